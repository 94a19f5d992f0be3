package guardedsql

import (
	"context"
	"database/sql"

	"github.com/tenantmcp/tenantmcp/builder"
	"github.com/tenantmcp/tenantmcp/guardedsql/internal/engine"
	"github.com/tenantmcp/tenantmcp/guardedsql/internal/guard"

	"github.com/tenantmcp/tenantmcp/guardedsql/internal/engine/sqlite"
	"github.com/tenantmcp/tenantmcp/internal/mint"
	"github.com/tenantmcp/tenantmcp/internal/sqlast"
	"github.com/tenantmcp/tenantmcp/scope"
)

// ScopeZeroContextForTest attaches the zero Scope to ctx, as a buggy server
// might; FromContext must still report no scope.
func ScopeZeroContextForTest(ctx context.Context) context.Context {
	return mint.NewContext(ctx, scope.Scope{})
}

// NewForTest guards pool with an arbitrary dialect. opts is not validated
// and Logger stays nil (nothing is logged).
func NewForTest(pool engine.Pool, d engine.Dialect, sch *builder.Schema, opts Options) (*DB, error) {
	return newDB(pool, d, sch, config{Options: opts})
}

// NewPredicatesOnlyForTest is NewForTest without the join-aware rewrites.
func NewPredicatesOnlyForTest(pool engine.Pool, d engine.Dialect, sch *builder.Schema, opts Options) (*DB, error) {
	return newDB(pool, d, sch, config{Options: opts, guard: guard.Options{PredicatesOnly: true}})
}

// NewSQLitePredicatesOnlyForTest is guardedsql/sqlite.New without the
// join-aware rewrites: the plain predicates the rewrites are compared
// against. It is a test-only knob, so it is not a field of Options.
func NewSQLitePredicatesOnlyForTest(ctx context.Context, db *sql.DB, sch *builder.Schema, opts Options) (*DB, error) {
	return OpenConn(ctx, &engine.Conn{Pool: engine.CachedStdPool(db, false, engine.DefaultStmtCacheSize), Dialect: sqlite.Dialect{}, PredicatesOnly: true}, sch, opts)
}

// SchemaLevelsForTest exposes the graph's levels.
func SchemaLevelsForTest(sch any) []*sqlast.Level {
	g, _ := sqlast.SchemaOf(sch)
	return g.Levels
}
