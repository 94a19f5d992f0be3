// Package driver is the registry between engine-neutral package guardedsql
// and the database drivers, so that guardedsql itself links none of them.
//
// Its subpackages (pgxdriver, mysqldriver, sqlitedriver) each import one
// driver and, in init, fill in that engine's entry here. The public engine
// packages (guardedsql/postgres, guardedsql/mysql, guardedsql/sqlite)
// import them, so that a program links exactly the drivers of the engines
// it imports. guardedsql reads the entries when a DSN is opened and when
// an error is classified; an engine whose entry is nil is refused with
// guardedsql.ErrNoEngine, never opened some other way.
//
// The subpackages never import guardedsql (its in-package tests import
// them); the other direction — the public engine packages calling
// guardedsql's unexported, driver-free code with driver values — goes
// through the hooks of [Postgres] that guardedsql fills in its own init.
package driver

import (
	"context"
	"database/sql"

	"github.com/tenantmcp/tenantmcp/builder"
	"github.com/tenantmcp/tenantmcp/guardedsql/internal/engine"
)

// PostgresDriver is what the pgx driver package provides.
type PostgresDriver struct {
	// Open opens a pool for a postgres:// or postgresql:// DSN, owned by
	// the result (Close closes it); maxConns > 0 caps its size. A DSN it
	// cannot parse is a *DSNError.
	Open func(ctx context.Context, dsn string, maxConns int) (engine.Pool, error)
}

// DSNError is returned by PostgresDriver.Open for a DSN it cannot parse
// (as opposed to a server it cannot reach). Its text may quote the DSN:
// guardedsql redacts it.
type DSNError struct{ Err error }

func (e *DSNError) Error() string { return e.Err.Error() }
func (e *DSNError) Unwrap() error { return e.Err }

// MySQLDriver is what the MySQL driver package provides.
type MySQLDriver struct {
	// Open returns an unpinged *sql.DB for a mysql:// DSN with the
	// library's defaults (parseTime, clientFoundRows).
	Open func(dsn string) (*sql.DB, error)
}

// Registered engines; nil (false) until the driver package is linked.
var (
	PostgresEngine *PostgresDriver
	MySQLEngine    *MySQLDriver
	// SQLiteEngine: the "sqlite" database/sql driver (modernc.org/sqlite)
	// is registered.
	SQLiteEngine bool
)

// Error predicates and DSN readers registered by the driver packages, for
// guardedsql.IsUnavailable, guardedsql.IsTimeout and guardedsql.RedactDSN.
var (
	// Unavailable reports a driver error meaning the server cannot be
	// reached or is not accepting work.
	Unavailable []func(error) bool
	// Timeout reports a driver error of a statement or lock timeout.
	Timeout []func(error) bool
	// DSNSecrets returns the passwords a driver's own DSN parser finds
	// in dsn (beyond what guardedsql's generic parsing finds).
	DSNSecrets []func(dsn string) []string
)

// Begin begins a transaction on a caller's connection (an owner's or an
// administrator's), adapted by the driver package.
type Begin func(ctx context.Context) (engine.Tx, error)

// PostgresAPI is guardedsql's driver-free PostgreSQL code that package
// guardedsql/postgres calls with pgx values. guardedsql sets it in its
// init; opts is a guardedsql.Options (New), RLSKeyOptions (CheckRLS,
// ApplyRLS) or RLSOptions (AddRLSKey, RemoveRLSKey), and New's result a
// *guardedsql.DB.
type PostgresAPI struct {
	New          func(ctx context.Context, p engine.Pool, sch *builder.Schema, opts any) (any, error)
	CheckRLS     func(ctx context.Context, p engine.Pool, sch *builder.Schema, opts any) error
	Introspect   func(ctx context.Context, p engine.Pool, t builder.Tenancy) (*builder.Schema, error)
	ApplyRLS     func(ctx context.Context, owner Begin, sch *builder.Schema, opts any) error
	AddRLSKey    func(ctx context.Context, owner Begin, key any, opts any) error
	RemoveRLSKey func(ctx context.Context, owner Begin, id string, opts any) error
	GrantApp     func(ctx context.Context, admin Begin, sch *builder.Schema, role string) error
}

// Postgres is set by guardedsql's init.
var Postgres PostgresAPI
