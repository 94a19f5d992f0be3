package server_test

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tenantmcp/tenantmcp/guardedsql"
	"github.com/tenantmcp/tenantmcp/internal/logbuf"
	"github.com/tenantmcp/tenantmcp/server"
)

// countLines counts the log lines containing every one of parts.
func countLines(log string, parts ...string) int {
	n := 0
	for _, line := range strings.Split(log, "\n") {
		all := line != ""
		for _, p := range parts {
			all = all && strings.Contains(line, p)
		}
		if all {
			n++
		}
	}
	return n
}

// An outage makes every call fail the same way: the operational log gets
// at most Burst lines of each kind per Interval, and the first line of the
// next window says how many were suppressed. Counted in the log itself,
// with a clock the test moves.
func TestErrorLogRateLimited(t *testing.T) {
	var log logbuf.Buffer
	var clock atomic.Int64
	clock.Store(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano())
	f := newFixture(t, func(o *server.Options) {
		o.Logger = slog.New(slog.NewTextHandler(&log, nil))
		o.Now = func() time.Time { return time.Unix(0, clock.Load()) }
		o.LogLimit = server.LogLimit{Burst: 3, Interval: 10 * time.Second}
	})
	type In struct {
		N int `json:"n"`
	}
	for _, name := range []string{"a", "b"} {
		err := server.AddTool(f.srv, server.Tool{Name: name}, func(ctx context.Context, _ *guardedsql.DB, in In) (empty, error) {
			if in.N%2 == 0 {
				return empty{}, fmt.Errorf("query %d: %w", in.N, driver.ErrBadConn)
			}
			return empty{}, fmt.Errorf("bug in row %d", in.N)
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	cs := f.session(t, "ann", "org:north")
	call := func(tool string, n int) {
		_, _ = cs.CallTool(context.Background(), &mcp.CallToolParams{Name: tool, Arguments: map[string]any{"n": n}})
	}
	var wg sync.WaitGroup
	for i := range 400 {
		wg.Add(1)
		go func() { defer wg.Done(); call("a", i) }()
	}
	wg.Wait()
	for i := range 10 {
		call("b", i)
	}
	out := log.String()
	if got := countLines(out, "database unavailable", "tool=a"); got != 3 {
		t.Errorf("%d 'database unavailable' lines for tool a after 200 failures, want 3", got)
	}
	if got := countLines(out, "tool call failed", "tool=a", "bug in row"); got != 3 {
		t.Errorf("%d 'tool call failed' lines for tool a after 200 failures, want 3", got)
	}
	if got := countLines(out, "tool=b"); got != 6 {
		t.Errorf("%d lines for tool b (its own budget), want 6", got)
	}

	clock.Add(int64(10 * time.Second))
	call("a", 0)
	call("a", 1)
	out = log.String()
	if got := countLines(out, "database unavailable", "tool=a", "suppressed=197"); got != 1 {
		t.Errorf("next window: %d lines reporting 197 suppressed unavailable errors, want 1\n%s", got, out)
	}
	if got := countLines(out, "tool call failed", "tool=a", "bug in row", "suppressed=197"); got != 1 {
		t.Errorf("next window: %d lines reporting 197 suppressed internal errors, want 1", got)
	}
	// The audit log is not limited: one record per call.
	if got := countLines(f.audit.String(), `"tool":"a"`); got != 402 {
		t.Errorf("%d audit records for 402 calls", got)
	}
}

// Burst < 0 turns the limit off.
func TestErrorLogLimitOff(t *testing.T) {
	var log logbuf.Buffer
	f := newFixture(t, func(o *server.Options) {
		o.Logger = slog.New(slog.NewTextHandler(&log, nil))
		o.LogLimit = server.LogLimit{Burst: -1}
	})
	if err := server.AddTool(f.srv, server.Tool{Name: "a"}, func(context.Context, *guardedsql.DB, empty) (empty, error) {
		return empty{}, errors.New("boom")
	}); err != nil {
		t.Fatal(err)
	}
	cs := f.session(t, "ann", "org:north")
	for range 20 {
		_, _ = cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "a", Arguments: map[string]any{}})
	}
	if got := countLines(log.String(), "tool call failed"); got != 20 {
		t.Errorf("%d lines with the limit off, want 20", got)
	}
}
