package redisstore_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tenantmcp/tenantmcp/server/internal/replaytest"
	"github.com/tenantmcp/tenantmcp/server/redisstore"
)

const envRedis = "TENANTMCP_TEST_REDIS_ADDR"

func client(t *testing.T) *redis.Client {
	t.Helper()
	addr := os.Getenv(envRedis)
	if addr == "" {
		t.Skipf("set %s to run (e.g. %s=127.0.0.1:6379); the test uses its own random key prefix", envRedis, envRedis)
	}
	c := redis.NewClient(&redis.Options{Addr: addr})
	t.Cleanup(func() { c.Close() })
	return c
}

func prefix(t *testing.T) string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return "tenantmcp-test:" + hex.EncodeToString(b[:]) + ":"
}

// TestSharedBucket: two stores (two replicas) on one Redis take from the
// same bucket: together they get the burst, then a refusal with a wait
// close to the emission interval; another key is independent; no key
// names the tenant.
func TestSharedBucket(t *testing.T) {
	c := client(t)
	p := prefix(t)
	a, b := newStore(t, c, redisstore.Options{Prefix: p}), newStore(t, c, redisstore.Options{Prefix: p})
	ctx := context.Background()
	var ok atomic.Int64
	var wg sync.WaitGroup
	for i := range 20 {
		st := a
		if i%2 == 1 {
			st = b
		}
		wg.Go(func() {
			wait, err := st.Take(ctx, "t\x00chain:acme", 2, 5)
			if err != nil {
				t.Error(err)
			}
			if wait == 0 {
				ok.Add(1)
			} else if wait > time.Second {
				t.Errorf("wait %s beyond the emission interval", wait)
			}
		})
	}
	wg.Wait()
	if ok.Load() != 5 {
		t.Fatalf("%d of 20 calls admitted across two replicas, want the burst of 5", ok.Load())
	}
	if wait, err := a.Take(ctx, "t\x00chain:globex", 2, 5); err != nil || wait != 0 {
		t.Fatalf("another tenant's bucket: wait %s, err %v", wait, err)
	}
	keys, err := c.Keys(ctx, p+"*").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		if len(k) != len(p)+64 {
			t.Errorf("key %q is not a digest", k)
		}
		t.Cleanup(func() { c.Del(context.Background(), k) })
	}
	time.Sleep(600 * time.Millisecond) // a token is back after 1/rate
	if wait, err := b.Take(ctx, "t\x00chain:acme", 2, 5); err != nil || wait != 0 {
		t.Fatalf("after the refill: wait %s, err %v", wait, err)
	}
	if wait, err := a.Take(ctx, "t\x00chain:acme", 2, 5); err != nil || wait == 0 {
		t.Fatalf("right after the refilled token was taken: wait %s, err %v", wait, err)
	}
}

// TestUnreachable fails closed with ErrStore, quickly.
func TestUnreachable(t *testing.T) {
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1})
	defer c.Close()
	s := newStore(t, c, redisstore.Options{Timeout: 200 * time.Millisecond})
	start := time.Now()
	_, err := s.Take(context.Background(), "t\x00chain:acme", 1, 1)
	if !errors.Is(err, redisstore.ErrStore) {
		t.Fatalf("err = %v, want ErrStore", err)
	}
	if time.Since(start) > 5*time.Second {
		t.Fatalf("took %s", time.Since(start))
	}
	// A replay store that cannot answer is an error, never "not spent".
	r, err := redisstore.NewReplays(c, redisstore.Options{Timeout: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Spend(context.Background(), "n", time.Now().Add(time.Minute)); !errors.Is(err, redisstore.ErrStore) {
		t.Fatalf("Spend err = %v, want ErrStore", err)
	}
}

func newStore(t *testing.T, c redis.Scripter, o redisstore.Options) *redisstore.Rates {
	t.Helper()
	s, err := redisstore.NewRates(c, o)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestNewRefusesBadOptions: a negative Timeout cannot mean "no bound" or
// silently the default, and a nil client is refused at start-up rather
// than at the first call.
func TestNewRefusesBadOptions(t *testing.T) {
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	defer c.Close()
	for name, tc := range map[string]struct {
		c redis.Scripter
		o redisstore.Options
	}{
		"negative timeout": {c, redisstore.Options{Timeout: -time.Second}},
		"nil client":       {nil, redisstore.Options{}},
	} {
		if s, err := redisstore.NewRates(tc.c, tc.o); !errors.Is(err, redisstore.ErrConfig) || s != nil {
			t.Errorf("%s: New = %v, %v; want nil, ErrConfig", name, s, err)
		}
	}
	if _, err := redisstore.NewRates(c, redisstore.Options{}); err != nil {
		t.Errorf("zero Options: %v", err)
	}
	if r, err := redisstore.NewReplays(nil, redisstore.Options{}); !errors.Is(err, redisstore.ErrConfig) || r != nil {
		t.Errorf("NewReplays(nil) = %v, %v", r, err)
	}
	if r, err := redisstore.NewReplays(c, redisstore.Options{Timeout: -1}); !errors.Is(err, redisstore.ErrConfig) || r != nil {
		t.Errorf("NewReplays negative timeout = %v, %v", r, err)
	}
}

// TestReplaysSpendOnce: two stores (two replicas) spending one nonce
// concurrently: exactly one succeeds, every other is server.ErrReplayed;
// the key expires with the state.
func TestReplaysSpendOnce(t *testing.T) {
	c := client(t)
	p := prefix(t)
	var stores [2]*redisstore.Replays
	for i := range stores {
		s, err := redisstore.NewReplays(c, redisstore.Options{Prefix: p})
		if err != nil {
			t.Fatal(err)
		}
		stores[i] = s
	}
	replaytest.SpendOnce(t, stores[0], stores[1], "n1")
	ctx := context.Background()
	if ttl := c.PTTL(ctx, p+"n1").Val(); ttl <= 0 || ttl > time.Minute {
		t.Fatalf("key TTL %v", ttl)
	}
}
