package main

import (
	"bufio"
	"context"
	"database/sql"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tenantmcp/tenantmcp/internal/proptest"
)

// unprivilegedUID is the user the sandboxed server runs as when the tests
// run as root (nobody): Landlock needs no privilege, and the test proves it.
const unprivilegedUID = 65534

// buildHotel builds the command into a directory any user can read.
func buildHotel(t testing.TB) string {
	t.Helper()
	dir := t.TempDir()
	os.Chmod(filepath.Dir(dir), 0o755)
	os.Chmod(dir, 0o755)
	bin := filepath.Join(dir, "hotel")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// runningHotel is a started command with its MCP endpoint and alice's
// development token.
type runningHotel struct {
	cmd             *exec.Cmd
	endpoint, token string
	output          string
}

// startHotel runs bin with args, waits until it has logged its endpoint
// and written the demo tokens (or exited), and stops it at the end of the test. asUser runs it as the
// unprivileged user when the test runs as root.
func startHotel(t testing.TB, ctx context.Context, bin string, asUser bool, args ...string) *runningHotel {
	t.Helper()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = "/"
	// Its temporary directories (the sandbox's private one stays behind,
	// empty) go where the test cleans up.
	tmp := t.TempDir()
	os.Chmod(filepath.Dir(tmp), 0o755)
	os.Chmod(tmp, 0o777)
	cmd.Env = append(os.Environ(), "TMPDIR="+tmp)
	if asUser && os.Geteuid() == 0 {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: unprivilegedUID, Gid: unprivilegedUID}}
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Signal(os.Interrupt); cmd.Wait() })
	h := &runningHotel{cmd: cmd}
	var output strings.Builder
	endpointRE := regexp.MustCompile(`endpoint=(\S+)`)
	tokensRE := regexp.MustCompile(`msg="demo tokens written.* file=(\S+)`)
	sc := bufio.NewScanner(stderr)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		output.WriteString(line + "\n")
		if m := endpointRE.FindStringSubmatch(line); m != nil {
			h.endpoint = m[1]
		}
		if m := tokensRE.FindStringSubmatch(line); m != nil {
			// The tokens are in the file the line names, never in the log.
			text, _ := os.ReadFile(m[1])
			for _, l := range strings.Split(string(text), "\n") {
				if v, ok := strings.CutPrefix(l, "export TOKEN_alice="); ok {
					h.token = v
				}
			}
			break
		}
	}
	go func() {
		for sc.Scan() {
		}
	}()
	h.output = output.String()
	return h
}

// wantServing fails the test unless the server printed its endpoint and
// tokens.
func (h *runningHotel) wantServing(t testing.TB) {
	t.Helper()
	if h.endpoint == "" || h.token == "" {
		t.Fatalf("server did not start:\n%s", h.output)
	}
}

