package server_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tenantmcp/tenantmcp/builder"
	"github.com/tenantmcp/tenantmcp/claims"
	"github.com/tenantmcp/tenantmcp/flow"
	"github.com/tenantmcp/tenantmcp/guardedsql"
	"github.com/tenantmcp/tenantmcp/guardedsql/postgres"
	"github.com/tenantmcp/tenantmcp/internal/cutproxy"
	"github.com/tenantmcp/tenantmcp/internal/logbuf"
	"github.com/tenantmcp/tenantmcp/server"
)

// probe GETs url and returns the status code and the decoded readiness
// body (empty for /healthz).
func probe(t *testing.T, url string) (int, server.Readiness) {
	t.Helper()
	code, body := httpGet(t, url)
	var r server.Readiness
	if strings.HasSuffix(url, server.ReadyPath) {
		if err := json.Unmarshal(body, &r); err != nil {
			t.Fatalf("%s: body %q: %v", url, body, err)
		}
	}
	return code, r
}

func serveHTTP(t *testing.T, srv *server.Server, o server.HTTPOptions) string {
	t.Helper()
	if o.ResourceURL == "" {
		o.ResourceURL = "https://notes.test/mcp"
	}
	h, err := srv.Handler(o)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(h)
	t.Cleanup(hs.Close)
	return hs.URL
}

// Readiness on the embedded database: ready with keys and a database; not
// ready when the deployment asked for the egress guard and none is
// installed, when an application check fails, or when the verifier has no
// signing keys yet. Liveness stays 200 throughout.
func TestReadinessChecks(t *testing.T) {
	f := newFixture(t, nil)
	base := serveHTTP(t, f.srv, server.HTTPOptions{})
	if code, r := probe(t, base+server.ReadyPath); code != 200 || !r.Ready || r.Checks["jwks"] != "ok" || r.Checks["database"] != "ok" {
		t.Fatalf("ready: %d %+v", code, r)
	}
	if code, _ := probe(t, base+server.HealthPath); code != 200 {
		t.Fatalf("healthz: %d", code)
	}

	appErr := errors.New("cache at 10.9.8.7 down")
	notReady := serveHTTP(t, f.srv, server.HTTPOptions{Health: server.HealthOptions{
		RequireEgress: true,
		Checks:        []server.ReadinessCheck{{Name: "cache", Check: func(context.Context) error { return appErr }}},
	}})
	code, r := probe(t, notReady+server.ReadyPath)
	if code != http.StatusServiceUnavailable || r.Ready || r.Checks["egress"] != "not installed" || r.Checks["cache"] != "failed" {
		t.Fatalf("egress required, app check failing: %d %+v", code, r)
	}

	// A verifier whose JWKS endpoint never answers has no keys.
	down := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(503) }))
	t.Cleanup(down.Close)
	v, err := claims.New(claims.Options{Issuer: f.issuer.URL, Audience: []string{f.issuer.Audience}, JWKSURL: down.URL,
		Mapping: claims.Mapping{Patterns: []string{"org:{org}"}}, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { v.Close() })
	g := newFixture(t, func(o *server.Options) { o.Verifier = v })
	noKeys := serveHTTP(t, g.srv, server.HTTPOptions{})
	if code, r := probe(t, noKeys+server.ReadyPath); code != http.StatusServiceUnavailable || r.Checks["jwks"] != "no signing keys" {
		t.Fatalf("no JWKS keys: %d %+v", code, r)
	}
	if code, _ := probe(t, noKeys+server.HealthPath); code != 200 {
		t.Fatalf("healthz without keys: %d", code)
	}
}

// pgNotes provisions, in the admin DSN's database, a schema with the notes
// table of testSchema owned by its own role, seeded with two tenants whose
// ids interleave, with row-level security applied, and an application
// role. It returns the admin configuration of the application role and the
// owner's pool. Everything is dropped at cleanup.
// notesKey signs the scope context of the PostgreSQL notes databases.
var notesKey = func() postgres.Key {
	k, err := postgres.NewKey("notes")
	if err != nil {
		panic(err)
	}
	return k
}()

