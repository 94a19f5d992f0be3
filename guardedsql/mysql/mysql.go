// Package mysql is guardedsql's MySQL and MariaDB engine, on
// github.com/go-sql-driver/mysql: importing it (a blank import is enough)
// registers the guardedsql engine of mysql:// DSNs, and links the driver
// — which a program that does not import this package never does. [New]
// guards a *sql.DB the caller opened (with [Config]); [Introspect] reads
// one's catalog.
//
// MySQL has no row-level security: the guard's predicates are the
// boundary. Where the foreign-key path reaches the level columns, a level
// holding one id is compared with that id as a typed bound value, and
// several ids are expanded from the scope's typed grant document with
// JSON_TABLE; the plans they produce, the collation advice for text tenant
// keys and the differences between MariaDB and MySQL 8 are documented in
// guardedsql/internal/engine/mysql.
package mysql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/go-sql-driver/mysql"

	"github.com/tenantmcp/tenantmcp/builder"
	"github.com/tenantmcp/tenantmcp/guardedsql"
	"github.com/tenantmcp/tenantmcp/guardedsql/internal/engine"
	mysqldialect "github.com/tenantmcp/tenantmcp/guardedsql/internal/engine/mysql"
	"github.com/tenantmcp/tenantmcp/internal/sqlast"
)

func init() {
	mysqldialect.AsServerError = asServerError
	guardedsql.Register("mysql", mysqlEngine{})
}

// ErrNoJSONTable: the MySQL server cannot expand the scope document
// (JSON_TABLE needs MySQL 8.0.4 or MariaDB 10.6). Nothing would be safe to
// run on it, so [New] and guardedsql.Open refuse it at start-up.
var ErrNoJSONTable = errors.New("guardedsql: the MySQL server lacks JSON_TABLE (needs MySQL 8.0.4+ or MariaDB 10.6+)")

// mysqlEngine is the guardedsql.Engine of mysql:// DSNs.
type mysqlEngine struct{}

func (mysqlEngine) Name() string { return "mysql" }

// Open opens dsn (see [Config]) with go-sql-driver/mysql, pool sized by
// opts.MaxConns.
func (mysqlEngine) Open(ctx context.Context, dsn string, sch *builder.Schema, opts guardedsql.Options) (*guardedsql.DB, error) {
	sqlDB, err := openDB(dsn)
	if err != nil {
		return nil, err
	}
	if opts.MaxConns > 0 {
		sqlDB.SetMaxOpenConns(opts.MaxConns)
	}
	if err := sqlDB.PingContext(ctx); err != nil {
		sqlDB.Close()
		return nil, guardedsql.RedactDSNError(fmt.Errorf("guardedsql: open %s: %w", guardedsql.RedactDSN(dsn), err), dsn)
	}
	db, err := newDB(ctx, sqlDB, true, sch, opts)
	if err != nil {
		sqlDB.Close()
		return nil, err
	}
	return db, nil
}

func (mysqlEngine) Catalog(ctx context.Context, dsn string) ([]builder.TableDef, error) {
	db, err := openDB(dsn)
	if err != nil {
		return nil, err
	}
	defer db.Close()
	return mysqldialect.Dialect{}.Introspect(ctx, engine.StdPool(db, false))
}

func (mysqlEngine) Unavailable(err error) bool { return unavailable(err) }
func (mysqlEngine) Timeout(err error) bool     { return timeout(err) }
func (mysqlEngine) DSNSecrets(dsn string) []string {
	return dsnSecrets(dsn)
}

// openDB returns an unpinged *sql.DB for a mysql:// DSN with the
// library's defaults (see Config).
func openDB(dsn string) (*sql.DB, error) {
	cfg, err := Config(dsn)
	if err != nil {
		return nil, err
	}
	conn, err := mysql.NewConnector(cfg)
	if err != nil {
		return nil, guardedsql.RedactDSNError(fmt.Errorf("guardedsql: MySQL DSN: %w", err), dsn)
	}
	return sql.OpenDB(conn), nil
}

// New guards a MySQL or MariaDB database opened by the caller with
// github.com/go-sql-driver/mysql. Close leaves db open. Open db with
// clientFoundRows=true ([Config] does): without it an ExpectOne update
// does not count a matched row that already holds the new value, so it can
// report ErrNotFound for an own row, and miss that it matched two
// (ErrAmbiguous).
//
// New checks once that the server supports JSON_TABLE ([ErrNoJSONTable]
// otherwise), and reads the character set and collation of the text level
// columns so that the expanded ids are compared in the columns' own
// collation (and can use their indexes).
func New(ctx context.Context, db *sql.DB, sch *builder.Schema, opts guardedsql.Options) (*guardedsql.DB, error) {
	return newDB(ctx, db, false, sch, opts)
}