// connect opens an MCP session as alice.
func (h *runningHotel) connect(t testing.TB, ctx context.Context) *mcp.ClientSession {
	t.Helper()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, nil).Connect(ctx, &mcp.StreamableClientTransport{
		Endpoint: h.endpoint, HTTPClient: &http.Client{Transport: bearer{h.token}}, DisableStandaloneSSE: true, MaxRetries: -1,
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

var revenueArgs = map[string]any{"from": "2026-01-01", "to": "2027-01-01"}

// wantSandboxed checks that the server said which rights it enforces and
// that the kernel shows the process confined: no_new_privs (Landlock's
// precondition) and the socket filter.
func (h *runningHotel) wantSandboxed(t testing.TB) {
	t.Helper()
	h.wantServing(t)
	if !strings.Contains(h.output, `msg="sandbox: Landlock domain enforced" enforced.abi=`) || !strings.Contains(h.output, `enforced.net="[bind_tcp connect_tcp]"`) {
		t.Fatalf("server did not report an active sandbox with TCP rules:\n%s", h.output)
	}
	status, err := os.ReadFile("/proc/" + strconv.Itoa(h.cmd.Process.Pid) + "/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"NoNewPrivs:\t1", "Seccomp:\t2"} {
		if !strings.Contains(string(status), want) {
			t.Errorf("/proc/PID/status lacks %q", want)
		}
	}
}

// TestServesUnderSandbox runs the real command with -sandbox as an
// unprivileged user, on the embedded SQLite and on PostgreSQL (and, as
// root, together with the eBPF egress guard), and calls a tool.
func TestServesUnderSandbox(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the command; skipped in -short mode")
	}
	bin := buildHotel(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	t.Run("sqlite", func(t *testing.T) {
		h := startHotel(t, ctx, bin, true, "-sandbox", "-addr", "127.0.0.1:0")
		h.wantSandboxed(t)
		res, err := h.connect(t, ctx).CallTool(ctx, &mcp.CallToolParams{Name: "revenue_report", Arguments: revenueArgs})
		if err != nil || res.IsError {
			t.Fatalf("revenue_report under the sandbox: %v %+v", err, res)
		}
	})

	t.Run("invalid-policy-never-serves", func(t *testing.T) {
		// A flow policy file that does not exist cannot be granted:
		// Install fails, and the command exits before it listens.
		port := strconv.Itoa(proptest.FreePort(t))
		h := startHotel(t, ctx, bin, true, "-sandbox", "-addr", "127.0.0.1:"+port, "-flow-policy", "/nonexistent/flow-policy.json")
		if err := h.cmd.Wait(); err == nil {
			t.Fatalf("the command exited 0:\n%s", h.output)
		}
		if h.endpoint != "" || !strings.Contains(h.output, "sandbox requested but not installed, refusing to serve") ||
			!strings.Contains(h.output, "sandbox: invalid policy") {
			t.Fatalf("want a refusal naming the invalid policy, got:\n%s", h.output)
		}
		if c, err := net.Dial("tcp4", "127.0.0.1:"+port); err == nil {
			c.Close()
			t.Fatal("something serves on the listen port")
		}
	})

	t.Run("postgres", func(t *testing.T) {
		admin := os.Getenv("TENANTMCP_TEST_POSTGRES_DSN")
		if admin == "" {
			t.Skip("set TENANTMCP_TEST_POSTGRES_DSN=postgres://postgres@127.0.0.1:5432/test?sslmode=disable to run the sandboxed hotel on PostgreSQL")
		}
		root, err := sql.Open("pgx", admin)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { root.Close() })
		suffix := strconv.FormatInt(time.Now().UnixNano(), 36)
		dbName, role := "tm_sandbox_"+suffix, "tm_sandbox_app_"+suffix
		if _, err := root.ExecContext(ctx, "CREATE DATABASE "+dbName); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if _, err := root.ExecContext(context.Background(), "DROP DATABASE IF EXISTS "+dbName+" WITH (FORCE)"); err != nil {
				t.Errorf("dropping %s: %v", dbName, err)
			}
			if _, err := root.ExecContext(context.Background(), "DROP ROLE IF EXISTS "+role); err != nil {
				t.Errorf("dropping role %s: %v", role, err)
			}
		})
		u, err := url.Parse(admin)
		if err != nil {
			t.Fatal(err)
		}
		u.Path = "/" + dbName
		app := *u
		app.User = url.User(role)
		h := startHotel(t, ctx, bin, true, "-sandbox", "-addr", "127.0.0.1:0", "-db", app.String(), "-setup-demo", u.String())
		h.wantSandboxed(t)
		res, err := h.connect(t, ctx).CallTool(ctx, &mcp.CallToolParams{Name: "revenue_report", Arguments: revenueArgs})
		if err != nil || res.IsError {
			t.Fatalf("revenue_report under the sandbox on PostgreSQL: %v %+v", err, res)
		}
	})

	t.Run("sqlite+egress", func(t *testing.T) {
		if os.Geteuid() != 0 {
			t.Skipf("the egress guard needs root (running as uid %d)", os.Geteuid())
		}
		h := startHotel(t, ctx, bin, false, "-sandbox", "-egress", "-addr", "127.0.0.1:0")
		if strings.Contains(h.output, "egress guard requested but not installed") {
			t.Skipf("egress guard unavailable here:\n%s", h.output)
		}
		if !strings.Contains(h.output, "egress guard active") {
			t.Fatalf("egress guard not active:\n%s", h.output)
		}
		h.wantSandboxed(t)
		res, err := h.connect(t, ctx).CallTool(ctx, &mcp.CallToolParams{Name: "revenue_report", Arguments: revenueArgs})
		if err != nil || res.IsError {
			t.Fatalf("revenue_report under sandbox and guard: %v %+v", err, res)
		}
	})
}

// BenchmarkSandboxThroughput measures the hotel's tools/call throughput
// under -sandbox against the same command without it, both running as the
// same user on the embedded SQLite, as the ratio of time per call
// sandboxed/plain. Rounds alternate in ABBA order (P S S P P S S P); in each
// round 4 clients complete b.N list_bookings calls together. ns/op is the
// sandboxed time per call; the plain time, the ratio of the totals and the
// median ratio of adjacent rounds are reported beside it. Run
//
//	go test ./examples/hotel -run '^$' -bench SandboxThroughput -benchtime 2000x
func BenchmarkSandboxThroughput(b *testing.B) {
	bin := buildHotel(b)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	const clients = 4
	sessions := func(args ...string) []*mcp.ClientSession {
		h := startHotel(b, ctx, bin, true, append([]string{"-addr", "127.0.0.1:0"}, args...)...)
		if len(args) > 0 {
			h.wantSandboxed(b)
		}
		var out []*mcp.ClientSession
		for range clients {
			out = append(out, h.connect(b, ctx))
		}
		return out
	}
	plain, sandboxed := sessions(), sessions("-sandbox")
	n := max(b.N, clients)
	round := func(ss []*mcp.ClientSession) time.Duration {
		var wg sync.WaitGroup
		errs := make(chan error, clients)
		start := time.Now()
		for k, cs := range ss {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := k; i < n; i += clients {
					day := 1 + i%28
					res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "list_bookings", Arguments: map[string]any{
						"from": fmt.Sprintf("2026-03-%02d", day), "to": fmt.Sprintf("2026-04-%02d", day)}})
					if err == nil && res.IsError {
						err = fmt.Errorf("tool error: %+v", res.Content)
					}
					if err != nil {
						errs <- err
						return
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		if err := <-errs; err != nil {
			b.Fatal(err)
		}
		return time.Since(start)
	}
	round(plain) // warm both up
	round(sandboxed)
	b.ResetTimer()
	var ratios proptest.Ratios
	for _, sb := range proptest.ABBA {
		if sb {
			ratios.Add(true, round(sandboxed))
		} else {
			ratios.Add(false, round(plain))
		}
	}
	per := float64(len(proptest.ABBA) / 2 * n)
	b.ReportMetric(float64(ratios.Candidate.Nanoseconds())/per, "ns/op")
	b.ReportMetric(float64(ratios.Baseline.Nanoseconds())/per, "plain-ns/op")
	b.ReportMetric(ratios.Ratio(), "ratio")
	b.ReportMetric(ratios.MedianPair(), "median-pair-ratio")
}
