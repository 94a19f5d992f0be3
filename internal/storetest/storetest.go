// Package storetest checks a flow.Store implementation against the
// contract of flow.Store, the same checks for the in-memory store, the
// PostgreSQL store (flow/pgtaint) and the Redis store
// (server/redisstore): Join is atomic per key across replicas, a taint
// only grows, it is dropped whole once idle past retain, and a subject's
// sessions past flow.MaxKeysPerSubject fold into its subject-wide taint.
package storetest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/tenantmcp/tenantmcp/flow"
)

// Open returns two views of one empty shared store (two replicas; the
// same value twice for a store private to one process). Keys are made
// unique per call, so a store may be shared with other tests.
type Open func(t *testing.T) (a, b flow.Store)

// Run runs every check of the contract as a subtest. The times it passes
// are two days in the past (a store may cap a "now" in the future by its
// own clock: more taint, never less), so they mean the same to every
// store.
func Run(t *testing.T, open Open) {
	t.Run("Empty", func(t *testing.T) { empty(t, open) })
	t.Run("RoundTrip", func(t *testing.T) { roundTrip(t, open) })
	t.Run("GrowsOnly", func(t *testing.T) { growsOnly(t, open) })
	t.Run("ConcurrentJoins", func(t *testing.T) { concurrentJoins(t, open) })
	t.Run("Retain", func(t *testing.T) { retain(t, open) })
	t.Run("KeysIndependent", func(t *testing.T) { keysIndependent(t, open) })
	t.Run("FoldPastMaxKeys", func(t *testing.T) { foldPastMaxKeys(t, open) })
}

// base is the clock of the checks.
func base() time.Time { return time.Now().Add(-48 * time.Hour).Truncate(time.Millisecond) }

// subject returns a subject name unique to this run.
func subject(name string) string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return name + "-" + hex.EncodeToString(b[:])
}

func cat(c, tool, call string) flow.Taint {
	return flow.Taint{Level: flow.Confidential, Categories: []string{c}, Owners: []string{"ann@guest.example"},
		From: []flow.TaintOrigin{{Level: flow.Public, Tool: tool, CallID: call}, {Level: flow.Internal, Tool: tool, CallID: call},
			{Level: flow.Confidential, Tool: tool, CallID: call}, {Category: c, Tool: tool, CallID: call, Session: "mcp:s"}}}
}

func load(t *testing.T, st flow.Store, k flow.Key, now time.Time) flow.Taint {
	t.Helper()
	got, err := st.Load(context.Background(), k, now, time.Hour)
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	return got
}

func join(t *testing.T, st flow.Store, k flow.Key, now time.Time, add flow.Taint) {
	t.Helper()
	if err := st.Join(context.Background(), k, now, time.Hour, add); err != nil {
		t.Fatalf("Join: %v", err)
	}
}

func empty(t *testing.T, open Open) {
	a, _ := open(t)
	if got := load(t, a, flow.Key{Subject: subject("nobody")}, base()); !reflect.DeepEqual(got, flow.Taint{}) {
		t.Fatalf("Load of a key never joined: %+v, want the zero Taint", got)
	}
}

// What one replica joins, the other loads as is.
func roundTrip(t *testing.T, open Open) {
	a, b := open(t)
	k, now := flow.Key{Subject: subject("rt"), Session: "mcp:s"}, base()
	want := cat("guest.pii", "guests", "c1")
	join(t, a, k, now, want)
	if got := load(t, b, k, now); !reflect.DeepEqual(got, want) {
		t.Fatalf("loaded on the other replica:\n got %+v\nwant %+v", got, want)
	}
}

// Nothing a join brings lowers a level, drops a category, an origin or an
// owner; past 8 owners they are unknown.
func growsOnly(t *testing.T, open Open) {
	a, b := open(t)
	k, now := flow.Key{Subject: subject("grow")}, base()
	join(t, a, k, now, flow.Taint{Level: flow.Secret, From: []flow.TaintOrigin{{Level: flow.Secret, Tool: "vault", CallID: "v"}}})
	join(t, b, k, now, cat("guest.pii", "guests", "c1"))
	join(t, a, k, now, flow.Taint{Level: flow.Public})
	got := load(t, b, k, now)
	if got.Level != flow.Secret || !slices.Equal(got.Categories, []string{"guest.pii"}) || !slices.Equal(got.Owners, []string{"ann@guest.example"}) {
		t.Fatalf("after joins of lower taints: %+v", got)
	}
	if !slices.ContainsFunc(got.From, func(o flow.TaintOrigin) bool { return o.CallID == "v" }) ||
		!slices.ContainsFunc(got.From, func(o flow.TaintOrigin) bool { return o.Category == "guest.pii" && o.CallID == "c1" }) {
		t.Fatalf("origins lost: %+v", got.From)
	}
	for i := range 8 {
		add := cat("guest.pii", "guests", "c1")
		add.Owners = []string{fmt.Sprintf("g%d@guest.example", i)}
		join(t, b, k, now, add)
	}
	if got := load(t, a, k, now); !got.OwnersUnknown || got.Owners != nil {
		t.Fatalf("past 8 owners: unknown=%v owners=%v, want unknown", got.OwnersUnknown, got.Owners)
	}
}

