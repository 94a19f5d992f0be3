package flow

import (
	"context"
	"reflect"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tenantmcp/tenantmcp/redact"
	"github.com/tenantmcp/tenantmcp/scope"
)

// countingStore counts the calls the checker makes to its store.
type countingStore struct {
	Store
	loads, joins atomic.Int64
}

func (s *countingStore) Load(ctx context.Context, k Key, now time.Time, retain time.Duration) (Taint, error) {
	s.loads.Add(1)
	return s.Store.Load(ctx, k, now, retain)
}

func (s *countingStore) Join(ctx context.Context, k Key, now time.Time, retain time.Duration, add Taint) error {
	s.joins.Add(1)
	return s.Store.Join(ctx, k, now, retain, add)
}

// counted is a fixture over testPolicy whose store counts its calls, and
// ops returns the loads and joins since its last call.
func counted(t *testing.T) (*fixture, func() (int64, int64)) {
	t.Helper()
	st := &countingStore{Store: NewMemoryStore()}
	f := newFixtureStore(t, testPolicy, st)
	var l0, j0 int64
	return f, func() (int64, int64) {
		l, j := st.loads.Load(), st.joins.Load()
		dl, dj := l-l0, j-j0
		l0, j0 = l, j
		return dl, dj
	}
}

func wantOps(t *testing.T, what string, ops func() (int64, int64), loads, joins int64) {
	t.Helper()
	if l, j := ops(); l != loads || j != joins {
		t.Fatalf("%s: %d loads and %d joins, want %d and %d", what, l, j, loads, joins)
	}
}

// A result with a public label and no category writes nothing: the taint
// stays empty and a sink may send anywhere.
func TestRecordPublicResultWritesNothing(t *testing.T) {
	f, ops := counted(t)
	ci := CallInfo{Subject: "pat", SessionID: "s"}
	f.read(t, ci, "rooms", roomsOut{Rooms: []string{"101"}})
	f.read(t, ci, "notes", notesOut{Notes: "the lift is out of order"})
	wantOps(t, "two public reads", ops, 0, 0)
	if got := f.taint(t, ci); got.Level != "" || got.Categories != nil {
		t.Fatalf("taint after public reads: %+v, want none", got)
	}
	if den := f.send(ci, "hook", "https://evil.example/"); den != nil {
		t.Fatalf("public data denied: %v", den)
	}
}

// A result that adds a category writes exactly once, and the taint then
// holds it; the same result again within the slack writes nothing, past
// the slack (when the retention would move) once more.
func TestRecordWritesOnlyWhatItAdds(t *testing.T) {
	f, ops := counted(t)
	ci := CallInfo{Subject: "ann-agent", SessionID: "s"}
	f.read(t, ci, "guests", annOnly)
	wantOps(t, "first read of guest data", ops, 0, 1)
	if got := f.taint(t, ci); !slices.Equal(got.Categories, []string{"guest.pii"}) || got.Level != Confidential {
		t.Fatalf("taint after the read: %+v, want confidential guest.pii", got)
	}
	ops()
	slack := touchSlack(DefaultRetain)
	f.now = f.now.Add(slack / 2)
	for range 3 {
		f.read(t, ci, "guests", annOnly)
	}
	wantOps(t, "the same read within the slack", ops, 0, 0)
	// Lower or equal labels add nothing either.
	f.read(t, ci, "rooms", roomsOut{})
	wantOps(t, "a public read", ops, 0, 0)
	f.now = f.now.Add(slack)
	f.read(t, ci, "guests", annOnly)
	wantOps(t, "the same read past the slack (the retention moves)", ops, 0, 1)
	// What the cache knows is per key: another session under the
	// subject scope is the same taint, another subject is not.
	f.read(t, CallInfo{Subject: "ann-agent", SessionID: "s2"}, "guests", annOnly)
	wantOps(t, "another session of the subject", ops, 0, 0)
	f.read(t, CallInfo{Subject: "bob-agent", SessionID: "s"}, "guests", annOnly)
	wantOps(t, "another subject", ops, 0, 1)
	// A new data subject, a new category, or a higher level is written.
	f.read(t, ci, "guests", guestsOut{Guests: []guest{bob}})
	wantOps(t, "a new data subject", ops, 0, 1)
	f.read(t, ci, "revenue", revenueOut{Total: 5})
	wantOps(t, "a new category", ops, 0, 1)
	// revenue's result names nobody: the data subjects are now unknown,
	// and another one adds nothing.
	f.read(t, ci, "guests", guestsOut{Guests: []guest{{ID: 3, Name: "Cy Poe", Email: "cy@guest.example"}}})
	wantOps(t, "a data subject once they are unknown", ops, 0, 0)
	f.read(t, ci, "pay", payment{Card: "4111111111111111", Email: ann.Email})
	wantOps(t, "payment (new category and level)", ops, 0, 1)
}

