//lint:file-ignore SA1019 logging is deprecated by 2026-07-28 (SEP-2577) but clients still receive it during the deprecation window

package server_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tenantmcp/tenantmcp/claims/devtoken"
	"github.com/tenantmcp/tenantmcp/guardedsql"
	"github.com/tenantmcp/tenantmcp/server"
)

// heard is what one client session received.
type heard struct {
	mu       sync.Mutex
	progress []*mcp.ProgressNotificationParams
	logs     []*mcp.LoggingMessageParams
}

func (h *heard) counts() (int, int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.progress), len(h.logs)
}

func listen(ctx context.Context, t *testing.T, url, tok string, version string) (*mcp.ClientSession, *heard) {
	t.Helper()
	h := &heard{}
	c := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, &mcp.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, r *mcp.ProgressNotificationClientRequest) {
			h.mu.Lock()
			h.progress = append(h.progress, r.Params)
			h.mu.Unlock()
		},
		LoggingMessageHandler: func(_ context.Context, r *mcp.LoggingMessageRequest) {
			h.mu.Lock()
			h.logs = append(h.logs, r.Params)
			h.mu.Unlock()
		},
	})
	var o *mcp.ClientSessionOptions
	if version != "" {
		o = &mcp.ClientSessionOptions{ProtocolVersion: version}
	}
	cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url + "/mcp", HTTPClient: &http.Client{Transport: bearer{tok}}}, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs, h
}

// TestNotifications: a handler's progress reaches its caller with the
// caller's progressToken and a redacted message; its log message's data
// is redacted; another session (of another tenant) never receives either;
// a 2026-07-28 request without a log level gets no log message.
func TestNotifications(t *testing.T) {
	const secret = "jane.doe@example.com"
	f := newFixture(t, nil)
	err := server.AddTool(f.srv, server.Tool{Name: "work"}, func(ctx context.Context, _ *guardedsql.DB, _ empty) (empty, error) {
		if err := server.Progress(ctx, 1, 2, "mailing "+secret); err != nil {
			return empty{}, err
		}
		return empty{}, server.Log(ctx, "info", "mailer "+secret, map[string]any{"guest": secret, "step": 1})
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := server.Progress(context.Background(), 1, 2, "x"); err == nil {
		t.Error("Progress outside a handler: no error")
	}
	ann, _ := f.issuer.Mint(devtoken.Token{Subject: "ann", Groups: []string{"org:north"}})
	bob, _ := f.issuer.Mint(devtoken.Token{Subject: "bob", Groups: []string{"org:south"}})
	addr, _ := serveFixture(t, f, server.HTTPOptions{Sessions: true})
	url := "http://" + addr
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	for _, version := range []string{"2025-11-25", ""} { // "": the client's latest, 2026-07-28
		t.Run("version="+version, func(t *testing.T) {
			a, ha := listen(ctx, t, url, ann, version)
			b, hb := listen(ctx, t, url, bob, version)
			for _, cs := range []*mcp.ClientSession{a, b} {
				//lint:ignore SA1019 deprecated in 2026-07-28, still spoken by older clients
				if err := cs.SetLoggingLevel(ctx, &mcp.SetLoggingLevelParams{Level: "debug"}); err != nil && version != "" {
					t.Fatal(err)
				}
			}
			p := &mcp.CallToolParams{Name: "work", Arguments: map[string]any{}}
			p.SetProgressToken("tok-1")
			if res, err := a.CallTool(ctx, p); err != nil || res.IsError {
				t.Fatalf("work: %v %+v", err, res)
			}
			time.Sleep(100 * time.Millisecond) // notifications are asynchronous to the result
			ha.mu.Lock()
			if len(ha.progress) != 1 || ha.progress[0].ProgressToken != "tok-1" || ha.progress[0].Progress != 1 ||
				ha.progress[0].Total != 2 || !strings.HasPrefix(ha.progress[0].Message, "mailing ") ||
				strings.Contains(ha.progress[0].Message, secret) {
				t.Errorf("progress = %+v, want one with tok-1, 1/2 and a redacted message", ha.progress)
			}
			wantLogs := 1
			if version == "" {
				wantLogs = 0 // 2026-07-28: no _meta logLevel on the request, no log message
			}
			if len(ha.logs) != wantLogs {
				t.Errorf("got %d log messages, want %d", len(ha.logs), wantLogs)
			}
			for _, l := range ha.logs {
				js, _ := json.Marshal(l)
				if strings.Contains(string(js), secret) || l.Level != "info" || !strings.Contains(string(js), `"step":1`) {
					t.Errorf("log message = %s, want info, step 1 and no e-mail", js)
				}
			}
			ha.mu.Unlock()
			if np, nl := hb.counts(); np+nl != 0 {
				t.Errorf("another session received %d progress and %d log notifications", np, nl)
			}
			// Without a progressToken no progress is sent.
			if _, err := a.CallTool(ctx, &mcp.CallToolParams{Name: "work", Arguments: map[string]any{}}); err != nil {
				t.Fatal(err)
			}
			time.Sleep(100 * time.Millisecond)
			if np, _ := ha.counts(); np != 1 {
				t.Errorf("progress without a token: %d notifications in all, want 1", np)
			}
		})
	}
}
