package guardedsql

import (
	"context"

	"github.com/tenantmcp/tenantmcp/guardedsql/internal/dialect/postgres"
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

// SignedScopeForTest returns the setting value that makes doc verify in
// the transaction whose nonce (postgres.NonceSQL) is nonce.
func SignedScopeForTest(k RLSKey, nonce, doc string) string {
	return postgres.Dialect{}.Signed(postgres.Key{ID: k.ID, Secret: k.secret}, nonce, doc)
}

// NonceSQLForTest is the query of a transaction's nonce.
const NonceSQLForTest = postgres.NonceSQL
