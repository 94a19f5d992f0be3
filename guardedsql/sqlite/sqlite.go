// Package sqlite is guardedsql's SQLite engine, on modernc.org/sqlite (pure
// Go): importing it (a blank import is enough) registers the "sqlite"
// database/sql driver and the guardedsql engine of the sqlite: and file:
// DSN schemes, and links the driver — which a program that does not
// import this package never does. [New] guards a *sql.DB the caller
// opened; [Introspect] reads one's catalog.
//
// guardedsql.Open opens SQLite databases with foreign keys enforced, a 5 s
// busy timeout (or Options.StatementTimeout, if shorter) and immediate
// transactions unless the DSN sets those itself; a file database in WAL
// mode (unless the DSN sets journal_mode), with one writer connection for
// every write and transaction beside a pool of query-only readers, so that
// concurrent calls never fail with SQLITE_BUSY. Statements are prepared
// once per connection and kept, by exact SQL text, for the next call of
// the same shape (a bounded cache, like pgx's for PostgreSQL). A *sql.DB
// given to [New] is used as it is. SQLite serves one process: run
// replicas on PostgreSQL.
package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	_ "modernc.org/sqlite" // registers the "sqlite" driver

	"github.com/tenantmcp/tenantmcp/builder"
	"github.com/tenantmcp/tenantmcp/guardedsql"
	"github.com/tenantmcp/tenantmcp/guardedsql/internal/engine"
	"github.com/tenantmcp/tenantmcp/guardedsql/internal/engine/sqlite"
)

func init() {
	guardedsql.Register("sqlite", sqliteEngine{})
	guardedsql.Register("file", sqliteEngine{})
}

// sqliteEngine is the guardedsql.Engine of SQLite DSNs.
type sqliteEngine struct{}

func (sqliteEngine) Name() string { return "sqlite" }

func (sqliteEngine) Open(ctx context.Context, dsn string, sch *builder.Schema, opts guardedsql.Options) (*guardedsql.DB, error) {
	pool, err := openPool(ctx, dsn, opts.StatementTimeout)
	if err != nil {
		return nil, err
	}
	db, err := guardedsql.OpenConn(ctx, &engine.Conn{Pool: pool, Dialect: sqlite.Dialect{}}, sch, opts)
	if err != nil {
		pool.Close()
		return nil, err
	}
	return db, nil
}

func (sqliteEngine) Catalog(ctx context.Context, dsn string) ([]builder.TableDef, error) {
	db, err := openSQL(ctx, dsn, 0)
	if err != nil {
		return nil, err
	}
	defer db.Close()
	return sqlite.Dialect{}.Introspect(ctx, engine.StdPool(db, false))
}

// sqliteBusy is SQLITE_BUSY, the primary result code of a busy timeout.
const sqliteBusy = 5

func (sqliteEngine) Unavailable(error) bool { return false }

// Timeout reports SQLITE_BUSY: the busy timeout ran out waiting for the
// database lock.
func (sqliteEngine) Timeout(err error) bool {
	var se interface{ Code() int } // modernc.org/sqlite's *Error
	return errors.As(err, &se) && se.Code()&0xff == sqliteBusy
}

func (sqliteEngine) DSNSecrets(string) []string { return nil }

// New guards an SQLite database opened by the caller with the "sqlite"
// driver, which importing this package registers. Close leaves db open
// (it closes only the statements the DB prepared on it). Open it with
// foreign keys enforced (_pragma=foreign_keys(1)): the start-up catalog
// check (guardedsql.CheckCatalog) refuses a connection without, as it
// refuses a graph that disagrees with the database.
func New(ctx context.Context, db *sql.DB, sch *builder.Schema, opts guardedsql.Options) (*guardedsql.DB, error) {
	return guardedsql.OpenConn(ctx, &engine.Conn{Pool: engine.CachedStdPool(db, false, engine.DefaultStmtCacheSize), Dialect: sqlite.Dialect{}}, sch, opts)
}

// Introspect reads the tables, columns, primary keys and foreign keys of
// an SQLite database and builds a Schema with tenancy t applied.
func Introspect(ctx context.Context, db *sql.DB, t builder.Tenancy) (*builder.Schema, error) {
	cat, err := sqlite.Dialect{}.Introspect(ctx, engine.StdPool(db, false))
	if err != nil {
		return nil, err
	}
	return t.Schema(cat)
}

// openPool opens an SQLite DSN for Open. A file database is switched
// to WAL (unless the DSN sets a journal mode) and opened twice: one writer
// connection for every write and transaction, and a pool of query-only
// readers (engine.SplitPool). With the busy timeout and immediate
// transactions this keeps SQLITE_BUSY from the calls of one process: its
// writes wait their turn for the one connection, and WAL readers never
// wait for the writer. An in-memory database is one connection.
func openPool(ctx context.Context, dsn string, busy time.Duration) (engine.Pool, error) {
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
		return nil, guardedsql.RedactDSNError(fmt.Errorf("guardedsql: open %s: %w", guardedsql.RedactDSN(dsn), err), dsn)
	}
	return sqlDB, nil
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
		return nil, guardedsql.RedactDSNError(fmt.Errorf("guardedsql: open %s: %w", guardedsql.RedactDSN(dsn), err), dsn)
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
		return "", false, fmt.Errorf("%w: unsupported DSN scheme %q", guardedsql.ErrNoEngine, guardedsql.DSNScheme(dsn))
	}
	if name == "" {
		return "", false, fmt.Errorf("guardedsql: empty SQLite path in DSN")
	}
	memory = strings.HasPrefix(name, ":memory:") || strings.Contains(name, "mode=memory")
	path, query, _ := strings.Cut(name, "?")
	q, err := url.ParseQuery(query)
	if err != nil {
		return "", false, guardedsql.RedactDSNError(fmt.Errorf("guardedsql: DSN query: %w", err), dsn)
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
