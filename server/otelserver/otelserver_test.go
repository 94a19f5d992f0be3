package otelserver_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/tenantmcp/tenantmcp/builder"
	"github.com/tenantmcp/tenantmcp/claims"
	"github.com/tenantmcp/tenantmcp/claims/devtoken"
	"github.com/tenantmcp/tenantmcp/guardedsql"
	_ "github.com/tenantmcp/tenantmcp/guardedsql/sqlite" // the engine of the test database
	"github.com/tenantmcp/tenantmcp/scope"
	"github.com/tenantmcp/tenantmcp/server"
	"github.com/tenantmcp/tenantmcp/server/otelserver"
)

var testSchema = builder.MustSchema(builder.SchemaDef{
	Levels: []builder.Level{{Name: "org", Key: builder.TextKey}},
	Tables: []builder.TableDef{{Name: "notes", Columns: []string{"id", "org_id", "body"}, PrimaryKey: []string{"id"}, Levels: map[string]string{"org_id": "org"}}},
})

// fixture is a server on in-memory SQLite whose Tracer is tel, with a
// development issuer for its tokens.
type fixture struct {
	srv    *server.Server
	issuer *devtoken.Issuer
}

type empty struct{}

func newFixture(t *testing.T, tel *otelserver.Telemetry) *fixture {
	t.Helper()
	is, err := devtoken.Start(devtoken.Options{Addr: "127.0.0.1:0", Audience: "https://notes.test/mcp", Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { is.Close() })
	v, err := claims.New(claims.Options{Issuer: is.URL, Audience: []string{is.Audience}, JWKS: is.JWKS(),
		Mapping: claims.Mapping{Patterns: []string{"org:{org}"}}})
	if err != nil {
		t.Fatal(err)
	}
	db, err := guardedsql.Open(context.Background(), "sqlite::memory:", testSchema, guardedsql.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	srv, err := server.New(server.Options{Name: "notes", Verifier: v, DB: db, Levels: []string{"org"}, Tracer: tel,
		AuditLogger: slog.New(slog.DiscardHandler), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	return &fixture{srv: srv, issuer: is}
}

// session connects a client over in-memory stdio with a token for sub in
// groups.
func (f *fixture) session(t *testing.T, sub string, groups ...string) *mcp.ClientSession {
	t.Helper()
	tok, err := f.issuer.Mint(devtoken.Token{Subject: sub, Groups: groups})
	if err != nil {
		t.Fatal(err)
	}
	ct, st := mcp.NewInMemoryTransports()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	errc := make(chan error, 1)
	go func() { errc <- f.srv.Run(ctx, st, func(context.Context) (string, error) { return tok, nil }) }()
	select {
	case err := <-errc:
		t.Fatal(err)
	case <-time.After(200 * time.Millisecond):
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// httpGet returns the status and body of GET url.
func httpGet(t *testing.T, url string) (int, []byte) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, body
}

// scrape fetches url and returns the Prometheus text body.
func scrape(t *testing.T, url string) string {
	t.Helper()
	code, body := httpGet(t, url)
	if code != http.StatusOK {
		t.Fatalf("GET %s: %d\n%s", url, code, body)
	}
	return string(body)
}

// sample returns the value of the series name{labels} in a Prometheus text
// body, matching the labels exactly (after dropping otel_scope_* labels),
// and whether it is there.
func sample(body, name string, labels map[string]string) (float64, bool) {
	var want []string
	for k, v := range labels {
		want = append(want, k+"="+strconv.Quote(v))
	}
	sort.Strings(want)
	sc := bufio.NewScanner(strings.NewReader(body))
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") {
			continue
		}
		series, value, ok := strings.Cut(line, " ")
		if !ok {
			continue
		}
		n, ls, _ := strings.Cut(series, "{")
		if n != name {
			continue
		}
		var got []string
		for _, l := range splitLabels(strings.TrimSuffix(ls, "}")) {
			if !strings.HasPrefix(l, "otel_scope_") {
				got = append(got, l)
			}
		}
		sort.Strings(got)
		if strings.Join(got, ",") != strings.Join(want, ",") {
			continue
		}
		f, err := strconv.ParseFloat(value, 64)
		return f, err == nil
	}
	return 0, false
}

// splitLabels splits a="x",b="y" (values contain no commas in these tests).
func splitLabels(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, ",")
}

// The metrics a deployment scrapes count each tool call by tool and
// outcome, its latency, denials by rule, redactions by category, pool
// waits and rate-limit rejections, with exactly the values the calls
// produced, and never carry the subject or a tenant id.
func TestMetricsScrape(t *testing.T) {
	tel, err := otelserver.New(otelserver.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tel.Shutdown(context.Background()) })
	f := newFixture(t, tel)
	type In struct {
		Mode string `json:"mode"`
	}
	type Guest struct {
		Name  string `json:"name" pii:"name"`
		Email string `json:"email" pii:"email"`
	}
	type Out struct {
		Guests []Guest `json:"guests"`
	}
	err = server.AddTool(f.srv, server.Tool{Name: "guests"}, func(ctx context.Context, _ *guardedsql.DB, in In) (Out, error) {
		switch in.Mode {
		case "deny":
			return Out{}, server.Deny("policy.test", "refused", nil)
		case "fail":
			return Out{}, errors.New("boom")
		case "missing":
			return Out{}, guardedsql.ErrNotFound
		}
		return Out{[]Guest{{"Ann Smith", "ann@north.example"}, {"Bo Lee", "bo@north.example"}}}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	h, err := f.srv.Handler(server.HTTPOptions{ResourceURL: "https://notes.test/mcp", MetricsPath: "/metrics", Metrics: tel.Handler()})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(h)
	t.Cleanup(hs.Close)

	cs := f.session(t, "subject-ann-7731", "org:tenant-north-5150")
	calls := map[string]int{"ok": 3, "deny": 2, "fail": 1, "missing": 4}
	for mode, n := range calls {
		for range n {
			_, _ = cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "guests", Arguments: map[string]any{"mode": mode}})
		}
	}
	// The hooks the rate limiter and the pool-wait bound call.
	ctx := context.Background()
	tel.RateLimited(ctx, "guests", "tenant")
	tel.RateLimited(ctx, "guests", "tenant")
	tel.PoolWait(ctx, "guests", 20*time.Millisecond, true)
	tel.PoolWait(ctx, "guests", 3*time.Second, false)

	body := scrape(t, hs.URL+"/metrics")
	for _, c := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"tenantmcp_tool_calls_total", map[string]string{"tool": "guests", "outcome": "ok"}, 3},
		{"tenantmcp_tool_calls_total", map[string]string{"tool": "guests", "outcome": "denied"}, 2},
		{"tenantmcp_tool_calls_total", map[string]string{"tool": "guests", "outcome": "error"}, 1},
		{"tenantmcp_tool_calls_total", map[string]string{"tool": "guests", "outcome": "not_found"}, 4},
		{"tenantmcp_tool_call_duration_seconds_count", map[string]string{"tool": "guests", "outcome": "ok"}, 3},
		{"tenantmcp_tool_call_duration_seconds_count", map[string]string{"tool": "guests", "outcome": "not_found"}, 4},
		{"tenantmcp_denials_total", map[string]string{"tool": "guests", "rule": "policy.test"}, 2},
		{"tenantmcp_redactions_total", map[string]string{"tool": "guests", "category": "email"}, 6},
		{"tenantmcp_redactions_total", map[string]string{"tool": "guests", "category": "name"}, 6},
		{"tenantmcp_rate_limit_rejections_total", map[string]string{"tool": "guests", "limit": "tenant"}, 2},
		{"tenantmcp_pool_wait_seconds_count", map[string]string{"tool": "guests", "outcome": "acquired"}, 1},
		{"tenantmcp_pool_wait_seconds_count", map[string]string{"tool": "guests", "outcome": "timeout"}, 1},
		{"tenantmcp_pool_wait_seconds_sum", map[string]string{"tool": "guests", "outcome": "timeout"}, 3},
	} {
		got, ok := sample(body, c.name, c.labels)
		if !ok || got != c.want {
			t.Errorf("%s%v = %v (present %v), want %v", c.name, c.labels, got, ok, c.want)
		}
	}
	for _, secret := range []string{"subject-ann-7731", "tenant-north-5150", "ann@north.example", "Ann Smith"} {
		if strings.Contains(body, secret) {
			t.Errorf("/metrics names %q", secret)
		}
	}
	if t.Failed() || testing.Verbose() {
		t.Logf("scrape:\n%s", body)
	}
}

