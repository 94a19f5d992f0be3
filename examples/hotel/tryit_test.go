package main

import (
	"context"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tenantmcp/tenantmcp/examples/hotel/hotel"
)

// TestTryItHintWorks runs the start-up hint's commands exactly as printed
// (with the token the user would have exported) against a running hotel
// server, on the machine's own Node: what a new user pastes must work.
func TestTryItHintWorks(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node is not installed; the hint needs Node >= 18")
	}
	root, _ := filepath.Abs("../..")
	if _, err := os.Stat(filepath.Join(root, "interop", "node_modules", "@modelcontextprotocol", "sdk")); err != nil {
		t.Skip("interop clients not installed: run npm ci --prefix interop")
	}
	ctx, cancel := context.WithCancel(context.Background())
	app, err := hotel.New(ctx, hotel.Options{Addr: "127.0.0.1:0"})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- app.Serve(ctx) }()
	t.Cleanup(func() { cancel(); <-done; app.Close() })
	token, err := app.Token(hotel.DemoUsers[0], time.Hour)
	if err != nil {
		t.Fatal(err)
	}

	var ran int
	for _, line := range strings.Split(tryIt(app.HTTP.ResourceURL), "\n") {
		line = strings.TrimSpace(line)
		if !strings.HasPrefix(line, "node ") {
			continue
		}
		ran++
		// The shell would expand "$TOKEN_alice" and strip the quotes.
		cmd := exec.Command("sh", "-c", line)
		cmd.Dir = root
		cmd.Env = append(os.Environ(), "TOKEN_alice="+token, "PATH="+filepath.Dir(node)+":"+os.Getenv("PATH"))
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s: %v\n%s", line, err, out)
		}
		switch {
		case strings.Contains(line, "tools/list") && !strings.Contains(string(out), `"list_bookings"`):
			t.Errorf("%s: no list_bookings in\n%s", line, out)
		case strings.Contains(line, "tools/call") && (!strings.Contains(string(out), `"bookings"`) || strings.Contains(string(out), `"isError": true`)):
			t.Errorf("%s: no bookings in\n%s", line, out)
		}
	}
	if ran < 2 {
		t.Fatalf("the hint has %d node commands:\n%s", ran, tryIt(app.HTTP.ResourceURL))
	}
}

// TestProtocol2026AsTheREADMEStartsIt: the hotel started as the README
// says (no flags) answers a bare MCP 2026-07-28 request, one that carries
// only its _meta and the routing headers (no initialize, no session).
func TestProtocol2026AsTheREADMEStartsIt(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	app, err := hotel.New(ctx, hotel.Options{Addr: "127.0.0.1:0"})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- app.Serve(ctx) }()
	t.Cleanup(func() { cancel(); <-done; app.Close() })
	token, err := app.Token(hotel.DemoUsers[0], time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	post := func(method, name, params string) string {
		t.Helper()
		body := `{"jsonrpc":"2.0","id":1,"method":"` + method + `","params":{` + params +
			`"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`
		req, _ := http.NewRequest(http.MethodPost, app.HTTP.ResourceURL, strings.NewReader(body))
		for k, v := range map[string]string{"Authorization": "Bearer " + token, "Content-Type": "application/json",
			"Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2026-07-28", "Mcp-Method": method} {
			req.Header.Set(k, v)
		}
		if name != "" {
			req.Header.Set("Mcp-Name", name)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		out, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK || resp.Header.Get("Mcp-Session-Id") != "" || !strings.Contains(string(out), `"result"`) {
			t.Fatalf("%s: status %d, session %q: %s", method, resp.StatusCode, resp.Header.Get("Mcp-Session-Id"), out)
		}
		return string(out)
	}
	if out := post("server/discover", "", ""); !strings.Contains(out, `"2026-07-28"`) {
		t.Errorf("server/discover lists no 2026-07-28: %s", out)
	}
	if out := post("tools/call", "list_bookings", `"name":"list_bookings","arguments":{"from":"2020-01-01","to":"2030-01-01"},`); !strings.Contains(out, "bookings") || strings.Contains(out, `"isError":true`) {
		t.Errorf("tools/call: %s", out)
	}
}
