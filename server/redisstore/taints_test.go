package redisstore_test

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tenantmcp/tenantmcp/flow"
	"github.com/tenantmcp/tenantmcp/internal/storetest"
	"github.com/tenantmcp/tenantmcp/redact"
	"github.com/tenantmcp/tenantmcp/scope"
	"github.com/tenantmcp/tenantmcp/server/redisstore"
)

// taints returns a Taints on c under prefix p, deleting its keys at cleanup.
func taints(t *testing.T, c *redis.Client, p string) *redisstore.Taints {
	t.Helper()
	s, err := redisstore.NewTaints(c, redisstore.Options{Prefix: p, Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx := context.Background()
		if keys, err := c.Keys(ctx, p+"*").Result(); err == nil && len(keys) > 0 {
			c.Del(ctx, keys...)
		}
	})
	return s
}

// TestTaintsContract runs the shared flow.Store contract (the checks the
// in-memory and PostgreSQL stores pass) on two replicas' Taints, each with
// its own client, on one Redis.
func TestTaintsContract(t *testing.T) {
	c1, c2 := client(t), client(t)
	storetest.Run(t, func(t *testing.T) (flow.Store, flow.Store) {
		p := prefix(t)
		return taints(t, c1, p), taints(t, c2, p)
	})
}

// TestTaintsKeysAreDigests: no subject, session or taint key names what
// it is about, and an altered value fails closed (flow.ErrTaintStore) in
// Load and Join, never an empty taint.
func TestTaintsKeysAreDigests(t *testing.T) {
	c := client(t)
	p := prefix(t)
	st := taints(t, c, p)
	ctx := context.Background()
	now := time.Now()
	add := flow.Taint{Level: flow.Confidential, Categories: []string{"guest.pii"}, From: []flow.TaintOrigin{{Category: "guest.pii", Tool: "guests", CallID: "c1"}}}
	k := flow.Key{Subject: "ann@acme.example", Session: "conv:secret-conversation"}
	if err := st.Join(ctx, k, now, time.Hour, add); err != nil {
		t.Fatal(err)
	}
	keys, err := c.Keys(ctx, p+"*").Result()
	if err != nil || len(keys) != 2 {
		t.Fatalf("keys %v, %v; want the taint and the session set", keys, err)
	}
	var taintKey string
	for _, key := range keys {
		for _, raw := range []string{"ann", "acme", "secret-conversation"} {
			if contains(key, raw) {
				t.Errorf("key %q names %q", key, raw)
			}
		}
		if typ := c.Type(ctx, key).Val(); typ == "hash" {
			taintKey = key
		}
	}
	if err := st.Ping(ctx); err != nil {
		t.Fatalf("Ping: %v", err)
	}
	for _, bad := range []string{`{"lvl":"secret"}`, `[]`, `{"level":"top"}`, ``} {
		c.HSet(ctx, taintKey, "t", bad)
		if _, err := st.Load(ctx, k, now, time.Hour); !errors.Is(err, flow.ErrTaintStore) {
			t.Errorf("Load of a taint altered to %q: %v, want ErrTaintStore", bad, err)
		}
		if err := st.Join(ctx, k, now, time.Hour, add); !errors.Is(err, flow.ErrTaintStore) {
			t.Errorf("Join into a taint altered to %q: %v, want ErrTaintStore", bad, err)
		}
	}
}

func contains(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return true
		}
	}
	return false
}

// TestTaintsUnreachable: a Redis that does not answer fails closed with
// flow.ErrTaintStore, quickly, in Load, Join and Ping; the rate and replay
// stores' Ping fail too.
func TestTaintsUnreachable(t *testing.T) {
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1})
	defer c.Close()
	o := redisstore.Options{Timeout: 200 * time.Millisecond}
	st, err := redisstore.NewTaints(c, o)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	start := time.Now()
	if _, err := st.Load(ctx, flow.Key{Subject: "s"}, time.Now(), time.Hour); !errors.Is(err, flow.ErrTaintStore) {
		t.Errorf("Load: %v", err)
	}
	if err := st.Join(ctx, flow.Key{Subject: "s"}, time.Now(), time.Hour, flow.Taint{Level: flow.Public}); !errors.Is(err, flow.ErrTaintStore) {
		t.Errorf("Join: %v", err)
	}
	if err := st.Ping(ctx); !errors.Is(err, flow.ErrTaintStore) {
		t.Errorf("Ping: %v", err)
	}
	rates, _ := redisstore.NewRates(c, o)
	replays, _ := redisstore.NewReplays(c, o)
	if err := rates.Ping(ctx); !errors.Is(err, redisstore.ErrStore) {
		t.Errorf("Rates.Ping: %v", err)
	}
	if err := replays.Ping(ctx); !errors.Is(err, redisstore.ErrStore) {
		t.Errorf("Replays.Ping: %v", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("took %s", d)
	}
	if s, err := redisstore.NewTaints(nil, redisstore.Options{}); !errors.Is(err, redisstore.ErrConfig) || s != nil {
		t.Errorf("NewTaints(nil) = %v, %v", s, err)
	}
}

