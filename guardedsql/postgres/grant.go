package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/tenantmcp/tenantmcp/builder"
	"github.com/tenantmcp/tenantmcp/guardedsql"
	"github.com/tenantmcp/tenantmcp/guardedsql/internal/engine"
	"github.com/tenantmcp/tenantmcp/guardedsql/internal/engine/postgres/pgxdriver"
	"github.com/tenantmcp/tenantmcp/internal/guardfault"
	"github.com/tenantmcp/tenantmcp/internal/sqlast"
)

// AppGrantDDL returns the statements that give role — the PostgreSQL
// application role guardedsql connects as — exactly the privileges it
// needs on sch and nothing more: USAGE on the schemas holding sch's
// tables, SELECT, INSERT, UPDATE and DELETE on its tenant-bound tables and
// on the global tables declared writable (TableDef.GlobalWritable), SELECT
// only on the other global tables (no other table of the database), and
// USAGE and SELECT on the sequences that feed their identity or serial
// columns. A global table has no row-level security, so write rights on it
// would let leaked application credentials rewrite what every tenant reads. It never grants ownership, TRUNCATE,
// REFERENCES or TRIGGER, and never touches tables outside the graph, so a
// table the application must not read (such as a key table) stays out of
// reach. Run them as the tables' owner or a superuser, after the tables
// exist; [GrantApp] does.
//
// The role itself is the deployment's to create, with LOGIN and a
// password, and NOSUPERUSER NOBYPASSRLS: [CheckRLS] refuses to serve as
// anything else.
func AppGrantDDL(sch *builder.Schema, role string) ([]string, error) {
	if sch == nil || len(sch.TableNames()) == 0 {
		return nil, fmt.Errorf("%w: nil or empty schema", guardedsql.ErrInvalid)
	}
	if role == "" || len(role) > 63 || strings.EqualFold(role, "public") || strings.ContainsRune(role, 0) {
		return nil, fmt.Errorf("%w: application role name must be 1-63 bytes, not PUBLIC", guardedsql.ErrInvalid)
	}
	r := quoteIdent(role)
	g, _ := sqlast.SchemaOf(sch)
	tables := sch.TableNames()
	var writable, readOnly []string
	literals := make([]string, len(tables))
	for i, t := range tables {
		q := quoteIdent(t)
		literals[i] = "'" + strings.ReplaceAll(q, "'", "''") + "'"
		if tb := g.Tables[t]; tb.Global && tb.GlobalWritable == "" && !guardfault.Off(guardfault.GlobalReadOnly) {
			readOnly = append(readOnly, q)
		} else {
			writable = append(writable, q)
		}
	}
	list := "ARRAY[" + strings.Join(literals, ", ") + "]::regclass[]"
	var grants []string
	if len(writable) > 0 {
		grants = append(grants, "GRANT SELECT, INSERT, UPDATE, DELETE ON TABLE "+strings.Join(writable, ", ")+" TO "+r)
	}
	if len(readOnly) > 0 {
		// Revoked first: a grant is additive, and GrantApp may run again
		// after a table stopped being writable.
		grants = append(grants, "REVOKE INSERT, UPDATE, DELETE, TRUNCATE ON TABLE "+strings.Join(readOnly, ", ")+" FROM "+r,
			"GRANT SELECT ON TABLE "+strings.Join(readOnly, ", ")+" TO "+r)
	}
	return append(append([]string{
		// Schemas first: a table privilege is useless without USAGE on its schema.
		`DO $grant$ DECLARE n name; BEGIN
  FOR n IN SELECT DISTINCT c.relnamespace::regnamespace::name FROM pg_catalog.pg_class c WHERE c.oid = ANY (` + list + `) LOOP
    EXECUTE pg_catalog.format('GRANT USAGE ON SCHEMA %I TO %s', n, ` + quoteLiteral(r) + `);
  END LOOP;
END $grant$`}, grants...),
		// Sequences owned by the graph's columns (serial, identity).
		`DO $grant$ DECLARE s regclass; BEGIN
  FOR s IN SELECT d.objid::regclass FROM pg_catalog.pg_depend d JOIN pg_catalog.pg_class c ON c.oid = d.objid AND c.relkind = 'S'
           WHERE d.classid = 'pg_catalog.pg_class'::regclass AND d.refobjid = ANY (`+list+`) AND d.deptype IN ('a', 'i') LOOP
    EXECUTE pg_catalog.format('GRANT USAGE, SELECT ON SEQUENCE %s TO %s', s, `+quoteLiteral(r)+`);
  END LOOP;
END $grant$`), nil
}

// GrantApp runs [AppGrantDDL] in one transaction on admin, connected as
// the tables' owner or a superuser. It first refuses a role that does not
// exist or that would bypass row-level security, with [ErrRLSSuperuser]
// or [ErrRLSBypassRLS]. On any error nothing is granted.
func GrantApp(ctx context.Context, admin TxBeginner, sch *builder.Schema, role string) error {
	stmts, err := AppGrantDDL(sch, role)
	if err != nil {
		return err
	}
	tx, err := pgxdriver.BeginOn(admin)(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(ctx) // a no-op after Commit
	var super, bypass bool
	switch err := queryRow(ctx, tx, `SELECT rolsuper, rolbypassrls FROM pg_catalog.pg_roles WHERE rolname = $1`, []any{role}, &super, &bypass); {
	case errors.Is(err, errNoRow):
		return fmt.Errorf("%w: application role %s does not exist; create it (LOGIN NOSUPERUSER NOBYPASSRLS) first", guardedsql.ErrInvalid, quoteIdent(role))
	case err != nil:
		return fmt.Errorf("guardedsql: reading role attributes: %w", err)
	case super:
		return fmt.Errorf("%w: refusing to grant to %s", ErrRLSSuperuser, quoteIdent(role))
	case bypass:
		return fmt.Errorf("%w: refusing to grant to %s", ErrRLSBypassRLS, quoteIdent(role))
	}
	for _, s := range stmts {
		if _, err := tx.Exec(ctx, s); err != nil {
			return fmt.Errorf("guardedsql: granting the application role: %w", err)
		}
	}
	return tx.Commit(ctx)
}

// quoteIdent quotes s as one PostgreSQL identifier (as pgx.Identifier's
// Sanitize does: double quotes doubled, NUL bytes dropped), so a role or
// table name is never read as SQL.
func quoteIdent(s string) string {
	return `"` + strings.ReplaceAll(strings.ReplaceAll(s, "\x00", ""), `"`, `""`) + `"`
}

// errNoRow: queryRow found no row.
var errNoRow = errors.New("guardedsql: no row")

// queryRow scans the first row of q into dest, or returns errNoRow.
func queryRow(ctx context.Context, q engine.Querier, sql string, args []any, dest ...any) error {
	rows, err := q.Query(ctx, sql, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	if !rows.Next() {
		if err := rows.Err(); err != nil {
			return err
		}
		return errNoRow
	}
	if err := rows.Scan(dest...); err != nil {
		return err
	}
	return rows.Close()
}

// quoteLiteral quotes s as an SQL string literal.
func quoteLiteral(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }
