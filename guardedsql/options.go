package guardedsql

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/tenantmcp/tenantmcp/guardedsql/internal/engine"
	"github.com/tenantmcp/tenantmcp/guardedsql/internal/engine/postgres"
	"github.com/tenantmcp/tenantmcp/guardedsql/internal/guard"
)

// Options configures a DB: [Open], [NewSQLite], [NewMySQL] and the engine
// packages' New functions take it by value. The zero Options is a working
// default (on PostgreSQL, RLSKey is required): the zero value of every field
// means the default its comment names, and a nil function means no hook.
// Negative durations and sizes are refused with an error matching
// [ErrInvalid] that names the field: none of these limits can be turned
// off by a negative value, their zero already means "no bound" or "the
// driver's default".
//
// The PostgreSQL fields (RLSKey, RLSNamespace, RLSOnly, RLSRecheck) are
// ignored by the other engines, which have no row-level security, so that
// one Options can open any DSN; MaxConns is ignored where the caller made
// the pool. The administration functions take their own, smaller structs
// ([RLSOptions], [RLSKeyOptions]) holding only what they use.
type Options struct {
	// Observer, if set, is called synchronously for every statement and
	// every transaction-control call sent to the database, just before it
	// is sent. Nothing reaches the database without passing it, which lets
	// a test prove that a call without scope sent nothing. Nil: no
	// observer.
	Observer func(ctx context.Context, s Statement)

	// Logger receives the DB's operational messages: engine errors (their
	// text with quoted literals removed and redacted), start-up warnings
	// (tables the schema graph leaves out, unique keys shared by all
	// tenants), and on PostgreSQL every failure and recovery of the
	// row-level security re-check. Nil means slog.Default().
	Logger *slog.Logger

	// LogStatements logs every statement to Logger at debug level: kind,
	// SQL text, number of arguments, duration and error. Argument values
	// are never logged. False (the default): statements are not logged.
	LogStatements bool

	// PoolWait bounds how long a statement (or a transaction's first
	// statement) waits for a free connection. Past the bound it fails with
	// ErrBusy and sends nothing; make it shorter than the call timeout, so
	// that a saturated pool answers "busy, retry" instead of every queued
	// call running into its deadline. Zero (the default) waits as long as
	// the context allows.
	PoolWait time.Duration

	// PoolWaitObserver, if set, is called after every wait for a
	// connection that blocked for more than a millisecond or ended in
	// ErrBusy: how long it waited and whether it gave up. It is the hook
	// for pool-wait metrics; it must be fast and safe for concurrent use.
	// Nil: no observer.
	PoolWaitObserver func(ctx context.Context, waited time.Duration, busy bool)

	// StatementTimeout bounds each statement in the database itself, set
	// in the same transaction as the scope so that it cannot leak to
	// another call on a pooled connection:
	//
	//   - PostgreSQL: statement_timeout, transaction-local (set_config(...,
	//     true), as SET LOCAL), pipelined with the scope setting;
	//   - MariaDB: SET STATEMENT max_statement_time=... FOR each statement
	//     (MySQL 8 lacks SET STATEMENT: ErrTimeoutUnsupported);
	//   - SQLite: a deadline on the statement's context, which the driver
	//     turns into sqlite3_interrupt; it does not cut a lock wait short,
	//     so Open also lowers the busy timeout to it (a DB made with
	//     NewSQLite keeps the busy_timeout its caller set).
	//
	// A statement stopped by it fails with an error IsTimeout reports.
	// Zero (the default) leaves the server's own setting.
	StatementTimeout time.Duration

	// LockTimeout bounds how long a statement waits for a row or table
	// lock: lock_timeout on PostgreSQL, innodb_lock_wait_timeout and
	// lock_wait_timeout on MariaDB (whole seconds, rounded up), set like
	// StatementTimeout. SQLite has one database lock, bounded by its
	// busy_timeout. Zero (the default) leaves the server's own setting.
	LockTimeout time.Duration

	// MaxConns sets the size of the connection pool Open creates for a
	// PostgreSQL or MySQL DSN (pgxpool's MaxConns, database/sql's
	// SetMaxOpenConns). The New functions, whose pool the caller sized,
	// and SQLite ignore it. Zero (the default) keeps the driver's default
	// (pgxpool: the larger of 4 and the number of CPUs).
	MaxConns int

	// RLSKey signs the PostgreSQL scope setting (see RLSKey). Open and
	// guardedsql/postgres.New require it on PostgreSQL (ErrRLSNoKey
	// without); the zero RLSKey means none.
	RLSKey RLSKey

	// RLSNamespace changes the namespace of the PostgreSQL scope setting,
	// policies, verifying function and key table from "tenantmcp" (setting
	// "tenantmcp.scope", policies "tenantmcp_scope",
	// "tenantmcp_scope_doc()", "tenantmcp_scope_keys") to a lower-case
	// identifier of at most 40 bytes. Give the same namespace to RLSDDL,
	// ApplyRLS, CheckRLS, AddRLSKey, RemoveRLSKey and SignScope ([RLSOptions],
	// [RLSKeyOptions]). Empty (the default) means "tenantmcp".
	RLSNamespace string

	// RLSOnly makes a PostgreSQL DB leave the read predicates to the
	// row-level security policies: statements carry no tenant predicates
	// of their own, and the policies, reading the signed transaction-local
	// scope setting, are the only read boundary (the guard still checks
	// writes). Policy drift then goes unnoticed for at most one re-check
	// interval (RLSRecheck); the default, with the guard's predicates,
	// never serves another tenant's row meanwhile. The start-up check still
	// runs, so the policies are known to be in force. False (the default)
	// is defence in depth: both.
	RLSOnly bool

	// RLSRecheck sets how often a PostgreSQL DB re-runs the start-up check
	// (CheckRLS) while serving; zero means DefaultRLSRecheck. The check
	// also runs on every new pooled connection before its first guarded
	// statement. While a check fails, guarded statements fail closed with
	// its error (matching ErrRLSUnsafe and naming the table or role; a
	// check that could not run at all, say deadlocked with a migration,
	// fails closed with ErrRLSUnsafe too) and send nothing, the check is
	// retried at most every second (or every interval if shorter), and
	// serving resumes when it passes again; each failure and each recovery
	// is logged to Logger. The re-check cannot be turned off.
	RLSRecheck time.Duration
}

