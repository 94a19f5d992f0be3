package scope_test

import (
	"strings"
	"testing"

	"github.com/tenantmcp/tenantmcp/scope"
)

func TestValidLevel(t *testing.T) {
	for _, ok := range []string{"a", "chain", "hotel_2", "x_", strings.Repeat("a", 64)} {
		if !scope.ValidLevel(ok) {
			t.Errorf("ValidLevel(%q) = false", ok)
		}
	}
	for _, bad := range []string{"", "Chain", "_a", "2a", "a-b", "a b", "é", "@role", strings.Repeat("a", 65)} {
		if scope.ValidLevel(bad) {
			t.Errorf("ValidLevel(%q) = true", bad)
		}
	}
}
