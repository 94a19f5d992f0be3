package mcpfixture_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
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
// The suite fails on any failure not listed in the revision's baseline
// (interop/conformance-baseline-REVISION.yml, each entry with its reason)
// and on any listed scenario that passes.
func TestConformanceSuite(t *testing.T) {
	dir := interopDir(t)
	node, err := mcpfixture.Node(dir, mcpfixture.NodeMajor)
	if err != nil {
		t.Skip(err)
	}
	for _, c := range []struct {
		rev      string
		sessions bool
		also     []string // expected failures of this mode only, beside the revision's baseline
	}{
		// One endpoint with sessions serves both eras; the default
		// (stateless) endpoint serves 2026-07-28 as is.
		{"2025-11-25", true, nil},
		{"2026-07-28", true, nil},
		{"2026-07-28", false, nil},
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
			if b, err := os.ReadFile(filepath.Join(dir, "conformance-baseline-"+rev+".yml")); err == nil {
				for _, e := range c.also {
					b = append(b, "  - "+e+"\n"...)
				}
				p := filepath.Join(t.TempDir(), "baseline.yml")
				if err := os.WriteFile(p, b, 0o600); err != nil {
					t.Fatal(err)
				}
				args = append(args, "--expected-failures", p)
			} else if !os.IsNotExist(err) {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			out, err := exec.CommandContext(ctx, node, args...).CombinedOutput()
			t.Logf("conformance suite (%s) output:\n%s", rev, tail(string(out), 80))
			if err != nil {
				t.Fatalf("conformance suite %s: %v", rev, err)
			}
		})
	}
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
