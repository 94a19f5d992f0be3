package server_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tenantmcp/tenantmcp/guardedsql"
	"github.com/tenantmcp/tenantmcp/internal/logbuf"
	"github.com/tenantmcp/tenantmcp/server"
)

// TestMalformedIdentifiers: a NUL (or another character that is not
// printable) in a resource URI, a tool or prompt name, a completion
// reference or a list cursor is refused with invalid params and an audit
// record (that does not repeat it), and the 2025 session goes on. (A NUL
// in a resource URI used to kill the session: the go-sdk's not-found data
// was not JSON, and that and every later request got an empty 200.)
func TestMalformedIdentifiers(t *testing.T) {
	audit := &logbuf.Buffer{}
	f := newFixture(t, func(o *server.Options) { o.AuditLogger = slog.New(slog.NewJSONHandler(audit, nil)) })
	if err := server.AddTool(f.srv, server.Tool{Name: "ping"}, func(context.Context, *guardedsql.DB, empty) (empty, error) { return empty{}, nil }); err != nil {
		t.Fatal(err)
	}
	ts := httpServer(t, f, server.HTTPOptions{Sessions: true})
	tok := f.token(t, "ann", "north", time.Hour)
	cs, err := connectHTTP(context.Background(), ts.URL, tok)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for _, c := range []struct {
		name string
		do   func() error
	}{
		{"resource uri NUL", func() error {
			_, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "notes://a\x00b"})
			return err
		}},
		{"resource uri BEL", func() error { _, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "notes://a\ab"}); return err }},
		{"resource uri tag char", func() error {
			_, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "notes://a\U000E0001"})
			return err
		}},
		{"subscribe uri NUL", func() error { return cs.Subscribe(ctx, &mcp.SubscribeParams{URI: "notes://\x00"}) }},
		{"tool name NUL", func() error {
			_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "pi\x00ng", Arguments: map[string]any{}})
			return err
		}},
		{"prompt name NUL", func() error { _, err := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "p\x00"}); return err }},
		{"completion ref NUL", func() error {
			_, err := cs.Complete(ctx, &mcp.CompleteParams{Ref: &mcp.CompleteReference{Type: "ref/resource", URI: "notes://\x00"}, Argument: mcp.CompleteParamsArgument{Name: "x"}})
			return err
		}},
		{"completion argument NUL", func() error {
			_, err := cs.Complete(ctx, &mcp.CompleteParams{Ref: &mcp.CompleteReference{Type: "ref/prompt", Name: "p"}, Argument: mcp.CompleteParamsArgument{Name: "a\x00"}})
			return err
		}},
		{"cursor NUL", func() error { _, err := cs.ListTools(ctx, &mcp.ListToolsParams{Cursor: "\x00"}); return err }},
		{"cursor DEL", func() error { _, err := cs.ListResources(ctx, &mcp.ListResourcesParams{Cursor: "\x7f"}); return err }},
	} {
		before := strings.Count(audit.String(), `"rule":"request.malformed"`)
		var werr *jsonrpc.Error
		if err := c.do(); !errors.As(err, &werr) || werr.Code != jsonrpc.CodeInvalidParams {
			t.Errorf("%s: %v, want invalid params", c.name, err)
		}
		if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "ping", Arguments: map[string]any{}}); err != nil {
			t.Fatalf("%s: the session did not go on: %v", c.name, err)
		}
		if strings.Count(audit.String(), `"rule":"request.malformed"`) != before+1 {
			t.Errorf("%s: no audit record", c.name)
		}
	}
	if strings.Contains(audit.String(), `\u0000`) || strings.Contains(audit.String(), "notes://") {
		t.Errorf("the audit log repeats the malformed input:\n%s", audit.String())
	}
}
