package server_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tenantmcp/tenantmcp/claims/devtoken"
	"github.com/tenantmcp/tenantmcp/guardedsql"
	"github.com/tenantmcp/tenantmcp/redact"
	"github.com/tenantmcp/tenantmcp/server"
)

func TestSurfaceRegistrationRefusesTenantNames(t *testing.T) {
	f := newFixture(t, nil)
	read := func(context.Context, *guardedsql.DB, map[string]string) (empty, error) { return empty{}, nil }
	for _, tmpl := range []string{"notes://{org}/notes", "notes://x/{tenant_id}", "notes://x/{orgId}", "notes://x{?id,org_id}"} {
		err := server.AddResourceTemplate(f.srv, server.ResourceTemplate{URITemplate: tmpl, Name: "n"}, read)
		var te *server.TenantInputError
		if !errors.Is(err, server.ErrTenantInInput) || !errors.As(err, &te) || te.Tool != "n" {
			t.Errorf("template %s: err = %v", tmpl, err)
		}
	}
	prompt := func(context.Context, *guardedsql.DB, map[string]string) (string, empty, error) {
		return "", empty{}, nil
	}
	if err := server.AddPrompt(f.srv, server.Prompt{Name: "p", Args: []server.PromptArg{{Name: "tenant"}}}, prompt); !errors.Is(err, server.ErrTenantInInput) {
		t.Errorf("prompt argument named tenant: err = %v", err)
	}
	if err := server.AddResourceTemplate(f.srv, server.ResourceTemplate{URITemplate: "notes://x/{id}", Name: "n",
		Complete: map[string]server.Completion{"other": {}}}, read); !errors.Is(err, server.ErrConfig) {
		t.Errorf("completion of a variable the template lacks: err = %v", err)
	}
	if err := server.AddResourceTemplate(f.srv, server.ResourceTemplate{URITemplate: "notes://x/{id}", Name: "n"}, read); err != nil {
		t.Errorf("clean template refused: %v", err)
	}
	if err := server.AddResourceTemplate(f.srv, server.ResourceTemplate{URITemplate: "notes://x/{id}", Name: "n"}, read); !errors.Is(err, server.ErrConfig) {
		t.Errorf("duplicate template: err = %v", err)
	}
}

// TestRequireAtCallTime: with no HTTP in front (stdio), a call the token
// does not meet the Require of is refused before the handler with a
// JSON-RPC error carrying the rule and what is required; lists hide it.
func TestRequireAtCallTime(t *testing.T) {
	ran := 0
	h := func(context.Context, *guardedsql.DB, empty) (empty, error) { ran++; return empty{}, nil }
	for _, c := range []struct {
		name   string
		roles  []string
		scopes []string
		allow  bool
	}{
		{"neither", nil, nil, false},
		{"role only", []string{"admin"}, nil, false},
		{"scope only", nil, []string{"notes:write"}, false},
		{"other role and scope", []string{"clerk"}, []string{"notes:read", "notes:write"}, false},
		{"both", []string{"clerk", "admin"}, []string{"notes:read", "notes:write"}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			// A fresh server per case: Run serves one stdio client.
			f := newFixture(t, nil)
			ran = 0
			if err := server.AddTool(f.srv, server.Tool{Name: "purge", Require: server.Require{Roles: []string{"admin"}, Scopes: []string{"notes:write"}}}, h); err != nil {
				t.Fatal(err)
			}
			tok, _ := f.issuer.Mint(devtoken.Token{Subject: "ann", Groups: []string{"org:north"}, Roles: c.roles, Extra: oauthScope(c.scopes)})
			cs, err := connectStdio(t, f, staticToken(tok))
			if err != nil {
				t.Fatal(err)
			}
			tools, err := cs.ListTools(context.Background(), nil)
			if err != nil {
				t.Fatal(err)
			}
			listed := slices.ContainsFunc(tools.Tools, func(x *mcp.Tool) bool { return x.Name == "purge" })
			_, err = cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "purge", Arguments: map[string]any{}})
			if c.allow {
				if err != nil || ran != 1 || !listed {
					t.Fatalf("allowed caller: err %v, ran %d, listed %v", err, ran, listed)
				}
				return
			}
			if listed {
				t.Error("tools/list shows the tool to a caller who may not call it")
			}
			var je *jsonrpc.Error
			if !errors.As(err, &je) || je.Code != server.CodeDenied || ran != 0 {
				t.Fatalf("err %v, ran %d", err, ran)
			}
			var data struct {
				Rule    string         `json:"rule"`
				Tool    string         `json:"tool"`
				Witness map[string]any `json:"witness"`
			}
			if err := json.Unmarshal(je.Data, &data); err != nil || data.Rule != server.RuleInsufficientScope || data.Tool != "purge" || data.Witness["scope"] != "notes:write" {
				t.Errorf("error data %s", je.Data)
			}
		})
	}
	d := &server.DenyError{Rule: server.RuleInsufficientScope}
	if !errors.Is(d, server.ErrInsufficientScope) || !errors.Is(d, server.ErrDenied) || errors.Is(&server.DenyError{Rule: server.RuleScopeRequired}, server.ErrInsufficientScope) {
		t.Error("errors.Is on the insufficient-scope denial")
	}
}

