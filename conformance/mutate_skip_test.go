//go:build !tenantmcp_faults

package conformance

import (
	"strings"
	"testing"
)

// TestMutateSkipsWithoutTag: built without the tag tenantmcp_faults,
// Mutate skips its test, naming the tag and the command that runs it,
// before it touches a database.
func TestMutateSkipsWithoutTag(t *testing.T) {
	var ran bool
	t.Run("TestMutation", func(t *testing.T) {
		ms := Mutate(t, Target{Name: "unused", DSN: "no-such-engine://"}, MutateOptions{})
		ran = true
		t.Errorf("Mutate returned %v instead of skipping", ms)
	})
	if ran {
		return
	}
	// The subtest skipped; its reason is needFaults's.
	got := needFaults("conformance.Mutate", t)
	for _, want := range []string{"tenantmcp_faults", "go test -tags tenantmcp_faults -run '^TestMutateSkipsWithoutTag$' ./..."} {
		if !strings.Contains(got, want) {
			t.Errorf("skip reason %q lacks %q", got, want)
		}
	}
}