// A sink call's check reads the taint once; its result, when it adds
// nothing to what that read returned, is not written back.
func TestSinkResultReusesTheCheckRead(t *testing.T) {
	f, ops := counted(t)
	// A sink whose results are internal (the default level).
	tool, err := f.c.Register("mail_internal", reflect.TypeFor[mailIn](), reflect.TypeFor[empty](), Decl{Sink: &Sink{Kind: Email, DestArg: "to"}})
	if err != nil {
		t.Fatal(err)
	}
	f.tools["mail_internal"] = tool
	ci := CallInfo{Subject: "desk", SessionID: "s"}
	f.read(t, ci, "guests", annOnly)
	ops()
	// Past the slack of that join: only the check's read is fresh.
	f.now = f.now.Add(time.Hour)
	call, den := f.begin(ci, "mail_internal", map[string]any{"to": "desk@staff.example", "body": "hi"})
	if den != nil {
		t.Fatalf("allowed sink denied: %v", den)
	}
	if err := call.Record(context.Background(), empty{}, testReport(t, empty{})); err != nil {
		t.Fatal(err)
	}
	wantOps(t, "a sink call whose result adds nothing", ops, 1, 0)
	if got := f.taint(t, ci); !slices.Equal(got.Categories, []string{"guest.pii"}) || got.Level != Confidential {
		t.Fatalf("taint after the sink: %+v", got)
	}
	ops()
	// On a clean taint the same sink's internal result is written.
	clean := CallInfo{Subject: "fresh", SessionID: "s"}
	call, den = f.begin(clean, "mail_internal", map[string]any{"to": "desk@staff.example", "body": "hi"})
	if den != nil {
		t.Fatalf("allowed sink denied: %v", den)
	}
	if err := call.Record(context.Background(), empty{}, testReport(t, empty{})); err != nil {
		t.Fatal(err)
	}
	wantOps(t, "a sink call whose result adds the internal level", ops, 1, 1)
	if got := f.taint(t, clean); got.Level != Internal {
		t.Fatalf("taint after the sink on a clean taint: %+v, want internal", got)
	}
}

// Skipped writes never let data out: after reads that wrote nothing, a
// sink call to an outsider is denied as before, the data subject's $owner
// exception is lost once a second subject's data was read, and the taint
// is kept for the policy's retain from the last (unwritten) exposure.
func TestSkippedWritesStillDeny(t *testing.T) {
	f, ops := counted(t)
	ci := CallInfo{Subject: "leaky", SessionID: "s"}
	f.read(t, ci, "guests", annOnly)
	slack := touchSlack(DefaultRetain)
	f.now = f.now.Add(slack)
	for range 5 {
		f.read(t, ci, "guests", annOnly)
	}
	wantOps(t, "seed and repeated reads", ops, 0, 1)
	for _, dest := range []string{"x@evil.example", "bob@guest.example"} {
		if den := f.send(ci, "mail", dest); den == nil || den.Rule != RuleCategory {
			t.Fatalf("send to %s after skipped writes: %v, want %s", dest, den, RuleCategory)
		}
	}
	if den := f.send(ci, "mail", "ann@guest.example"); den != nil {
		t.Fatalf("send to the data subject: %v", den)
	}
	// Bob's data is a new data subject: written, so $owner no longer
	// matches Ann.
	f.read(t, ci, "guests", guestsOut{Guests: []guest{bob}})
	if den := f.send(ci, "mail", "ann@guest.example"); den == nil || den.Rule != RuleCategory {
		t.Fatalf("send to one of two data subjects: %v, want %s", den, RuleCategory)
	}

	// Retention runs from the last exposure, even an unwritten one: a
	// second subject reads at t0 (written) and again at t0+slack (not).
	g, ops2 := counted(t)
	ci2 := CallInfo{Subject: "late", SessionID: "s"}
	g.read(t, ci2, "guests", annOnly)
	g.now = g.now.Add(slack)
	g.read(t, ci2, "guests", annOnly)
	wantOps(t, "read, then the same read at the slack", ops2, 0, 1)
	g.now = g.now.Add(DefaultRetain)
	if den := g.send(ci2, "hook", "https://evil.example/"); den == nil || den.Rule != RuleCategory {
		t.Fatalf("send the policy's retain after the unwritten exposure: %v, want %s", den, RuleCategory)
	}
}

// A result already held is released while the store is down (its label is
// durable), but a result that adds something is withheld.
func TestSkipOnlyWhatIsHeldDuringOutage(t *testing.T) {
	st := &failingStore{Store: NewMemoryStore()}
	f := newFixtureStore(t, testPolicy, st)
	ci := CallInfo{Subject: "ann-agent", SessionID: "s"}
	f.read(t, ci, "guests", annOnly)
	st.down.Store(true)
	f.read(t, ci, "guests", annOnly) // held: no store call
	call, den := f.begin(ci, "revenue", nil)
	if den != nil {
		t.Fatal(den)
	}
	if err := call.Record(context.Background(), revenueOut{}, testReport(t, revenueOut{})); err == nil {
		t.Fatal("a result adding a category was released with the store down")
	}
}

type failingStore struct {
	Store
	down atomic.Bool
}

func (s *failingStore) Join(ctx context.Context, k Key, now time.Time, retain time.Duration, add Taint) error {
	if s.down.Load() {
		return ErrTaintStore
	}
	return s.Store.Join(ctx, k, now, retain, add)
}

// testReport is the redaction report of out, as the server makes it.
func testReport(t *testing.T, out any) redact.Report {
	t.Helper()
	red := testRedactor.ForScope(scope.Scope{})
	if _, err := red.JSON(out); err != nil {
		t.Fatal(err)
	}
	return red.Report()
}
