package guardedsql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/tenantmcp/tenantmcp/builder"
	"github.com/tenantmcp/tenantmcp/guardedsql/internal/engine"
	mysqldialect "github.com/tenantmcp/tenantmcp/guardedsql/internal/engine/mysql"
	"github.com/tenantmcp/tenantmcp/guardedsql/internal/driver"
	"github.com/tenantmcp/tenantmcp/internal/sqlast"
)

// ErrNoJSONTable: the MySQL server cannot expand the scope document
// (JSON_TABLE needs MySQL 8.0.4 or MariaDB 10.6). Nothing would be safe to
// run on it, so NewMySQL and Open refuse it at start-up.
var ErrNoJSONTable = errors.New("guardedsql: the MySQL server lacks JSON_TABLE (needs MySQL 8.0.4+ or MariaDB 10.6+)")

// NewMySQL guards a MySQL or MariaDB database opened by the caller with
// github.com/go-sql-driver/mysql (package guardedsql/mysql's New is the
// same). Close leaves db open. Open db with clientFoundRows=true
// (guardedsql/mysql.Config does): without it an ExpectOne update
// does not count a matched row that already holds the new value, so it can
// report ErrNotFound for an own row, and miss that it matched two
// (ErrAmbiguous).
//
// MySQL has no row-level security: the guard's predicates are the
// boundary. The scope's typed grant document is bound as a parameter and
// expanded with JSON_TABLE where the foreign-key path reaches the level
// columns; the plan it produces, the collation advice for text tenant keys
// and the differences between MariaDB and MySQL 8 are documented in
// guardedsql/internal/engine/mysql. NewMySQL
// checks once that the server supports JSON_TABLE, and reads the character
// set and collation of the text level columns so that the expanded ids
// are compared in the columns' own collation (and can use their indexes).
func NewMySQL(ctx context.Context, db *sql.DB, sch *builder.Schema, opts Options) (*DB, error) {
	c, err := newConfig(opts)
	if err != nil {
		return nil, err
	}
	return newMySQL(ctx, db, false, sch, c)
}

func newMySQL(ctx context.Context, db *sql.DB, owned bool, sch *builder.Schema, c config) (*DB, error) {
	g, ok := sqlast.SchemaOf(sch)
	if !ok {
		return nil, fmt.Errorf("%w: nil or zero schema", ErrInvalid)
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
	c.mariaDB = maria
	if !probeIntersect(ctx, db) {
		c.guard.NoIntersectExcept = true
	}
	gdb, err := newDB(pool, mysqldialect.Dialect{Charsets: cs, MariaDB: maria}, sch, c)
	if err != nil {
		return nil, err
	}
	if err := startupCatalog(ctx, gdb); err != nil {
		return nil, err
	}
	return gdb, nil
}

// serverError reads a MySQL server error through the linked driver.
func serverError(err error) (mysqldialect.ServerError, bool) {
	if mysqldialect.AsServerError == nil {
		return mysqldialect.ServerError{}, false
	}
	return mysqldialect.AsServerError(err)
}

func probeJSONTable(ctx context.Context, db *sql.DB) error {
	var n int
	err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM JSON_TABLE(?, '$[*]' COLUMNS (`id` BIGINT PATH '$')) AS `_tms`", "[1,2]").Scan(&n)
	if err != nil {
		if me, ok := serverError(err); ok && (me.Number == 1064 || me.Number == 1305) { // syntax error, unknown function
			return fmt.Errorf("%w: %v", ErrNoJSONTable, err)
		}
		return fmt.Errorf("guardedsql: MySQL start-up check: %w", err)
	}
	if n != 2 {
		return fmt.Errorf("%w: JSON_TABLE returned %d rows for two ids", ErrNoJSONTable, n)
	}
	return nil
}

// openMySQLDB returns an unpinged *sql.DB for a mysql:// DSN through the
// linked driver (package guardedsql/mysql: Config).
func openMySQLDB(dsn string) (*sql.DB, error) {
	if driver.MySQLEngine == nil {
		return nil, noEngine("MySQL", "mysql")
	}
	db, err := driver.MySQLEngine.Open(dsn)
	return db, RedactDSNError(err, dsn)
}

// openMySQL opens a mysql:// DSN (see package guardedsql/mysql's Config)
// with github.com/go-sql-driver/mysql.
func openMySQL(ctx context.Context, dsn string, sch *builder.Schema, c config) (*DB, error) {
	sqlDB, err := openMySQLDB(dsn)
	if err != nil {
		return nil, err
	}
	if c.MaxConns > 0 {
		sqlDB.SetMaxOpenConns(c.MaxConns)
	}
	if err := sqlDB.PingContext(ctx); err != nil {
		sqlDB.Close()
		return nil, RedactDSNError(fmt.Errorf("guardedsql: open %s: %w", RedactDSN(dsn), err), dsn)
	}
	db, err := newMySQL(ctx, sqlDB, true, sch, c)
	if err != nil {
		sqlDB.Close()
		return nil, err
	}
	return db, nil
}

// IntrospectMySQL reads the tables, columns, primary keys and foreign keys
// of the connection's current database from information_schema and builds
// a Schema with tenancy t applied.
func IntrospectMySQL(ctx context.Context, db *sql.DB, t builder.Tenancy) (*builder.Schema, error) {
	cat, err := mysqldialect.Dialect{}.Introspect(ctx, engine.StdPool(db, false))
	if err != nil {
		return nil, err
	}
	def, err := t.Apply(cat)
	if err != nil {
		return nil, err
	}
	return builder.NewSchema(def)
}
