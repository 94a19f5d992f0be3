package guardedsql

import (
	"context"
	"strings"

	"github.com/tenantmcp/tenantmcp/builder"
	"github.com/tenantmcp/tenantmcp/guardedsql/internal/engine"
	mysqldialect "github.com/tenantmcp/tenantmcp/guardedsql/internal/engine/mysql"
	"github.com/tenantmcp/tenantmcp/guardedsql/internal/engine/postgres"
	"github.com/tenantmcp/tenantmcp/guardedsql/internal/engine/sqlite"
)

// IntrospectCatalog opens dsn (any DSN [Open] accepts), reads its tables,
// columns, primary, unique and foreign keys and declared types, and
// closes it again. Unlike [Introspect] it applies no tenancy and validates
// nothing: the result is the raw catalog, for tools such as command
// tenantmcp-gen that generate code from it. Build a [builder.Schema] from
// it with a [builder.Tenancy] (see [builder.Tenancy.Apply]). Errors never
// echo the DSN's password.
func IntrospectCatalog(ctx context.Context, dsn string) ([]builder.TableDef, error) {
	cat, err := introspectCatalog(ctx, dsn)
	return cat, RedactDSNError(err, dsn)
}

func introspectCatalog(ctx context.Context, dsn string) ([]builder.TableDef, error) {
	scheme, _, _ := strings.Cut(dsn, "://")
	switch scheme {
	case "postgres", "postgresql":
		pool, err := openPostgresPool(ctx, dsn, 0)
		if err != nil {
			return nil, err
		}
		defer pool.Close()
		return postgres.Dialect{}.Introspect(ctx, pool)
	case "mysql":
		db, err := openMySQLDB(dsn)
		if err != nil {
			return nil, err
		}
		defer db.Close()
		return mysqldialect.Dialect{}.Introspect(ctx, engine.StdPool(db, false))
	}
	db, err := openSQL(ctx, dsn, 0)
	if err != nil {
		return nil, err
	}
	defer db.Close()
	return sqlite.Dialect{}.Introspect(ctx, engine.StdPool(db, false))
}