func pgNotes(t *testing.T) (app *pgxpool.Config, owner *pgxpool.Pool) {
	t.Helper()
	dsn := os.Getenv("TENANTMCP_TEST_POSTGRES_DSN")
	if dsn == "" {
		t.Skip("set TENANTMCP_TEST_POSTGRES_DSN to run (a superuser DSN, e.g. postgres://postgres@127.0.0.1:5432/test?sslmode=disable; the test creates and drops its own schema and roles)")
	}
	ctx := context.Background()
	adminCfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	root, err := pgxpool.NewWithConfig(ctx, adminCfg)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	b := make([]byte, 6)
	rand.Read(b)
	id := hex.EncodeToString(b)
	schema, ownerRole, appRole := "tm_srv_"+id, "tm_srv_owner_"+id, "tm_srv_app_"+id
	pw := hex.EncodeToString(b) + "pw"
	run := func(p *pgxpool.Pool, stmts ...string) {
		t.Helper()
		for _, s := range stmts {
			if _, err := p.Exec(ctx, s); err != nil {
				t.Fatalf("%s: %v", s, err)
			}
		}
	}
	run(root,
		`CREATE ROLE `+ownerRole+` LOGIN NOSUPERUSER NOBYPASSRLS PASSWORD '`+pw+`'`,
		`CREATE ROLE `+appRole+` LOGIN NOSUPERUSER NOBYPASSRLS PASSWORD '`+pw+`'`,
		`CREATE SCHEMA `+schema+` AUTHORIZATION `+ownerRole,
		`GRANT USAGE ON SCHEMA `+schema+` TO `+appRole)
	t.Cleanup(func() {
		root, err := pgxpool.NewWithConfig(context.Background(), adminCfg)
		if err != nil {
			t.Errorf("cleanup: %v", err)
			return
		}
		defer root.Close()
		// The app role's sessions hold their scope counters (temporary
		// sequences of the owner) until their backends exit.
		_, _ = root.Exec(context.Background(), `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = ANY($1)`, []string{appRole, ownerRole})
		for _, s := range []string{`DROP SCHEMA IF EXISTS ` + schema + ` CASCADE`, `DROP ROLE IF EXISTS ` + appRole, `DROP ROLE IF EXISTS ` + ownerRole} {
			_, err := root.Exec(context.Background(), s)
			for end := time.Now().Add(10 * time.Second); err != nil && time.Now().Before(end); _, err = root.Exec(context.Background(), s) {
				time.Sleep(50 * time.Millisecond)
			}
			if err != nil {
				t.Errorf("cleanup: %s: %v", s, err)
			}
		}
	})
	cfgFor := func(user string) *pgxpool.Config {
		c := adminCfg.Copy()
		c.ConnConfig.User, c.ConnConfig.Password = user, pw
		c.ConnConfig.RuntimeParams["search_path"] = schema
		c.MinConns = 0
		return c
	}
	owner, err = pgxpool.NewWithConfig(ctx, cfgFor(ownerRole))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(owner.Close)
	run(owner,
		`CREATE TABLE notes (id BIGINT PRIMARY KEY, org_id TEXT NOT NULL, body TEXT NOT NULL)`,
		`INSERT INTO notes VALUES (1, 'north', 'n1'), (2, 'south', 's1'), (3, 'north', 'n2'), (4, 'south', 's2')`,
		`GRANT SELECT, INSERT, UPDATE, DELETE ON notes TO `+appRole)
	if err := postgres.ApplyRLS(ctx, owner, testSchema, postgres.Options{Key: notesKey}); err != nil {
		t.Fatal(err)
	}
	return cfgFor(appRole), owner
}

