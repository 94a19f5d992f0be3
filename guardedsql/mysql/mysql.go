// Package mysql is guardedsql's MySQL and MariaDB engine, on
// github.com/go-sql-driver/mysql: importing it (a blank import is enough)
// makes guardedsql.Open and guardedsql.Introspect accept mysql:// DSNs,
// and links the driver — which a program that does not import this
// package never does. [New] guards a *sql.DB the caller opened (with
// [Config]).
package mysql

import (
	"context"
	"database/sql"

	"github.com/go-sql-driver/mysql"

	"github.com/tenantmcp/tenantmcp/builder"
	"github.com/tenantmcp/tenantmcp/guardedsql"
	"github.com/tenantmcp/tenantmcp/guardedsql/internal/driver/mysqldriver"
)

// New guards a MySQL or MariaDB database opened by the caller with
// github.com/go-sql-driver/mysql; it is guardedsql.NewMySQL, whose
// documentation describes the start-up checks. Close leaves db open. Open
// db with clientFoundRows=true ([Config] does).
func New(ctx context.Context, db *sql.DB, sch *builder.Schema, opts guardedsql.Options) (*guardedsql.DB, error) {
	return guardedsql.NewMySQL(ctx, db, sch, opts)
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
	cfg, err := mysqldriver.Config(dsn)
	if err != nil {
		return nil, guardedsql.RedactDSNError(err, dsn)
	}
	return cfg, nil
}

// Introspect reads the tables, columns, primary keys and foreign keys of
// the connection's current database; it is guardedsql.IntrospectMySQL.
func Introspect(ctx context.Context, db *sql.DB, t builder.Tenancy) (*builder.Schema, error) {
	return guardedsql.IntrospectMySQL(ctx, db, t)
}
