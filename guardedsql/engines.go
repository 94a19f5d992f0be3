package guardedsql

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/tenantmcp/tenantmcp/builder"
	"github.com/tenantmcp/tenantmcp/guardedsql/internal/engine"
)

// Engine is a database engine behind [Open], [Introspect] and
// [IntrospectCatalog], registered for its DSN schemes with [Register].
// The engine packages guardedsql/sqlite, guardedsql/postgres and
// guardedsql/mysql each register one in their init, so that a program
// links exactly the drivers of the engines it imports; package guardedsql
// itself links none.
type Engine interface {
	// Name is the engine's name ("postgres", "mysql", "sqlite"): the
	// EngineName of its own [EngineOptions].
	Name() string
	// Open opens dsn, owned by the DB (Close closes it), and guards it
	// with sch (through [OpenConn]). opts is valid and its Engine, if
	// set, is this engine's.
	Open(ctx context.Context, dsn string, sch *builder.Schema, opts Options) (*DB, error)
	// Catalog opens dsn, reads its raw catalog and closes it again.
	Catalog(ctx context.Context, dsn string) ([]builder.TableDef, error)
	// Unavailable reports a driver error meaning the server cannot be
	// reached or is not accepting work ([IsUnavailable]).
	Unavailable(err error) bool
	// Timeout reports a driver error of a statement or lock timeout
	// ([IsTimeout]).
	Timeout(err error) bool
	// DSNSecrets returns the passwords the driver's own DSN parser finds
	// in dsn, beyond URL userinfo and password parameters ([RedactDSN]).
	DSNSecrets(dsn string) []string
}

// EngineOptions are one engine's own options, set in [Options].Engine
// (such as guardedsql/postgres.Options). EngineName is the [Engine]'s
// Name: an engine given another engine's options refuses them with
// [ErrInvalid].
type EngineOptions interface {
	EngineName() string
}

// ErrNoEngine: the DSN names an engine whose package the program does not
// import (or no engine at all). Import the engine package —
// guardedsql/sqlite, guardedsql/postgres or guardedsql/mysql — for Open to
// accept its DSNs (a blank import is enough). It wraps [ErrInvalid].
var ErrNoEngine = fmt.Errorf("%w: database engine not linked", ErrInvalid)

var (
	enginesMu sync.RWMutex
	engines   = map[string]Engine{}
)

// Register makes e open the DSNs of scheme (the text before the first
// ':', such as "postgres" for postgres://...). Engine packages call it in
// init. It panics if e is nil or scheme is already registered, as
// sql.Register does.
func Register(scheme string, e Engine) {
	enginesMu.Lock()
	defer enginesMu.Unlock()
	if e == nil {
		panic("guardedsql: Register engine is nil")
	}
	if _, dup := engines[scheme]; dup {
		panic("guardedsql: Register called twice for scheme " + scheme)
	}
	engines[scheme] = e
}

// registered returns every registered engine once.
func registered() []Engine {
	enginesMu.RLock()
	defer enginesMu.RUnlock()
	var out []Engine
	for _, e := range engines {
		if !slices.Contains(out, e) {
			out = append(out, e)
		}
	}
	return out
}

// enginePackages names the package that registers each scheme this
// module has an engine for, for ErrNoEngine's message.
var enginePackages = map[string]string{
	"postgres": "postgres", "postgresql": "postgres", "mysql": "mysql", "sqlite": "sqlite", "file": "sqlite",
}

// engineFor returns the engine registered for dsn's scheme, or
// ErrNoEngine naming the package to import.
func engineFor(dsn string) (Engine, error) {
	scheme, _, _ := strings.Cut(dsn, ":")
	enginesMu.RLock()
	e := engines[scheme]
	enginesMu.RUnlock()
	if e != nil {
		return e, nil
	}
	if pkg, ok := enginePackages[scheme]; ok {
		return nil, fmt.Errorf("%w: a %s DSN needs the engine package: import _ \"github.com/tenantmcp/tenantmcp/guardedsql/%s\"", ErrNoEngine, scheme, pkg)
	}
	if !strings.Contains(dsn, ":") && strings.Contains(dsn, "=") {
		// PostgreSQL's keyword/value form ("host=... user=..."): the
		// engines take URLs only. Nothing of it is echoed.
		return nil, fmt.Errorf("%w: a keyword=value DSN is not supported: write it as a URL (postgres://user@host:5432/db?sslmode=...)", ErrNoEngine)
	}
	return nil, fmt.Errorf("%w: unsupported DSN scheme %q", ErrNoEngine, DSNScheme(dsn))
}

