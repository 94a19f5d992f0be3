//go:build tenantmcp_faults

package guard

import (
	"testing"

	"github.com/tenantmcp/tenantmcp/internal/guardfault"
)

// TestRenderCacheKeyMutation: with the scope's levels and shapes left out
// of the render cache's key, TestRenderCacheIsolation's check notices (a
// tenant granted at the hotel level is served the text of one granted at
// the chain level).
func TestRenderCacheKeyMutation(t *testing.T) {
	restore := guardfault.Disable(guardfault.RenderCacheKey)
	bad, _ := renderCacheMismatches(t)
	restore()
	if len(bad) == 0 {
		t.Fatal("render cache key without the grant shape: no render differed from an uncached one")
	}
	t.Logf("%d renders differed, first: %s", len(bad), bad[0])
	// The cache filled under the fault is dropped with its key.
	renderCache.Lock()
	renderCache.m = nil
	renderCache.Unlock()
}
