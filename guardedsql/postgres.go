package guardedsql

import (
	"context"
	"errors"
	"fmt"

	"github.com/tenantmcp/tenantmcp/builder"
	"github.com/tenantmcp/tenantmcp/guardedsql/internal/engine"
	"github.com/tenantmcp/tenantmcp/guardedsql/internal/engine/postgres"
	"github.com/tenantmcp/tenantmcp/guardedsql/internal/driver"
	"github.com/tenantmcp/tenantmcp/internal/sqlast"
)

// Errors of the PostgreSQL start-up check (guardedsql/postgres.CheckRLS and New, Open).
// Each names one reason the row-level security policies would not confine
// the connected role; all of them also match ErrRLSUnsafe.
var (
	// ErrRLSUnsafe is matched by every error below.
	ErrRLSUnsafe = postgres.ErrRLSUnsafe
	// ErrRLSSuperuser: the connected role is a superuser, which bypasses
	// every policy. Connect as an application role.
	ErrRLSSuperuser = postgres.ErrRLSSuperuser
	// ErrRLSBypassRLS: the connected role has the BYPASSRLS attribute.
	ErrRLSBypassRLS = postgres.ErrRLSBypassRLS
	// ErrRLSOwnerNotForced: the connected role owns (or is a member of the
	// role owning) a tenant-bound table whose row-level security is not
	// FORCE'd, so the table's policies do not apply to it.
	ErrRLSOwnerNotForced = postgres.ErrRLSOwnerNotForced
	// ErrRLSNotEnabled: a tenant-bound table does not have row-level
	// security both enabled and forced (or is a view).
	ErrRLSNotEnabled = postgres.ErrRLSNotEnabled
	// ErrRLSPolicyMissing: a tenant-bound table lacks the policy RLSDDL
	// generates for the current schema, or has one that was altered or
	// generated for an older schema (its marker comment differs).
	ErrRLSPolicyMissing = postgres.ErrRLSPolicyMissing
	// ErrRLSPolicyUnexpected: another permissive policy that applies to the
	// connected role exists on a tenant-bound table; permissive policies
	// are OR'ed, so it would widen access.
	ErrRLSPolicyUnexpected = postgres.ErrRLSPolicyUnexpected
	// ErrRLSTableMissing: a tenant-bound table of the schema does not
	// resolve on the connection's search_path.
	ErrRLSTableMissing = postgres.ErrRLSTableMissing
	// ErrRLSSigning: the verifying function or the key table of the
	// signed scope context is missing or altered, or the connected role is
	// a member of their owner (it could read the key or replace the
	// function). See RLSKey.
	ErrRLSSigning = postgres.ErrRLSSigning
	// ErrRLSKeyUnknown: the key given in Options.RLSKey is not installed in
	// the key table (AddRLSKey), so no statement would see a row.
	ErrRLSKeyUnknown = postgres.ErrRLSKeyUnknown
)

// newPostgres guards a PostgreSQL pool connected as the application role
// (package guardedsql/postgres: New). Options.RLSKey is required
// (ErrRLSNoKey otherwise).
//
// Every guarded statement runs in its own transaction (DB.Tx: one for the
// whole function) that first sets the scope document, signed with the key
// for that transaction, as the transaction-local setting
// "tenantmcp.scope" (set_config(..., true)), which the row-level security
// policies of RLSDDL read through their verifying function. Before
// returning, it runs the check of CheckRLS and fails closed, with an
// error matching ErrRLSUnsafe, if those policies would not confine the
// connected role or the key is not installed. The check runs again on
// every new pooled connection and periodically (Options.RLSRecheck); while
// it fails, statements fail closed. c is validated (newConfig).
func newPostgres(ctx context.Context, p engine.Pool, sch *builder.Schema, c config) (*DB, error) {
	g, ok := sqlast.SchemaOf(sch)
	if !ok {
		return nil, fmt.Errorf("%w: nil or zero schema", ErrInvalid)
	}
	d, err := postgresDialect(c.RLSNamespace, c.RLSKey, "Options.RLS")
	if err != nil {
		return nil, err
	}
	if d.Key == nil {
		return nil, ErrRLSNoKey
	}
	d.RLSOnly = c.RLSOnly
	d.Timeouts = postgres.Timeouts{Statement: c.StatementTimeout, Lock: c.LockTimeout}
	if err := d.Check(ctx, p, g); err != nil {
		return nil, err
	}
	// Invariant (issue 25 §6): a guarded statement's unqualified table
	// names resolve in the schemas checked here, never in pg_temp first.
	sp, err := postgres.SearchPathFor(ctx, p)
	if err != nil {
		return nil, err
	}
	d.SearchPath = sp
	m := newRLSMonitor(func(ctx context.Context, q engine.Querier) error { return d.Check(ctx, q, g) }, p, &c)
	if nc, ok := p.(postgres.NewConnChecker); ok {
		nc.SetNewConnCheck(m.connCheck)
	}
	db, err := newDB(p, d, sch, c)
	if err != nil {
		return nil, err
	}
	if err := startupCatalog(ctx, db); err != nil {
		return nil, err
	}
	db.rls = m
	return db, nil
}