// With TenantLabel configured, the call metrics carry the label it
// returns, and only that.
func TestMetricsTenantLabelOptIn(t *testing.T) {
	tel, err := otelserver.New(otelserver.Options{TenantLabel: func(sc scope.Scope) string {
		return fmt.Sprintf("tier-%d", len(sc.GrantsAt("org")))
	}})
	if err != nil {
		t.Fatal(err)
	}
	f := newFixture(t, tel)
	if err := server.AddTool(f.srv, server.Tool{Name: "ping"}, func(context.Context, *guardedsql.DB, empty) (empty, error) { return empty{}, nil }); err != nil {
		t.Fatal(err)
	}
	cs := f.session(t, "ann", "org:north", "org:south")
	if _, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "ping", Arguments: map[string]any{}}); err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(tel.Handler())
	t.Cleanup(hs.Close)
	body := scrape(t, hs.URL)
	if got, ok := sample(body, "tenantmcp_tool_calls_total", map[string]string{"tool": "ping", "outcome": "ok", "tenant": "tier-2"}); !ok || got != 1 {
		t.Errorf("calls{tenant=tier-2} = %v (present %v), want 1\n%s", got, ok, body)
	}
	if strings.Contains(body, "north") || strings.Contains(body, "ann") {
		t.Errorf("/metrics names the tenant or subject:\n%s", body)
	}
}

