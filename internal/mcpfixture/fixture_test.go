package mcpfixture_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tenantmcp/tenantmcp/internal/mcpfixture"
	"github.com/tenantmcp/tenantmcp/server"
)

// interopDir is the repository's interop/ with its npm packages installed,
// or the test skips with the command that installs them.
func interopDir(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs("../../interop")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "@modelcontextprotocol", "conformance")); err != nil {
		t.Skipf("interop clients not installed: run `npm ci --prefix interop` from the repository root (%v)", err)
	}
	return dir
}

func start(t *testing.T, o mcpfixture.Options) (*mcpfixture.Fixture, string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	f, err := mcpfixture.Start(ctx, o)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- f.Serve(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
		f.Close()
	})
	tok, err := f.Token(time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return f, tok
}

// TestConformanceSuite runs every server scenario the official suite
// requires of a protocol revision against the fixture server, through a
// loopback proxy that adds a valid bearer token (the suite sends none).
// Nothing is baselined: any failure of a scenario the revision requires
// fails the test.
func TestConformanceSuite(t *testing.T) {
	dir := interopDir(t)
	node, err := mcpfixture.Node(dir, mcpfixture.NodeMajor)
	if err != nil {
		t.Skip(err)
	}
	for _, c := range []struct {
		rev      string
		sessions bool
		required int // the revision's server scenarios (`list --server`), all of which must pass
	}{
		// One endpoint with sessions serves both eras; the default
		// (stateless) endpoint serves 2026-07-28 as is.
		{"2025-11-25", true, 30},
		{"2026-07-28", true, 37},
		{"2026-07-28", false, 37},
	} {
		rev := c.rev
		name := rev + map[bool]string{true: "/sessions", false: "/stateless"}[c.sessions]
		t.Run(name, func(t *testing.T) {
			f, tok := start(t, mcpfixture.Options{HTTP: server.HTTPOptions{Sessions: c.sessions}})
			front, stop, err := mcpfixture.TokenProxy(f.HTTP.ResourceURL, tok)
			if err != nil {
				t.Fatal(err)
			}
			defer stop()
			outDir := os.Getenv("TENANTMCP_CONFORMANCE_OUT") // keep the per-scenario results there
			if outDir == "" {
				outDir = t.TempDir()
			} else {
				outDir = filepath.Join(outDir, name)
			}
			args := []string{filepath.Join(dir, "node_modules", "@modelcontextprotocol", "conformance", "dist", "index.js"),
				"server", "--url", front + "/mcp", "--requirements", rev, "-o", outDir}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			out, err := exec.CommandContext(ctx, node, args...).CombinedOutput()
			t.Logf("conformance suite (%s) output:\n%s", rev, tail(string(out), 80))
			if err != nil {
				t.Fatalf("conformance suite %s: %v", rev, err)
			}
			// An exit status of 0 is not enough: the scenarios must have run
			// and passed (extension and pending ones are not required).
			if n := passedScenarios(t, outDir); n < c.required {
				t.Fatalf("conformance suite %s: %d scenarios passed every check, want at least %d", rev, n, c.required)
			}
		})
	}
}

// passedScenarios counts the scenario results under dir whose checks all
// succeeded (SKIPPED, INFO and WARNING are not failures).
func passedScenarios(t *testing.T, dir string) int {
	files, err := filepath.Glob(filepath.Join(dir, "*", "checks.json"))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var checks []struct{ Status string }
		if err := json.Unmarshal(b, &checks); err != nil || len(checks) == 0 {
			continue
		}
		if !slices.ContainsFunc(checks, func(c struct{ Status string }) bool { return c.Status == "FAILURE" }) {
			n++
		}
	}
	return n
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
