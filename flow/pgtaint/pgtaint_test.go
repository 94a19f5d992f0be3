package pgtaint_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/url"
	"os"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tenantmcp/tenantmcp/flow"
	"github.com/tenantmcp/tenantmcp/flow/pgtaint"
	"github.com/tenantmcp/tenantmcp/internal/storetest"
	"github.com/tenantmcp/tenantmcp/redact"
	"github.com/tenantmcp/tenantmcp/scope"
)

// These tests need a live PostgreSQL (TENANTMCP_TEST_POSTGRES_DSN, a
// superuser); each creates its own database and role and drops them.

const policy = `{
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

type guestsOut struct {
	Guests []guest `json:"guests"`
}

type mailIn struct {
	To   string `json:"to"`
	Body string `json:"body"`
}

type empty struct{}

// replica is one server process's checker, with its own pool.
type replica struct {
	c     *flow.Checker
	pool  *pgxpool.Pool
	read  *flow.Tool
	mail  *flow.Tool
	clock *clock
}

type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// live is a database with the taint table installed by its owner (the
// test's superuser) and an application role granted the store's
// functions: the DSNs of both.
type live struct {
	app, owner, role string
}

// liveDB creates a database with the taint table and an application role
// that may use it through the functions only.
func liveDB(t testing.TB) live {
	t.Helper()
	admin := os.Getenv("TENANTMCP_TEST_POSTGRES_DSN")
	if admin == "" {
		t.Skip("set TENANTMCP_TEST_POSTGRES_DSN=postgres://postgres@127.0.0.1:5432/test?sslmode=disable to run the PostgreSQL taint store tests")
	}
	ctx := context.Background()
	var b [4]byte
	_, _ = rand.Read(b[:])
	name, role := "tm_taint_"+hex.EncodeToString(b[:]), "tm_taint_app_"+hex.EncodeToString(b[:])
	root, err := pgxpool.New(ctx, admin)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(root.Close)
	for _, s := range []string{"CREATE DATABASE " + name, "CREATE ROLE " + role + " LOGIN NOSUPERUSER NOBYPASSRLS"} {
		if _, err := root.Exec(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		if _, err := root.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
			t.Errorf("drop database: %v", err)
		}
		if _, err := root.Exec(ctx, "DROP ROLE IF EXISTS "+role); err != nil {
			t.Errorf("drop role: %v", err)
		}
	})
	u, _ := url.Parse(admin)
	u.Path = "/" + name
	owner, err := pgxpool.New(ctx, u.String())
	if err != nil {
		t.Fatal(err)
	}
	defer owner.Close()
	// Before Install, a store refuses to start.
	app := *u
	app.User = url.User(role)
	if p, err := pgxpool.New(ctx, app.String()); err == nil {
		_, err = pgtaint.New(ctx, p, pgtaint.Options{})
		p.Close()
		if !errors.Is(err, pgtaint.ErrConfig) {
			t.Fatalf("New without the table: %v, want ErrConfig", err)
		}
	}
	if err := pgtaint.Install(ctx, owner, pgtaint.Options{}); err != nil {
		t.Fatal(err)
	}
	if err := pgtaint.Grant(ctx, owner, pgtaint.Options{}, role); err != nil {
		t.Fatal(err)
	}
	return live{app: app.String(), owner: u.String(), role: role}
}

// pool opens a pool on dsn, closed at cleanup.
func pool(t *testing.T, dsn string) *pgxpool.Pool {
	t.Helper()
	p, err := pgxpool.New(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

// openStore opens a pool on dsn (closed at cleanup) and a Store on it.
func openStore(t *testing.T, dsn string) (*pgxpool.Pool, *pgtaint.Store) {
	t.Helper()
	pool := pool(t, dsn)
	st, err := pgtaint.New(context.Background(), pool, pgtaint.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return pool, st
}

func newReplica(t *testing.T, dsn string, clk *clock) *replica {
	t.Helper()
	pool, st := openStore(t, dsn)
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
	if r.mail, err = c.Register("mail", reflect.TypeFor[mailIn](), nil, flow.Decl{Level: flow.Public, Sink: &flow.Sink{Kind: flow.Email, DestArg: "to"}}); err != nil {
		t.Fatal(err)
	}
	return r
}

func (r *replica) readGuests(t *testing.T, subject, callID string) {
	t.Helper()
	ctx := context.Background()
	call, den := r.read.Begin(ctx, flow.CallInfo{Subject: subject, CallID: callID, Args: json.RawMessage(`{}`)})
	if den != nil {
		t.Fatal(den)
	}
	out := guestsOut{Guests: []guest{{Name: "Ann Lee", Email: "ann@guest.example"}}}
	red := redact.Default().ForScope(scope.Scope{})
	if _, err := red.JSON(out); err != nil {
		t.Fatal(err)
	}
	if err := call.Record(ctx, out, red.Report()); err != nil {
		t.Fatal(err)
	}
}

func (r *replica) send(subject, to string) *flow.Denial {
	args, _ := json.Marshal(mailIn{To: to, Body: "hi"})
	_, err := r.mail.Begin(context.Background(), flow.CallInfo{Subject: subject, CallID: "send", Args: args})
	if err == nil {
		return nil
	}
	var den *flow.Denial
	if !errors.As(err, &den) {
		return &flow.Denial{Rule: "not a *flow.Denial: " + err.Error()}
	}
	return den
}

// A subject reads guest data on one replica and calls the sink on
// another: denied, with the witness naming the read on the first. Both
// replicas restart: still denied. Past the policy's retain: allowed.
func TestReplicasShareTaintAcrossRestart(t *testing.T) {
	dsn := liveDB(t).app
	clk := &clock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	a, b := newReplica(t, dsn, clk), newReplica(t, dsn, clk)
	a.readGuests(t, "ann-reader", "read-on-a")
	den := b.send("ann-reader", "x@evil.example")
	if den == nil || den.Rule != flow.RuleCategory {
		t.Fatalf("sink on replica b after a read on replica a: %v, want %s", den, flow.RuleCategory)
	}
	if len(den.Witness.IntroducedBy) == 0 || den.Witness.IntroducedBy[0].CallID != "read-on-a" {
		t.Fatalf("witness does not name the read on replica a: %+v", den.Witness.IntroducedBy)
	}
	// The store is not denying everything: the staff address is allowed,
	// and another subject is clean.
	if den := b.send("ann-reader", "desk@staff.example"); den != nil {
		t.Fatalf("allowed destination denied: %v", den)
	}
	if den := b.send("someone-else", "x@evil.example"); den != nil {
		t.Fatalf("another subject inherited the taint: %v", den)
	}
	// Kill both (their pools and checkers go), start a fresh one.
	a.pool.Close()
	b.pool.Close()
	c := newReplica(t, dsn, clk)
	if den := c.send("ann-reader", "x@evil.example"); den == nil || den.Rule != flow.RuleCategory {
		t.Fatalf("after a restart: %v, want %s", den, flow.RuleCategory)
	}
	// Each use keeps the taint alive; idle past retain it is dropped.
	clk.add(59 * time.Minute)
	if den := c.send("ann-reader", "x@evil.example"); den == nil {
		t.Fatal("dropped before retain")
	}
	clk.add(61 * time.Minute)
	if den := c.send("ann-reader", "x@evil.example"); den != nil {
		t.Fatalf("past retain: %v", den)
	}
}

// TestStoreContract runs the shared flow.Store contract (the checks the
// in-memory and Redis stores pass) on two replicas' stores, each with its
// own pool, connected as the application role.
func TestStoreContract(t *testing.T) {
	db := liveDB(t)
	storetest.Run(t, func(t *testing.T) (flow.Store, flow.Store) {
		_, a := openStore(t, db.app)
		_, b := openStore(t, db.app)
		return a, b
	})
}

// With the database gone, a sink call is denied and a result's label
// cannot be recorded: fail closed, with no detail of the database.
func TestOutageFailsClosed(t *testing.T) {
	dsn := liveDB(t).app
	r := newReplica(t, dsn, &clock{now: time.Now()})
	r.pool.Close()
	den := r.send("ann-reader", "desk@staff.example")
	if den == nil || den.Rule != flow.RuleTaintStore {
		t.Fatalf("sink during an outage: %v, want %s", den, flow.RuleTaintStore)
	}
	call, _ := r.read.Begin(context.Background(), flow.CallInfo{Subject: "ann-reader", Args: json.RawMessage(`{}`)})
	if err := call.Record(context.Background(), guestsOut{}, redact.Report{}); !errors.Is(err, flow.ErrTaintStore) {
		t.Fatalf("Record during an outage: %v, want ErrTaintStore", err)
	}
}

// A join that adds nothing to the live taint (a session calling the same
// tool again) still marks it used, so it outlives the idle window, and a
// later join that does add lands on top of it.
func TestJoinThatAddsNothingKeepsTaintLive(t *testing.T) {
	dsn := liveDB(t).app
	ctx := context.Background()
	_, st := openStore(t, dsn)
	k := flow.Key{Subject: "repeat", Session: "mcp:s1"}
	a := flow.Taint{Level: flow.Confidential, Categories: []string{"guest.pii"}, Owners: []string{"ann@example.com"},
		From: []flow.TaintOrigin{{Category: "guest.pii", Tool: "guests", CallID: "c1"}}}
	t0 := time.Now()
	if err := st.Join(ctx, k, t0, time.Hour, a); err != nil {
		t.Fatal(err)
	}
	again := a
	again.From = []flow.TaintOrigin{{Category: "guest.pii", Tool: "guests", CallID: "c2"}}
	if err := st.Join(ctx, k, t0.Add(50*time.Minute), time.Hour, again); err != nil {
		t.Fatal(err)
	}
	// Idle for an hour counted from t0, but not from the second join.
	got, err := st.Load(ctx, k, t0.Add(90*time.Minute), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got.Categories, a.Categories) || !slices.Equal(got.Owners, a.Owners) || len(got.From) != 1 || got.From[0].CallID != "c1" {
		t.Fatalf("after a join that adds nothing: %+v, want the first join's taint, still live", got)
	}
	b := flow.Taint{Level: flow.Confidential, Categories: []string{"guest.pii"}, Owners: []string{"bob@example.com"},
		From: []flow.TaintOrigin{{Category: "guest.pii", Tool: "guests", CallID: "c3"}}}
	if err := st.Join(ctx, k, t0.Add(95*time.Minute), time.Hour, b); err != nil {
		t.Fatal(err)
	}
	got, err = st.Load(ctx, k, t0.Add(96*time.Minute), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got.Owners, []string{"ann@example.com", "bob@example.com"}) {
		t.Fatalf("a join adding an owner after a no-op join: owners %v, want both", got.Owners)
	}
	// Past the idle window the taint is dropped whole, no-op join or not.
	got, err = st.Load(ctx, k, t0.Add(4*time.Hour), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Categories) != 0 {
		t.Fatalf("taint idle past retain: %+v, want none", got)
	}
}