// Every tool call is one server span named after the tool, with the
// outcome and call id, and without the subject or tenant.
func TestCallSpans(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { tp.Shutdown(context.Background()) })
	tel, err := otelserver.New(otelserver.Options{TracerProvider: tp})
	if err != nil {
		t.Fatal(err)
	}
	f := newFixture(t, tel)
	if err := server.AddTool(f.srv, server.Tool{Name: "ping"}, func(context.Context, *guardedsql.DB, empty) (empty, error) {
		return empty{}, errors.New("boom")
	}); err != nil {
		t.Fatal(err)
	}
	cs := f.session(t, "subject-ann-7731", "org:tenant-north-5150")
	if _, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "ping", Arguments: map[string]any{}}); err != nil {
		t.Fatal(err)
	}
	spans := rec.Ended()
	if len(spans) != 1 {
		t.Fatalf("%d spans, want 1", len(spans))
	}
	sp := spans[0]
	attrs := map[attribute.Key]string{}
	for _, kv := range sp.Attributes() {
		attrs[kv.Key] = kv.Value.String()
		if strings.Contains(kv.Value.String(), "north") || strings.Contains(kv.Value.String(), "ann") {
			t.Errorf("span attribute %s = %q names the tenant or subject", kv.Key, kv.Value.String())
		}
	}
	if sp.Name() != "tools/call ping" || attrs["gen_ai.tool.name"] != "ping" || attrs["tenantmcp.outcome"] != "error" || attrs["tenantmcp.call_id"] == "" {
		t.Errorf("span %q attrs %v", sp.Name(), attrs)
	}
	if sp.Status().Code.String() != "Error" {
		t.Errorf("span status %v, want Error", sp.Status())
	}
}
