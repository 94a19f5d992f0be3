// Package sqlite is guardedsql's SQLite engine, on modernc.org/sqlite (pure
// Go): importing it (a blank import is enough) registers the "sqlite"
// database/sql driver and makes guardedsql.Open and guardedsql.Introspect
// accept SQLite DSNs (sqlite:, file:), and links the driver — which a
// program that does not import this package never does.
package sqlite

import (
	"context"
	"database/sql"

	"github.com/tenantmcp/tenantmcp/builder"
	"github.com/tenantmcp/tenantmcp/guardedsql"
	_ "github.com/tenantmcp/tenantmcp/guardedsql/internal/driver/sqlitedriver" // links modernc.org/sqlite
)

// New guards an SQLite database opened by the caller with the "sqlite"
// driver, which importing this package registers; it is
// guardedsql.NewSQLite. Close leaves db open. Open it with foreign keys
// enforced (_pragma=foreign_keys(1)): the start-up catalog check refuses a
// connection without.
func New(ctx context.Context, db *sql.DB, sch *builder.Schema, opts guardedsql.Options) (*guardedsql.DB, error) {
	return guardedsql.NewSQLite(ctx, db, sch, opts)
}

// Introspect reads the tables, columns, primary keys and foreign keys of
// an SQLite database; it is guardedsql.IntrospectSQLite.
func Introspect(ctx context.Context, db *sql.DB, t builder.Tenancy) (*builder.Schema, error) {
	return guardedsql.IntrospectSQLite(ctx, db, t)
}
