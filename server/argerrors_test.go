package server_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tenantmcp/tenantmcp/claims/devtoken"
	"github.com/tenantmcp/tenantmcp/guardedsql"
	"github.com/tenantmcp/tenantmcp/server"
)

type GetThingIn struct {
	ID    int64 `json:"id"`
	Inner struct {
		N int8 `json:"n"`
	} `json:"inner"`
}

// Argument errors say what is wrong in the input schema's terms: the
// argument's path and the JSON type it must have. They name no Go type
// and do not echo the value the client sent.
func TestArgumentErrorsSpeakSchema(t *testing.T) {
	f := newFixture(t, nil)
	if err := server.AddTool(f.srv, server.Tool{Name: "get_thing"}, func(_ context.Context, _ *guardedsql.DB, in GetThingIn) (empty, error) {
		return empty{}, nil
	}); err != nil {
		t.Fatal(err)
	}
	tok, _ := f.issuer.Mint(devtoken.Token{Subject: "ann", Groups: []string{"org:north"}})
	cs, err := connectStdio(t, f, staticToken(tok))
	if err != nil {
		t.Fatal(err)
	}
	const secret = "hunter2-leak-marker"
	for _, tc := range []struct {
		args string
		want string
	}{
		{`{"id": 5.0, "inner": {"n": 1}}`, `argument "id" must be an integer from -9223372036854775808 to 9223372036854775807, written without a fraction or exponent`},
		{`{"id": 5.5, "inner": {"n": 1}}`, `argument "id" must be an integer, not a number`},
		{`{"id": "` + secret + `", "inner": {"n": 1}}`, `argument "id" must be an integer, not a string`},
		{`{"id": 1, "inner": {"n": "` + secret + `"}}`, `argument "inner.n" must be an integer, not a string`},
		{`{"id": 1, "inner": {"n": 300}}`, `argument "inner.n" must be at most 127`},
		{`{"inner": {"n": 1}}`, `the arguments: missing required property "id"`},
		{`{"id": 1, "inner": {"n": 1}, "zz": 1}`, `the arguments: unknown property "zz"`},
		{`{"id": 1, "inner": {"n": 1}, "` + secret + ` x": 1}`, `the arguments: an unknown property`},
	} {
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "get_thing", Arguments: json.RawMessage(tc.args)})
		if err != nil || !res.IsError {
			t.Fatalf("%s: %v %+v", tc.args, err, res)
		}
		msg := res.Content[0].(*mcp.TextContent).Text
		if !strings.Contains(msg, tc.want) {
			t.Errorf("%s: %q, want it to contain %q", tc.args, msg, tc.want)
		}
		for _, bad := range []string{"GetThingIn", "int64", "int8", "Go struct", "json:", secret, "validating"} {
			if strings.Contains(msg, bad) {
				t.Errorf("%s: %q names %q", tc.args, msg, bad)
			}
		}
	}
}

// The 400 responses of the HTTP endpoint do not echo what the client
// sent (the go-sdk's quote JSON decoding errors with Go types).
func TestBadRequestsDoNotEcho(t *testing.T) {
	f := newFixture(t, nil)
	h, err := f.srv.Handler(server.HTTPOptions{ResourceURL: f.issuer.Audience})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(h)
	defer ts.Close()
	tok, _ := f.issuer.Mint(devtoken.Token{Subject: "ann", Groups: []string{"org:north"}})
	const marker = "leak-marker-7f3a"
	for _, body := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":` + marker,
		`{"jsonrpc":"2.0","id":1,"method":{"` + marker + `":1}}`,
		`[` + marker + `]`,
	} {
		req, _ := http.NewRequest(http.MethodPost, ts.URL+"/mcp", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+tok)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		got, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode/100 != 4 {
			t.Errorf("%s: status %d, want 4xx", body, resp.StatusCode)
		}
		for _, bad := range []string{marker, "json:", "Go struct", "invalid character"} {
			if strings.Contains(string(got), bad) {
				t.Errorf("%s: %d body %q contains %q", body, resp.StatusCode, got, bad)
			}
		}
	}
}
