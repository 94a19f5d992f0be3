package main

import (
	"context"
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
