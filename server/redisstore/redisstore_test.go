package redisstore_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tenantmcp/tenantmcp/server/internal/ratetest"
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
// same bucket (ratetest.SharedBucket, the checks pgstore's rates pass
// too); no key names the tenant.
func TestSharedBucket(t *testing.T) {
	c := client(t)
	p := prefix(t)
	a, b := newStore(t, c, redisstore.Options{Prefix: p}), newStore(t, c, redisstore.Options{Prefix: p})
	ctx := context.Background()
	t.Cleanup(func() {
		if keys, err := c.Keys(context.Background(), p+"*").Result(); err == nil && len(keys) > 0 {
			c.Del(context.Background(), keys...)
		}
	})
	ratetest.SharedBucket(t, a, b, "t\x00chain:acme")
	keys, err := c.Keys(ctx, p+"*").Result()
	if err != nil || len(keys) == 0 {
		t.Fatalf("keys %v, %v; want the buckets", keys, err)
	}
	for _, k := range keys {
		if len(k) != len(p)+64 {
			t.Errorf("key %q is not a digest", k)
		}
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
