package server_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tenantmcp/tenantmcp/claims/devtoken"
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

// TestAuthorizationAnswers: a missing role no token can add is a JSON-RPC
// denial that leaves a go-sdk client's session working; a missing OAuth
// scope (of the item, of HTTPOptions.RequiredScopes, or the scope
// RoleScopes maps the missing role to) is 403 with an insufficient_scope
// challenge naming exactly the operation's scopes; offline_access appears
// in no challenge and not in the metadata.
func TestAuthorizationAnswers(t *testing.T) {
	f := newFixture(t, nil)
	for _, tl := range []server.Tool{
		{Name: "ping"},
		{Name: "report", Require: server.Require{Roles: []string{"manager"}}},
		{Name: "audit", Require: server.Require{Roles: []string{"auditor"}, Scopes: []string{"notes:read"}}},
		{Name: "purge", Require: server.Require{Scopes: []string{"notes:write", "notes:read", "offline_access"}}},
	} {
		if err := server.AddTool(f.srv, tl, func(context.Context, *guardedsql.DB, empty) (empty, error) { return empty{}, nil }); err != nil {
			t.Fatal(err)
		}
	}
	ts := httpServer(t, f, server.HTTPOptions{Sessions: true, RequiredScopes: []string{"mcp"},
		ScopesSupported: []string{"offline_access", "notes:read"}, RoleScopes: map[string]string{"auditor": "notes:audit"}})
	mint := func(scopes ...string) string {
		tok, err := f.issuer.Mint(devtoken.Token{Subject: "ann", Groups: []string{"org:north"}, Extra: oauthScope(scopes)})
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	full := mint("mcp", "notes:read")

	// The role denial keeps the 2025 session (the go-sdk client closes it
	// on a 403) and is audited.
	cs, err := connectHTTP(context.Background(), ts.URL, full)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	_, err = cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "report", Arguments: map[string]any{}})
	var werr *jsonrpc.Error
	if !errors.As(err, &werr) || werr.Code != server.CodeDenied {
		t.Fatalf("role denial: %v", err)
	}
	if _, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "ping", Arguments: map[string]any{}}); err != nil {
		t.Fatalf("the session did not survive the role denial: %v", err)
	}

	for _, c := range []struct {
		name, tok, tool string
		scope           string // the challenge's scope, "" for no challenge
	}{
		{"role no scope grants", full, "report", ""},
		{"item scopes", mint("mcp", "notes:read"), "purge", "notes:read notes:write"},
		{"role mapped to a scope", full, "audit", "notes:audit notes:read"},
		{"required scopes", mint("notes:read"), "ping", "mcp"},
		{"required and item scopes", mint("notes:read"), "purge", "mcp notes:read notes:write"},
	} {
		w := post(t, ts.URL+"/mcp", c.tok, req2026("tools/call", `"name":"`+c.tool+`","arguments":{}`), hdr2026("tools/call", c.tool)...)
		ch := w.header.Get("WWW-Authenticate")
		if c.scope == "" {
			if w.status != http.StatusOK || ch != "" || w.msg.Error == nil || w.msg.Error.Code != server.CodeDenied {
				t.Errorf("%s: %d %q %s", c.name, w.status, ch, w.raw)
			}
			continue
		}
		if w.status != http.StatusForbidden || !strings.HasPrefix(ch, `Bearer error="insufficient_scope", scope="`+c.scope+`"`) ||
			!strings.Contains(ch, `resource_metadata="https://notes.test/.well-known/oauth-protected-resource/mcp"`) || strings.Contains(ch, "offline_access") {
			t.Errorf("%s: %d, WWW-Authenticate %q", c.name, w.status, ch)
		}
	}
	resp, err := http.Get(ts.URL + server.WellKnownProtectedResource + "/mcp")
	if err != nil {
		t.Fatal(err)
	}
	meta, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if strings.Contains(string(meta), "offline_access") || !strings.Contains(string(meta), `"notes:audit"`) {
		t.Errorf("metadata: %s", meta)
	}
	for _, o := range []server.HTTPOptions{{RequiredScopes: []string{"offline_access"}}, {RoleScopes: map[string]string{"auditor": "offline_access"}}} {
		o.ResourceURL = "https://notes.test/mcp"
		if _, err := f.srv.Handler(o); !errors.Is(err, server.ErrConfig) {
			t.Errorf("%+v: %v, want ErrConfig", o, err)
		}
	}
}

// TestErrorDataOnTheWire: the 400 answers of 2026-07-28 requests keep the
// error data the spec requires (-32022 supported and requested, a
// resource-not-found's uri), with a value the client could have crafted
// replaced rather than echoed or dropped; a header mismatch keeps its code
// and echoes no header value.
func TestErrorDataOnTheWire(t *testing.T) {
	f := newFixture(t, nil)
	if err := server.AddTool(f.srv, server.Tool{Name: "ping"}, func(context.Context, *guardedsql.DB, empty) (empty, error) { return empty{}, nil }); err != nil {
		t.Fatal(err)
	}
	ts := httpServer(t, f, server.HTTPOptions{})
	url, tok := ts.URL+"/mcp", f.token(t, "ann", "north", time.Hour)
	data := func(w wire) map[string]any {
		t.Helper()
		var d map[string]any
		if w.msg.Error == nil || json.Unmarshal(w.msg.Error.Data, &d) != nil {
			t.Fatalf("no error data: %d %s", w.status, w.raw)
		}
		return d
	}
	version := func(v string) wire {
		body := strings.ReplaceAll(req2026("tools/list", ""), `"2026-07-28"`, `"`+v+`"`)
		return post(t, url, tok, body, "MCP-Protocol-Version", v, "Mcp-Method", "tools/list")
	}
	w := version("2099-01-01")
	d := data(w)
	if w.status != http.StatusBadRequest || w.msg.Error.Code != mcp.CodeUnsupportedProtocolVersion || d["requested"] != "2099-01-01" ||
		!strings.Contains(string(w.msg.Error.Data), `"2026-07-28"`) || !strings.Contains(string(w.msg.Error.Data), `"2025-11-25"`) {
		t.Errorf("-32022: %d %s", w.status, w.raw)
	}
	if w = version("v999.0.0"); data(w)["requested"] != "v999.0.0" { // as the conformance suite sends it
		t.Errorf("-32022 for v999.0.0: %s", w.raw)
	}
	if w = version("2099-<img src=x>"); data(w)["requested"] != "(redacted)" || strings.Contains(w.raw, "img") {
		t.Errorf("-32022 with a crafted version: %s", w.raw)
	}

	uri := "notes://nothing/here"
	w = post(t, url, tok, req2026("resources/read", `"uri":"`+uri+`"`), "MCP-Protocol-Version", "2026-07-28", "Mcp-Method", "resources/read", "Mcp-Name", uri)
	if d = data(w); w.status != http.StatusBadRequest || w.msg.Error.Code != jsonrpc.CodeInvalidParams || d["uri"] != uri {
		t.Errorf("resource not found: %d %s", w.status, w.raw)
	}

	w = post(t, url, tok, req2026("tools/call", `"name":"ping","arguments":{}`), hdr2026("tools/call", "pong-secret")...)
	if w.status != http.StatusBadRequest || w.msg.Error == nil || w.msg.Error.Code != mcp.CodeHeaderMismatch || strings.Contains(w.raw, "pong-secret") {
		t.Errorf("-32020: %d %s", w.status, w.raw)
	}
}
