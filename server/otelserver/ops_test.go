package otelserver_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tenantmcp/tenantmcp/claims"
	"github.com/tenantmcp/tenantmcp/claims/devtoken"
	"github.com/tenantmcp/tenantmcp/guardedsql"
	"github.com/tenantmcp/tenantmcp/internal/rpctest"
	"github.com/tenantmcp/tenantmcp/scope"
	"github.com/tenantmcp/tenantmcp/scope/scopetest"
	"github.com/tenantmcp/tenantmcp/server"
	"github.com/tenantmcp/tenantmcp/server/otelserver"
)

// The private registry serves the Go runtime and process metrics by
// default (a soak reads go_goroutines from /metrics), and leaves them out
// when asked.
func TestRuntimeMetrics(t *testing.T) {
	tel, err := otelserver.New(otelserver.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tel.Shutdown(context.Background()) })
	// A second Telemetry in the same process must not collide with the
	// first's collectors (each has its own registry).
	tel2, err := otelserver.New(otelserver.Options{})
	if err != nil {
		t.Fatalf("second Telemetry: %v", err)
	}
	t.Cleanup(func() { tel2.Shutdown(context.Background()) })
	hs := httptest.NewServer(tel.Handler())
	t.Cleanup(hs.Close)
	body := scrape(t, hs.URL)
	g, ok := sample(body, "go_goroutines", map[string]string{})
	if !ok || g < 1 {
		t.Errorf("go_goroutines = %v (present %v), want >= 1", g, ok)
	}
	if _, ok := sample(body, "go_memstats_heap_alloc_bytes", map[string]string{}); !ok {
		t.Error("go_memstats_heap_alloc_bytes missing")
	}
	if runtime.GOOS == "linux" {
		for _, name := range []string{"process_resident_memory_bytes", "process_open_fds"} {
			if v, ok := sample(body, name, map[string]string{}); !ok || v <= 0 {
				t.Errorf("%s = %v (present %v), want > 0", name, v, ok)
			}
		}
	}

	off, err := otelserver.New(otelserver.Options{NoRuntimeMetrics: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { off.Shutdown(context.Background()) })
	hs2 := httptest.NewServer(off.Handler())
	t.Cleanup(hs2.Close)
	if body := scrape(t, hs2.URL); strings.Contains(body, "go_goroutines") || strings.Contains(body, "process_open_fds") {
		t.Errorf("NoRuntimeMetrics: runtime metrics served:\n%s", body)
	}
}

// tenantValues returns the distinct values of the tenant label of metric
// name in a Prometheus text body, with the sum of each one's samples.
func tenantValues(body, name string) map[string]float64 {
	out := map[string]float64{}
	for _, line := range strings.Split(body, "\n") {
		series, value, ok := strings.Cut(line, " ")
		if !ok || strings.HasPrefix(line, "#") {
			continue
		}
		n, ls, _ := strings.Cut(series, "{")
		if n != name {
			continue
		}
		for _, l := range splitLabels(strings.TrimSuffix(ls, "}")) {
			if v, ok := strings.CutPrefix(l, "tenant="); ok {
				f, _ := strconv.ParseFloat(value, 64)
				uq, _ := strconv.Unquote(v)
				out[uq] += f
			}
		}
	}
	return out
}

