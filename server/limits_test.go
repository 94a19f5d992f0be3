package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tenantmcp/tenantmcp/claims/devtoken"
	"github.com/tenantmcp/tenantmcp/guardedsql"
	"github.com/tenantmcp/tenantmcp/internal/logbuf"
	"github.com/tenantmcp/tenantmcp/internal/rpctest"
	"github.com/tenantmcp/tenantmcp/server"
)

// holdTool registers "hold": it reports its start on started and returns
// when release is closed, or when its context ends (reported on ended).
type holdTool struct {
	started chan string
	release chan struct{}
	ended   chan error
}

func addHold(t *testing.T, s *server.Server) *holdTool {
	t.Helper()
	h := &holdTool{started: make(chan string, 64), release: make(chan struct{}), ended: make(chan error, 64)}
	type In struct {
		Tag string `json:"tag"`
	}
	type Out struct {
		Tag string `json:"tag"`
	}
	err := server.AddTool(s, server.Tool{Name: "hold"}, func(ctx context.Context, _ *guardedsql.DB, in In) (Out, error) {
		h.started <- in.Tag
		select {
		case <-h.release:
			return Out(in), nil
		case <-ctx.Done():
			h.ended <- context.Cause(ctx)
			return Out{}, ctx.Err()
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func (f *fixture) token(t *testing.T, sub, org string, ttl time.Duration) string {
	t.Helper()
	tok, err := f.issuer.Mint(devtoken.Token{Subject: sub, Groups: []string{"org:" + org}, TTL: ttl})
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func httpServer(t *testing.T, f *fixture, o server.HTTPOptions) *httptest.Server {
	t.Helper()
	o.ResourceURL = "https://notes.test/mcp"
	h, err := f.srv.Handler(o)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(h)
	t.Cleanup(ts.Close)
	return ts
}

// callHTTP posts one tools/call of tool (stateless mode: no session).
func callHTTP(ctx context.Context, url, tok, tool, tag string) (rpctest.Reply, error) {
	return rpctest.Call(ctx, url+"/mcp", tok, tool, map[string]any{"tag": tag})
}

func limitData(t *testing.T, e *jsonrpc.Error) map[string]any {
	t.Helper()
	var d map[string]any
	if err := json.Unmarshal(e.Data, &d); err != nil {
		t.Fatalf("limit error data %q: %v", e.Data, err)
	}
	return d
}

func waitStarted(t *testing.T, h *holdTool, n int) {
	t.Helper()
	for range n {
		select {
		case <-h.started:
		case <-time.After(10 * time.Second):
			t.Fatal("call did not start")
		}
	}
}

// TestTenantConcurrencyLimitHTTP: a tenant at its concurrency limit gets
// 429 with Retry-After and a JSON-RPC error naming the rule (and neither
// tenant nor subject) before its call is dispatched, while another tenant
// is served at once; slots come back when calls end.
func TestTenantConcurrencyLimitHTTP(t *testing.T) {
	f := newFixture(t, func(o *server.Options) {
		o.Limits = server.Limits{PerTenant: server.Limit{Concurrent: 2}, RetryAfter: 3 * time.Second}
	})
	h := addHold(t, f.srv)
	ts := httpServer(t, f, server.HTTPOptions{})
	ctx := context.Background()
	north1, north2, north3 := f.token(t, "ann", "north", time.Hour), f.token(t, "ben", "north", time.Hour), f.token(t, "cat", "north", time.Hour)
	south := f.token(t, "dan", "south", time.Hour)

	var wg sync.WaitGroup
	replies := make(chan rpctest.Reply, 2)
	for _, tok := range []string{north1, north2} {
		wg.Go(func() {
			r, err := callHTTP(ctx, ts.URL, tok, "hold", "north")
			if err != nil {
				t.Error(err)
			}
			replies <- r
		})
	}
	waitStarted(t, h, 2)

	r, err := callHTTP(ctx, ts.URL, north3, "hold", "north-3")
	if err != nil {
		t.Fatal(err)
	}
	if r.Status != http.StatusTooManyRequests || r.RetryAfter != "3" {
		t.Fatalf("third north call: status %d, Retry-After %q; want 429 and 3", r.Status, r.RetryAfter)
	}
	if r.Err == nil || r.Err.Code != server.CodeLimited {
		t.Fatalf("third north call: error %+v, want code %d", r.Err, server.CodeLimited)
	}
	d := limitData(t, r.Err)
	if d["rule"] != server.RuleTenantConcurrency || d["retry_after_ms"] != float64(3000) || d["retryable"] != true {
		t.Fatalf("limit data %v", d)
	}
	if bytes.Contains(r.Err.Data, []byte("north")) || bytes.Contains(r.Err.Data, []byte("cat")) {
		t.Fatalf("limit data names the tenant or subject: %s", r.Err.Data)
	}
	select {
	case tag := <-h.started:
		t.Fatalf("a refused call reached its handler (%s)", tag)
	default:
	}

	// Another tenant is not held up by north's calls.
	done := make(chan rpctest.Reply, 1)
	go func() {
		r, err := callHTTP(ctx, ts.URL, south, "hold", "south")
		if err != nil {
			t.Error(err)
		}
		done <- r
	}()
	waitStarted(t, h, 1)

	close(h.release)
	wg.Wait()
	for range 2 {
		if r := <-replies; r.Status != http.StatusOK || r.Err != nil || r.IsError {
			t.Fatalf("held north call: %+v", r)
		}
	}
	if r := <-done; r.Status != http.StatusOK || r.Err != nil {
		t.Fatalf("south call: %+v", r)
	}
	// The slots were given back.
	if r, err := callHTTP(ctx, ts.URL, north3, "hold", "again"); err != nil || r.Status != http.StatusOK || r.Err != nil {
		t.Fatalf("north after release: %+v %v", r, err)
	}
	if !strings.Contains(f.audit.String(), `"outcome":"limited"`) || !strings.Contains(f.audit.String(), `"rule":"`+server.RuleTenantConcurrency+`"`) {
		t.Fatalf("no audit record of the refusal:\n%s", f.audit)
	}
}

// TestSubjectRateLimitStdio: on stdio the same refusal is a JSON-RPC error
// with code CodeLimited and the retry delay in its data.
func TestSubjectRateLimitStdio(t *testing.T) {
	f := newFixture(t, func(o *server.Options) {
		o.Limits = server.Limits{PerSubject: server.Limit{Rate: 0.5, Burst: 2}}
	})
	h := addHold(t, f.srv)
	close(h.release)
	cs, err := connectStdio(t, f, staticToken(f.token(t, "ann", "north", time.Hour)))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for i := range 2 {
		if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "hold", Arguments: map[string]any{"tag": "x"}}); err != nil {
			t.Fatalf("call %d within the burst: %v", i, err)
		}
	}
	_, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "hold", Arguments: map[string]any{"tag": "x"}})
	var je *jsonrpc.Error
	if !errors.As(err, &je) || je.Code != server.CodeLimited {
		t.Fatalf("third call: err = %v, want a JSON-RPC error with code %d", err, server.CodeLimited)
	}
	d := limitData(t, je)
	if d["rule"] != server.RuleSubjectRate || d["retry_after_ms"].(float64) <= 0 || d["retry_after_ms"].(float64) > 2000 {
		t.Fatalf("limit data %v", d)
	}
}

// TestClientDisconnectCancelsCall: when the HTTP client goes away, the
// call's context is cancelled (the statement with it) and its limit slot
// is given back.
func TestClientDisconnectCancelsCall(t *testing.T) {
	f := newFixture(t, func(o *server.Options) {
		o.Limits = server.Limits{PerTenant: server.Limit{Concurrent: 1}}
	})
	h := addHold(t, f.srv)
	ts := httpServer(t, f, server.HTTPOptions{})
	tok := f.token(t, "ann", "north", time.Hour)
	ctx, cancel := context.WithCancel(context.Background())
	go func() { _, _ = callHTTP(ctx, ts.URL, tok, "hold", "gone") }()
	waitStarted(t, h, 1)
	cancel()
	select {
	case cause := <-h.ended:
		if cause == nil || !strings.Contains(cause.Error(), "disconnected") {
			t.Fatalf("call ended with cause %v, want the client disconnect", cause)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the call went on after its client disconnected")
	}
	// The tenant's only slot is free again.
	close(h.release)
	deadline := time.Now().Add(10 * time.Second)
	for {
		r, err := callHTTP(context.Background(), ts.URL, tok, "hold", "next")
		if err == nil && r.Status == http.StatusOK {
			break
		}
		t.Logf("after disconnect: %d %v", r.Status, err)
		if time.Now().After(deadline) {
			t.Fatalf("slot not released: %+v %v", r, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

type brokenRates struct{}

func (brokenRates) Take(context.Context, string, float64, int) (time.Duration, error) {
	return 0, errors.New("store down")
}

// TestRateStoreFailureFailsClosed: under Limits.FailClosed, when the
// shared rate store cannot answer, calls are refused
// (RuleLimitUnavailable), not let through.
func TestRateStoreFailureFailsClosed(t *testing.T) {
	f := newFixture(t, func(o *server.Options) {
		o.Limits = server.Limits{PerTenant: server.Limit{Rate: 100}, Rates: brokenRates{}, FailClosed: true}
	})
	h := addHold(t, f.srv)
	close(h.release)
	ts := httpServer(t, f, server.HTTPOptions{})
	r, err := callHTTP(context.Background(), ts.URL, f.token(t, "ann", "north", time.Hour), "hold", "x")
	if err != nil || r.Status != http.StatusTooManyRequests || r.Err == nil || limitData(t, r.Err)["rule"] != server.RuleLimitUnavailable {
		t.Fatalf("store down: %+v %v", r, err)
	}
	if strings.Contains(string(r.Err.Data), "store down") {
		t.Fatalf("the store's error reached the client: %s", r.Err.Data)
	}
}

// TestQueueWaitAndTimeoutPenalty: a tenant's second call waits (up to
// QueueWait) for the slot its first call holds instead of being refused at
// once; a call that timed out keeps its slot for TimeoutPenalty, so the
// next call of that tenant is refused meanwhile, and admitted after.
func TestQueueWaitAndTimeoutPenalty(t *testing.T) {
	f := newFixture(t, func(o *server.Options) {
		o.CallTimeout = 300 * time.Millisecond
		o.Limits = server.Limits{PerTenant: server.Limit{Concurrent: 1}, QueueWait: 5 * time.Second, TimeoutPenalty: time.Second}
	})
	h := addHold(t, f.srv)
	ts := httpServer(t, f, server.HTTPOptions{})
	ctx := context.Background()
	tok := f.token(t, "ann", "north", time.Hour)

	// The first call times out (its handler waits for a release that only
	// comes later); the second, queued behind it, must wait out the
	// penalty too.
	first := make(chan rpctest.Reply, 1)
	go func() {
		r, _ := callHTTP(ctx, ts.URL, tok, "hold", "first")
		first <- r
	}()
	waitStarted(t, h, 1)
	start := time.Now()
	go func() { <-h.started; close(h.release) }()
	r, err := callHTTP(ctx, ts.URL, tok, "hold", "second")
	waited := time.Since(start)
	if err != nil || r.Status != http.StatusOK || r.Err != nil || r.IsError {
		t.Fatalf("queued call: %+v %v", r, err)
	}
	if r := <-first; !r.IsError {
		t.Fatalf("first call did not time out: %+v", r)
	}
	t.Logf("queued call admitted after %s (call timeout 300ms + penalty 1s)", waited.Round(10*time.Millisecond))
	if waited < time.Second {
		t.Fatalf("the queued call ran after %s, before the timed-out call's penalty ended", waited)
	}
}

// switchRates is a shared rate store that can be taken down: while down,
// Take and Ping fail (as Redis or PostgreSQL unreachable would); up, it
// admits everything and counts what it was asked.
type switchRates struct {
	down  atomic.Bool
	takes atomic.Int64
}

func (s *switchRates) Take(context.Context, string, float64, int) (time.Duration, error) {
	if s.down.Load() {
		return 0, errors.New("dial tcp 10.0.0.9:6379: connection refused")
	}
	s.takes.Add(1)
	return 0, nil
}

func (s *switchRates) Ping(context.Context) error {
	if s.down.Load() {
		return errors.New("dial tcp 10.0.0.9:6379: connection refused")
	}
	return nil
}

// TestRateStoreOutageFallsBackPerReplica (issue 29 §4): while the shared
// rate store is down, calls are still admitted, against a per-replica
// bucket with the same rate and burst (the call past the burst is refused
// with the tenant's rate rule, not let through unmetered); the outage is
// logged once (no tenant, no subject), OnDegraded hears true then false,
// /readyz stays 200 and lists "rates" as degraded; when the store answers
// again the shared buckets are used again, and a second outage warns
// again. On main every call was refused (limit.unavailable), silently.
func TestRateStoreOutageFallsBackPerReplica(t *testing.T) {
	rates := &switchRates{}
	logs := &logbuf.Buffer{}
	var mu sync.Mutex
	var transitions []bool
	f := newFixture(t, func(o *server.Options) {
		o.Logger = slog.New(slog.NewJSONHandler(logs, nil))
		o.Limits = server.Limits{PerTenant: server.Limit{Rate: 0.01, Burst: 2}, Rates: rates,
			OnDegraded: func(_ context.Context, d bool) { mu.Lock(); transitions = append(transitions, d); mu.Unlock() }}
	})
	h := addHold(t, f.srv)
	close(h.release)
	ts := httpServer(t, f, server.HTTPOptions{Health: server.HealthOptions{CacheFor: -1}})
	tok := f.token(t, "ann", "north", time.Hour)
	call := func(tag string) rpctest.Reply {
		t.Helper()
		r, err := callHTTP(context.Background(), ts.URL, tok, "hold", tag)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	ready := func() (int, server.Readiness) {
		t.Helper()
		return probe(t, ts.URL+server.ReadyPath)
	}
	if r := call("up"); !r.OK() {
		t.Fatalf("store up: %+v", r)
	}
	if code, r := ready(); code != 200 || r.Checks["rates"] != "ok" || len(r.Degraded) != 0 {
		t.Fatalf("ready with the store up: %d %+v", code, r)
	}

	rates.down.Store(true)
	for i := range 2 {
		if r := call(fmt.Sprint("down-", i)); !r.OK() {
			t.Fatalf("store down, call %d within the burst: %+v (want admitted per replica)", i, r)
		}
	}
	r := call("down-past-burst")
	if r.Status != http.StatusTooManyRequests || r.Err == nil || limitData(t, r.Err)["rule"] != server.RuleTenantRate {
		t.Fatalf("store down, past the per-replica burst: %+v, want 429 %s", r, server.RuleTenantRate)
	}
	if n := strings.Count(logs.String(), "rate-limit store unavailable"); n != 1 {
		t.Fatalf("%d outage warnings for one outage, want 1:\n%s", n, logs)
	}
	for _, secret := range []string{"north", "ann", "10.0.0.9"} {
		if strings.Contains(logs.String(), secret) {
			t.Fatalf("the log names %q:\n%s", secret, logs)
		}
	}
	code, rd := ready()
	if code != 200 || !rd.Ready || rd.Checks["rates"] != "degraded" || !slices.Equal(rd.Degraded, []string{"rates"}) {
		t.Fatalf("ready with the rate store down: %d %+v, want 200, ready, degraded [rates]", code, rd)
	}

	rates.down.Store(false)
	before := rates.takes.Load()
	if r := call("back"); !r.OK() {
		t.Fatalf("store back: %+v", r)
	}
	if rates.takes.Load() == before {
		t.Fatal("the store answered again but the call was not taken from it")
	}
	if !strings.Contains(logs.String(), "rate-limit store answering again") {
		t.Fatalf("no recovery line:\n%s", logs)
	}
	if code, r := ready(); code != 200 || len(r.Degraded) != 0 || r.Checks["rates"] != "ok" {
		t.Fatalf("ready after the outage: %d %+v", code, r)
	}
	rates.down.Store(true)
	call("second outage")
	if n := strings.Count(logs.String(), "rate-limit store unavailable"); n != 2 {
		t.Fatalf("%d outage warnings after two outages, want 2", n)
	}
	mu.Lock()
	defer mu.Unlock()
	if !slices.Equal(transitions, []bool{true, false, true}) {
		t.Fatalf("OnDegraded transitions %v, want [true false true]", transitions)
	}
}

// TestRateStoreFailClosedNotReady: under FailClosed a rate store that is
// down refuses every rated call, so the replica says it is not ready.
func TestRateStoreFailClosedNotReady(t *testing.T) {
	rates := &switchRates{}
	rates.down.Store(true)
	f := newFixture(t, func(o *server.Options) {
		o.Limits = server.Limits{PerTenant: server.Limit{Rate: 100}, Rates: rates, FailClosed: true}
	})
	ts := httpServer(t, f, server.HTTPOptions{})
	if code, r := probe(t, ts.URL+server.ReadyPath); code != http.StatusServiceUnavailable || r.Ready || r.Checks["rates"] != "unavailable" {
		t.Fatalf("fail-closed rate store down: %d %+v, want 503 rates unavailable", code, r)
	}
}
