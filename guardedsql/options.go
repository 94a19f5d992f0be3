package guardedsql

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"time"

	"github.com/tenantmcp/tenantmcp/guardedsql/internal/engine"
	"github.com/tenantmcp/tenantmcp/guardedsql/internal/guard"
)

// Options configures a DB: [Open] and the engine packages' New functions
// take it by value. The zero Options is a working default (on PostgreSQL,
// the Engine options' Key is required): the zero value of every field
// means the default its comment names, and a nil function means no hook.
// Negative durations and sizes are refused with an error matching
// [ErrInvalid] that names the field: none of these limits can be turned
// off by a negative value, their zero already means "no bound" or "the
// driver's default".
//
// The fields are engine-neutral; an engine's own options are in Engine.
// MaxConns is ignored where the caller made the pool.
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

	// PoolFIFO turns the tenant-fair connection queue off: waiters for a
	// connection are then served in arrival order, as the driver's pool
	// does. By default (false) a pool that knows its size (PostgreSQL)
	// gets a queue in front of it that charges each root tenant of a
	// call's scope the connection time it holds (forgotten with a
	// half-life of two seconds) and, while more statements want a
	// connection than the pool has, hands the next free connection to the
	// waiter whose tenant holds and has held the least, unless a waiter
	// has been passed over for half a second (or half of PoolWait, if
	// shorter): the overdue go first, in arrival order, so the order never
	// makes a call wait out PoolWait while others are served. A tenant running
	// heavy reports back to back then gets its share of the pool, not a
	// connection per call in flight, while the others' statements wait;
	// and while other tenants are active, a tenant over its share of
	// PoolShare that is an outlier waits before its next statement: one
	// whose time per hold is over four times the median of the other
	// active tenants' (heavy statements) until it is back to its share,
	// one whose connection time per second is over twice theirs until it
	// is back to the larger of the two; for at most five seconds, not
	// counted against PoolWait: the budget slows a tenant down, it never
	// refuses a call. A hold of
	// t is charged t + t²/250ms, so a long statement (a whole-range
	// report) costs more than its time and a short one its time. A tenant
	// using what the others typically use is never held. Alone, a tenant
	// runs as fast as before. The wait in the queue (after the budget's) counts against PoolWait (ErrBusy) and
	// is reported to PoolWaitObserver. Statements without a scope bypass
	// it.
	PoolFIFO bool

	// PoolShare is the connection time per second (in connections) whose
	// equal split between the tenants active in the last second is each
	// tenant's floor in the tenant-fair queue's budget: the budget never
	// holds a tenant to less than its floor, and never holds one that is
	// within it. Above its floor a tenant waits only while it is an
	// outlier (over twice the median of the other active tenants),
	// until its decayed use is back to the larger of its floor and that
	// median (at most a second). Zero (the default) means half the
	// pool's size: when the database's CPU, not its connections, runs out
	// first, a tenant running heavy statements back to back is held to
	// what a typical tenant uses. Ignored with PoolFIFO.
	PoolShare float64

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
	//     guardedsql/sqlite.New keeps the busy_timeout its caller set).
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

	// Engine holds the options of one engine (such as
	// guardedsql/postgres.Options, which carries the scope-signing key the
	// PostgreSQL engine requires). An engine given another engine's
	// options refuses them with ErrInvalid. Nil: the engine's defaults.
	Engine EngineOptions
}

// config is a validated Options with its defaults applied, plus what the
// constructors learn from the engine.
type config struct {
	Options
	guard        guard.Options
	setStatement bool // engine.Conn.SetStatement: the server takes SET STATEMENT (MariaDB)
}

// Validate reports the first engine-neutral field of o that is invalid,
// with an error matching [ErrInvalid] that names the field. [Open] and the
// engine packages' New functions call it before opening or sending
// anything (and validate o.Engine themselves).
func (o Options) Validate() error {
	_, err := newConfig(o)
	return err
}

// newConfig validates opts and applies the defaults. Its errors name the
// field, never a value that could be a secret.
func newConfig(opts Options) (config, error) {
	for _, f := range []struct {
		name string
		bad  bool
	}{
		{"PoolWait", opts.PoolWait < 0},
		{"StatementTimeout", opts.StatementTimeout < 0},
		{"LockTimeout", opts.LockTimeout < 0},
		{"MaxConns", opts.MaxConns < 0},
		{"PoolShare", opts.PoolShare < 0 || math.IsNaN(opts.PoolShare) || math.IsInf(opts.PoolShare, 0)},
	} {
		if f.bad {
			return config{}, fmt.Errorf("%w: Options.%s must not be negative (zero is its default)", ErrInvalid, f.name)
		}
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	return config{Options: opts}, nil
}

// wait is the pool-wait bound of c.
func (c *config) wait() engine.Wait {
	return engine.Wait{Timeout: c.PoolWait, Observe: c.PoolWaitObserver}
}