func newDB(ctx context.Context, db *sql.DB, owned bool, sch *builder.Schema, opts guardedsql.Options) (*guardedsql.DB, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	if opts.Engine != nil {
		return nil, fmt.Errorf("%w: Options.Engine holds %s options, given to the mysql engine", guardedsql.ErrInvalid, opts.Engine.EngineName())
	}
	g, ok := sqlast.SchemaOf(sch)
	if !ok {
		return nil, fmt.Errorf("%w: nil or zero schema", guardedsql.ErrInvalid)
	}
	if err := probeJSONTable(ctx, db); err != nil {
		return nil, err
	}
	// Guarded transactions begin READ COMMITTED unless asked otherwise
	// (issue 26 §1: see GuardedIsolation).
	pool := engine.IsolatedStdPool(db, owned, mysqldialect.GuardedIsolation)
	cs, err := mysqldialect.LevelCharsets(ctx, pool, g)
	if err != nil {
		return nil, fmt.Errorf("guardedsql: MySQL start-up check: %w", err)
	}
	var maria bool
	if err := db.QueryRowContext(ctx, "SELECT VERSION() LIKE '%MariaDB%'").Scan(&maria); err != nil {
		return nil, fmt.Errorf("guardedsql: MySQL start-up check: %w", err)
	}
	return guardedsql.OpenConn(ctx, &engine.Conn{
		Pool:              pool,
		Dialect:           mysqldialect.Dialect{Charsets: cs, MariaDB: maria},
		SetStatement:      maria,
		NoIntersectExcept: !probeIntersect(ctx, db),
	}, sch, opts)
}

func probeJSONTable(ctx context.Context, db *sql.DB) error {
	var n int
	err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM JSON_TABLE(?, '$[*]' COLUMNS (`id` BIGINT PATH '$')) AS `_tms`", "[1,2]").Scan(&n)
	if err != nil {
		if me, ok := asServerError(err); ok && (me.Number == 1064 || me.Number == 1305) { // syntax error, unknown function
			return fmt.Errorf("%w: %v", ErrNoJSONTable, err)
		}
		return fmt.Errorf("guardedsql: MySQL start-up check: %w", err)
	}
	if n != 2 {
		return fmt.Errorf("%w: JSON_TABLE returned %d rows for two ids", ErrNoJSONTable, n)
	}
	return nil
}

// Config translates a mysql:// DSN into a go-sql-driver configuration.
// Two forms are accepted:
//
//	mysql://user:pass@tcp(host:3306)/dbname?param=value   go-sql-driver's own DSN after the scheme
//	mysql://user:pass@host:3306/dbname?param=value        URL form (percent-encoded user and password)
//
// Parameters are go-sql-driver's (tls=..., and server variables); unix
// sockets use the first form with unix(/path/to.sock). parseTime defaults
// to true, so DATE and DATETIME columns scan into time.Time as they do on
// the other engines; an explicit parseTime=false is kept. clientFoundRows
// defaults to true, so that an UPDATE reports the rows it matched, as the
// other engines do, which ExpectOne's checks (ErrNotFound, ErrAmbiguous)
// rely on; a *sql.DB given to [New] should be opened with it too. Errors
// never echo the DSN's password.
func Config(dsn string) (*mysql.Config, error) {
	cfg, err := driverConfig(dsn)
	if err != nil {
		return nil, guardedsql.RedactDSNError(err, dsn)
	}
	return cfg, nil
}

// Introspect reads the tables, columns, primary keys and foreign keys of
// the connection's current database from information_schema and builds a
// Schema with tenancy t applied.
func Introspect(ctx context.Context, db *sql.DB, t builder.Tenancy) (*builder.Schema, error) {
	cat, err := mysqldialect.Dialect{}.Introspect(ctx, engine.StdPool(db, false))
	if err != nil {
		return nil, err
	}
	return t.Schema(cat)
}

// probeIntersect reports whether the MySQL/MariaDB server parses INTERSECT
// (MySQL 8.0.31+, MariaDB 10.3+); EXCEPT arrived in the same releases.
func probeIntersect(ctx context.Context, db *sql.DB) bool {
	var n int
	return db.QueryRowContext(ctx, "SELECT 1 INTERSECT SELECT 1").Scan(&n) == nil && n == 1
}
