package server_test

import (
	"context"
	"database/sql/driver"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tenantmcp/tenantmcp/claims/devtoken"
	"github.com/tenantmcp/tenantmcp/guardedsql"
	"github.com/tenantmcp/tenantmcp/server"
)

// A handler error that means the database is unreachable reaches the
// client as CodeUnavailable with retryable data and nothing of the
// error's text; any other error stays a non-retryable internal error.
func TestUnavailableIsRetryable(t *testing.T) {
	f := newFixture(t, nil)
	type In struct {
		Mode string `json:"mode"`
	}
	detail := "dial tcp 10.1.2.3:5432 user=app_secret_role"
	err := server.AddTool(f.srv, server.Tool{Name: "q"}, func(ctx context.Context, _ *guardedsql.DB, in In) (empty, error) {
		if in.Mode == "down" {
			return empty{}, fmt.Errorf("%s: %w", detail, driver.ErrBadConn)
		}
		return empty{}, errors.New(detail)
	})
	if err != nil {
		t.Fatal(err)
	}
	cs := f.session(t, "ann", "org:north")
	_, err = cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "q", Arguments: map[string]any{"mode": "down"}})
	var we *jsonrpc.Error
	if !errors.As(err, &we) || we.Code != server.CodeUnavailable {
		t.Fatalf("database down: err = %v, want a JSON-RPC error with code %d", err, server.CodeUnavailable)
	}
	var data struct {
		Retryable bool   `json:"retryable"`
		CallID    string `json:"call_id"`
	}
	if err := json.Unmarshal(we.Data, &data); err != nil || !data.Retryable || data.CallID == "" {
		t.Fatalf("data = %s (%v), want retryable with a call id", we.Data, err)
	}
	for _, part := range []string{"10.1.2.3", "5432", "app_secret_role", "dial"} {
		if strings.Contains(we.Message, part) || strings.Contains(string(we.Data), part) {
			t.Errorf("the retryable error reveals %q: %s %s", part, we.Message, we.Data)
		}
	}
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "q", Arguments: map[string]any{"mode": "bug"}})
	if err != nil || !res.IsError || !strings.HasPrefix(res.Content[0].(*mcp.TextContent).Text, "internal error") {
		t.Fatalf("a bug: %v %+v, want the internal tool error", err, res)
	}
	if !strings.Contains(f.audit.String(), `"outcome":"unavailable"`) {
		t.Errorf("audit log has no unavailable outcome:\n%s", f.audit.String())
	}
}

// session connects a client over in-memory stdio with a token for sub in
// groups.
func (f *fixture) session(t *testing.T, sub string, groups ...string) *mcp.ClientSession {
	t.Helper()
	tok, err := f.issuer.Mint(devtoken.Token{Subject: sub, Groups: groups})
	if err != nil {
		t.Fatal(err)
	}
	cs, err := connectStdio(t, f, staticToken(tok))
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// httpGet returns the status and body of GET url.
func httpGet(t *testing.T, url string) (int, []byte) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, body
}