// Concurrent joins into one key from two replicas lose nothing.
func concurrentJoins(t *testing.T, open Open) {
	a, b := open(t)
	k, now := flow.Key{Subject: subject("busy")}, base()
	const n = 24
	var wg sync.WaitGroup
	for i := range n {
		st := a
		if i%2 == 1 {
			st = b
		}
		wg.Go(func() {
			c := fmt.Sprintf("cat%02d", i)
			add := flow.Taint{Level: flow.Internal, Categories: []string{c},
				From: []flow.TaintOrigin{{Level: flow.Public, Tool: "t"}, {Level: flow.Internal, Tool: "t"}, {Category: c, Tool: "t", CallID: c}}}
			if err := st.Join(context.Background(), k, now, time.Hour, add); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	got := load(t, a, k, now)
	if len(got.Categories) != n || !slices.IsSorted(got.Categories) || len(got.From) != n+2 {
		t.Fatalf("after %d concurrent joins: %d categories (sorted %v), %d origins; want %d, %d",
			n, len(got.Categories), slices.IsSorted(got.Categories), len(got.From), n, n+2)
	}
}

// Each use keeps a taint alive; idle past retain it is dropped whole, and
// a join then starts afresh.
func retain(t *testing.T, open Open) {
	a, b := open(t)
	k, t0 := flow.Key{Subject: subject("idle"), Session: "conv:x"}, base()
	join(t, a, k, t0, cat("guest.pii", "guests", "c1"))
	if got := load(t, b, k, t0.Add(59*time.Minute)); len(got.Categories) != 1 {
		t.Fatalf("before retain: %+v", got)
	}
	// Loaded at +59m: alive until +119m.
	if got := load(t, a, k, t0.Add(118*time.Minute)); len(got.Categories) != 1 {
		t.Fatalf("a load did not keep the taint alive: %+v", got)
	}
	if got := load(t, b, k, t0.Add(179*time.Minute+time.Second)); !reflect.DeepEqual(got, flow.Taint{}) {
		t.Fatalf("idle past retain: %+v, want none", got)
	}
	later := t0.Add(4 * time.Hour)
	fresh := flow.Taint{Level: flow.Internal, From: []flow.TaintOrigin{{Level: flow.Public, Tool: "list"}, {Level: flow.Internal, Tool: "list"}}}
	join(t, b, k, later, fresh)
	if got := load(t, a, k, later); !reflect.DeepEqual(got, fresh) {
		t.Fatalf("a join after expiry: %+v, want only the new taint %+v", got, fresh)
	}
}

// A session's taint, the subject's and another subject's are separate.
func keysIndependent(t *testing.T, open Open) {
	a, b := open(t)
	s, now := subject("sep"), base()
	join(t, a, flow.Key{Subject: s, Session: "mcp:1"}, now, cat("guest.pii", "guests", "c1"))
	for _, k := range []flow.Key{{Subject: s}, {Subject: s, Session: "mcp:2"}, {Subject: s + "x", Session: "mcp:1"}} {
		if got := load(t, b, k, now); !reflect.DeepEqual(got, flow.Taint{}) {
			t.Fatalf("%+v inherited another key's taint: %+v", k, got)
		}
	}
}

// Past flow.MaxKeysPerSubject live session taints, a subject's further
// sessions join and read its subject-wide taint (more taint, never less);
// once those sessions have expired, a new session is on its own again.
func foldPastMaxKeys(t *testing.T, open Open) {
	a, b := open(t)
	s, now := subject("flood"), base()
	small := flow.Taint{Level: flow.Public, From: []flow.TaintOrigin{{Level: flow.Public, Tool: "ping"}}}
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	for i := range flow.MaxKeysPerSubject {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			if err := a.Join(context.Background(), flow.Key{Subject: s, Session: fmt.Sprintf("conv:%d", i)}, now, time.Hour, small); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	join(t, b, flow.Key{Subject: s, Session: "conv:new-1"}, now, cat("guest.pii", "guests", "c1"))
	for _, k := range []flow.Key{{Subject: s}, {Subject: s, Session: "conv:new-1"}, {Subject: s, Session: "conv:new-2"}} {
		if got := load(t, a, k, now); !slices.Contains(got.Categories, "guest.pii") {
			t.Fatalf("%+v past the bound: %+v, want the subject's taint", k.Session, got)
		}
	}
	// A session that had its own taint before the bound keeps reading it.
	if got := load(t, b, flow.Key{Subject: s, Session: "conv:7"}, now); got.Level != flow.Public || len(got.Categories) != 0 {
		t.Fatalf("an existing session past the bound: %+v, want its own taint", got)
	}
	later := now.Add(2 * time.Hour)
	if got := load(t, a, flow.Key{Subject: s, Session: "conv:new-3"}, later); !reflect.DeepEqual(got, flow.Taint{}) {
		t.Fatalf("after expiry: %+v, want none", got)
	}
}
