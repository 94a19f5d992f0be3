package postgres

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/tenantmcp/tenantmcp/builder"
	"github.com/tenantmcp/tenantmcp/guardedsql"
	"github.com/tenantmcp/tenantmcp/guardedsql/internal/engine"
	pgdialect "github.com/tenantmcp/tenantmcp/guardedsql/internal/engine/postgres"
	"github.com/tenantmcp/tenantmcp/guardedsql/internal/engine/postgres/pgxdriver"
	"github.com/tenantmcp/tenantmcp/internal/sqlast"
)

// Errors of the PostgreSQL start-up check ([CheckRLS], [New] and guardedsql.Open).
// Each names one reason the row-level security policies would not confine
// the connected role; all of them also match ErrRLSUnsafe.
var (
	// ErrRLSUnsafe is matched by every error below.
	ErrRLSUnsafe = pgdialect.ErrRLSUnsafe
	// ErrRLSSuperuser: the connected role is a superuser, which bypasses
	// every policy. Connect as an application role.
	ErrRLSSuperuser = pgdialect.ErrRLSSuperuser
	// ErrRLSBypassRLS: the connected role has the BYPASSRLS attribute.
	ErrRLSBypassRLS = pgdialect.ErrRLSBypassRLS
	// ErrRLSOwnerNotForced: the connected role owns (or is a member of the
	// role owning) a tenant-bound table whose row-level security is not
	// FORCE'd, so the table's policies do not apply to it.
	ErrRLSOwnerNotForced = pgdialect.ErrRLSOwnerNotForced
	// ErrRLSNotEnabled: a tenant-bound table does not have row-level
	// security both enabled and forced (or is a view).
	ErrRLSNotEnabled = pgdialect.ErrRLSNotEnabled
	// ErrRLSPolicyMissing: a tenant-bound table lacks the policy RLSDDL
	// generates for the current schema, or has one that was altered or
	// generated for an older schema (its marker comment differs), or a
	// function the policies call (a column's keep function, a table's sees
	// or counting function) is missing or is not the generated one: its
	// body, security, search_path or owner differ.
	ErrRLSPolicyMissing = pgdialect.ErrRLSPolicyMissing
	// ErrRLSPolicyUnexpected: another permissive policy that applies to the
	// connected role exists on a tenant-bound table; permissive policies
	// are OR'ed, so it would widen access.
	ErrRLSPolicyUnexpected = pgdialect.ErrRLSPolicyUnexpected
	// ErrRLSBypassPath: the connected role holds a privilege on a
	// relation that reaches a tenant-bound table's rows around its
	// row-level security: a partition or inheritance child (named directly,
	// its own row-level security applies), a view that is not
	// security_invoker owned by a superuser or BYPASSRLS role, or a
	// materialized view. Revoke the privilege, or make the view
	// security_invoker. The error names the relation and the table.
	ErrRLSBypassPath = pgdialect.ErrRLSBypassPath
	// ErrRLSTableMissing: a tenant-bound table of the schema does not
	// resolve on the connection's search_path.
	ErrRLSTableMissing = pgdialect.ErrRLSTableMissing
	// ErrRLSSigning: the verifying function or the key table of the
	// signed scope context is missing or altered, or the connected role is
	// a member of their owner (it could read the key or replace the
	// function). See Key.
	ErrRLSSigning = pgdialect.ErrRLSSigning
	// ErrRLSKeyUnknown: the key given in Options.Key is not installed in
	// the key table (AddKey), so no statement would see a row.
	ErrRLSKeyUnknown = pgdialect.ErrRLSKeyUnknown
)

// RLSDDL returns the statements that install PostgreSQL row-level security
// for every tenant-bound table of sch: the key table "tenantmcp_scope_keys"
// (no privilege for anyone but its owner; row-level security enabled with
// no policy), the verifying function "tenantmcp_scope_doc()" (SECURITY
// DEFINER, STABLE, search_path pinned) and the exchange functions
// "tenantmcp_scope_open()" and "tenantmcp_scope_set(text)" (SECURITY
// DEFINER, VOLATILE, search_path pinned; see ScopeExchange), all in the
// current schema (see Key); ENABLE and FORCE ROW LEVEL SECURITY, and one permissive policy
// FOR ALL (USING and WITH CHECK) that follows the table's foreign-key path
// to the columns carrying the scope levels and reads the scope only
// through the verifying function (a table with no level column of its own
// and a single-column scope parent defers to its parent's policy instead:
// the foreign key holds one of the keys the parent's policy admits), plus
// a marker comment that CheckRLS compares. The WITH CHECK expressions call
// one "tenantmcp_keep_<table>_<column>" function (SECURITY INVOKER) per
// level column that is not its table's identity: it tells whether the row
// already holds the value, which a writer may keep though its scope does
// not reach it (a hotel's manager updating its hotel keeps the chain). Run them in one transaction as the tables' owner
// (ApplyRLS does); they drop and re-create the policies, so re-running them
// after a schema change is how policies are updated. Global tables are not
// touched.
//
// An empty or missing setting makes every policy admit no rows, never an
// error and never all rows. opts.Namespace must be the DB's.
func RLSDDL(sch *builder.Schema, opts Options) ([]string, error) {
	d, err := opts.dialect()
	if err != nil {
		return nil, err
	}
	return rlsDDL(sch, d)
}

