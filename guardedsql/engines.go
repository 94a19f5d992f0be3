package guardedsql

import (
	"context"
	"errors"
	"fmt"

	"github.com/tenantmcp/tenantmcp/builder"
	"github.com/tenantmcp/tenantmcp/guardedsql/internal/engine"
	"github.com/tenantmcp/tenantmcp/guardedsql/internal/driver"
)

// ErrNoEngine: the DSN names an engine whose package the program does not
// import, so its driver is not linked. Import the engine package —
// guardedsql/sqlite, guardedsql/postgres or guardedsql/mysql — for Open to
// accept its DSNs (a blank import is enough). It wraps [ErrInvalid].
var ErrNoEngine = fmt.Errorf("%w: database engine not linked", ErrInvalid)

// noEngine is ErrNoEngine naming the engine and the package to import.
func noEngine(name, pkg string) error {
	return fmt.Errorf("%w: %s DSN needs the engine package: import _ \"github.com/tenantmcp/tenantmcp/guardedsql/%s\"", ErrNoEngine, name, pkg)
}

// The live engines' DSN schemes for Open and Introspect. Their drivers are
// linked only by the engine packages (see package internal/driver); a
// scheme whose driver is not linked fails with ErrNoEngine.
func init() {
	for _, scheme := range []string{"postgres", "postgresql"} {
		openers[scheme] = openPostgres
		introspectors[scheme] = introspectPostgresDSN
	}
	openers["mysql"] = openMySQL
	introspectors["mysql"] = introspectMySQLDSN
	driver.Postgres = driver.PostgresAPI{
		New: func(ctx context.Context, p engine.Pool, sch *builder.Schema, opts any) (any, error) {
			c, err := newConfig(opts.(Options))
			if err != nil {
				return nil, err
			}
			return newPostgres(ctx, p, sch, c)
		},
		CheckRLS: func(ctx context.Context, p engine.Pool, sch *builder.Schema, opts any) error {
			return checkRLS(ctx, p, sch, opts.(RLSKeyOptions))
		},
		Introspect: introspectPostgres,
		ApplyRLS: func(ctx context.Context, owner driver.Begin, sch *builder.Schema, opts any) error {
			return applyRLS(ctx, owner, sch, opts.(RLSKeyOptions))
		},
		AddRLSKey: func(ctx context.Context, owner driver.Begin, k any, opts any) error {
			return addRLSKey(ctx, owner, k.(RLSKey), opts.(RLSOptions))
		},
		RemoveRLSKey: func(ctx context.Context, owner driver.Begin, id string, opts any) error {
			return removeRLSKey(ctx, owner, id, opts.(RLSOptions))
		},
		GrantApp: grantApp,
	}
}

// openPostgresPool opens an owned pool for a PostgreSQL DSN through the
// linked pgx driver.
func openPostgresPool(ctx context.Context, dsn string, maxConns int) (engine.Pool, error) {
	if driver.PostgresEngine == nil {
		return nil, noEngine("PostgreSQL", "postgres")
	}
	p, err := driver.PostgresEngine.Open(ctx, dsn, maxConns)
	var bad *driver.DSNError
	switch {
	case errors.As(err, &bad):
		return nil, RedactDSNError(fmt.Errorf("guardedsql: PostgreSQL DSN %s: %w", RedactDSN(dsn), bad.Err), dsn)
	case err != nil:
		return nil, RedactDSNError(fmt.Errorf("guardedsql: open %s: %w", RedactDSN(dsn), err), dsn)
	}
	return p, nil
}

func introspectPostgresDSN(ctx context.Context, dsn string, t builder.Tenancy) (*builder.Schema, error) {
	pool, err := openPostgresPool(ctx, dsn, 0)
	if err != nil {
		return nil, err
	}
	defer pool.Close()
	return introspectPostgres(ctx, pool, t)
}

func introspectMySQLDSN(ctx context.Context, dsn string, t builder.Tenancy) (*builder.Schema, error) {
	db, err := openMySQLDB(dsn)
	if err != nil {
		return nil, err
	}
	defer db.Close()
	return IntrospectMySQL(ctx, db, t)
}