// RLSOptions configures the PostgreSQL administration functions that need
// only the namespace: [RLSDDL], [SignScope], guardedsql/postgres.AddRLSKey
// and RemoveRLSKey. The zero RLSOptions is the default namespace.
type RLSOptions struct {
	// Namespace is Options.RLSNamespace: empty means "tenantmcp"; give
	// every function the DB's.
	Namespace string
}

// RLSKeyOptions configures the PostgreSQL administration functions that
// also use a scope-signing key: guardedsql/postgres.ApplyRLS (which
// installs it, as AddRLSKey does) and guardedsql/postgres.CheckRLS (which
// checks that a scope it signs verifies). The zero RLSKeyOptions is the
// default namespace and no key.
type RLSKeyOptions struct {
	// Namespace is Options.RLSNamespace: empty means "tenantmcp".
	Namespace string
	// Key is the scope-signing key; the zero RLSKey means none.
	Key RLSKey
}

// config is a validated Options with its defaults applied, plus what the
// constructors learn from the engine.
type config struct {
	Options
	guard   guard.Options
	mariaDB bool // set by newMySQL: the server takes SET STATEMENT
}

// newConfig validates opts (every constructor calls it before opening or
// sending anything) and applies the defaults. Its errors name the field,
// never a value that could be a secret.
func newConfig(opts Options) (config, error) {
	for _, f := range []struct {
		name string
		bad  bool
	}{
		{"PoolWait", opts.PoolWait < 0},
		{"StatementTimeout", opts.StatementTimeout < 0},
		{"LockTimeout", opts.LockTimeout < 0},
		{"MaxConns", opts.MaxConns < 0},
		{"RLSRecheck", opts.RLSRecheck < 0},
	} {
		if f.bad {
			return config{}, fmt.Errorf("%w: Options.%s must not be negative (zero is its default)", ErrInvalid, f.name)
		}
	}
	if _, err := postgresDialect(opts.RLSNamespace, opts.RLSKey, "Options.RLS"); err != nil {
		return config{}, err
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.RLSRecheck == 0 {
		opts.RLSRecheck = DefaultRLSRecheck
	}
	return config{Options: opts}, nil
}

// wait is the pool-wait bound of c.
func (c *config) wait() engine.Wait {
	return engine.Wait{Timeout: c.PoolWait, Observe: c.PoolWaitObserver}
}

// postgresDialect builds the PostgreSQL dialect of a namespace and an
// optional key, refusing an invalid one (ErrInvalid, naming the field:
// prefix+"Namespace" or prefix+"Key"; never the secret).
func postgresDialect(ns string, key RLSKey, prefix string) (postgres.Dialect, error) {
	if ns != "" && !postgres.ValidNamespace(ns) {
		return postgres.Dialect{}, fmt.Errorf("%w: %sNamespace %q is not a lower-case identifier of at most 40 bytes", ErrInvalid, prefix, ns)
	}
	d := postgres.Dialect{Namespace: ns}
	if !key.isZero() {
		k := postgres.Key{ID: key.ID, Secret: key.secret}
		if err := k.Validate(); err != nil {
			return postgres.Dialect{}, fmt.Errorf("%w: %sKey: %w", ErrInvalid, prefix, err)
		}
		d.Key = &k
	}
	return d, nil
}

// dialect is the PostgreSQL dialect of o's namespace.
func (o RLSOptions) dialect() (postgres.Dialect, error) {
	return postgresDialect(o.Namespace, RLSKey{}, "RLSOptions.")
}

// dialect is the PostgreSQL dialect of o's namespace and key.
func (o RLSKeyOptions) dialect() (postgres.Dialect, error) {
	return postgresDialect(o.Namespace, o.Key, "RLSKeyOptions.")
}
