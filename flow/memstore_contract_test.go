package flow_test

import (
	"testing"

	"github.com/tenantmcp/tenantmcp/flow"
	"github.com/tenantmcp/tenantmcp/internal/storetest"
)

// TestMemoryStoreContract runs the shared flow.Store contract on the
// in-process store (one process: both "replicas" are the same store).
func TestMemoryStoreContract(t *testing.T) {
	storetest.Run(t, func(*testing.T) (flow.Store, flow.Store) {
		st := flow.NewMemoryStore()
		return st, st
	})
}
