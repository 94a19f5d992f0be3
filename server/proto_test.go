package server_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tenantmcp/tenantmcp/guardedsql"
	"github.com/tenantmcp/tenantmcp/server"
)

// wire is one HTTP answer of the MCP endpoint: status, headers and the
// JSON-RPC message (from a JSON or an SSE body).
type wire struct {
	status int
	header http.Header
	raw    string
	msg    struct {
		Result json.RawMessage `json:"result"`
		Error  *struct {
			Code    int64           `json:"code"`
			Message string          `json:"message"`
			Data    json.RawMessage `json:"data"`
		} `json:"error"`
	}
}

// post sends one JSON-RPC body with a bearer token and extra headers.
func post(t *testing.T, url, tok, body string, hdr ...string) wire {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+tok)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	w := wire{status: resp.StatusCode, header: resp.Header, raw: string(b)}
	js := w.raw
	if i := strings.Index(js, "data: "); i >= 0 {
		js = js[i+6:]
		if j := strings.IndexByte(js, '\n'); j >= 0 {
			js = js[:j]
		}
	}
	_ = json.Unmarshal([]byte(js), &w.msg)
	return w
}

// req2026 is a 2026-07-28 request: only its _meta says who the client is.
func req2026(method, params string) string {
	if params != "" {
		params += ","
	}
	return `{"jsonrpc":"2.0","id":7,"method":"` + method + `","params":{` + params +
		`"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`
}

// hdr2026 are a 2026-07-28 request's headers.
func hdr2026(method, name string) []string {
	h := []string{"MCP-Protocol-Version", "2026-07-28", "Mcp-Method", method}
	if name != "" {
		h = append(h, "Mcp-Name", name)
	}
	return h
}

const init2025 = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`

// TestProtocolModes: both modes serve 2026-07-28 requests (server/discover
// lists the version) and a 2025-11-25 initialize; only with Sessions does
// the initialize open a session that a 2025 client keeps using.
func TestProtocolModes(t *testing.T) {
	f := newFixture(t, nil)
	if err := server.AddTool(f.srv, server.Tool{Name: "ping"}, func(context.Context, *guardedsql.DB, empty) (empty, error) { return empty{}, nil }); err != nil {
		t.Fatal(err)
	}
	tok := f.token(t, "ann", "north", time.Hour)
	for _, sessions := range []bool{false, true} {
		ts := httpServer(t, f, server.HTTPOptions{Sessions: sessions})
		url := ts.URL + "/mcp"
		w := post(t, url, tok, req2026("server/discover", ""), hdr2026("server/discover", "")...)
		if w.status != http.StatusOK || !strings.Contains(string(w.msg.Result), `"2026-07-28"`) {
			t.Errorf("sessions=%v: server/discover: %d %s", sessions, w.status, w.raw)
		}
		w = post(t, url, tok, req2026("tools/call", `"name":"ping","arguments":{}`), hdr2026("tools/call", "ping")...)
		if w.status != http.StatusOK || w.msg.Error != nil || len(w.msg.Result) == 0 || w.header.Get("Mcp-Session-Id") != "" {
			t.Errorf("sessions=%v: 2026-07-28 tools/call: %d %s", sessions, w.status, w.raw)
		}
		w = post(t, url, tok, init2025)
		if w.status != http.StatusOK || !strings.Contains(string(w.msg.Result), `"2025-11-25"`) || (w.header.Get("Mcp-Session-Id") != "") != sessions {
			t.Errorf("sessions=%v: 2025-11-25 initialize: %d session %q %s", sessions, w.status, w.header.Get("Mcp-Session-Id"), w.raw)
		}
		cs, err := connectHTTP(context.Background(), ts.URL, tok)
		if err != nil {
			t.Fatalf("sessions=%v: 2025 client: %v", sessions, err)
		}
		if (cs.ID() != "") != sessions {
			t.Errorf("sessions=%v: session id %q", sessions, cs.ID())
		}
		for range 2 {
			if _, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "ping", Arguments: map[string]any{}}); err != nil {
				t.Errorf("sessions=%v: call in the 2025 session: %v", sessions, err)
			}
		}
		cs.Close()
	}
}
