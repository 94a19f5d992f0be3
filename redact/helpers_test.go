package redact

import (
	"testing"

	"github.com/tenantmcp/tenantmcp/scope"
	"github.com/tenantmcp/tenantmcp/scope/scopetest"
)

// testScope mints a scope with one grant and the given roles.
func testScope(t testing.TB, level, id string, roles ...string) scope.Scope {
	t.Helper()
	return scopetest.New("user-"+id, []scope.Grant{{Level: level, ID: id}}, roles...)
}

// ForTest returns a default-policy Scoped for a tenant "acme".
func ForTest() *Scoped {
	return defaultRedactor.ForScope(scopetest.New("tester", []scope.Grant{{Level: "chain", ID: "acme"}}))
}
