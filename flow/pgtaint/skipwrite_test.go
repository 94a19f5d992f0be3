package pgtaint_test

import (
	"context"
	"errors"
	"reflect"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tenantmcp/tenantmcp/flow"
	"github.com/tenantmcp/tenantmcp/flow/pgtaint"
	"github.com/tenantmcp/tenantmcp/redact"
	"github.com/tenantmcp/tenantmcp/scope"
)

// statements counts the round trips of a pool: each statement, each batch.
type statements struct{ n atomic.Int64 }

func (s *statements) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	s.n.Add(1)
	return ctx
}

func (s *statements) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// A batch is one round trip.
func (s *statements) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	s.n.Add(1)
	return ctx
}

func (s *statements) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}
func (s *statements) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData)     {}

// since returns the statements sent since its last call.
func (s *statements) since() func() int64 {
	var last int64
	return func() int64 {
		n := s.n.Load()
		d := n - last
		last = n
		return d
	}
}

// TestCheckerSkipsWritesLive: with the taints in PostgreSQL, a call whose
// result adds nothing sends no statement; one that adds sends its join;
// a sink call's check is one statement and its result, adding nothing,
// none. The skipped writes never let the data out.
func TestCheckerSkipsWritesLive(t *testing.T) {
	dsn := liveDB(t).app
	ctx := context.Background()
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	tr := &statements{}
	cfg.ConnConfig.Tracer = tr
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	st, err := pgtaint.New(ctx, pool, pgtaint.Options{})
	if err != nil {
		t.Fatal(err)
	}
	clk := &clock{now: time.Now()}
	p, err := flow.ParsePolicy("policy.json", []byte(policy))
	if err != nil {
		t.Fatal(err)
	}
	c, err := flow.New(p, flow.Options{Store: st, Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	r := &replica{c: c, pool: pool, clock: clk}
	if r.read, err = c.Register("guests", reflect.TypeFor[empty](), reflect.TypeFor[guestsOut](), flow.Decl{}); err != nil {
		t.Fatal(err)
	}
	if r.mail, err = c.Register("mail", reflect.TypeFor[mailIn](), nil, flow.Decl{Sink: &flow.Sink{Kind: flow.Email, DestArg: "to"}}); err != nil {
		t.Fatal(err)
	}
	public, err := c.Register("rooms", reflect.TypeFor[empty](), reflect.TypeFor[empty](), flow.Decl{Level: flow.Public})
	if err != nil {
		t.Fatal(err)
	}
	sent := tr.since()
	sent() // New's checks

	call, den := public.Begin(ctx, flow.CallInfo{Subject: "quiet", Args: []byte(`{}`)})
	if den != nil {
		t.Fatal(den)
	}
	if err := call.Record(ctx, empty{}, redact.Report{}); err != nil {
		t.Fatal(err)
	}
	if n := sent(); n != 0 {
		t.Fatalf("a public result with no category: %d statements, want 0", n)
	}
	if l, err := c.Taint(ctx, flow.Key{Subject: "quiet"}); err != nil || l.Level != "" || l.Categories != nil {
		t.Fatalf("taint after a public result: %+v %v, want none", l, err)
	}
	sent()

	r.readGuests(t, "ann-reader", "first")
	if n := sent(); n != 4 {
		t.Fatalf("the first read of guest data: %d round trips, want 4 (the held check, BEGIN+lock, put+COMMIT, the first sweep)", n)
	}
	for range 5 {
		r.readGuests(t, "ann-reader", "again")
	}
	if n := sent(); n != 0 {
		t.Fatalf("five reads adding nothing within the slack: %d statements, want 0", n)
	}
	clk.add(time.Minute) // past the slack of a 1h retain: the retention moves
	r.readGuests(t, "ann-reader", "later")
	if n := sent(); n != 1 {
		t.Fatalf("a read past the slack: %d statements, want 1 (the store's join that adds nothing)", n)
	}
	clk.add(time.Minute)
	if den := r.send("ann-reader", "x@evil.example"); den == nil || den.Rule != flow.RuleCategory {
		t.Fatalf("sink to an outsider after skipped writes: %v, want %s", den, flow.RuleCategory)
	}
	if n := sent(); n != 1 {
		t.Fatalf("a denied sink call: %d statements, want 1 (the read)", n)
	}
	// An allowed sink call: its check reads, its internal result adds
	// nothing to what the read returned, so it is not written.
	args := []byte(`{"to":"desk@staff.example","body":"hi"}`)
	sc, err := r.mail.Begin(ctx, flow.CallInfo{Subject: "ann-reader", CallID: "send", Args: args})
	if err != nil {
		t.Fatal(err)
	}
	red := redact.Default().ForScope(scope.Scope{})
	if err := sc.Record(ctx, struct{}{}, red.Report()); err != nil {
		t.Fatal(err)
	}
	if n := sent(); n != 1 {
		t.Fatalf("an allowed sink call: %d statements, want 1 (its check's read)", n)
	}
	// Another replica (its own checker and cache) sees the taint.
	if den := newReplica(t, dsn, clk).send("ann-reader", "x@evil.example"); den == nil || den.Rule != flow.RuleCategory {
		t.Fatalf("sink on another replica: %v, want %s", den, flow.RuleCategory)
	}
}

// TestJoinErrorClosesItsTransaction: a join the put function refuses (a
// row altered so that it is not a subset of what the merge writes back)
// fails with flow.ErrTaintStore, and the pool's only connection, left in
// the failed transaction, is not reused as it is: the next join works.
func TestJoinErrorClosesItsTransaction(t *testing.T) {
	db := liveDB(t)
	ctx := context.Background()
	cfg, err := pgxpool.ParseConfig(db.app)
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = 1
	p, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	st, err := pgtaint.New(ctx, p, pgtaint.Options{})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	k := flow.Key{Subject: "altered"}
	pii := flow.Taint{Level: flow.Confidential, Categories: []string{"guest.pii"}, From: []flow.TaintOrigin{{Category: "guest.pii", Tool: "guests", CallID: "c1"}}}
	if err := st.Join(ctx, k, now, time.Hour, flow.Taint{Level: flow.Internal}); err != nil {
		t.Fatal(err)
	}
	// An origin with an empty level: it decodes, but the merge writes it
	// back without the key, which the put function refuses.
	if _, err := pool(t, db.owner).Exec(ctx, `UPDATE `+pgtaint.DefaultTable+` SET taint = '{"level": "internal", "from": [{"tool": "x", "call_id": "y", "level": ""}]}' WHERE subject = 'altered'`); err != nil {
		t.Fatal(err)
	}
	if err := st.Join(ctx, k, now, time.Hour, pii); !errors.Is(err, flow.ErrTaintStore) || !strings.Contains(err.Error(), "a taint only grows") {
		t.Fatalf("join refused by the put function: %v, want ErrTaintStore from the put function", err)
	}
	k2 := flow.Key{Subject: "next"}
	if err := st.Join(ctx, k2, now, time.Hour, pii); err != nil {
		t.Fatalf("the join after a refused one: %v", err)
	}
	got, err := st.Load(ctx, k2, now, time.Hour)
	if err != nil || !slices.Equal(got.Categories, pii.Categories) {
		t.Fatalf("taint after the join: %+v %v", got, err)
	}
}