// With TenantTopN, 10,000 tenants yield at most N+1 tenant values per
// metric: the N busiest tenants by their pseudonym, everyone else
// "other"; no call is lost from the counts and no tenant id is served.
func TestTenantTopNBoundsCardinality(t *testing.T) {
	const n = 5
	tel, err := otelserver.New(otelserver.Options{TenantTopN: n})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tel.Shutdown(context.Background()) })
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(1, 2))
	scopeOf := func(id string) scope.Scope {
		return scopetest.New("subject-"+id, []scope.Grant{{Level: "org", ID: id}})
	}
	var heavy []scope.Scope
	for i := range n {
		heavy = append(heavy, scopeOf(fmt.Sprintf("heavy-tenant-%d", i)))
	}
	// 10,000 light tenants of 1 to 3 calls each, and 5 heavy tenants of 300
	// calls each, interleaved at random.
	var calls []scope.Scope
	for i := range 10000 {
		sc := scopeOf(fmt.Sprintf("light-tenant-%05d", i))
		for range 1 + rng.IntN(3) {
			calls = append(calls, sc)
		}
	}
	for _, sc := range heavy {
		for range 300 {
			calls = append(calls, sc)
		}
	}
	rng.Shuffle(len(calls), func(i, j int) { calls[i], calls[j] = calls[j], calls[i] })
	for _, sc := range calls {
		tel.TraceCallEnd(ctx, server.TraceCallEndData{Tool: "ping", Outcome: server.OutcomeOK, Scope: sc, Duration: time.Millisecond})
	}
	// A refusal whose context carries the scope is labelled too.
	tel.TraceLimit(scopetest.NewContext(ctx, heavy[0]), &server.LimitError{Rule: server.RuleTenantRate, Method: "tools/call", Tool: "ping"})

	hs := httptest.NewServer(tel.Handler())
	t.Cleanup(hs.Close)
	body := scrape(t, hs.URL)
	vals := tenantValues(body, "tenantmcp_tool_calls_total")
	if len(vals) > n+1 {
		t.Fatalf("%d tenant values on tenantmcp_tool_calls_total, want <= %d: %v", len(vals), n+1, vals)
	}
	if got := tenantValues(body, "tenantmcp_tool_call_duration_seconds_count"); len(got) > n+1 {
		t.Errorf("%d tenant values on the latency histogram, want <= %d", len(got), n+1)
	}
	total := 0.0
	for _, v := range vals {
		total += v
	}
	if int(total) != len(calls) {
		t.Errorf("counted %v calls, want %d", total, len(calls))
	}
	if vals[otelserver.OtherTenant] == 0 {
		t.Errorf("no %q series: %v", otelserver.OtherTenant, vals)
	}
	for i, sc := range heavy {
		p := otelserver.Pseudonym(sc, nil)
		// Its first calls, before it was known busy, count as "other".
		if vals[p] < 200 {
			t.Errorf("heavy tenant %d (%s): %v calls under its own label, want most of its 300; labels %v", i, p, vals[p], vals)
		}
	}
	if got := tenantValues(body, "tenantmcp_rate_limit_rejections_total"); got[otelserver.Pseudonym(heavy[0], nil)] != 1 {
		t.Errorf("rate-limit rejection by tenant = %v, want 1 for heavy tenant 0", got)
	}
	if strings.Contains(body, "tenant-") || strings.Contains(body, "subject-") {
		t.Error("/metrics names a tenant or subject id")
	}
	t.Logf("tenant values: %v", vals)

	// Every tenant busy: 10,000 tenants of 25 calls each still make at
	// most N+1 values, the bound does not depend on who calls how much.
	busy, err := otelserver.New(otelserver.Options{TenantTopN: n, NoRuntimeMetrics: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { busy.Shutdown(context.Background()) })
	for i := range 10000 {
		sc := scopeOf(fmt.Sprintf("busy-tenant-%05d", i))
		for range 25 {
			busy.TraceCallEnd(ctx, server.TraceCallEndData{Tool: "ping", Outcome: server.OutcomeOK, Scope: sc})
		}
	}
	bs := httptest.NewServer(busy.Handler())
	t.Cleanup(bs.Close)
	if got := tenantValues(scrape(t, bs.URL), "tenantmcp_tool_calls_total"); len(got) != n+1 {
		t.Errorf("10,000 busy tenants: %d tenant values, want %d (N named + other): %v", len(got), n+1, got)
	}
}

// The default label is a pseudonym of the root tenants: the same for
// grants within one root, never the id, different under a key.
func TestTenantPseudonym(t *testing.T) {
	root := scopetest.New("ann", []scope.Grant{{Level: "chain", ID: "acme"}})
	within := scopetest.New("bob", []scope.Grant{{Level: "hotel", ID: "acme-paris", Within: []scope.Grant{{Level: "chain", ID: "acme"}}}})
	other := scopetest.New("ann", []scope.Grant{{Level: "chain", ID: "globex"}})
	p := otelserver.Pseudonym(root, nil)
	if !strings.HasPrefix(p, "t_") || len(p) != 14 || strings.Contains(p, "acme") {
		t.Errorf("Pseudonym = %q", p)
	}
	if q := otelserver.Pseudonym(within, nil); q != p {
		t.Errorf("a grant within acme: %q, want acme's %q", q, p)
	}
	if q := otelserver.Pseudonym(other, nil); q == p {
		t.Errorf("globex and acme share %q", p)
	}
	k1, k2 := otelserver.Pseudonym(root, []byte("key-one-0123456789abcdef")), otelserver.Pseudonym(root, []byte("key-two-0123456789abcdef"))
	if k1 == p || k1 == k2 {
		t.Errorf("keyed pseudonyms %q %q vs unkeyed %q", k1, k2, p)
	}
	if _, err := otelserver.New(otelserver.Options{TenantTopN: -1}); !errors.Is(err, server.ErrConfig) {
		t.Errorf("TenantTopN -1: %v, want ErrConfig", err)
	}
}

