// Package replaytest checks a server.ReplayStore implementation.
package replaytest

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tenantmcp/tenantmcp/server"
)

// SpendOnce spends nonce 16 times at once, alternating between a and b
// (two replicas' views of one shared store): exactly one spend must
// succeed and every other must be server.ErrReplayed.
func SpendOnce(t *testing.T, a, b server.ReplayStore, nonce string) {
	t.Helper()
	ctx := context.Background()
	var ok, replayed atomic.Int32
	var wg sync.WaitGroup
	for i := range 16 {
		st := a
		if i%2 == 1 {
			st = b
		}
		wg.Go(func() {
			switch err := st.Spend(ctx, nonce, time.Now().Add(time.Minute)); {
			case err == nil:
				ok.Add(1)
			case errors.Is(err, server.ErrReplayed):
				replayed.Add(1)
			default:
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if ok.Load() != 1 || replayed.Load() != 15 {
		t.Fatalf("%d spent, %d replayed; want 1 and 15", ok.Load(), replayed.Load())
	}
}
