package pgtaint_test

import (
	"context"
	"encoding/json"
	"reflect"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tenantmcp/tenantmcp/flow"
	"github.com/tenantmcp/tenantmcp/flow/pgtaint"
	"github.com/tenantmcp/tenantmcp/redact"
	"github.com/tenantmcp/tenantmcp/scope"
)

// The taint store's share of a P5-like call on PostgreSQL: one subject
// calling a read tool whose result is already in its taint (steady state),
// and an allowed sink call. Each reports the statements it sends per call.
// They need TENANTMCP_TEST_POSTGRES_DSN like the tests.

func benchReplica(b *testing.B) (*replica, *statements) {
	b.Helper()
	db := liveDB(b).app
	ctx := context.Background()
	cfg, err := pgxpool.ParseConfig(db)
	if err != nil {
		b.Fatal(err)
	}
	tr := &statements{}
	cfg.ConnConfig.Tracer = tr
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(pool.Close)
	return replicaOn(b, pool, &clock{now: time.Now()}), tr
}

// replicaOn is a checker on a store on pool: guests (guest data) and mail,
// a sink whose results are internal (the default level).
func replicaOn(b *testing.B, pool *pgxpool.Pool, clk *clock) *replica {
	st, err := pgtaint.New(context.Background(), pool, pgtaint.Options{})
	if err != nil {
		b.Fatal(err)
	}
	p, err := flow.ParsePolicy("policy.json", []byte(policy))
	if err != nil {
		b.Fatal(err)
	}
	c, err := flow.New(p, flow.Options{Store: st, Now: clk.Now})
	if err != nil {
		b.Fatal(err)
	}
	r := &replica{c: c, pool: pool, clock: clk}
	if r.read, err = c.Register("guests", reflect.TypeFor[empty](), reflect.TypeFor[guestsOut](), flow.Decl{}); err != nil {
		b.Fatal(err)
	}
	if r.mail, err = c.Register("mail", reflect.TypeFor[mailIn](), nil, flow.Decl{Sink: &flow.Sink{Kind: flow.Email, DestArg: "to"}}); err != nil {
		b.Fatal(err)
	}
	return r
}

func (c *clock) set(t time.Time) { c.mu.Lock(); defer c.mu.Unlock(); c.now = t }

func BenchmarkRecordHeldLive(b *testing.B) {
	r, tr := benchReplica(b)
	ctx := context.Background()
	out := guestsOut{Guests: []guest{{Name: "Ann Lee", Email: "ann@guest.example"}}}
	red := redact.Default().ForScope(scope.Scope{})
	if _, err := red.JSON(out); err != nil {
		b.Fatal(err)
	}
	rep := red.Report()
	ci := flow.CallInfo{Subject: "p5", CallID: "c", Args: json.RawMessage(`{}`)}
	call, err := r.read.Begin(ctx, ci)
	if err != nil {
		b.Fatal(err)
	}
	if err := call.Record(ctx, out, rep); err != nil {
		b.Fatal(err)
	}
	n0 := tr.n.Load()
	for b.Loop() {
		r.clock.set(time.Now())
		call, err := r.read.Begin(ctx, ci)
		if err != nil {
			b.Fatal(err)
		}
		if err := call.Record(ctx, out, rep); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(tr.n.Load()-n0)/float64(b.N), "stmts/op")
}

func BenchmarkSinkCallLive(b *testing.B) {
	r, tr := benchReplica(b)
	ctx := context.Background()
	args := json.RawMessage(`{"to":"desk@staff.example","body":"hi"}`)
	ci := flow.CallInfo{Subject: "p5", CallID: "c", Args: args}
	rep := redact.Report{}
	// The subject has read guest data: the sink's result adds nothing.
	call, err := r.read.Begin(ctx, flow.CallInfo{Subject: "p5", CallID: "r", Args: json.RawMessage(`{}`)})
	if err != nil {
		b.Fatal(err)
	}
	guests := guestsOut{Guests: []guest{{Name: "Ann Lee", Email: "ann@guest.example"}}}
	if err := call.Record(ctx, guests, rep); err != nil {
		b.Fatal(err)
	}
	n0 := tr.n.Load()
	for b.Loop() {
		r.clock.set(time.Now())
		call, err := r.mail.Begin(ctx, ci)
		if err != nil {
			b.Fatal(err)
		}
		if err := call.Record(ctx, struct{}{}, rep); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(tr.n.Load()-n0)/float64(b.N), "stmts/op")
}

// BenchmarkJoinNewKeyLive is a join that grows a taint: each call's key is
// new (a subject's first categorised result).
func BenchmarkJoinNewKeyLive(b *testing.B) {
	r, tr := benchReplica(b)
	ctx := context.Background()
	st, err := pgtaint.New(ctx, r.pool, pgtaint.Options{})
	if err != nil {
		b.Fatal(err)
	}
	add := flow.Taint{Level: flow.Confidential, Categories: []string{"guest.pii"}, From: []flow.TaintOrigin{{Category: "guest.pii", Tool: "guests", CallID: "c"}}}
	now := time.Now()
	if err := st.Join(ctx, flow.Key{Subject: "warm"}, now, time.Hour, add); err != nil { // the first sweep
		b.Fatal(err)
	}
	n0, i := tr.n.Load(), 0
	for b.Loop() {
		i++
		if err := st.Join(ctx, flow.Key{Subject: "s" + strconv.Itoa(i)}, now, time.Hour, add); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(tr.n.Load()-n0)/float64(b.N), "roundtrips/op")
}