// LimitDegraded drives the gauge tenantmcp_limit_degraded (0 from the
// start, 1 during an outage of the shared rate store, 0 after).
func TestLimitDegradedGauge(t *testing.T) {
	tel, err := otelserver.New(otelserver.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tel.Shutdown(context.Background()) })
	hs := httptest.NewServer(tel.Handler())
	t.Cleanup(hs.Close)
	gauge := func() float64 {
		t.Helper()
		body := scrape(t, hs.URL)
		v, ok := sample(body, "tenantmcp_limit_degraded", map[string]string{})
		if !ok {
			t.Fatalf("no tenantmcp_limit_degraded:\n%s", body)
		}
		return v
	}
	if v := gauge(); v != 0 {
		t.Errorf("at start: %v, want 0", v)
	}
	ctx := context.Background()
	// The signature of server.Limits.OnDegraded (issue 29's seam), so the
	// method is wired as Limits{OnDegraded: tel.LimitDegraded}.
	var onDegraded func(context.Context, bool) = tel.LimitDegraded
	onDegraded(ctx, true)
	if v := gauge(); v != 1 {
		t.Errorf("degraded: %v, want 1", v)
	}
	onDegraded(ctx, false)
	if v := gauge(); v != 0 {
		t.Errorf("recovered: %v, want 0", v)
	}
	var none *otelserver.Telemetry
	none.LimitDegraded(ctx, true) // a nil Telemetry records nothing
}

// Who is limited: over streamable HTTP, a tenant over its rate is refused
// with 429 at the HTTP front, and the refusal is counted under that
// tenant's bounded label (its pseudonym), never its id; another tenant's
// calls are counted under its own.
func TestTenantTopNLabelsLimitedTenant(t *testing.T) {
	tel, err := otelserver.New(otelserver.Options{TenantTopN: 3})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tel.Shutdown(context.Background()) })
	const aud = "https://notes.test/mcp"
	is, err := devtoken.Start(devtoken.Options{Addr: "127.0.0.1:0", Audience: aud, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { is.Close() })
	v, err := claims.New(claims.Options{Issuer: is.URL, Audience: []string{aud}, JWKS: is.JWKS(),
		Mapping: claims.Mapping{Patterns: []string{"org:{org}"}}})
	if err != nil {
		t.Fatal(err)
	}
	db, err := guardedsql.Open(context.Background(), "sqlite::memory:", testSchema, guardedsql.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	// A burst of 25 per tenant and (nearly) no refill: the 26th call of a
	// tenant is refused.
	srv, err := server.New(server.Options{Name: "notes", Verifier: v, DB: db, Levels: []string{"org"}, Tracer: tel,
		Limits:      server.Limits{PerTenant: server.Limit{Rate: 0.001, Burst: 25}},
		AuditLogger: slog.New(slog.DiscardHandler), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	if err := server.AddTool(srv, server.Tool{Name: "ping"}, func(context.Context, *guardedsql.DB, empty) (empty, error) { return empty{}, nil }); err != nil {
		t.Fatal(err)
	}
	h, err := srv.Handler(server.HTTPOptions{ResourceURL: aud})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(h)
	t.Cleanup(hs.Close)
	endpoint := hs.URL + "/mcp"
	call := func(sub, org string, n int) (ok, limited int) {
		tok, err := is.Mint(devtoken.Token{Subject: sub, Groups: []string{"org:" + org}})
		if err != nil {
			t.Fatal(err)
		}
		for range n {
			r, err := rpctest.Call(context.Background(), endpoint, tok, "ping", map[string]any{})
			switch {
			case err != nil:
				t.Fatal(err)
			case r.Status == http.StatusTooManyRequests:
				limited++
			case r.OK():
				ok++
			default:
				t.Fatalf("unexpected reply %+v", r)
			}
		}
		return ok, limited
	}
	if ok, lim := call("subject-noisy-1", "tenant-noisy-77", 30); ok != 25 || lim != 5 {
		t.Fatalf("noisy tenant: %d ok, %d limited; want 25, 5", ok, lim)
	}
	if ok, lim := call("subject-quiet-1", "tenant-quiet-42", 21); ok != 21 || lim != 0 {
		t.Fatalf("quiet tenant: %d ok, %d limited; want 21, 0", ok, lim)
	}
	noisy := otelserver.Pseudonym(scopetest.New("x", []scope.Grant{{Level: "org", ID: "tenant-noisy-77"}}), nil)
	quiet := otelserver.Pseudonym(scopetest.New("x", []scope.Grant{{Level: "org", ID: "tenant-quiet-42"}}), nil)
	ms := httptest.NewServer(tel.Handler())
	t.Cleanup(ms.Close)
	body := scrape(t, ms.URL)
	rej := tenantValues(body, "tenantmcp_rate_limit_rejections_total")
	if rej[noisy] != 5 || len(rej) != 1 {
		t.Errorf("rate-limit rejections by tenant = %v, want 5 under the noisy tenant's label %s only", rej, noisy)
	}
	calls := tenantValues(body, "tenantmcp_tool_calls_total")
	if calls[quiet] < 1 || calls[noisy] < 1 {
		t.Errorf("calls by tenant = %v, want both tenants' labels (%s, %s)", calls, noisy, quiet)
	}
	if strings.Contains(body, "tenant-noisy") || strings.Contains(body, "subject-") {
		t.Error("/metrics names a tenant or subject id")
	}
	t.Logf("rejections %v, calls %v", rej, calls)
}