func rlsDDL(sch *builder.Schema, d pgdialect.Dialect) ([]string, error) {
	g, ok := sqlast.SchemaOf(sch)
	if !ok {
		return nil, fmt.Errorf("%w: nil or zero schema", guardedsql.ErrInvalid)
	}
	return d.RLSDDL(g), nil
}

// ApplyRLS runs RLSDDL(sch) in one transaction on owner, which must be
// connected as the tables' owner (or a superuser): migrations are the
// application's choice, this is the ready-made one. On any error nothing
// is changed; a level or foreign-key column whose type is not of the kind
// the graph says is refused before any DDL ([guardedsql.ErrTypeDrift]).
// With opts.Key it also installs that key (as [AddKey]). Seed
// or migrate data as that owner before applying: with FORCE ROW LEVEL
// SECURITY the owner, too, sees only rows of a signed scope ([SignScope]).
func ApplyRLS(ctx context.Context, owner TxBeginner, sch *builder.Schema, opts Options) error {
	d, err := opts.dialect()
	if err != nil {
		return err
	}
	stmts, err := rlsDDL(sch, d)
	if err != nil {
		return err
	}
	tx, err := pgxdriver.BeginOn(owner)(ctx)
	if err != nil {
		return err
	}
	if err := keyTypes(ctx, tx, sch, d); err != nil {
		return errors.Join(err, tx.Rollback(ctx))
	}
	for _, s := range stmts {
		if _, err := tx.Exec(ctx, s); err != nil {
			return errors.Join(fmt.Errorf("guardedsql: applying row-level security: %w (in %q)", err, s), tx.Rollback(ctx))
		}
	}
	if d.Key != nil {
		// The error names the statement, never its arguments (the secret).
		if _, err := tx.Exec(ctx, d.AddKeySQL(), d.Key.AddKeyArgs()...); err != nil {
			return errors.Join(fmt.Errorf("guardedsql: installing RLS key %q: %w", d.Key.ID, err), tx.Rollback(ctx))
		}
	}
	return tx.Commit(ctx)
}

// keyTypes refuses, before any DDL, a level or foreign-key column whose
// type in the database is not of the kind the graph says (a bigint column
// of a level declared with text keys): the policies would compare them
// and PostgreSQL stop at "operator does not exist" deep in a CREATE
// POLICY. The error is Open's for the same mistake ([guardedsql.ErrTypeDrift]).
// Tables not created yet are left to the DDL.
func keyTypes(ctx context.Context, q engine.Querier, sch *builder.Schema, d pgdialect.Dialect) error {
	g, ok := sqlast.SchemaOf(sch)
	if !ok {
		return fmt.Errorf("%w: nil or zero schema", guardedsql.ErrInvalid)
	}
	defs, _, err := d.Catalog(ctx, q, nil)
	if err != nil {
		return fmt.Errorf("guardedsql: applying row-level security: reading the catalog: %w", err)
	}
	var errs []error
	for _, name := range g.Names {
		t := g.Tables[name]
		i := slices.IndexFunc(defs, func(td builder.TableDef) bool { return strings.EqualFold(td.Name, t.Name) })
		if i < 0 {
			continue
		}
		for col, typ := range defs[i].Types {
			c := slices.IndexFunc(t.Columns, func(x string) bool { return strings.EqualFold(x, col) })
			if c < 0 {
				continue
			}
			if msg := t.ScopeTypeProblem(t.Columns[c], typ, false); msg != "" {
				errs = append(errs, fmt.Errorf("%w: %s", guardedsql.ErrTypeDrift, msg))
			}
		}
	}
	slices.SortFunc(errs, func(a, b error) int { return strings.Compare(a.Error(), b.Error()) })
	return errors.Join(errs...)
}
