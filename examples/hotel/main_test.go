package main

import (
	"context"
	"errors"
	"flag"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tenantmcp/tenantmcp/examples/hotel/hotel"
)

type bearer struct{ token string }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

// TestServesUnderEgressGuard runs the real command with -egress: the guard
// is installed before anything is served, the process sits in the guard's
// cgroup, and the tools still work (the embedded database and the
// development issuer need no outbound connection).
func TestServesUnderEgressGuard(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the command; skipped in -short mode")
	}
	if os.Geteuid() != 0 {
		t.Skipf("the egress guard needs root (running as uid %d)", os.Geteuid())
	}
	bin := buildHotel(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	h := startHotel(t, ctx, bin, false, "-egress", "-addr", "127.0.0.1:0")
	if strings.Contains(h.output, "not installed") && (strings.Contains(h.output, "cgroup") || strings.Contains(h.output, "not permitted")) {
		t.Skipf("egress guard unavailable here:\n%s", h.output)
	}
	h.wantServing(t)
	if !strings.Contains(h.output, "egress guard active") {
		t.Fatalf("server did not start guarded:\n%s", h.output)
	}
	cmd := h.cmd
	cg, err := os.ReadFile("/proc/" + strconv.Itoa(cmd.Process.Pid) + "/cgroup")
	if err != nil || !strings.Contains(string(cg), "tenantmcp-egress-") {
		t.Fatalf("server process is not in the guard cgroup: %s %v", cg, err)
	}
	cs := h.connect(t, ctx)
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "revenue_report", Arguments: map[string]any{"from": "2026-01-01", "to": "2027-01-01"}})
	if err != nil || res.IsError {
		t.Fatalf("revenue_report under the guard: %v %+v", err, res)
	}
}

func TestDBHostPort(t *testing.T) {
	for dsn, want := range map[string]string{
		"postgres://app:pw@db.internal:6432/hotel?sslmode=require": "db.internal:6432",
		"postgresql://app@127.0.0.1/hotel":                         "127.0.0.1:5432",
		"mysql://root@tcp(127.0.0.1:3306)/test":                    "127.0.0.1:3306",
		"mysql://root@tcp(10.1.2.3)/test":                          "10.1.2.3:3306",
		"sqlite:/tmp/hotel.db":                                     "",
		"":                                                         "",
	} {
		got, ok := dbHostPort(dsn)
		if got != want || ok != (want != "") {
			t.Errorf("dbHostPort(%q) = %q, %v; want %q", dsn, got, ok, want)
		}
	}
}

// TestStdioBindsNoPort runs two -stdio instances at once while -addr is
// held by another listener: neither may bind it, both serve their client.
func TestStdioBindsNoPort(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the command; skipped in -short mode")
	}
	bin := filepath.Join(t.TempDir(), "hotel")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var sessions []*mcp.ClientSession
	for range 2 {
		cmd := exec.CommandContext(ctx, bin, "-stdio", "-as", "alice", "-addr", busy.Addr().String())
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, nil).Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
		if err != nil {
			t.Fatalf("stdio instance with -addr in use: %v", err)
		}
		defer cs.Close()
		sessions = append(sessions, cs)
	}
	for i, cs := range sessions {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "revenue_report", Arguments: map[string]any{"from": "2026-01-01", "to": "2027-01-01"}})
		if err != nil || res.IsError {
			t.Fatalf("stdio instance %d: %v %+v", i, err, res)
		}
	}
}

// TestHelpListsAtMostTwentyFlags: -h lists the common flags only (at most
// 20); the rest are keys of the grouped flags, each of which still parses.
func TestHelpListsAtMostTwentyFlags(t *testing.T) {
	var out strings.Builder
	if err := run([]string{"-h"}, &out); !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("run -h: %v", err)
	}
	var listed []string
	for _, l := range strings.Split(out.String(), "\n") {
		if name, ok := strings.CutPrefix(l, "  -"); ok {
			listed = append(listed, strings.Fields(name)[0])
		}
	}
	if len(listed) == 0 || len(listed) > 20 {
		t.Fatalf("-h lists %d flags, want 1..20: %v", len(listed), listed)
	}
	var cfg hotel.Options
	var o options
	fs := flag.NewFlagSet("hotel", flag.ContinueOnError)
	flags(fs, &cfg, &o)
	err := fs.Parse([]string{"-limits", "pool-size=8,call-timeout=1m,max-token-lifetime=2h",
		"-fairness", "tenant-rate=5.5,subject-burst=3,redis=127.0.0.1:6379,pool-share=1.5,pool-fifo=true", "-metrics=tenants=5", "-http", "allow-origin=https://a.test,allow-origin=https://b.test,max-sessions=-1",
		"-egress=best-effort,allow=10.0.0.5:443", "-sandbox"})
	l := cfg.Limits
	if err != nil || l.PoolSize != 8 || l.CallTimeout != time.Minute || l.MaxTokenLifetime != 2*time.Hour || l.PerTenant.Rate != 5.5 ||
		l.PerSubject.Burst != 3 || o.redis != "127.0.0.1:6379" || len(l.AllowedOrigins) != 2 || l.MaxSessionsPerSubject != -1 ||
		!o.egress.on || !o.egress.bestEffort || len(o.egress.allow) != 1 || !o.sandbox.on || o.sandbox.bestEffort || l.QueueWait != time.Second ||
		l.PoolShare != 1.5 || !l.PoolFIFO || !cfg.Metrics || cfg.MetricsTenants != 5 {
		t.Fatalf("grouped flags parsed to %+v %+v: %v", l, o, err)
	}
	if err := fs.Parse([]string{"-limits", "pool-sise=8"}); err == nil || !strings.Contains(err.Error(), "pool-size") {
		t.Fatalf("a misspelt key: %v, want an error listing the keys", err)
	}
}
