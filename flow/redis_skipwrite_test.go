package flow_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"os"
	"reflect"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tenantmcp/tenantmcp/flow"
	"github.com/tenantmcp/tenantmcp/redact"
	"github.com/tenantmcp/tenantmcp/scope"
	"github.com/tenantmcp/tenantmcp/server/redisstore"
)

// countingStore counts the calls a checker makes to its store.
type countingStore struct {
	flow.Store
	loads, joins atomic.Int64
}

func (s *countingStore) Load(ctx context.Context, k flow.Key, now time.Time, retain time.Duration) (flow.Taint, error) {
	s.loads.Add(1)
	return s.Store.Load(ctx, k, now, retain)
}

func (s *countingStore) Join(ctx context.Context, k flow.Key, now time.Time, retain time.Duration, add flow.Taint) error {
	s.joins.Add(1)
	return s.Store.Join(ctx, k, now, retain, add)
}

type redisGuest struct {
	Name  string `json:"name" pii:"name"`
	Email string `json:"email" pii:"email"`
}

type redisMail struct {
	To   string `json:"to"`
	Body string `json:"body"`
}

// TestRedisCheckerSkipsWrites: with the taints on Redis
// (TENANTMCP_TEST_REDIS_ADDR; keys under a random prefix), a result that
// adds nothing makes no store call, one that adds makes one Join, and a
// sink to an outsider after the skipped writes is denied, on this
// replica and on another.
func TestRedisCheckerSkipsWrites(t *testing.T) {
	addr := os.Getenv("TENANTMCP_TEST_REDIS_ADDR")
	if addr == "" {
		t.Skip("set TENANTMCP_TEST_REDIS_ADDR=127.0.0.1:6379 to run the Redis taint store test")
	}
	ctx := context.Background()
	rc := redis.NewClient(&redis.Options{Addr: addr})
	t.Cleanup(func() { rc.Close() })
	var b [8]byte
	_, _ = rand.Read(b[:])
	prefix := "tenantmcp-test:" + hex.EncodeToString(b[:]) + ":"
	t.Cleanup(func() {
		if keys, err := rc.Keys(ctx, prefix+"*").Result(); err == nil && len(keys) > 0 {
			rc.Del(ctx, keys...)
		}
	})
	pol, err := flow.ParsePolicy("policy.json", []byte(`{"version": 1, "taint": {"retain": "1h"},
  "pii": {"email": "guest.pii", "name": "guest.pii"},
  "categories": {"guest.pii": {"level": "confidential", "to": ["email:*@staff.example"]}},
  "destinations": {"email:*@staff.example": "confidential"},
  "tools": {"rooms": "public"}}`))
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	type replica struct {
		st                  *countingStore
		guests, rooms, mail *flow.Tool
	}
	open := func() replica {
		rs, err := redisstore.NewTaints(rc, redisstore.Options{Prefix: prefix, Timeout: 2 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		r := replica{st: &countingStore{Store: rs}}
		c, err := flow.New(pol, flow.Options{Store: r.st, Now: func() time.Time { return now }})
		if err != nil {
			t.Fatal(err)
		}
		reg := func(name string, in, out reflect.Type, d flow.Decl) *flow.Tool {
			tool, err := c.Register(name, in, out, d)
			if err != nil {
				t.Fatal(err)
			}
			return tool
		}
		r.guests = reg("guests", reflect.TypeFor[struct{}](), reflect.TypeFor[redisGuest](), flow.Decl{})
		r.rooms = reg("rooms", reflect.TypeFor[struct{}](), reflect.TypeFor[struct{}](), flow.Decl{})
		r.mail = reg("mail", reflect.TypeFor[redisMail](), nil, flow.Decl{Level: flow.Public, Sink: &flow.Sink{Kind: flow.Email, DestArg: "to"}})
		return r
	}
	a := open()
	call := func(tool *flow.Tool, out any) {
		t.Helper()
		c, err := tool.Begin(ctx, flow.CallInfo{Subject: "ann-reader", Args: []byte(`{}`)})
		if err != nil {
			t.Fatal(err)
		}
		red := redact.Default().ForScope(scope.Scope{})
		if _, err := red.JSON(out); err != nil {
			t.Fatal(err)
		}
		if err := c.Record(ctx, out, red.Report()); err != nil {
			t.Fatal(err)
		}
	}
	ops := func(what string, loads, joins int64) {
		t.Helper()
		if l, j := a.st.loads.Swap(0), a.st.joins.Swap(0); l != loads || j != joins {
			t.Fatalf("%s: %d loads and %d joins, want %d and %d", what, l, j, loads, joins)
		}
	}
	call(a.rooms, struct{}{})
	ops("a public result", 0, 0)
	ann := redisGuest{Name: "Ann Lee", Email: "ann@guest.example"}
	call(a.guests, ann)
	ops("the first read of guest data", 0, 1)
	for range 3 {
		call(a.guests, ann)
	}
	ops("reads adding nothing within the slack", 0, 0)
	now = now.Add(time.Minute)
	call(a.guests, ann)
	ops("a read past the slack", 0, 1)
	for _, r := range []replica{a, open()} {
		_, err := r.mail.Begin(ctx, flow.CallInfo{Subject: "ann-reader", Args: []byte(`{"to":"x@evil.example","body":"hi"}`)})
		var den *flow.Denial
		if !errors.As(err, &den) || den.Rule != flow.RuleCategory {
			t.Fatalf("sink to an outsider after skipped writes: %v, want %s", err, flow.RuleCategory)
		}
	}
}
