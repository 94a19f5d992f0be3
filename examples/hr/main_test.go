package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"slices"
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

// TestDevServer runs the command as a developer does (embedded SQLite, the
// development issuer), takes the endpoint from its log and alice's token
// from the file the log names, and lists her departments over MCP: acme's five, no other
// company's.
func TestDevServer(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"-addr", "127.0.0.1:0"}, pw)
		pw.Close()
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("run: %v", err)
		}
	})
	var endpoint, token string
	lines := bufio.NewScanner(pr)
	for token == "" && lines.Scan() {
		l := lines.Text()
		if _, v, ok := strings.Cut(l, " endpoint="); ok {
			endpoint = v
		}
		if _, file, ok := strings.Cut(l, "msg=\"demo tokens written"); ok {
			// The tokens are in the file the line names, never in the log.
			_, file, _ = strings.Cut(file, " file=")
			text, _ := os.ReadFile(strings.Fields(file)[0])
			for _, tl := range strings.Split(string(text), "\n") {
				if v, ok := strings.CutPrefix(tl, "export TOKEN_alice="); ok {
					token = v
				}
			}
			break
		}
	}
	go func() { _, _ = io.Copy(io.Discard, pr) }() // the server's log, from now on
	if endpoint == "" || token == "" {
		t.Fatalf("the command printed no endpoint (%q) or token for alice", endpoint)
	}
	cctx, ccancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer ccancel()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "dev-test", Version: "1"}, nil).Connect(cctx, &mcp.StreamableClientTransport{
		Endpoint: endpoint, HTTPClient: &http.Client{Transport: bearer{token}}, DisableStandaloneSSE: true, MaxRetries: -1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	res, err := cs.CallTool(cctx, &mcp.CallToolParams{Name: "list_departments", Arguments: map[string]any{}})
	if err != nil || res.IsError {
		t.Fatalf("list_departments: %v %+v", err, res)
	}
	raw, _ := json.Marshal(res.StructuredContent)
	var out struct {
		Departments []struct {
			DepartmentID   int64  `json:"department_id"`
			DepartmentName string `json:"department_name"`
		} `json:"departments"`
	}
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatal(err)
	}
	var ids []int64
	for _, d := range out.Departments {
		ids = append(ids, d.DepartmentID)
	}
	// hr.Generate(3): department ids 10, 20, 30, … taken in turn by acme,
	// globex and initech.
	if want := []int64{10, 40, 70, 100, 130}; !slices.Equal(ids, want) {
		t.Fatalf("alice's departments %v, want acme's %v", ids, want)
	}
}