// openPostgres opens a pool for a postgres:// or postgresql:// DSN.
func openPostgres(ctx context.Context, dsn string, sch *builder.Schema, c config) (*DB, error) {
	pool, err := openPostgresPool(ctx, dsn, c.MaxConns)
	if err != nil {
		return nil, err
	}
	db, err := newPostgres(ctx, pool, sch, c)
	if err != nil {
		pool.Close()
		return nil, err
	}
	return db, nil
}

// RLSDDL returns the statements that install PostgreSQL row-level security
// for every tenant-bound table of sch: the key table "tenantmcp_scope_keys"
// (no privilege for anyone but its owner; row-level security enabled with
// no policy) and the verifying function "tenantmcp_scope_doc()" (SECURITY
// DEFINER, STABLE, search_path pinned), both in the current schema (see
// RLSKey); ENABLE and FORCE ROW LEVEL SECURITY, and one permissive policy
// FOR ALL (USING and WITH CHECK) that follows the table's foreign-key path
// to the columns carrying the scope levels and reads the scope only
// through the verifying function (a table with no level column of its own
// and a single-column scope parent defers to its parent's policy instead:
// the foreign key holds one of the keys the parent's policy admits), plus
// a marker comment that CheckRLS compares. Run them in one transaction as the tables' owner
// (ApplyRLS does); they drop and re-create the policies, so re-running them
// after a schema change is how policies are updated. Global tables are not
// touched.
//
// An empty or missing setting makes every policy admit no rows, never an
// error and never all rows. opts.Namespace must be the DB's
// (Options.RLSNamespace).
func RLSDDL(sch *builder.Schema, opts RLSOptions) ([]string, error) {
	d, err := opts.dialect()
	if err != nil {
		return nil, err
	}
	return rlsDDL(sch, d)
}

func rlsDDL(sch *builder.Schema, d postgres.Dialect) ([]string, error) {
	g, ok := sqlast.SchemaOf(sch)
	if !ok {
		return nil, fmt.Errorf("%w: nil or zero schema", ErrInvalid)
	}
	return d.RLSDDL(g), nil
}

// applyRLS runs RLSDDL(sch) in one transaction begun by owner, which
// must be connected as the tables' owner (or a superuser); package
// guardedsql/postgres: ApplyRLS.
func applyRLS(ctx context.Context, owner driver.Begin, sch *builder.Schema, opts RLSKeyOptions) error {
	d, err := opts.dialect()
	if err != nil {
		return err
	}
	stmts, err := rlsDDL(sch, d)
	if err != nil {
		return err
	}
	tx, err := owner(ctx)
	if err != nil {
		return err
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

// checkRLS is package guardedsql/postgres's CheckRLS on p.
func checkRLS(ctx context.Context, p engine.Pool, sch *builder.Schema, opts RLSKeyOptions) error {
	g, ok := sqlast.SchemaOf(sch)
	if !ok {
		return fmt.Errorf("%w: nil or zero schema", ErrInvalid)
	}
	d, err := opts.dialect()
	if err != nil {
		return err
	}
	return d.Check(ctx, p, g)
}

// introspectPostgres is package guardedsql/postgres's Introspect on p.
func introspectPostgres(ctx context.Context, p engine.Pool, t builder.Tenancy) (*builder.Schema, error) {
	cat, err := postgres.Dialect{}.Introspect(ctx, p)
	if err != nil {
		return nil, err
	}
	def, err := t.Apply(cat)
	if err != nil {
		return nil, err
	}
	return builder.NewSchema(def)
}
