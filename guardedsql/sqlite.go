package guardedsql

import (
	"context"
	"database/sql"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/tenantmcp/tenantmcp/builder"
	"github.com/tenantmcp/tenantmcp/guardedsql/internal/engine"
	"github.com/tenantmcp/tenantmcp/guardedsql/internal/engine/sqlite"
	"github.com/tenantmcp/tenantmcp/guardedsql/internal/driver"
)

// openers maps a DSN scheme (the text before "://") to the function
// that opens it; engine files register theirs in init, e.g.
// openers["postgres"] = openPostgres. SQLite is built in.
var openers = map[string]func(ctx context.Context, dsn string, sch *builder.Schema, c config) (*DB, error){}

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
// SQLite databases are opened with foreign keys enforced, a 5 s busy
// timeout (or Options.StatementTimeout, if shorter) and immediate
// transactions unless the DSN sets those itself; a file database in WAL
// mode (unless the DSN sets journal_mode), with one writer connection for
// every write and transaction beside a pool of query-only readers, so that
// concurrent calls never fail with SQLITE_BUSY. SQLite statements are
// prepared once per connection and kept, by exact SQL text, for the next
// call of the same shape (a bounded cache, like pgx's for PostgreSQL).
// PostgreSQL is opened as postgres.New does, start-up check of row-level
// security included: connect as the application role, not the tables'
// owner or a superuser. MySQL is opened as NewMySQL does. Close closes the
// database.
//
// Each engine's DSNs are accepted only when its package is imported
// (guardedsql/sqlite, guardedsql/postgres, guardedsql/mysql; a blank
// import is enough); otherwise Open fails with [ErrNoEngine], naming the
// package, and opens nothing. Invalid opts are refused before anything is
// opened (see [Options]).
func Open(ctx context.Context, dsn string, sch *builder.Schema, opts Options) (*DB, error) {
	c, err := newConfig(opts)
	if err != nil {
		return nil, err
	}
	if scheme, _, ok := strings.Cut(dsn, "://"); ok {
		if open := openers[scheme]; open != nil {
			db, err := open(ctx, dsn, sch, c)
			return db, RedactDSNError(err, dsn)
		}
	}
	pool, err := openSQLitePool(ctx, dsn, c.StatementTimeout)
	if err != nil {
		return nil, err
	}
	db, err := newDB(pool, sqlite.Dialect{}, sch, c)
	if err == nil {
		err = startupCatalog(ctx, db)
	}
	if err != nil {
		pool.Close()
		return nil, err
	}
	return db, nil
}

// openSQLitePool opens an SQLite DSN for Open. A file database is switched
// to WAL (unless the DSN sets a journal mode) and opened twice: one writer
// connection for every write and transaction, and a pool of query-only
// readers (engine.SplitPool). With the busy timeout and immediate
// transactions this keeps SQLITE_BUSY from the calls of one process: its
// writes wait their turn for the one connection, and WAL readers never
// wait for the writer. An in-memory database is one connection.
func openSQLitePool(ctx context.Context, dsn string, busy time.Duration) (engine.Pool, error) {
	name, memory, err := sqliteName(dsn, busy)
	if err != nil {
		return nil, err
	}
	if memory {
		sqlDB, err := openSQL(ctx, dsn, busy)
		if err != nil {
			return nil, err
		}
		return engine.CachedStdPool(sqlDB, true, engine.DefaultStmtCacheSize), nil
	}
	if !strings.Contains(name, "journal_mode") {
		name += "&_pragma=journal_mode(wal)"
	}
	write, err := pingSQLite(ctx, dsn, name)
	if err != nil {
		return nil, err
	}
	write.SetMaxOpenConns(1)
	read, err := pingSQLite(ctx, dsn, name+"&_pragma=query_only(1)")
	if err != nil {
		write.Close()
		return nil, err
	}
	return engine.SplitPool(read, write, engine.DefaultStmtCacheSize), nil
}

func pingSQLite(ctx context.Context, dsn, name string) (*sql.DB, error) {
	sqlDB, err := sql.Open("sqlite", name)
	if err != nil {
		return nil, err
	}
	if err := sqlDB.PingContext(ctx); err != nil {
		sqlDB.Close()
		return nil, RedactDSNError(fmt.Errorf("guardedsql: open %s: %w", RedactDSN(dsn), err), dsn)
	}
	return sqlDB, nil
}

// NewSQLite guards an SQLite database opened by the caller with the
// "sqlite" driver (modernc.org/sqlite). Close leaves db open (it closes
// only the statements the DB prepared on it, see Open). Open it with
// foreign keys enforced (_pragma=foreign_keys(1)): the start-up catalog
// check (CheckCatalog) refuses a connection without, as it refuses a graph
// that disagrees with the database.
func NewSQLite(ctx context.Context, db *sql.DB, sch *builder.Schema, opts Options) (*DB, error) {
	c, err := newConfig(opts)
	if err != nil {
		return nil, err
	}
	return newSQLite(ctx, db, sch, c)
}

