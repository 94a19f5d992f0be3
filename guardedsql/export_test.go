package guardedsql

import (
	"context"

	"github.com/tenantmcp/tenantmcp/internal/mint"
	"github.com/tenantmcp/tenantmcp/internal/sqlast"
	"github.com/tenantmcp/tenantmcp/scope"
)

// ScopeZeroContextForTest attaches the zero Scope to ctx, as a buggy server
// might; FromContext must still report no scope.
func ScopeZeroContextForTest(ctx context.Context) context.Context {
	return mint.NewContext(ctx, scope.Scope{})
}

// NewForTest guards pool with an arbitrary dialect.
var NewForTest = newDB

// SchemaLevelsForTest exposes the graph's levels.
func SchemaLevelsForTest(sch any) []*sqlast.Level {
	g, _ := sqlast.SchemaOf(sch)
	return g.Levels
}

// WithPredicatesOnlyForTest disables the join-aware rewrites.
func WithPredicatesOnlyForTest() Option {
	return func(c *config) { c.guard.PredicatesOnly = true }
}
