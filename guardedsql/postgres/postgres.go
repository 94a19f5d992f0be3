// Package postgres is guardedsql's PostgreSQL engine, on
// github.com/jackc/pgx/v5: importing it (a blank import is enough)
// registers the guardedsql engine of postgres:// and postgresql:// DSNs,
// and links pgx — which a program that does not import this package never
// does. It owns what is PostgreSQL's alone: its [Options] (the
// scope-signing [Key] above all), [New] for a *pgxpool.Pool, the
// row-level security that backs the guard ([RLSDDL], [AppGrantDDL],
// [SignScope]), its start-up check [CheckRLS] and its errors
// ([ErrRLSUnsafe] and the specific ErrRLS errors), [Introspect], and the
// owner's administration functions ([ApplyRLS], [AddKey], [RemoveKey],
// [GrantApp]).
//
// Row-level security is a second, independent boundary: [RLSDDL]
// generates, from the schema graph, ENABLE and FORCE ROW LEVEL SECURITY and one policy per
// tenant-bound table that follows the foreign-key path like the guard
// does (a table with no level column of its own and a single-column scope
// parent admits the rows whose parent row the same role sees under the
// parent's policy: one array of visible parent keys per statement), and
// [ApplyRLS] installs them as the tables' owner. Every guarded statement
// runs in a transaction that first sets the scope document as
// the transaction-local setting "tenantmcp.scope" (never a session-level
// SET: a pooled connection never carries one request's scope into the
// next).
//
// The setting is signed. Any role can write a setting, so the policies
// never read it directly: they call a SECURITY DEFINER function (owned by
// the tables' owner, search_path pinned, STABLE, evaluated once per
// statement as an InitPlan) that returns the document only if its
// HMAC-SHA256 verifies under a key in a table the application role cannot
// read, over the document, the namespace, and the transaction's nonce:
// the backend's pid and the transaction's start time ([ScopeNonceSQL]),
// which the application role cannot choose. The DB does not read that
// nonce first: each backend holds a counter (a temporary sequence only the
// owner can use, started at a random 60-bit value), the DB signs the
// document for the connection's next counter, and the first statement of
// the transaction, "tenantmcp_scope_set" (SECURITY DEFINER), verifies that
// signature, consumes the counter (a sequence is not rolled back) and sets
// the value signed for the transaction's nonce ([ScopeExchange],
// [SignExchange]). So a guarded statement is one round trip (the
// exchange, the statement and, for a single statement, the implicit
// commit travel in one pipelined batch), and an exchange value verifies
// at most once, in one transaction of the backend it was signed for. Raw
// SQL as the application role, with no setting, an unsigned one, or a
// signed or exchange value replayed from another transaction or
// connection, sees no row. Keys are [Key] values ([NewKey], [AddKey] and
// [RemoveKey]): every installed key verifies, so a key rotates without
// downtime (add the new one, move the servers to it, remove the old one).
// The owner needs TEMPORARY on the database (PUBLIC has it by default),
// and cannot be dropped while application sessions hold their counters.
// The counter belongs to a backend, so guarded transactions need a
// primary (a hot standby cannot create it) and a connection that keeps its
// backend: behind a transaction-pooling proxy (PgBouncer's
// pool_mode=transaction) the exchange does not verify and guarded
// statements fail closed with the exchange's error; use session pooling.
//
// The start-up check ([CheckRLS], run by [New] and guardedsql.Open)
// refuses a superuser, a BYPASSRLS role, an owner of tables that are not
// FORCE'd, tables whose row-level security or policies are missing,
// altered or outdated, a verifying function or key table that is missing,
// altered or owned by a role the connected role belongs to, and a key that
// is not installed, each with its own error ([ErrRLSSuperuser] and
// friends, all matching [ErrRLSUnsafe] and guardedsql.ErrEngineUnsafe);
// guardedsql's DB.Check runs it again for readiness checks. It also runs
// on every new pooled connection before its first statement and, in the
// DB's own goroutine, every 15 seconds, so that its verdict never gets
// older than [Options].Recheck (30 seconds): while it fails, guarded
// statements fail closed with its error, naming the table, and each
// failure and the recovery are logged. No call ever runs or waits for the
// periodic check, so a pool whose every connection is busy delays it
// without refusing anyone, until its verdict would expire. Close the DB
// to stop that goroutine. The guard's own predicates, which bind the granted
// ids as typed array parameters and never read the setting, are added as
// well unless [Options].RLSOnly is set.
package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tenantmcp/tenantmcp/builder"
	"github.com/tenantmcp/tenantmcp/guardedsql"
	"github.com/tenantmcp/tenantmcp/guardedsql/internal/engine"
	pgdialect "github.com/tenantmcp/tenantmcp/guardedsql/internal/engine/postgres"
	"github.com/tenantmcp/tenantmcp/guardedsql/internal/engine/postgres/pgxdriver"
	"github.com/tenantmcp/tenantmcp/internal/sqlast"
)

