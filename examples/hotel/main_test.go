package main

import (
	"bufio"
	"context"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
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
	bin := filepath.Join(t.TempDir(), "hotel")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "-egress", "-addr", "127.0.0.1:0")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Signal(os.Interrupt); cmd.Wait() }()

	var endpoint, token string
	var output strings.Builder
	endpointRE := regexp.MustCompile(`MCP endpoint (\S+)`)
	sc := bufio.NewScanner(stderr)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		output.WriteString(line + "\n")
		if strings.Contains(line, "not installed") {
			if strings.Contains(line, "cgroup") || strings.Contains(line, "not permitted") {
				t.Skipf("egress guard unavailable here: %s", line)
			}
		}
		if m := endpointRE.FindStringSubmatch(line); m != nil {
			endpoint = m[1]
		}
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "export TOKEN_alice="); ok {
			token = v
		}
		if strings.HasPrefix(line, "Try it:") {
			break
		}
	}
	go func() {
		for sc.Scan() {
		}
	}()
	if endpoint == "" || token == "" || !strings.Contains(output.String(), "egress guard active") {
		t.Fatalf("server did not start guarded:\n%s", output.String())
	}
	cg, err := os.ReadFile("/proc/" + strconv.Itoa(cmd.Process.Pid) + "/cgroup")
	if err != nil || !strings.Contains(string(cg), "tenantmcp-egress-") {
		t.Fatalf("server process is not in the guard cgroup: %s %v", cg, err)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, nil).Connect(ctx, &mcp.StreamableClientTransport{
		Endpoint: endpoint, HTTPClient: &http.Client{Transport: bearer{token}}, DisableStandaloneSSE: true, MaxRetries: -1,
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
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