const flowPolicy = `{
  "version": 1,
  "taint": {"scope": "subject", "retain": "1h"},
  "pii": {"email": "guest.pii", "name": "guest.pii"},
  "categories": {"guest.pii": {"level": "confidential", "to": ["email:*@staff.example"]}},
  "destinations": {"email:*@staff.example": "confidential"}
}`

type guest struct {
	Name  string `json:"name" pii:"name"`
	Email string `json:"email" pii:"email"`
}

type mailIn struct {
	To string `json:"to"`
}

// replica is one server process's checker on a Taints of its own client.
type replica struct {
	read, mail *flow.Tool
}

func newReplica(t *testing.T, st flow.Store) replica {
	t.Helper()
	p, err := flow.ParsePolicy("policy.json", []byte(flowPolicy))
	if err != nil {
		t.Fatal(err)
	}
	c, err := flow.New(p, flow.Options{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	var r replica
	if r.read, err = c.Register("guests", reflect.TypeFor[struct{}](), reflect.TypeFor[[]guest](), flow.Decl{}); err != nil {
		t.Fatal(err)
	}
	if r.mail, err = c.Register("mail", reflect.TypeFor[mailIn](), nil, flow.Decl{Level: flow.Public, Sink: &flow.Sink{Kind: flow.Email, DestArg: "to"}}); err != nil {
		t.Fatal(err)
	}
	return r
}

func (r replica) send(subject, to string) error {
	args, _ := json.Marshal(mailIn{To: to})
	_, err := r.mail.Begin(context.Background(), flow.CallInfo{Subject: subject, CallID: "send", Args: args})
	return err
}

// TestTaintsShareAcrossReplicas: a subject reads guest data through one
// replica's checker and calls the sink through another's: denied (the
// policy's category rule); another subject and an allowed destination
// are not; with Redis gone, the sink call is denied (fail closed) and a
// result's label cannot be recorded.
func TestTaintsShareAcrossReplicas(t *testing.T) {
	p := prefix(t)
	a, b := newReplica(t, taints(t, client(t), p)), newReplica(t, taints(t, client(t), p))
	ctx := context.Background()
	call, err := a.read.Begin(ctx, flow.CallInfo{Subject: "ann-reader", CallID: "read-on-a", Args: json.RawMessage(`{}`)})
	if err != nil {
		t.Fatal(err)
	}
	out := []guest{{Name: "Ann Lee", Email: "ann@guest.example"}}
	red := redact.Default().ForScope(scope.Scope{})
	if _, err := red.JSON(out); err != nil {
		t.Fatal(err)
	}
	if err := call.Record(ctx, out, red.Report()); err != nil {
		t.Fatal(err)
	}
	var den *flow.Denial
	if err := b.send("ann-reader", "x@evil.example"); !errors.As(err, &den) || den.Rule != flow.RuleCategory {
		t.Fatalf("send on replica b after a read on a: %v, want %s", err, flow.RuleCategory)
	}
	if err := b.send("ann-reader", "desk@staff.example"); err != nil {
		t.Fatalf("allowed destination: %v", err)
	}
	if err := b.send("someone-else", "x@evil.example"); err != nil {
		t.Fatalf("another subject: %v", err)
	}
	down := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1})
	defer down.Close()
	st, err := redisstore.NewTaints(down, redisstore.Options{Prefix: p, Timeout: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	c := newReplica(t, st)
	if err := c.send("someone-else", "desk@staff.example"); !errors.As(err, &den) || den.Rule != flow.RuleTaintStore {
		t.Fatalf("send with Redis down: %v, want %s", err, flow.RuleTaintStore)
	}
	call, err = c.read.Begin(ctx, flow.CallInfo{Subject: "ann-reader", Args: json.RawMessage(`{}`)})
	if err != nil {
		t.Fatal(err)
	}
	if err := call.Record(ctx, out, red.Report()); !errors.Is(err, flow.ErrTaintStore) {
		t.Fatalf("Record with Redis down: %v, want ErrTaintStore", err)
	}
}
