package guardedsql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"

	"github.com/go-sql-driver/mysql"

	"github.com/tenantmcp/tenantmcp/builder"
	"github.com/tenantmcp/tenantmcp/guardedsql/internal/dialect"
	mysqldialect "github.com/tenantmcp/tenantmcp/guardedsql/internal/dialect/mysql"
	"github.com/tenantmcp/tenantmcp/internal/sqlast"
)

// ErrNoJSONTable: the MySQL server cannot expand the scope document
// (JSON_TABLE needs MySQL 8.0.4 or MariaDB 10.6). Nothing would be safe to
// run on it, so NewMySQL and Open refuse it at start-up.
var ErrNoJSONTable = errors.New("guardedsql: the MySQL server lacks JSON_TABLE (needs MySQL 8.0.4+ or MariaDB 10.6+)")

// NewMySQL guards a MySQL or MariaDB database opened by the caller with
// github.com/go-sql-driver/mysql. Close leaves db open. Open db with
// clientFoundRows=true (MySQLConfig does): without it an ExpectOne update
// does not count a matched row that already holds the new value, so it can
// report ErrNotFound for an own row, and miss that it matched two
// (ErrAmbiguous).
//
// MySQL has no row-level security: the guard's predicates are the
// boundary. The scope's typed grant document is bound as a parameter and
// expanded with JSON_TABLE where the foreign-key path reaches the level
// columns; the plan it produces, the collation advice for text tenant keys
// and the differences between MariaDB and MySQL 8 are documented in
// guardedsql/internal/dialect/mysql. NewMySQL
// checks once that the server supports JSON_TABLE, and reads the character
// set and collation of the text level columns so that the expanded ids
// are compared in the columns' own collation (and can use their indexes).
func NewMySQL(ctx context.Context, db *sql.DB, sch *builder.Schema, opts ...Option) (*DB, error) {
	return newMySQL(ctx, db, false, sch, opts)
}

func newMySQL(ctx context.Context, db *sql.DB, owned bool, sch *builder.Schema, opts []Option) (*DB, error) {
	g, ok := sqlast.SchemaOf(sch)
	if !ok {
		return nil, fmt.Errorf("%w: nil or zero schema", ErrInvalid)
	}
	if err := probeJSONTable(ctx, db); err != nil {
		return nil, err
	}
	pool := dialect.StdPool(db, owned)
	cs, err := mysqldialect.LevelCharsets(ctx, pool, g)
	if err != nil {
		return nil, fmt.Errorf("guardedsql: MySQL start-up check: %w", err)
	}
	var maria bool
	if err := db.QueryRowContext(ctx, "SELECT VERSION() LIKE '%MariaDB%'").Scan(&maria); err != nil {
		return nil, fmt.Errorf("guardedsql: MySQL start-up check: %w", err)
	}
	opts = append(opts[:len(opts):len(opts)], func(c *config) { c.mariaDB = maria })
	if !probeIntersect(ctx, db) {
		opts = append(opts, func(c *config) { c.guard.NoIntersectExcept = true })
	}
	gdb, err := newDB(pool, mysqldialect.Dialect{Charsets: cs, MariaDB: maria}, sch, opts)
	if err != nil {
		return nil, err
	}
	if err := startupCatalog(ctx, gdb); err != nil {
		return nil, err
	}
	return gdb, nil
}

func probeJSONTable(ctx context.Context, db *sql.DB) error {
	var n int
	err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM JSON_TABLE(?, '$[*]' COLUMNS (`id` BIGINT PATH '$')) AS `_tms`", "[1,2]").Scan(&n)
	if err != nil {
		var me *mysql.MySQLError
		if errors.As(err, &me) && (me.Number == 1064 || me.Number == 1305) { // syntax error, unknown function
			return fmt.Errorf("%w: %v", ErrNoJSONTable, err)
		}
		return fmt.Errorf("guardedsql: MySQL start-up check: %w", err)
	}
	if n != 2 {
		return fmt.Errorf("%w: JSON_TABLE returned %d rows for two ids", ErrNoJSONTable, n)
	}
	return nil
}

