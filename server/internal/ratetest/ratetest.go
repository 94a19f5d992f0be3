// Package ratetest checks a server.RateStore implementation shared by
// replicas: the same checks for the Redis store (server/redisstore) and
// the PostgreSQL store (server/pgstore).
package ratetest

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tenantmcp/tenantmcp/server"
)

// SharedBucket: a and b (two replicas' views of one shared store) take
// from the same bucket: 20 concurrent takes at rate 2/s, burst 5, get the
// burst and refusals with a wait within the emission interval; another key
// is independent; after 1/rate a token is back, and only one. key must be
// unique to the run.
func SharedBucket(t *testing.T, a, b server.RateStore, key string) {
	t.Helper()
	ctx := context.Background()
	// Warm up: the 20 takes below must land within a small fraction of
	// the emission interval, not behind new connections.
	var wg sync.WaitGroup
	for i := range 20 {
		st := a
		if i%2 == 1 {
			st = b
		}
		wg.Go(func() { _, _ = st.Take(ctx, key+"-warm", 100, 100) })
	}
	wg.Wait()
	var ok atomic.Int64
	for i := range 20 {
		st := a
		if i%2 == 1 {
			st = b
		}
		wg.Go(func() {
			wait, err := st.Take(ctx, key, 2, 5)
			if err != nil {
				t.Error(err)
			}
			if wait == 0 {
				ok.Add(1)
			} else if wait > time.Second || wait < 0 {
				t.Errorf("wait %s beyond the emission interval", wait)
			}
		})
	}
	wg.Wait()
	if ok.Load() != 5 {
		t.Fatalf("%d of 20 calls admitted across two replicas, want the burst of 5", ok.Load())
	}
	if wait, err := a.Take(ctx, key+"-other", 2, 5); err != nil || wait != 0 {
		t.Fatalf("another key's bucket: wait %s, err %v", wait, err)
	}
	time.Sleep(600 * time.Millisecond) // a token is back after 1/rate
	if wait, err := b.Take(ctx, key, 2, 5); err != nil || wait != 0 {
		t.Fatalf("after the refill: wait %s, err %v", wait, err)
	}
	if wait, err := a.Take(ctx, key, 2, 5); err != nil || wait == 0 {
		t.Fatalf("right after the refilled token was taken: wait %s, err %v", wait, err)
	}
}
