package server_test

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tenantmcp/tenantmcp/claims/devtoken"
	"github.com/tenantmcp/tenantmcp/guardedsql"
	"github.com/tenantmcp/tenantmcp/internal/logbuf"
	"github.com/tenantmcp/tenantmcp/server"
)

// TestSessionIDNotLogged runs a stateful streamable HTTP session with the
// operational and audit logs at debug level and checks that the
// Mcp-Session-Id value appears in neither (the go-sdk logs it as
// session_id; the server replaces it by a fingerprint).
func TestSessionIDNotLogged(t *testing.T) {
	logs := &logbuf.Buffer{}
	f := newFixture(t, func(o *server.Options) {
		h := slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})
		o.Logger = slog.New(h)
		o.AuditLogger = slog.New(h)
	})
	if err := server.AddTool(f.srv, server.Tool{Name: "ping"}, func(context.Context, *guardedsql.DB, empty) (empty, error) { return empty{}, nil }); err != nil {
		t.Fatal(err)
	}
	h, err := f.srv.Handler(server.HTTPOptions{ResourceURL: f.issuer.Audience, Sessions: true})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(h)
	defer hs.Close()
	tok, _ := f.issuer.Mint(devtoken.Token{Subject: "ann", Groups: []string{"org:north"}})
	ctx := context.Background()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, nil).Connect(ctx, &mcp.StreamableClientTransport{
		Endpoint:   hs.URL + pathOf(f.issuer.Audience),
		HTTPClient: &http.Client{Transport: bearer{tok}},
	}, legacy)
	if err != nil {
		t.Fatal(err)
	}
	id := cs.ID()
	if id == "" {
		t.Fatal("no session id: the test needs stateful mode")
	}
	if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "ping", Arguments: map[string]any{}}); err != nil {
		t.Fatal(err)
	}
	cs.Close()
	out := logs.String()
	if !strings.Contains(out, "session_id_sha256") {
		t.Fatalf("the go-sdk's session records are missing, the test proves nothing:\n%s", out)
	}
	if strings.Contains(out, id) {
		t.Fatalf("the Mcp-Session-Id %q reached the logs:\n%s", id, out)
	}
}

func pathOf(u string) string {
	_, rest, _ := strings.Cut(strings.TrimPrefix(u, "https://"), "/")
	return "/" + rest
}