func init() {
	pgdialect.AsPgError = pgxdriver.AsPgError
	guardedsql.Register("postgres", pgEngine{})
	guardedsql.Register("postgresql", pgEngine{})
}

// Options are the PostgreSQL engine's own options, set in
// guardedsql.Options.Engine; the administration functions take them too
// and read only Namespace and Key. An invalid Namespace or Key is refused
// with guardedsql.ErrInvalid naming the field, never the secret.
type Options struct {
	// Key signs the scope setting (see [Key]). guardedsql.Open and [New]
	// require it ([ErrRLSNoKey] without); the zero Key means none.
	Key Key

	// Namespace changes the namespace of the scope setting, policies,
	// verifying function and key table from "tenantmcp" (setting
	// "tenantmcp.scope", policies "tenantmcp_scope",
	// "tenantmcp_scope_doc()", "tenantmcp_scope_keys") to a lower-case
	// identifier of at most 40 bytes. Give the same namespace to RLSDDL,
	// ApplyRLS, CheckRLS, AddKey, RemoveKey and SignScope. Empty (the
	// default) means "tenantmcp".
	Namespace string

	// RLSOnly makes the DB leave the read predicates to the row-level
	// security policies: statements carry no tenant predicates of their
	// own, and the policies, reading the signed transaction-local scope
	// setting, are the only read boundary (the guard still checks
	// writes). Policy drift then goes unnoticed for at most one re-check
	// interval (Recheck); the default, with the guard's predicates, never
	// serves another tenant's row meanwhile. The start-up check still
	// runs, so the policies are known to be in force. False (the default)
	// is defence in depth: both.
	RLSOnly bool

	// Recheck bounds the age of the verdict guarded statements are served
	// on: the DB re-runs the start-up check (CheckRLS) in its own
	// goroutine every half Recheck, on one pooled connection, and refuses
	// statements once its last pass is older than Recheck; zero means
	// DefaultRecheck. The check also runs on every new pooled connection
	// before its first guarded statement. While a check fails, guarded
	// statements fail closed with its error (matching ErrRLSUnsafe and
	// naming the table or role; a check that failed while reading, say
	// deadlocked with a migration, fails closed with ErrRLSUnsafe too)
	// and send nothing, the check is retried at most every second (or
	// every interval if shorter), and serving resumes when it passes
	// again; each failure and each recovery is logged to
	// guardedsql.Options.Logger. A check that finds no free connection
	// within the pool wait, or no database, changes nothing and is
	// retried soon; only when the verdict expires are statements refused,
	// with an error that matches ErrRLSUnsafe and is retryable
	// (guardedsql.IsUnavailable), logged once. The re-check cannot be
	// turned off.
	Recheck time.Duration
}

// EngineName implements guardedsql.EngineOptions.
func (Options) EngineName() string { return "postgres" }

// DefaultRecheck is how often a DB re-reads its row-level security from
// the catalogs while serving (see Options.Recheck).
const DefaultRecheck = 30 * time.Second

