package conformance

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/tenantmcp/tenantmcp/internal/logbuf"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tenantmcp/tenantmcp/claims"
	"github.com/tenantmcp/tenantmcp/claims/devtoken"
	"github.com/tenantmcp/tenantmcp/guardedsql"
	"github.com/tenantmcp/tenantmcp/redact"
	"github.com/tenantmcp/tenantmcp/scope"
	"github.com/tenantmcp/tenantmcp/server"
)

const noTools = "the target has no tool server (Target.Tools is nil)"

// toolServer is the target's tools on a real server.Server, served over
// streamable HTTP on a loopback port, with a development issuer minting
// the tokens and a verifier checking them.
type toolServer struct {
	srv    *server.Server
	issuer *devtoken.Issuer
	url    string
	logs   *logbuf.Buffer
	stop   func()
}

// groupOf is the token group the suite's claim mapping turns into g.
// groupOf is the group string that grants g: its ancestors (which must be
// consecutive levels ending just above g's) then its own level form the
// path; rolesOf adds one role-suffixed group per role bound to g.
func groupOf(g scope.Grant) string {
	path := "tm-conformance"
	for _, w := range g.Within {
		path += "/" + w.Level + "/" + w.ID
	}
	return path + "/" + g.Level + "/" + g.ID
}

// groupsOf is every group string granting g with its roles.
func groupsOf(g scope.Grant) []string {
	if len(g.Roles) == 0 {
		return []string{groupOf(g)}
	}
	var out []string
	for _, role := range g.Roles {
		out = append(out, groupOf(g)+"/role/"+role)
	}
	return out
}

func (r *runner) startTools(p *pt) (ts *toolServer, err error) {
	tools := r.target.Tools
	var undo []func()
	defer func() {
		if err != nil {
			for i := len(undo) - 1; i >= 0; i-- {
				undo[i]()
			}
		}
	}()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	undo = append(undo, func() { ln.Close() })
	public := "http://" + ln.Addr().String() + "/mcp"
	is, err := devtoken.Start(devtoken.Options{Addr: "127.0.0.1:0", Audience: public, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return nil, err
	}
	undo = append(undo, func() { is.Close() })
	// One pattern per level, one per path from an upper level down to it,
	// and each again with a role suffix binding a role to the grant.
	var levels, patterns []string
	for i, l := range r.g.levels {
		levels = append(levels, l.Name)
		for j := i; j >= 0; j-- {
			pat := "tm-conformance"
			for _, a := range r.g.levels[j : i+1] {
				pat += "/" + a.Name + "/{" + a.Name + "}"
			}
			patterns = append(patterns, pat, pat+"/role/"+claims.RolePlaceholder)
		}
	}
	v, err := claims.New(claims.Options{Issuer: is.URL, Audience: []string{public}, JWKS: is.JWKS(),
		Mapping: claims.Mapping{Patterns: patterns, Levels: levels}})
	if err != nil {
		return nil, err
	}
	undo = append(undo, func() { v.Close() })
	red, err := redact.New(tools.Redaction)
	if err != nil {
		return nil, err
	}
	logs := &logbuf.Buffer{}
	lg := slog.New(slog.NewJSONHandler(logs, nil))
	srv, err := server.New(server.Options{Name: "tenantmcp-conformance", Verifier: v, DB: r.db, Redactor: red,
		Levels: tools.Levels, ScopeKeys: tools.ScopeKeys, Logger: lg, AuditLogger: lg})
	if err != nil {
		return nil, err
	}
	if err := tools.Register(srv); err != nil {
		return nil, fmt.Errorf("registering the target's tools: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- srv.Serve(ctx, ln, server.HTTPOptions{ResourceURL: public, AuthorizationServers: []string{is.URL}})
	}()
	return &toolServer{srv: srv, issuer: is, url: public, logs: logs, stop: func() {
		cancel()
		if err := <-done; err != nil {
			p.Errorf("tool server: %v", err)
		}
		v.Close()
		is.Close()
	}}, nil
}

type bearer struct {
	token string
	base  http.RoundTripper
}

func (b bearer) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context())
	req.Header.Set("Authorization", "Bearer "+b.token)
	return b.base.RoundTrip(req)
}

// session connects an MCP client with a real token for tn and roles.
func (ts *toolServer) session(ctx context.Context, tn Tenant, roles []string) (*mcp.ClientSession, error) {
	var groups []string
	for _, g := range tn.Grants {
		groups = append(groups, groupsOf(g)...)
	}
	tok, err := ts.issuer.Mint(devtoken.Token{Subject: "conformance-" + tn.Name, Groups: groups, Roles: roles, TTL: 10 * time.Minute})
	if err != nil {
		return nil, err
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "tenantmcp-conformance", Version: "1"}, nil)
	return client.Connect(ctx, &mcp.StreamableClientTransport{
		Endpoint:             ts.url,
		HTTPClient:           &http.Client{Transport: bearer{tok, http.DefaultTransport}, Timeout: time.Minute},
		DisableStandaloneSSE: true,
		MaxRetries:           -1,
	}, nil)
}

