package postgres

import (
	"context"
	"regexp"
	"strings"

	"github.com/tenantmcp/tenantmcp/guardedsql/internal/engine"
)

var _ engine.ErrorClassifier = Dialect{}

// keyColumns reads the column list of a unique violation's detail,
// "Key (a, b)=(...)", stopping before the values.
var keyColumns = regexp.MustCompile(`^Key \(([A-Za-z0-9_, "]+)\)=\(`)

// PgError is the part of a server error (pgconn.PgError) that Classify
// reads. This package does not import the driver: the driver package
// (guardedsql/postgres) sets AsPgError when it is linked.
type PgError struct {
	Code, Severity, Message, Detail       string
	TableName, ConstraintName, ColumnName string
}

// AsPgError finds a server error in err's chain; nil until the pgx
// driver package registers it (then no pgx error can exist either).
var AsPgError func(err error) (*PgError, bool)

// Classify implements engine.ErrorClassifier for *pgconn.PgError (read
// through AsPgError), by SQLSTATE. Names come from the error's structured fields (and, for a
// unique violation, the column list that precedes the values in its
// detail), never from its message.
func (Dialect) Classify(err error) (engine.EngineError, bool) {
	if AsPgError == nil {
		return engine.EngineError{}, false
	}
	pe, ok := AsPgError(err)
	if !ok {
		return engine.EngineError{}, false
	}
	e := engine.EngineError{
		Code:       pe.Code,
		Table:      engine.Ident(pe.TableName),
		Constraint: engine.Ident(pe.ConstraintName),
		Message:    pe.Severity + ": " + pe.Message + " (SQLSTATE " + pe.Code + ")",
	}
	if c := engine.Ident(pe.ColumnName); c != "" {
		e.Columns = []string{c}
	}
	switch {
	case pe.Code == "23505": // unique_violation
		e.Kind = engine.EngineUnique
		if m := keyColumns.FindStringSubmatch(pe.Detail); m != nil {
			for _, c := range strings.Split(m[1], ",") {
				if c = engine.Ident(strings.Trim(strings.TrimSpace(c), `"`)); c != "" {
					e.Columns = append(e.Columns, c)
				}
			}
		}
	case pe.Code == "23503": // foreign_key_violation
		// "update or delete on table ... violates foreign key constraint
		// ... on table ..." is the referenced side; "insert or update on
		// table ..." the referencing side.
		e.Kind = engine.EngineMissingRef
		if strings.HasPrefix(pe.Message, "update or delete on table") {
			e.Kind = engine.EngineReferenced
		}
	case pe.Code == "40001", pe.Code == "40P01", pe.Code == "55P03":
		// serialization_failure, deadlock_detected, lock_not_available
		// (lock_timeout or NOWAIT): the transaction lost a race with
		// another one; its detail names processes and transactions, and
		// nothing of it is kept but the code.
		e.Kind = engine.EngineRetryable
		e.Table, e.Constraint, e.Columns = "", "", nil
	case pe.Code == "23502", pe.Code == "23514", strings.HasPrefix(pe.Code, "22"):
		// not_null_violation, check_violation, data_exception
		e.Kind = engine.EngineInvalid
	}
	return e, true
}

var _ engine.UniqueLister = Dialect{}

// UniqueKeys implements engine.UniqueLister for the current schema.
func (Dialect) UniqueKeys(ctx context.Context, q engine.Querier) ([]engine.UniqueKey, error) {
	return engine.CollectUniqueKeys(ctx, q, `SELECT c.relname::text, i.relname::text, x.indisprimary,
       pg_catalog.string_agg(a.attname::text, ',' ORDER BY k.ord)
FROM pg_catalog.pg_index x
JOIN pg_catalog.pg_class c ON c.oid = x.indrelid
JOIN pg_catalog.pg_class i ON i.oid = x.indexrelid
CROSS JOIN LATERAL pg_catalog.unnest(x.indkey) WITH ORDINALITY AS k(attnum, ord)
JOIN pg_catalog.pg_attribute a ON a.attrelid = c.oid AND a.attnum = k.attnum
WHERE x.indisunique AND c.relnamespace = pg_catalog.to_regnamespace(pg_catalog.current_schema())::oid
GROUP BY c.relname, i.relname, x.indisprimary
ORDER BY 1, 2`)
}
