package guardedsql

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tenantmcp/tenantmcp/builder"
)

// The live engines register their DSN schemes with Open and Introspect.
func init() {
	for _, scheme := range []string{"postgres", "postgresql"} {
		openers[scheme] = openPostgres
		introspectors[scheme] = introspectPostgresDSN
	}
	openers["mysql"] = openMySQL
	introspectors["mysql"] = introspectMySQLDSN
}

func introspectPostgresDSN(ctx context.Context, dsn string, t builder.Tenancy) (*builder.Schema, error) {
	pool, err := pgxpool.New(ctx, dsn)
	if err != nil {
		return nil, RedactDSNError(fmt.Errorf("guardedsql: open %s: %w", RedactDSN(dsn), err), dsn)
	}
	defer pool.Close()
	return IntrospectPostgres(ctx, pool, t)
}

func introspectMySQLDSN(ctx context.Context, dsn string, t builder.Tenancy) (*builder.Schema, error) {
	cfg, err := MySQLConfig(dsn)
	if err != nil {
		return nil, err
	}
	conn, err := mysql.NewConnector(cfg)
	if err != nil {
		return nil, RedactDSNError(fmt.Errorf("guardedsql: MySQL DSN %s: %w", RedactDSN(dsn), err), dsn)
	}
	db := sql.OpenDB(conn)
	defer db.Close()
	return IntrospectMySQL(ctx, db, t)
}