// forbiddenKey reports whether a property name is a scope key for the
// target: the server's default keys, the target's extra keys, each level
// and "<level>_id", compared without case and separators. It is the
// suite's own reading of the rule, not the server's code.
func (r *runner) forbiddenKey(name string) bool {
	norm := func(s string) string {
		s = strings.ToLower(s)
		for _, sep := range []string{"_", "-", " ", "."} {
			s = strings.ReplaceAll(s, sep, "")
		}
		return s
	}
	keys := slices.Clone(server.DefaultScopeKeys)
	keys = append(keys, r.target.Tools.ScopeKeys...)
	for _, l := range r.g.levels {
		keys = append(keys, l.Name, l.Name+"_id")
	}
	for _, k := range keys {
		if norm(k) == norm(name) {
			return true
		}
	}
	return false
}

// schemaKeys collects every property name (and required name) anywhere in
// a JSON schema document.
func schemaKeys(v any, path string, out map[string]string) {
	switch x := v.(type) {
	case map[string]any:
		if props, ok := x["properties"].(map[string]any); ok {
			for k := range props {
				out[path+"/"+k] = k
			}
		}
		if req, ok := x["required"].([]any); ok {
			for _, k := range req {
				if s, ok := k.(string); ok {
					out[path+"/"+s] = s
				}
			}
		}
		for k, sub := range x {
			schemaKeys(sub, path+"/"+k, out)
		}
	case []any:
		for _, sub := range x {
			schemaKeys(sub, path+"/*", out)
		}
	}
}

// P19: the target's tools register on a real server and every tool's
// input schema, as a client lists it, names no tenant key; a tool whose
// input names one (top-level, nested, camel-cased, in an array) is refused
// at registration with a *server.TenantInputError and never listed, while
// a tenant-free control tool registers.
func propToolInputs(p *pt, r *runner) {
	if r.target.Tools == nil {
		p.Skipf(noTools)
	}
	ts, err := r.startTools(p)
	if err != nil {
		p.Fatalf("%v", err)
	}
	defer ts.stop()
	type filter struct {
		Org string `json:"org"`
	}
	type nested struct {
		Query  string `json:"query"`
		Filter filter `json:"filter"`
	}
	type camel struct {
		ChainID string `json:"chainId"`
	}
	type item struct {
		Tenant string `json:"tenant"`
	}
	type inArray struct {
		Items []item `json:"items"`
	}
	type top struct {
		TenantID string `json:"tenant_id"`
	}
	type clean struct {
		Query string `json:"query"`
	}
	refusals := map[string]error{
		"tm_conformance_top":    server.AddTool(ts.srv, server.Tool{Name: "tm_conformance_top"}, func(context.Context, *guardedsql.DB, top) (clean, error) { return clean{}, nil }),
		"tm_conformance_nested": server.AddTool(ts.srv, server.Tool{Name: "tm_conformance_nested"}, func(context.Context, *guardedsql.DB, nested) (clean, error) { return clean{}, nil }),
		"tm_conformance_camel":  server.AddTool(ts.srv, server.Tool{Name: "tm_conformance_camel"}, func(context.Context, *guardedsql.DB, camel) (clean, error) { return clean{}, nil }),
		"tm_conformance_array":  server.AddTool(ts.srv, server.Tool{Name: "tm_conformance_array"}, func(context.Context, *guardedsql.DB, inArray) (clean, error) { return clean{}, nil }),
	}
	for name, err := range refusals {
		var tie *server.TenantInputError
		if !errors.As(err, &tie) || !errors.Is(err, server.ErrTenantInInput) {
			p.Errorf("AddTool %s with a tenant-keyed input = %v; want *server.TenantInputError", name, err)
		}
	}
	if err := server.AddTool(ts.srv, server.Tool{Name: "tm_conformance_clean"}, func(context.Context, *guardedsql.DB, clean) (clean, error) { return clean{}, nil }); err != nil {
		p.Errorf("control: a tenant-free tool was refused: %v", err)
	}
	cs, err := ts.session(p.ctx, r.tenants[0], nil)
	if err != nil {
		p.Fatalf("connecting: %v", err)
	}
	defer cs.Close()
	listed := map[string]bool{}
	for tool, err := range cs.Tools(p.ctx, nil) {
		if err != nil {
			p.Fatalf("listing tools: %v", err)
		}
		listed[tool.Name] = true
		raw, err := json.Marshal(tool.InputSchema)
		if err != nil {
			p.Errorf("tool %s: input schema: %v", tool.Name, err)
			continue
		}
		var doc any
		_ = json.Unmarshal(raw, &doc)
		keys := map[string]string{}
		schemaKeys(doc, "", keys)
		for path, k := range keys {
			if r.forbiddenKey(k) {
				p.Errorf("tool %s: input property %s names the tenant key %q", tool.Name, path, k)
			}
		}
	}
	for name := range refusals {
		if listed[name] {
			p.Errorf("refused tool %s is listed", name)
		}
	}
	if !listed["tm_conformance_clean"] {
		p.Errorf("control tool not listed; the listing proves nothing")
	}
	if len(listed) < 2 {
		p.Errorf("the target registered no tools")
	}
	p.Logf("%d tools listed, inputs tenant-free; %d tenant-keyed inputs refused", len(listed)-1, len(refusals))
}