// openMySQL opens a mysql:// DSN (see MySQLConfig) with
// github.com/go-sql-driver/mysql.
func openMySQL(ctx context.Context, dsn string, sch *builder.Schema, opts []Option) (*DB, error) {
	cfg, err := MySQLConfig(dsn)
	if err != nil {
		return nil, err
	}
	conn, err := mysql.NewConnector(cfg)
	if err != nil {
		return nil, RedactDSNError(fmt.Errorf("guardedsql: MySQL DSN %s: %w", RedactDSN(dsn), err), dsn)
	}
	sqlDB := sql.OpenDB(conn)
	if n := configOf(opts).maxConns; n > 0 {
		sqlDB.SetMaxOpenConns(n)
	}
	if err := sqlDB.PingContext(ctx); err != nil {
		sqlDB.Close()
		return nil, RedactDSNError(fmt.Errorf("guardedsql: open %s: %w", RedactDSN(dsn), err), dsn)
	}
	db, err := newMySQL(ctx, sqlDB, true, sch, opts)
	if err != nil {
		sqlDB.Close()
		return nil, err
	}
	return db, nil
}

// MySQLConfig translates a mysql:// DSN into a go-sql-driver configuration.
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
// rely on; a *sql.DB given to NewMySQL should be opened with it too.
func MySQLConfig(dsn string) (*mysql.Config, error) {
	cfg, err := mysqlConfig(dsn)
	if err != nil {
		return nil, err
	}
	_, q, _ := strings.Cut(dsn, "?")
	if !hasParam(q, "parseTime") {
		cfg.ParseTime = true
	}
	// ExpectOne counts the rows an UPDATE matched: without found rows a
	// row that already holds the value is not counted, and an update
	// matching two rows (ErrAmbiguous) could pass for one.
	if !hasParam(q, "clientFoundRows") {
		cfg.ClientFoundRows = true
	}
	return cfg, nil
}

// hasParam reports whether the raw query string names the parameter.
func hasParam(rawQuery, name string) bool {
	for _, kv := range strings.Split(rawQuery, "&") {
		if k, _, _ := strings.Cut(kv, "="); k == name {
			return true
		}
	}
	return false
}

func mysqlConfig(dsn string) (*mysql.Config, error) {
	rest, ok := strings.CutPrefix(dsn, "mysql://")
	if !ok {
		return nil, fmt.Errorf("guardedsql: MySQL DSN must start with mysql://")
	}
	slash := strings.LastIndexByte(strings.SplitN(rest, "?", 2)[0], '/')
	if slash < 0 {
		return nil, fmt.Errorf("guardedsql: MySQL DSN %s names no database", RedactDSN(dsn))
	}
	if head := rest[:slash]; strings.Contains(head, "(") && strings.HasSuffix(head, ")") {
		cfg, err := mysql.ParseDSN(rest)
		if err != nil {
			return nil, RedactDSNError(fmt.Errorf("guardedsql: MySQL DSN %s: %w", RedactDSN(dsn), err), dsn)
		}
		return cfg, nil
	}
	u, err := url.Parse(dsn)
	if err != nil {
		return nil, RedactDSNError(fmt.Errorf("guardedsql: MySQL DSN %s: %w", RedactDSN(dsn), redactURLError(err)), dsn)
	}
	host := u.Host
	if u.Port() == "" {
		host = net.JoinHostPort(u.Hostname(), "3306")
	}
	cfg, err := mysql.ParseDSN("tcp(" + host + ")/" + strings.TrimPrefix(u.Path, "/") + "?" + u.RawQuery)
	if err != nil {
		return nil, RedactDSNError(fmt.Errorf("guardedsql: MySQL DSN %s: %w", RedactDSN(dsn), err), dsn)
	}
	if u.User != nil {
		cfg.User = u.User.Username()
		cfg.Passwd, _ = u.User.Password()
	}
	return cfg, nil
}

// redactURLError drops the URL (which may hold a password) from a
// url.Parse error.
func redactURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// IntrospectMySQL reads the tables, columns, primary keys and foreign keys
// of the connection's current database from information_schema and builds
// a Schema with tenancy t applied.
func IntrospectMySQL(ctx context.Context, db *sql.DB, t builder.Tenancy) (*builder.Schema, error) {
	cat, err := mysqldialect.Dialect{}.Introspect(ctx, dialect.StdPool(db, false))
	if err != nil {
		return nil, err
	}
	def, err := t.Apply(cat)
	if err != nil {
		return nil, err
	}
	return builder.NewSchema(def)
}