// dialect builds the dialect of o's namespace and key, refusing an invalid
// one (guardedsql.ErrInvalid naming the field; never the secret).
func (o Options) dialect() (pgdialect.Dialect, error) {
	if o.Namespace != "" && !pgdialect.ValidNamespace(o.Namespace) {
		return pgdialect.Dialect{}, fmt.Errorf("%w: postgres.Options.Namespace %q is not a lower-case identifier of at most 40 bytes", guardedsql.ErrInvalid, o.Namespace)
	}
	if o.Recheck < 0 {
		return pgdialect.Dialect{}, fmt.Errorf("%w: postgres.Options.Recheck must not be negative (zero is its default)", guardedsql.ErrInvalid)
	}
	d := pgdialect.Dialect{Namespace: o.Namespace}
	if !o.Key.isZero() {
		k := o.Key.dialect()
		if err := k.Validate(); err != nil {
			return pgdialect.Dialect{}, fmt.Errorf("%w: postgres.Options.Key: %w", guardedsql.ErrInvalid, err)
		}
		d.Key = &k
	}
	return d, nil
}

// options returns the PostgreSQL options in opts, validated.
func options(opts guardedsql.Options) (Options, pgdialect.Dialect, error) {
	if err := opts.Validate(); err != nil {
		return Options{}, pgdialect.Dialect{}, err
	}
	var o Options
	switch e := opts.Engine.(type) {
	case nil:
	case Options:
		o = e
	default:
		return Options{}, pgdialect.Dialect{}, fmt.Errorf("%w: Options.Engine holds %s options, given to the postgres engine", guardedsql.ErrInvalid, e.EngineName())
	}
	d, err := o.dialect()
	return o, d, err
}

// pgEngine is the guardedsql.Engine of postgres:// and postgresql:// DSNs.
type pgEngine struct{}

func (pgEngine) Name() string { return "postgres" }

// Open opens a pgxpool for dsn (sized by opts.MaxConns, every session in
// UTC) and guards it as [New] does.
func (pgEngine) Open(ctx context.Context, dsn string, sch *builder.Schema, opts guardedsql.Options) (*guardedsql.DB, error) {
	if _, _, err := options(opts); err != nil {
		return nil, err
	}
	pool, err := openPool(ctx, dsn, opts.MaxConns)
	if err != nil {
		return nil, err
	}
	db, err := newDB(ctx, pool, sch, opts)
	if err != nil {
		pool.Close()
		return nil, err
	}
	return db, nil
}

func (pgEngine) Catalog(ctx context.Context, dsn string) ([]builder.TableDef, error) {
	pool, err := openPool(ctx, dsn, 0)
	if err != nil {
		return nil, err
	}
	defer pool.Close()
	return pgdialect.Dialect{}.Introspect(ctx, pool)
}

func (pgEngine) Unavailable(err error) bool { return pgxdriver.Unavailable(err) }
func (pgEngine) Timeout(err error) bool     { return pgxdriver.Timeout(err) }
func (pgEngine) DSNSecrets(string) []string { return nil }

// openPool opens an owned pool for a PostgreSQL DSN.
func openPool(ctx context.Context, dsn string, maxConns int) (engine.Pool, error) {
	p, err := pgxdriver.Open(ctx, dsn, maxConns)
	var bad *pgxdriver.DSNError
	switch {
	case errors.As(err, &bad):
		return nil, guardedsql.RedactDSNError(fmt.Errorf("guardedsql: PostgreSQL DSN %s: %w", guardedsql.RedactDSN(dsn), bad.Err), dsn)
	case err != nil:
		return nil, guardedsql.RedactDSNError(fmt.Errorf("guardedsql: open %s: %w", guardedsql.RedactDSN(dsn), err), dsn)
	}
	return p, nil
}

