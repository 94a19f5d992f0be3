// Package scopetest mints scopes for unit tests of tool code. It is the only
// way outside this module to obtain a scope without a verified token, and it
// refuses to do so outside a test binary: New and NewContext panic unless
// testing.Testing reports true, so a production binary that imports it by
// mistake fails loudly instead of serving with a fabricated tenant scope.
package scopetest

import (
	"context"
	"testing"

	"github.com/tenantmcp/tenantmcp/internal/mint"
	"github.com/tenantmcp/tenantmcp/scope"
)

func mustBeTest() {
	if !testing.Testing() {
		panic("scopetest: used outside a test binary; scopes in production come only from package claims")
	}
}

// New mints a scope for a test. It panics on invalid input or outside tests.
func New(subject string, grants []scope.Grant, roles ...string) scope.Scope {
	mustBeTest()
	s, err := mint.Scope(subject, grants, roles)
	if err != nil {
		panic(err)
	}
	return s
}

// NewContext returns ctx carrying s, as the server would for a tool call.
func NewContext(ctx context.Context, s scope.Scope) context.Context {
	mustBeTest()
	return mint.NewContext(ctx, s)
}