// P20: calling the target's tools in process, through the real server
// with real signed tokens, as every tenant and every caller role: no
// output (structured content, text, error message) and no log line
// contains a planted PII canary of another tenant or of a category the
// caller's roles may not see; at least one canary the caller may see does
// come back, so the calls did read PII-bearing rows.
func propCanaries(p *pt, r *runner) {
	tools := r.target.Tools
	if tools == nil || tools.Calls == nil || tools.Canaries == nil {
		p.Skipf(noTools + " or has no Calls/Canaries")
	}
	canaries := tools.Canaries(r.data)
	if len(canaries) == 0 {
		p.Fatalf("Tools.Canaries returned none; plant PII canaries in the seed")
	}
	for _, c := range canaries {
		if _, ok := r.or.byPK[c.Table][c.Key]; !ok {
			p.Fatalf("canary %q names row %s of %s, which the Dataset lacks", c.Value, c.Key, c.Table)
		}
	}
	ts, err := r.startTools(p)
	if err != nil {
		p.Fatalf("%v", err)
	}
	defer ts.stop()
	callers := tools.Callers
	if len(callers) == 0 {
		callers = [][]string{nil}
	}
	shown, calls, failed := 0, 0, 0
	var firstFailure string
	for _, tn := range r.tenants {
		for _, roles := range callers {
			revealed := map[redact.Category]bool{}
			for _, role := range roles {
				for _, c := range tools.Redaction.Reveal[role] {
					revealed[c] = true
				}
			}
			who := callerName(tn, roles)
			text, err := ts.callTools(p, who, tn, roles, tools.Calls(r.data, tn))
			if err != nil {
				p.Fatalf("calling as %s: %v", who, err)
			}
			p.mu.Lock()
			if t := p.tallies[who]; t != nil {
				calls += t.calls
				failed += t.failed
				if firstFailure == "" {
					firstFailure = t.first
				}
			}
			p.mu.Unlock()
			for _, c := range canaries {
				// The caller's own row only if the graph's reading and the
				// live catalog's (P58) agree that it is.
				mine := r.or.visible(c.Table, tn.Grants)[c.Key] && !r.catForeign(c.Table, c.Key, tn)
				allowed := mine && revealed[c.Category] && c.Category != redact.Secret
				if !strings.Contains(text, c.Value) {
					continue
				}
				if allowed {
					shown++
					continue
				}
				why := "of another tenant"
				if mine {
					why = fmt.Sprintf("of category %s, which roles %v may not see", c.Category, roles)
				}
				where := c.Table + "." + c.Key
				if c.Column != "" {
					where = fmt.Sprintf("%s.%s of row %s", c.Table, c.Column, c.Key)
				}
				p.Errorf("tool output as %s with roles %v contains canary %q (%s) %s", tn, roles, c.Value, where, why)
			}
		}
	}
	logs := ts.logs.String()
	for _, c := range canaries {
		if strings.Contains(logs, c.Value) {
			p.Errorf("the server's log or audit log contains canary %q", c.Value)
		}
	}
	if shown == 0 {
		why := ""
		if failed > 0 {
			why = fmt.Sprintf(" (%d of %d calls returned an error; the first: %s)", failed, calls, firstFailure)
		}
		p.Errorf("control: no call returned a canary its caller may see; the calls read no PII-bearing rows and prove nothing%s", why)
	}
	p.Logf("%d tool calls (%d returned an error) as %d tenants × %d role sets; %d canaries planted; %d allowed sightings, 0 forbidden", calls, failed, len(r.tenants), len(callers), len(canaries), shown)
}