func newSQLite(ctx context.Context, db *sql.DB, sch *builder.Schema, c config) (*DB, error) {
	g, err := newDB(engine.CachedStdPool(db, false, engine.DefaultStmtCacheSize), sqlite.Dialect{}, sch, c)
	if err != nil {
		return nil, err
	}
	if err := startupCatalog(ctx, g); err != nil {
		return nil, err
	}
	return g, nil
}

// IntrospectSQLite reads the tables, columns, primary keys and foreign
// keys of an SQLite database and builds a Schema with tenancy t applied.
func IntrospectSQLite(ctx context.Context, db *sql.DB, t builder.Tenancy) (*builder.Schema, error) {
	cat, err := sqlite.Dialect{}.Introspect(ctx, engine.StdPool(db, false))
	if err != nil {
		return nil, err
	}
	def, err := t.Apply(cat)
	if err != nil {
		return nil, err
	}
	return builder.NewSchema(def)
}

// introspectors maps a DSN scheme to its introspection, as openers does.
var introspectors = map[string]func(ctx context.Context, dsn string, t builder.Tenancy) (*builder.Schema, error){}

// Introspect opens dsn (as Open does), introspects it with tenancy t and
// closes it again.
func Introspect(ctx context.Context, dsn string, t builder.Tenancy) (*builder.Schema, error) {
	if scheme, _, ok := strings.Cut(dsn, "://"); ok {
		if in := introspectors[scheme]; in != nil {
			sch, err := in(ctx, dsn, t)
			return sch, RedactDSNError(err, dsn)
		}
	}
	sqlDB, err := openSQL(ctx, dsn, 0)
	if err != nil {
		return nil, err
	}
	defer sqlDB.Close()
	return IntrospectSQLite(ctx, sqlDB, t)
}

// openSQL opens an SQLite DSN; a positive busy bounds lock waits below the
// default busy timeout (see Options.StatementTimeout).
func openSQL(ctx context.Context, dsn string, busy time.Duration) (*sql.DB, error) {
	name, memory, err := sqliteName(dsn, busy)
	if err != nil {
		return nil, err
	}
	sqlDB, err := sql.Open("sqlite", name)
	if err != nil {
		return nil, err
	}
	if memory {
		sqlDB.SetMaxOpenConns(1)
	}
	if err := sqlDB.PingContext(ctx); err != nil {
		sqlDB.Close()
		return nil, RedactDSNError(fmt.Errorf("guardedsql: open %s: %w", RedactDSN(dsn), err), dsn)
	}
	return sqlDB, nil
}

func sqliteName(dsn string, busy time.Duration) (name string, memory bool, err error) {
	switch {
	case strings.HasPrefix(dsn, "sqlite://"):
		name = strings.TrimPrefix(dsn, "sqlite://")
	case strings.HasPrefix(dsn, "sqlite:"):
		name = strings.TrimPrefix(dsn, "sqlite:")
	case strings.HasPrefix(dsn, "file:"):
		name = dsn
	default:
		scheme, _, _ := strings.Cut(dsn, ":")
		return "", false, fmt.Errorf("guardedsql: unsupported DSN scheme %q", RedactDSN(scheme))
	}
	if name == "" {
		return "", false, fmt.Errorf("guardedsql: empty SQLite path in DSN")
	}
	if !driver.SQLiteEngine {
		return "", false, noEngine("SQLite", "sqlite")
	}
	memory = strings.HasPrefix(name, ":memory:") || strings.Contains(name, "mode=memory")
	path, query, _ := strings.Cut(name, "?")
	q, err := url.ParseQuery(query)
	if err != nil {
		return "", false, RedactDSNError(fmt.Errorf("guardedsql: DSN query: %w", err), dsn)
	}
	pragmas := strings.Join(q["_pragma"], ";")
	if !strings.Contains(pragmas, "foreign_keys") && q.Get("_foreign_keys") == "" && q.Get("_fk") == "" {
		q.Add("_pragma", "foreign_keys(1)")
	}
	if !strings.Contains(pragmas, "busy_timeout") && q.Get("_busy_timeout") == "" && q.Get("_timeout") == "" {
		// The context deadline of StatementTimeout does not cut a busy
		// wait short, so the busy timeout is bounded by it as well.
		ms := int64(5000)
		if busy > 0 {
			ms = min(ms, max(busy.Milliseconds(), 1))
		}
		q.Add("_pragma", "busy_timeout("+strconv.FormatInt(ms, 10)+")")
	}
	if q.Get("_txlock") == "" {
		q.Set("_txlock", "immediate")
	}
	return path + "?" + q.Encode(), memory, nil
}