// New guards a PostgreSQL pool connected as the application role. The
// DB's Close stops its periodic re-check and leaves pool open (close the
// DB first). The Key of opts.Engine (an [Options]) is required
// ([ErrRLSNoKey] otherwise); opts.MaxConns is ignored (the caller sized
// pool).
//
// Before returning, New runs [CheckRLS] and fails closed, with an error
// matching [ErrRLSUnsafe], if the policies of [RLSDDL] would not confine
// the connected role or the key is not installed: connect as a role that
// is neither superuser nor BYPASSRLS nor a member of the tables' owner,
// after the owner has applied the DDL and added the key ([ApplyRLS] with
// Options.Key). The check runs again on every new pooled connection and
// periodically (Options.Recheck); while it fails, statements fail closed.
func New(ctx context.Context, pool *pgxpool.Pool, sch *builder.Schema, opts guardedsql.Options) (*guardedsql.DB, error) {
	return newDB(ctx, pgxdriver.NewPool(pool, false), sch, opts)
}

func newDB(ctx context.Context, p engine.Pool, sch *builder.Schema, opts guardedsql.Options) (*guardedsql.DB, error) {
	o, d, err := options(opts)
	if err != nil {
		return nil, err
	}
	g, ok := sqlast.SchemaOf(sch)
	if !ok {
		return nil, fmt.Errorf("%w: nil or zero schema", guardedsql.ErrInvalid)
	}
	if d.Key == nil {
		return nil, ErrRLSNoKey
	}
	d.RLSOnly = o.RLSOnly
	d.Timeouts = pgdialect.Timeouts{Statement: opts.StatementTimeout, Lock: opts.LockTimeout}
	checked := time.Now()
	if err := d.Check(ctx, p, g); err != nil {
		return nil, err
	}
	// Invariant (issue 25 §6): a guarded statement's unqualified table
	// names resolve in the schemas checked here, never in pg_temp first.
	sp, err := pgdialect.SearchPathFor(ctx, p)
	if err != nil {
		return nil, err
	}
	d.SearchPath = sp
	m := newMonitor(func(ctx context.Context, q engine.Querier) error { return d.Check(ctx, q, g) }, p, o.Recheck, opts.Logger, checked)
	if nc, ok := p.(pgdialect.NewConnChecker); ok {
		nc.SetNewConnCheck(m.connCheck)
	}
	verify := func(ctx context.Context, q engine.Querier) error {
		err := d.Check(ctx, q, g)
		if err != nil && !errors.Is(err, ErrRLSUnsafe) && guardedsql.IsUnavailable(err) {
			return fmt.Errorf("%w: %w", guardedsql.ErrUnavailable, err)
		}
		return err
	}
	db, err := guardedsql.OpenConn(ctx, &engine.Conn{Pool: p, Dialect: d, Gate: m.gate, Verify: verify, Stop: m.stop}, sch, opts)
	if err != nil {
		return nil, err
	}
	m.start()
	return db, nil
}

// CheckRLS reads back from the catalogs, on pool (connected as the
// application role), whether the row-level security of RLSDDL(sch),
// signed context included, is in force for that role (and, with opts.Key,
// that a scope signed with that key verifies), and returns an error
// matching [ErrRLSUnsafe] and one of the specific ErrRLS errors if not.
// [New] and guardedsql.Open run it at start-up; call it again after
// migrations if you like.
func CheckRLS(ctx context.Context, pool *pgxpool.Pool, sch *builder.Schema, opts Options) error {
	g, ok := sqlast.SchemaOf(sch)
	if !ok {
		return fmt.Errorf("%w: nil or zero schema", guardedsql.ErrInvalid)
	}
	d, err := opts.dialect()
	if err != nil {
		return err
	}
	return d.Check(ctx, pgxdriver.NewPool(pool, false), g)
}

// Introspect reads the tables, columns, primary keys and foreign keys of
// the pool's current schema from information_schema and builds a Schema
// with tenancy t applied.
func Introspect(ctx context.Context, pool *pgxpool.Pool, t builder.Tenancy) (*builder.Schema, error) {
	cat, err := pgdialect.Dialect{}.Introspect(ctx, pgxdriver.NewPool(pool, false))
	if err != nil {
		return nil, err
	}
	return t.Schema(cat)
}

// TxBeginner is what the administration functions need: *pgxpool.Pool,
// *pgx.Conn and pgx.Tx (which nests as a savepoint) all qualify.
type TxBeginner interface {
	Begin(ctx context.Context) (pgx.Tx, error)
}
