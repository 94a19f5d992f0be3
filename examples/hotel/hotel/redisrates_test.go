package hotel_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tenantmcp/tenantmcp/examples/hotel/hotel"
	"github.com/tenantmcp/tenantmcp/internal/cutproxy"
	"github.com/tenantmcp/tenantmcp/internal/rpctest"
	"github.com/tenantmcp/tenantmcp/server"
	"github.com/tenantmcp/tenantmcp/server/redisstore"
)

// TestRedisOutageRatesFallBackPerReplica (issue 29 §4) with a real Redis
// that stops: the hotel's per-tenant rate limits live in Redis
// (redisstore.NewRates) reached through a relay the test cuts. While Redis
// is unreachable calls are still admitted against a per-replica bucket of
// the same rate and burst (the call past the burst is refused with the
// tenant's rate rule), /readyz stays 200 and lists "rates" as degraded,
// and one warning is logged that names neither tenant nor subject; when
// Redis answers again the shared bucket is used again (its key's
// remaining tokens move) and readiness is no longer degraded.
func TestRedisOutageRatesFallBackPerReplica(t *testing.T) {
	addr := os.Getenv("TENANTMCP_TEST_REDIS_ADDR")
	if addr == "" {
		t.Skip("set TENANTMCP_TEST_REDIS_ADDR=127.0.0.1:6379 to run the hotel's rate limits on a Redis that the test stops")
	}
	admin := redis.NewClient(&redis.Options{Addr: addr})
	t.Cleanup(func() { admin.Close() })
	var b [8]byte
	_, _ = rand.Read(b[:])
	prefix := "tenantmcp-test:" + hex.EncodeToString(b[:]) + ":"
	t.Cleanup(func() {
		if keys, err := admin.Keys(context.Background(), prefix+"*").Result(); err == nil && len(keys) > 0 {
			admin.Del(context.Background(), keys...)
		}
	})
	relay, err := cutproxy.Start(addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { relay.Close() })
	rc := redis.NewClient(&redis.Options{Addr: relay.Addr, MaxRetries: -1, DialTimeout: 300 * time.Millisecond})
	t.Cleanup(func() { rc.Close() })
	rates, err := redisstore.NewRates(rc, redisstore.Options{Prefix: prefix, Timeout: 500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	const burst = 3
	h := startWith(t, hotel.Options{Seed: 7, Limits: hotel.Limits{
		PerTenant: server.Limit{Rate: 0.05, Burst: burst}, Rates: rates}}, nil)
	endpoint := h.app.HTTP.ResourceURL
	u, err := url.Parse(endpoint)
	if err != nil {
		t.Fatal(err)
	}
	readyz := u.Scheme + "://" + u.Host + server.ReadyPath
	tok := h.tokenFor(t, "alice")
	call := func(what string) rpctest.Reply {
		t.Helper()
		r, err := rpctest.Call(context.Background(), endpoint, tok, "list_bookings", map[string]any{"from": "2025-01-01", "to": "2028-01-01"})
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		return r
	}
	// ready polls /readyz until want holds (readiness may be cached for
	// a moment), or fails with the last answer.
	ready := func(what string, want func(int, server.Readiness) bool) {
		t.Helper()
		var code int
		var rd server.Readiness
		for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(100 * time.Millisecond) {
			resp, err := http.Get(readyz)
			if err != nil {
				t.Fatal(err)
			}
			code = resp.StatusCode
			rd = server.Readiness{}
			err = json.NewDecoder(resp.Body).Decode(&rd)
			resp.Body.Close()
			if err == nil && want(code, rd) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: /readyz %d %+v", what, code, rd)
			}
		}
	}
	bucketKeys := func() []string {
		t.Helper()
		keys, err := admin.Keys(context.Background(), prefix+"*").Result()
		if err != nil {
			t.Fatal(err)
		}
		return keys
	}
	bucket := func(keys []string) string {
		t.Helper()
		var parts []string
		for _, k := range keys {
			v, err := admin.Dump(context.Background(), k).Result()
			if err != nil {
				t.Fatal(err)
			}
			parts = append(parts, v)
		}
		return strings.Join(parts, "|")
	}

	if r := call("Redis up"); !r.OK() {
		t.Fatalf("Redis up: %+v", r)
	}
	keys := bucketKeys()
	if len(keys) == 0 {
		t.Fatal("no bucket in Redis after a rated call: the shared store is not in use")
	}
	ready("Redis up", func(c int, r server.Readiness) bool { return c == 200 && r.Ready && len(r.Degraded) == 0 })

	relay.Cut()
	before := bucket(keys)
	for i := range burst {
		if r := call("Redis down"); !r.OK() {
			t.Fatalf("Redis down, call %d within the burst: %+v (want admitted per replica)", i, r)
		}
	}
	if r := call("Redis down, past the burst"); r.Status != http.StatusTooManyRequests || r.Err == nil || !strings.Contains(string(r.Err.Data), server.RuleTenantRate) {
		t.Fatalf("Redis down, past the per-replica burst: %+v, want 429 %s", r, server.RuleTenantRate)
	}
	ready("Redis down", func(c int, r server.Readiness) bool {
		return c == 200 && r.Ready && slices.Contains(r.Degraded, "rates")
	})
	if after := bucket(keys); after != before {
		t.Fatal("the shared bucket moved while Redis was cut off: the relay did not cut")
	}
	logs := h.logs.String()
	if n := strings.Count(logs, "rate-limit store unavailable"); n != 1 {
		t.Fatalf("%d outage warnings, want 1:\n%s", n, logs)
	}
	for _, secret := range []string{`"acme"`, "alice"} {
		if strings.Contains(logs, secret) {
			t.Fatalf("the log names %s:\n%s", secret, logs)
		}
	}

	relay.Restore()
	var r rpctest.Reply
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		// The shared bucket still holds burst-1 tokens: admitted once
		// the store answers (per-replica, this call would be refused).
		if r = call("Redis back"); r.OK() || time.Now().After(deadline) {
			break
		}
	}
	if !r.OK() {
		t.Fatalf("Redis back: %+v, want admitted from the shared bucket", r)
	}
	if bucket(keys) == before {
		t.Fatal("Redis answers again but the shared bucket did not move")
	}
	ready("Redis back", func(c int, r server.Readiness) bool { return c == 200 && r.Ready && len(r.Degraded) == 0 })
}