// The readiness probe through a PostgreSQL outage, simulated by cutting a
// loopback TCP proxy between the server's pool and the shared PostgreSQL:
// ready before, not ready (database "unavailable") during, ready again
// within seconds after; calls during the outage get the retryable
// CodeUnavailable without a word about the database, the error log stays
// at its burst, and no call ever sees the other tenant's rows. Then an RLS
// policy switched off behind the server's back makes it unready too.
func TestReadinessThroughPostgresOutage(t *testing.T) {
	appCfg, owner := pgNotes(t)
	ctx := context.Background()
	proxy, err := cutproxy.Start(net.JoinHostPort(appCfg.ConnConfig.Host, strconv.Itoa(int(appCfg.ConnConfig.Port))))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { proxy.Close() })
	host, port, _ := net.SplitHostPort(proxy.Addr)
	p, _ := strconv.Atoi(port)
	appCfg.ConnConfig.Host, appCfg.ConnConfig.Port = host, uint16(p)
	appCfg.ConnConfig.ConnectTimeout = 2 * time.Second
	pool, err := pgxpool.NewWithConfig(ctx, appCfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	db, err := postgres.New(ctx, pool, testSchema, guardedsql.Options{Engine: postgres.Options{Key: notesKey}})
	if err != nil {
		t.Fatal(err)
	}
	tr := &recordingTracer{}
	var log logbuf.Buffer
	f := newFixture(t, func(o *server.Options) {
		o.DB = db
		o.Tracer = tr
		o.Logger = slog.New(slog.NewTextHandler(&log, nil))
	})
	type Note struct {
		ID   int64  `json:"id"`
		Body string `json:"body"`
	}
	type Out struct {
		Notes []Note `json:"notes"`
	}
	notes := testSchema.Table("notes")
	q := builder.Must(builder.Select(notes.Col("id"), notes.Col("body")).From(notes).OrderBy(notes.Col("id").Asc()).Build())
	err = server.AddTool(f.srv, server.Tool{Name: "notes"}, func(ctx context.Context, db *guardedsql.DB, _ empty) (Out, error) {
		rows, err := guardedsql.All(ctx, db, q, func(r *guardedsql.Rows) (Note, error) {
			var n Note
			return n, r.Scan(&n.ID, &n.Body)
		})
		return Out{rows}, err
	})
	if err != nil {
		t.Fatal(err)
	}
	base := serveHTTP(t, f.srv, server.HTTPOptions{Health: server.HealthOptions{CacheFor: -1}})
	cs := f.session(t, "ann", "org:north")
	call := func() (*mcp.CallToolResult, error) {
		return cs.CallTool(ctx, &mcp.CallToolParams{Name: "notes", Arguments: map[string]any{}})
	}
	wantNorth := func(what string) {
		t.Helper()
		res, err := call()
		if err != nil || res.IsError {
			t.Fatalf("%s: %v %+v", what, err, res)
		}
		raw, _ := json.Marshal(res.StructuredContent)
		if string(raw) != `{"notes":[{"body":"n1","id":1},{"body":"n2","id":3}]}` {
			t.Fatalf("%s: north sees %s", what, raw)
		}
	}

	if code, r := probe(t, base+server.ReadyPath); code != 200 || !r.Ready || r.Checks["rls"] != "ok" {
		t.Fatalf("before the outage: %d %+v", code, r)
	}
	wantNorth("before the outage")

	proxy.Cut()
	cut := time.Now()
	code, r := probe(t, base+server.ReadyPath)
	t.Logf("readiness %d %v %s after the cut", code, r.Checks, time.Since(cut).Round(time.Millisecond))
	if code != http.StatusServiceUnavailable || r.Ready || r.Checks["database"] != "unavailable" {
		t.Fatalf("during the outage: %d %+v, want 503 with the database unavailable", code, r)
	}
	if code, _ := probe(t, base+server.HealthPath); code != 200 {
		t.Fatalf("healthz during the outage: %d", code)
	}
	const outageCalls = 50
	for i := range outageCalls {
		_, err := call()
		var we *jsonrpc.Error
		if !errors.As(err, &we) || we.Code != server.CodeUnavailable {
			t.Fatalf("call %d during the outage: %v, want CodeUnavailable", i, err)
		}
		for _, part := range []string{appCfg.ConnConfig.User, port, "postgres", "pgx", "127.0.0.1", "connect"} {
			if strings.Contains(we.Message+string(we.Data), part) {
				t.Fatalf("the retryable error reveals %q: %s %s", part, we.Message, we.Data)
			}
		}
	}
	if n := countLines(log.String(), "tool call failed: database unavailable"); n > server.DefaultLogBurst {
		t.Errorf("%d error lines for %d failed calls, want at most %d", n, outageCalls, server.DefaultLogBurst)
	}

	proxy.Restore()
	restored := time.Now()
	for {
		code, r = probe(t, base+server.ReadyPath)
		if code == 200 && r.Ready {
			break
		}
		if time.Since(restored) > 10*time.Second {
			t.Fatalf("still not ready 10 s after the database came back: %d %+v", code, r)
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("ready again %s after the database came back", time.Since(restored).Round(time.Millisecond))
	wantNorth("after the outage")

	// What the call metrics count (package server/otelserver turns these
	// into tenantmcp_tool_calls_total).
	if got := tr.outcomes("notes"); got[server.OutcomeUnavailable] != outageCalls || got[server.OutcomeOK] != 2 {
		t.Errorf("calls by outcome %v, want %d unavailable and 2 ok", got, outageCalls)
	}

	// The RLS check is current: policies switched off after start-up make
	// the server unready while the database itself answers.
	if _, err := owner.Exec(ctx, `ALTER TABLE notes NO FORCE ROW LEVEL SECURITY`); err != nil {
		t.Fatal(err)
	}
	code, r = probe(t, base+server.ReadyPath)
	if code != http.StatusServiceUnavailable || r.Checks["database"] != "ok" || r.Checks["rls"] != "failed" {
		t.Fatalf("RLS not forced: %d %+v, want 503 with rls failed", code, r)
	}
	if keys := slices.Sorted(func(yield func(string) bool) {
		for k := range r.Checks {
			if !yield(k) {
				return
			}
		}
	}); !slices.Equal(keys, []string{"database", "jwks", "rls"}) {
		t.Errorf("checks %v", keys)
	}
}

// Probe and metrics paths that collide with another endpoint are a
// configuration error, not a panic.
func TestProbePathsMustBeFree(t *testing.T) {
	f := newFixture(t, nil)
	metrics := http.NotFoundHandler()
	for _, o := range []server.HTTPOptions{
		{ResourceURL: "https://notes.test/healthz"},
		{ResourceURL: "https://notes.test/mcp", MetricsPath: "/mcp", Metrics: metrics},
		{ResourceURL: "https://notes.test/mcp", MetricsPath: server.ReadyPath, Metrics: metrics},
		{ResourceURL: "https://notes.test/mcp", MetricsPath: "metrics", Metrics: metrics},
		{ResourceURL: "https://notes.test/mcp", MetricsPath: "/metrics"}, // nothing to serve there
		{ResourceURL: "https://notes.test/mcp", Health: server.HealthOptions{Timeout: -time.Second}},
	} {
		if _, err := f.srv.Handler(o); !errors.Is(err, server.ErrConfig) {
			t.Errorf("%+v: err = %v, want ErrConfig", o, err)
		}
	}
	if _, err := f.srv.Handler(server.HTTPOptions{ResourceURL: "https://notes.test/healthz", Health: server.HealthOptions{Disable: true}}); err != nil {
		t.Errorf("MCP at /healthz with the probes disabled: %v", err)
	}
}

// downable is the up/down switch of a shared store in these tests.
type downable struct{ down atomic.Bool }

func (d *downable) Ping(context.Context) error {
	if d.down.Load() {
		return errors.New("dial tcp 10.0.0.9:6379: connection refused")
	}
	return nil
}

// pingTaints is a taint store that can be pinged (as the Redis and
// PostgreSQL ones are).
type pingTaints struct {
	flow.Store
	*downable
}

// pingReplays is a consent replay store that can be pinged.
type pingReplays struct {
	server.ReplayStore
	*downable
}

// TestReadinessPingsSharedStores (issue 29 §4): readiness pings the flow
// taint store and the consent replay store when they implement Pinger;
// either down makes the replica not ready (503), naming the check, because
// both fail closed (every call that needs them is refused). Up again, it
// is ready. On main readiness never asked them: 200 while every flow
// checked call failed.
func TestReadinessPingsSharedStores(t *testing.T) {
	taints, replays := &downable{}, &downable{}
	pol, err := flow.ParsePolicy("policy.json", []byte(`{"version": 1}`))
	if err != nil {
		t.Fatal(err)
	}
	fc, err := flow.New(pol, flow.Options{Store: pingTaints{flow.NewMemoryStore(), taints}})
	if err != nil {
		t.Fatal(err)
	}
	f := newFixture(t, func(o *server.Options) {
		o.Flow = fc
		o.Input.Replays = pingReplays{server.NewMemoryReplays(), replays}
	})
	base := serveHTTP(t, f.srv, server.HTTPOptions{Health: server.HealthOptions{CacheFor: -1}})
	if code, r := probe(t, base+server.ReadyPath); code != 200 || !r.Ready || r.Checks["taints"] != "ok" || r.Checks["replays"] != "ok" {
		t.Fatalf("stores up: %d %+v", code, r)
	}
	for _, c := range []struct {
		name string
		d    *downable
	}{{"taints", taints}, {"replays", replays}} {
		c.d.down.Store(true)
		code, r := probe(t, base+server.ReadyPath)
		if code != http.StatusServiceUnavailable || r.Ready || r.Checks[c.name] != "unavailable" || len(r.Degraded) != 0 {
			t.Errorf("%s store down: %d %+v, want 503 with %s unavailable", c.name, code, r, c.name)
		}
		c.d.down.Store(false)
		if code, r := probe(t, base+server.ReadyPath); code != 200 || !r.Ready {
			t.Errorf("%s store back: %d %+v", c.name, code, r)
		}
	}
}
