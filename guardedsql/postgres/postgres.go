// Package postgres is guardedsql's PostgreSQL engine, on
// github.com/jackc/pgx/v5: importing it (a blank import is enough) makes
// guardedsql.Open and guardedsql.Introspect accept postgres:// and
// postgresql:// DSNs, and links pgx — which a program that does not import
// this package never does. It also holds what takes a pgx value: [New]
// for a *pgxpool.Pool, the start-up check [CheckRLS], [Introspect] and the
// owner's administration functions ([ApplyRLS], [AddRLSKey],
// [RemoveRLSKey], [GrantApp]).
//
// What needs no driver stays in package guardedsql: the DDL
// (guardedsql.RLSDDL, guardedsql.AppGrantDDL), the key type and signing
// (guardedsql.RLSKey, guardedsql.SignScope), the options structs
// (guardedsql.Options, guardedsql.RLSOptions, guardedsql.RLSKeyOptions) and
// the errors (guardedsql.ErrRLSUnsafe and the specific ErrRLS errors).
package postgres

import (
	"context"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tenantmcp/tenantmcp/builder"
	"github.com/tenantmcp/tenantmcp/guardedsql"
	"github.com/tenantmcp/tenantmcp/guardedsql/internal/driver"
	"github.com/tenantmcp/tenantmcp/guardedsql/internal/driver/pgxdriver"
)

// New guards a PostgreSQL pool connected as the application role. Close
// leaves pool open. opts.RLSKey is required (guardedsql.ErrRLSNoKey
// otherwise); opts.MaxConns is ignored (the caller sized pool), and the
// other fields are those of guardedsql.Options.
//
// Every guarded statement runs in its own transaction (DB.Tx: one for the
// whole function) that first sets the scope document, signed with the key
// for that transaction, as the transaction-local setting
// "tenantmcp.scope" (set_config(..., true)), which the row-level security
// policies of guardedsql.RLSDDL read through their verifying function.
// Before returning, New runs [CheckRLS] and fails closed, with an error
// matching guardedsql.ErrRLSUnsafe, if those policies would not confine
// the connected role or the key is not installed: connect as a role that
// is neither superuser nor BYPASSRLS nor a member of the tables' owner,
// after the owner has applied the DDL and added the key ([ApplyRLS] with
// RLSKeyOptions.Key). The check runs again on every new pooled connection
// and periodically (Options.RLSRecheck); while it fails, statements fail
// closed.
//
// The guard adds its own predicates as well, binding the granted ids as
// typed array parameters, so a mistake in either layer alone leaks
// nothing.
func New(ctx context.Context, pool *pgxpool.Pool, sch *builder.Schema, opts guardedsql.Options) (*guardedsql.DB, error) {
	db, err := driver.Postgres.New(ctx, pgxdriver.NewPool(pool, false), sch, opts)
	if err != nil {
		return nil, err
	}
	return db.(*guardedsql.DB), nil
}

// CheckRLS reads back from the catalogs, on pool (connected as the
// application role), whether the row-level security of
// guardedsql.RLSDDL(sch), signed context included, is in force for that
// role (and, with opts.Key, that a scope signed with that key verifies),
// and returns an error matching guardedsql.ErrRLSUnsafe and one of the
// specific ErrRLS errors if not. [New] and guardedsql.Open run it at
// start-up; call it again after migrations if you like.
func CheckRLS(ctx context.Context, pool *pgxpool.Pool, sch *builder.Schema, opts guardedsql.RLSKeyOptions) error {
	return driver.Postgres.CheckRLS(ctx, pgxdriver.NewPool(pool, false), sch, opts)
}

// Introspect reads the tables, columns, primary keys and foreign keys of
// the pool's current schema from information_schema and builds a Schema
// with tenancy t applied.
func Introspect(ctx context.Context, pool *pgxpool.Pool, t builder.Tenancy) (*builder.Schema, error) {
	return driver.Postgres.Introspect(ctx, pgxdriver.NewPool(pool, false), t)
}

// TxBeginner is what the administration functions need: *pgxpool.Pool,
// *pgx.Conn and pgx.Tx (which nests as a savepoint) all qualify.
type TxBeginner interface {
	Begin(ctx context.Context) (pgx.Tx, error)
}

// ApplyRLS runs guardedsql.RLSDDL(sch) in one transaction on owner, which
// must be connected as the tables' owner (or a superuser): migrations are
// the application's choice, this is the ready-made one. On any error
// nothing is changed. With opts.Key it also installs that key (as
// [AddRLSKey]). Seed or migrate data as that owner before applying: with
// FORCE ROW LEVEL SECURITY the owner, too, sees only rows of a signed
// scope (guardedsql.SignScope).
func ApplyRLS(ctx context.Context, owner TxBeginner, sch *builder.Schema, opts guardedsql.RLSKeyOptions) error {
	return driver.Postgres.ApplyRLS(ctx, pgxdriver.BeginOn(owner), sch, opts)
}

// AddRLSKey installs k in the key table of the signed scope context, on
// owner connected as the tables' owner, after [ApplyRLS] (or
// guardedsql.RLSDDL) has created it. Re-adding an id replaces its secret.
// opts.Namespace is the one given to RLSDDL.
func AddRLSKey(ctx context.Context, owner TxBeginner, k guardedsql.RLSKey, opts guardedsql.RLSOptions) error {
	return driver.Postgres.AddRLSKey(ctx, pgxdriver.BeginOn(owner), k, opts)
}

// RemoveRLSKey deletes the key with the given id from the key table;
// contexts signed with it no longer verify (their statements see no rows).
// opts.Namespace is the one given to RLSDDL.
func RemoveRLSKey(ctx context.Context, owner TxBeginner, id string, opts guardedsql.RLSOptions) error {
	return driver.Postgres.RemoveRLSKey(ctx, pgxdriver.BeginOn(owner), id, opts)
}

// GrantApp runs guardedsql.AppGrantDDL in one transaction on admin,
// connected as the tables' owner or a superuser. It first refuses a role
// that does not exist or that would bypass row-level security (a
// superuser or BYPASSRLS role), with guardedsql.ErrRLSSuperuser or
// guardedsql.ErrRLSBypassRLS. On any error nothing is granted.
func GrantApp(ctx context.Context, admin TxBeginner, sch *builder.Schema, role string) error {
	return driver.Postgres.GrantApp(ctx, pgxdriver.BeginOn(admin), sch, role)
}