// TestRequireOverHTTP: 403 with the insufficient_scope challenge naming
// the scope, before the SDK; metadata lists the scopes.
func TestRequireOverHTTP(t *testing.T) {
	f := newFixture(t, nil)
	ran := 0
	if err := server.AddTool(f.srv, server.Tool{Name: "purge", Require: server.Require{Scopes: []string{"notes:write"}}},
		func(context.Context, *guardedsql.DB, empty) (empty, error) { ran++; return empty{}, nil }); err != nil {
		t.Fatal(err)
	}
	h, err := f.srv.Handler(server.HTTPOptions{ResourceURL: "https://notes.test/mcp", ScopesSupported: []string{"notes:read"}})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(h)
	defer ts.Close()
	post := func(tok, body string) *http.Response { return postJSONRPC(t, ts.URL+"/mcp", tok, body) }
	call := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"purge","arguments":{}}}`
	reader, _ := f.issuer.Mint(devtoken.Token{Subject: "ann", Groups: []string{"org:north"}, Extra: oauthScope([]string{"notes:read"})})
	resp := post(reader, call)
	resp.Body.Close()
	ch := resp.Header.Get("WWW-Authenticate")
	if resp.StatusCode != http.StatusForbidden || !strings.Contains(ch, `error="insufficient_scope"`) || !strings.Contains(ch, `scope="notes:write"`) || ran != 0 {
		t.Fatalf("status %d, challenge %q, ran %d", resp.StatusCode, ch, ran)
	}
	writer, _ := f.issuer.Mint(devtoken.Token{Subject: "ann", Groups: []string{"org:north"}, Extra: oauthScope([]string{"notes:write"})})
	resp = post(writer, call)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || ran != 1 {
		t.Fatalf("allowed call: status %d, ran %d: %s", resp.StatusCode, ran, body)
	}
	mresp, err := http.Get(ts.URL + server.WellKnownProtectedResource + "/mcp")
	if err != nil {
		t.Fatal(err)
	}
	var meta struct {
		Scopes []string `json:"scopes_supported"`
	}
	json.NewDecoder(mresp.Body).Decode(&meta)
	mresp.Body.Close()
	if !slices.Equal(meta.Scopes, []string{"notes:read", "notes:write"}) {
		t.Errorf("scopes_supported = %v", meta.Scopes)
	}
}

// TestCompletionRedaction: a value the caller's role may not see, and a
// value the detectors flag, are never suggested.
func TestCompletionRedaction(t *testing.T) {
	red, err := redact.New(redact.Options{Reveal: map[string][]redact.Category{"desk": {redact.Name}}})
	if err != nil {
		t.Fatal(err)
	}
	f := newFixture(t, func(o *server.Options) { o.Redactor = red })
	err = server.AddPrompt(f.srv, server.Prompt{Name: "brief", Args: []server.PromptArg{
		{Name: "guest", Complete: &server.Completion{PII: redact.Name, Func: func(context.Context, *guardedsql.DB, string, map[string]string) ([]string, error) {
			return []string{"Ann Lee", "Bob Roe"}, nil
		}}},
		{Name: "note", Complete: &server.Completion{Func: func(context.Context, *guardedsql.DB, string, map[string]string) ([]string, error) {
			return []string{"late arrival", "mail ann@example.com"}, nil
		}}},
	}}, func(context.Context, *guardedsql.DB, map[string]string) (string, empty, error) {
		return "x", empty{}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		roles []string
		arg   string
		want  []string
	}{
		{[]string{"desk"}, "guest", []string{"Ann Lee", "Bob Roe"}},
		{[]string{"clerk"}, "guest", []string{}},
		{[]string{"desk"}, "note", []string{"late arrival"}},
	} {
		tok, _ := f.issuer.Mint(devtoken.Token{Subject: "ann", Groups: []string{"org:north"}, Roles: c.roles})
		h, err := f.srv.Handler(server.HTTPOptions{ResourceURL: "https://notes.test/mcp"})
		if err != nil {
			t.Fatal(err)
		}
		ts := httptest.NewServer(h)
		body := `{"jsonrpc":"2.0","id":1,"method":"completion/complete","params":{"ref":{"type":"ref/prompt","name":"brief"},"argument":{"name":"` + c.arg + `","value":""}}}`
		resp := postJSONRPC(t, ts.URL+"/mcp", tok, body)
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		ts.Close()
		var out struct {
			Result struct {
				Completion struct {
					Values []string `json:"values"`
				} `json:"completion"`
			} `json:"result"`
		}
		// The stateless handler may answer as SSE: take the data line.
		js := string(raw)
		if i := strings.Index(js, "data: "); i >= 0 {
			js = strings.TrimSpace(js[i+6:])
		}
		if err := json.Unmarshal([]byte(js), &out); err != nil {
			t.Fatalf("%v: %s", err, raw)
		}
		got := out.Result.Completion.Values
		if got == nil {
			got = []string{}
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("roles %v, %s: %v, want %v", c.roles, c.arg, got, c.want)
		}
	}
}

// oauthScope is the token's OAuth "scope" claim, space-separated.
func oauthScope(scopes []string) map[string]any {
	if len(scopes) == 0 {
		return nil
	}
	return map[string]any{"scope": strings.Join(scopes, " ")}
}

// postJSONRPC posts one JSON-RPC message with a bearer token, as a
// streamable HTTP client would.
func postJSONRPC(t *testing.T, url, tok, body string) *http.Response {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+tok)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// TestResourceErrorsRevealNothing: a resource handler's errors reach the
// client (here over stdio) as JSON-RPC errors that carry no value the
// handler mentioned; not found is exactly the go-sdk's "no such URI".
func TestResourceErrorsRevealNothing(t *testing.T) {
	f := newFixture(t, nil)
	secret := "jane.doe@example.com"
	err := server.AddResourceTemplate(f.srv, server.ResourceTemplate{URITemplate: "notes://fail/{mode}", Name: "fail"},
		func(ctx context.Context, _ *guardedsql.DB, vars map[string]string) (empty, error) {
			switch vars["mode"] {
			case "internal":
				return empty{}, errors.New("db exploded near row of " + secret)
			case "input":
				return empty{}, server.InvalidInput("no guest %s here", secret)
			case "panic":
				panic("boom " + secret)
			}
			return empty{}, guardedsql.ErrNotFound
		})
	if err != nil {
		t.Fatal(err)
	}
	tok, _ := f.issuer.Mint(devtoken.Token{Subject: "ann", Groups: []string{"org:north"}})
	cs, err := connectStdio(t, f, staticToken(tok))
	if err != nil {
		t.Fatal(err)
	}
	read := func(uri string) *jsonrpc.Error {
		_, err := cs.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: uri})
		var je *jsonrpc.Error
		if !errors.As(err, &je) {
			t.Fatalf("%s: %v", uri, err)
		}
		return je
	}
	for mode, want := range map[string]string{"internal": "internal error (correlation id ", "input": "no guest ", "panic": "internal error (correlation id "} {
		je := read("notes://fail/" + mode)
		if !strings.HasPrefix(je.Message, want) || strings.Contains(je.Message+string(je.Data), secret) {
			t.Errorf("%s: %d %q %s", mode, je.Code, je.Message, je.Data)
		}
	}
	nf, none := read("notes://fail/notfound"), read("notes://nothing")
	if nf.Code != none.Code || nf.Message != none.Message {
		t.Errorf("not found %d %q vs unknown URI %d %q", nf.Code, nf.Message, none.Code, none.Message)
	}
	if strings.Contains(f.audit.String(), secret) {
		t.Fatalf("audit log leaks the e-mail:\n%s", f.audit.String())
	}
}

// TestRequireOnResourcesAndPrompts: the same Require hides and refuses
// resources, templates and prompts, and their completions answer nothing.
func TestRequireOnResourcesAndPrompts(t *testing.T) {
	for _, admin := range []bool{false, true} {
		f := newFixture(t, nil)
		adm := server.Require{Roles: []string{"admin"}}
		read := func(context.Context, *guardedsql.DB, map[string]string) (empty, error) { return empty{}, nil }
		names := &server.Completion{Func: func(context.Context, *guardedsql.DB, string, map[string]string) ([]string, error) {
			return []string{"north"}, nil
		}}
		errs := []error{
			server.AddResource(f.srv, server.Resource{URI: "notes://all", Name: "all", Require: adm}, read),
			server.AddResourceTemplate(f.srv, server.ResourceTemplate{URITemplate: "notes://n/{id}", Name: "one", Require: adm}, read),
			server.AddPrompt(f.srv, server.Prompt{Name: "audit", Require: adm, Args: []server.PromptArg{{Name: "who", Complete: names}}},
				func(context.Context, *guardedsql.DB, map[string]string) (string, empty, error) {
					return "x", empty{}, nil
				}),
		}
		for _, err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
		var roles []string
		if admin {
			roles = []string{"admin"}
		}
		tok, _ := f.issuer.Mint(devtoken.Token{Subject: "ann", Groups: []string{"org:north"}, Roles: roles})
		cs, err := connectStdio(t, f, staticToken(tok))
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		rl, err1 := cs.ListResources(ctx, nil)
		tl, err2 := cs.ListResourceTemplates(ctx, nil)
		pl, err3 := cs.ListPrompts(ctx, nil)
		if err := errors.Join(err1, err2, err3); err != nil {
			t.Fatal(err)
		}
		if n := len(rl.Resources) + len(tl.ResourceTemplates) + len(pl.Prompts); admin && n != 3 || !admin && n != 0 {
			t.Errorf("admin=%v: %d items listed", admin, n)
		}
		_, rerr := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "notes://n/7"})
		_, perr := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "audit"})
		comp, cerr := cs.Complete(ctx, &mcp.CompleteParams{Ref: &mcp.CompleteReference{Type: "ref/prompt", Name: "audit"}, Argument: mcp.CompleteParamsArgument{Name: "who", Value: "n"}})
		if cerr != nil {
			t.Fatal(cerr)
		}
		if admin {
			if rerr != nil || perr != nil || len(comp.Completion.Values) != 1 {
				t.Errorf("admin: read %v, prompt %v, completion %v", rerr, perr, comp.Completion.Values)
			}
			continue
		}
		for what, err := range map[string]error{"read": rerr, "prompt": perr} {
			var je *jsonrpc.Error
			if !errors.As(err, &je) || je.Code != server.CodeDenied || !strings.Contains(string(je.Data), server.RuleInsufficientScope) {
				t.Errorf("non-admin %s: %v", what, err)
			}
		}
		if len(comp.Completion.Values) != 0 {
			t.Errorf("non-admin completion %v", comp.Completion.Values)
		}
	}
}
