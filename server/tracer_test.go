package server_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tenantmcp/tenantmcp/guardedsql"
	"github.com/tenantmcp/tenantmcp/server"
)

// recordingTracer is a server.Tracer that keeps what it is told.
type recordingTracer struct {
	mu     sync.Mutex
	starts int
	ends   []server.TraceCallEndData
	limits []string // LimitError.Rule
}

type traceKey struct{}

func (r *recordingTracer) TraceCallStart(ctx context.Context, d server.TraceCallStartData) context.Context {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.starts++
	return context.WithValue(ctx, traceKey{}, d.Tool)
}

func (r *recordingTracer) TraceCallEnd(_ context.Context, d server.TraceCallEndData) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ends = append(r.ends, d)
}

func (r *recordingTracer) TraceLimit(_ context.Context, e *server.LimitError) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.limits = append(r.limits, e.Rule)
}

// outcomes counts the ended calls of tool by outcome.
func (r *recordingTracer) outcomes(tool string) map[string]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	m := map[string]int{}
	for _, d := range r.ends {
		if d.Tool == tool {
			m[d.Outcome]++
		}
	}
	return m
}

// The Tracer sees every call start and end once, with its outcome, rule,
// call id and scope; the handler runs in the context TraceCallStart
// returned; a limit refusal reaches TraceLimit and still Limits.OnReject.
func TestTracerSeesEveryCall(t *testing.T) {
	tr := &recordingTracer{}
	var rejected []string
	f := newFixture(t, func(o *server.Options) {
		o.Tracer = tr
		o.Limits = server.Limits{PerSubject: server.Limit{Rate: 0.5, Burst: 3},
			OnReject: func(_ context.Context, e *server.LimitError) { rejected = append(rejected, e.Rule) }}
	})
	type In struct {
		Deny bool `json:"deny"`
	}
	err := server.AddTool(f.srv, server.Tool{Name: "ping"}, func(ctx context.Context, _ *guardedsql.DB, in In) (empty, error) {
		if ctx.Value(traceKey{}) != "ping" {
			return empty{}, errors.New("the handler does not run in the tracer's context")
		}
		if in.Deny {
			return empty{}, server.Deny("policy.test", "refused", nil)
		}
		return empty{}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	cs := f.session(t, "ann", "org:north")
	ctx := context.Background()
	for _, deny := range []bool{false, false, true} {
		if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "ping", Arguments: map[string]any{"deny": deny}}); (err != nil) != deny {
			t.Fatalf("deny %v: %v", deny, err)
		}
	}
	_, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "ping", Arguments: map[string]any{}})
	var je *jsonrpc.Error
	if !errors.As(err, &je) || je.Code != server.CodeLimited {
		t.Fatalf("fourth call: %v, want CodeLimited", err)
	}
	got := tr.outcomes("ping")
	if tr.starts != 4 || len(tr.ends) != 4 || got[server.OutcomeOK] != 2 || got[server.OutcomeDenied] != 1 || got[server.OutcomeLimited] != 1 {
		t.Fatalf("%d starts, ends by outcome %v, want 4 and ok 2, denied 1, limited 1", tr.starts, got)
	}
	for _, d := range tr.ends {
		if d.CallID == "" || d.Scope.IsZero() || (d.Outcome == server.OutcomeDenied) != (d.Rule == "policy.test") {
			t.Errorf("end %+v", d)
		}
	}
	if len(tr.limits) != 1 || tr.limits[0] != server.RuleSubjectRate || len(rejected) != 1 || rejected[0] != server.RuleSubjectRate {
		t.Errorf("TraceLimit saw %v, OnReject %v, want one %s each", tr.limits, rejected, server.RuleSubjectRate)
	}
}
