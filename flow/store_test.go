package flow

import (
	"context"
	"errors"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/tenantmcp/tenantmcp/scope"
)

// sentOut is what a sink returns: a receipt that echoes its destination.
type sentOut struct {
	Status string `json:"status"`
	To     string `json:"to"`
	Reply  string `json:"reply"`
}

// A sink's receipt that echoes its own destination must not taint the
// caller with the category of that address; anything in the result that
// the arguments did not carry still does.
func TestSinkEchoDoesNotRaiseTaint(t *testing.T) {
	f := newFixture(t, testPolicy)
	sink, err := f.c.Register("mail_echo", reflect.TypeFor[mailIn](), reflect.TypeFor[sentOut](),
		Decl{Level: Public, Sink: &Sink{Kind: Email, DestArg: "to"}})
	if err != nil {
		t.Fatal(err)
	}
	f.tools["mail_echo"] = sink
	send := func(ci CallInfo, to string, out sentOut) {
		t.Helper()
		call, den := f.begin(ci, "mail_echo", mailIn{To: to, Body: "hello"})
		if den != nil {
			t.Fatalf("clean session denied: %v", den)
		}
		red := testRedactor.ForScope(scope.Scope{})
		if _, err := red.JSON(out); err != nil {
			t.Fatal(err)
		}
		if err := call.Record(context.Background(), out, red.Report()); err != nil {
			t.Fatal(err)
		}
	}
	clean := CallInfo{Subject: "echo"}
	send(clean, "x@evil.example", sentOut{Status: "queued", To: "x@evil.example"})
	if got := f.taint(t, clean); len(got.Categories) != 0 {
		t.Fatalf("the sink's echo of its destination tainted the caller: %v", got)
	}
	// A second send from the same (still clean) subject is allowed.
	if den := f.send(clean, "hook", "https://evil.example/"); den != nil {
		t.Fatalf("after an echo: %v", den)
	}
	// A result carrying an address the arguments did not still taints.
	other := CallInfo{Subject: "reply"}
	send(other, "x@evil.example", sentOut{Status: "queued", To: "x@evil.example", Reply: "bounce from postmaster@mail.example"})
	if got := f.taint(t, other); !slices.Contains(got.Categories, "guest.pii") {
		t.Fatalf("an address only the result carried did not taint: %v", got)
	}
}

// failStore fails every operation, as a shared store does in an outage.
type failStore struct{}

func (failStore) Load(context.Context, Key, time.Time, time.Duration) (Taint, error) {
	return Taint{}, errors.New("connection refused")
}

func (failStore) Join(context.Context, Key, time.Time, time.Duration, Taint) error {
	return errors.New("connection refused")
}

func TestStoreErrorFailsClosed(t *testing.T) {
	f := newFixtureStore(t, testPolicy, failStore{})
	ci := CallInfo{Subject: "down"}
	call, den := f.begin(ci, "guests", nil)
	if den != nil {
		t.Fatalf("a non-sink call needs no taint: %v", den)
	}
	if err := call.Record(context.Background(), annOnly, testRedactor.ForScope(scope.Scope{}).Report()); !errors.Is(err, ErrTaintStore) {
		t.Fatalf("Record on a failing store: %v, want ErrTaintStore", err)
	}
	den = f.send(ci, "hook", "https://public.example/")
	if den == nil || den.Rule != RuleTaintStore || !errors.Is(den, ErrDenied) {
		t.Fatalf("sink on a failing store: %v, want %s", den, RuleTaintStore)
	}
	if _, err := f.c.Taint(context.Background(), f.c.KeyOf(ci)); !errors.Is(err, ErrTaintStore) {
		t.Fatalf("Taint: %v", err)
	}
}

// Concurrent joins into one key lose nothing, and the stored form keeps
// each category's origin.
func TestMemoryStoreConcurrentJoins(t *testing.T) {
	st := NewMemoryStore()
	k := Key{Subject: "s"}
	now := time.Now()
	var wg sync.WaitGroup
	for i := range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cat := "c" + string(rune('a'+i%26)) + string(rune('a'+i/26))
			add := Taint{Level: Internal, Categories: []string{cat},
				From: []TaintOrigin{{Level: Public, Tool: "t"}, {Level: Internal, Tool: "t"}, {Category: cat, Tool: "t", CallID: cat}}}
			if err := st.Join(context.Background(), k, now, time.Hour, add); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	got, err := st.Load(context.Background(), k, now, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Categories) != 32 || !slices.IsSorted(got.Categories) {
		t.Fatalf("categories after 32 joins: %v", got.Categories)
	}
	if n := len(got.From); n != 32+2 {
		t.Fatalf("origins: %d, want 34 (32 categories, 2 level steps)", n)
	}
	// Idle past retain, the taint is dropped whole.
	if got, _ := st.Load(context.Background(), k, now.Add(time.Hour+time.Second), time.Hour); got.Level != "" || got.Categories != nil {
		t.Fatalf("after retain: %+v", got)
	}
}