// checkEngine refuses options meant for another engine than name.
func checkEngine(opts Options, name string) error {
	if opts.Engine != nil && opts.Engine.EngineName() != name {
		return fmt.Errorf("%w: Options.Engine holds %s options, given to the %s engine", ErrInvalid, opts.Engine.EngineName(), name)
	}
	return nil
}

// Open opens a guarded database from a DSN:
//
//	sqlite:/path/to/file.db      SQLite file (created if missing)
//	sqlite:///path/to/file.db    the same
//	file:/path/to/file.db?...    SQLite URI, passed to the driver
//	sqlite::memory:              private in-memory SQLite (one connection)
//	postgres://user:pass@host:5432/db?sslmode=...   PostgreSQL (pgxpool; postgresql:// too)
//	mysql://user:pass@tcp(host:3306)/db?param=...    MySQL / MariaDB (see guardedsql/mysql.Config)
//	mysql://user:pass@host:3306/db?param=...         the same, URL form
//
// Each engine's DSNs are accepted only when its package is imported
// (guardedsql/sqlite, guardedsql/postgres, guardedsql/mysql; a blank
// import is enough), which registers it ([Register]); otherwise Open fails
// with [ErrNoEngine], naming the package, and opens nothing. Each engine
// package's documentation says how it opens its DSNs (SQLite's pragmas and
// writer connection, PostgreSQL's start-up check of row-level security:
// connect as the application role, not the tables' owner or a superuser).
// Invalid opts, or an opts.Engine of another engine, are refused before
// anything is opened (see [Options]). Close closes the database.
func Open(ctx context.Context, dsn string, sch *builder.Schema, opts Options) (*DB, error) {
	if _, err := newConfig(opts); err != nil {
		return nil, err
	}
	e, err := engineFor(dsn)
	if err != nil {
		return nil, err
	}
	if err := checkEngine(opts, e.Name()); err != nil {
		return nil, err
	}
	db, err := e.Open(ctx, dsn, sch, opts)
	return db, RedactDSNError(err, dsn)
}

// OpenConn guards the connection an engine package opened: it is what
// [Engine].Open and the engine packages' New functions call, as
// sql.OpenDB is for a driver's connector. Its argument's type is internal,
// so only this module's engine packages make one. It validates opts, runs
// the start-up catalog check ([CheckCatalog]) and leaves c's pool open on
// error.
func OpenConn(ctx context.Context, c *engine.Conn, sch *builder.Schema, opts Options) (*DB, error) {
	cfg, err := newConfig(opts)
	if err != nil {
		return nil, err
	}
	if err := checkEngine(opts, c.Dialect.Name()); err != nil {
		return nil, err
	}
	cfg.setStatement = c.SetStatement
	cfg.guard.NoIntersectExcept = c.NoIntersectExcept
	cfg.guard.PredicatesOnly = c.PredicatesOnly
	db, err := newDB(c.Pool, c.Dialect, sch, cfg)
	if err != nil {
		return nil, err
	}
	if err := startupCatalog(ctx, db); err != nil {
		return nil, err
	}
	db.gateFn, db.verify, db.stop = c.Gate, c.Verify, c.Stop
	return db, nil
}

// Introspect opens dsn (as Open does), reads its catalog, builds a Schema
// with tenancy t applied and closes dsn again.
func Introspect(ctx context.Context, dsn string, t builder.Tenancy) (*builder.Schema, error) {
	cat, err := IntrospectCatalog(ctx, dsn)
	if err != nil {
		return nil, err
	}
	return t.Schema(cat)
}

// IntrospectCatalog opens dsn (any DSN [Open] accepts), reads its tables,
// columns, primary, unique and foreign keys and declared types, and
// closes it again. Unlike [Introspect] it applies no tenancy and validates
// nothing: the result is the raw catalog, for tools such as command
// tenantmcp-gen that generate code from it. Build a [builder.Schema] from
// it with a [builder.Tenancy] (see [builder.Tenancy.Apply]). Errors never
// echo the DSN's password.
func IntrospectCatalog(ctx context.Context, dsn string) ([]builder.TableDef, error) {
	e, err := engineFor(dsn)
	if err != nil {
		return nil, err
	}
	cat, err := e.Catalog(ctx, dsn)
	return cat, RedactDSNError(err, dsn)
}
