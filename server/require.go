package server

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tenantmcp/tenantmcp/claims"
	"github.com/tenantmcp/tenantmcp/scope"
)

// RuleInsufficientScope: the caller's token lacks a role or an OAuth scope
// that the tool, prompt or resource requires (Require).
const RuleInsufficientScope = "authz.insufficient_scope"

// ErrInsufficientScope is matched (errors.Is) by the *DenyError of a call
// refused for a missing role or OAuth scope, as well as by ErrDenied.
var ErrInsufficientScope = errors.New("server: insufficient scope")

// Require is what a caller needs to use a tool, prompt or resource. The
// zero Require admits every caller with a tenant scope.
//
// A caller that does not meet it does not see the item in tools/list,
// prompts/list, resources/list or resources/templates/list, and a call
// that names it anyway is refused before the handler runs, with a
// JSON-RPC error (CodeDenied, rule RuleInsufficientScope) that leaves the
// session open. On streamable HTTP, where a new token could meet it (a
// missing OAuth scope, or a missing role HTTPOptions.RoleScopes maps to a
// scope), the answer is HTTP 403 with a WWW-Authenticate: Bearer
// error="insufficient_scope" challenge naming the operation's scopes
// instead, so the client can step up. Both checks read the current
// request's verified token.
type Require struct {
	// Roles: the caller's scope must hold at least one of them (the
	// roles claim, see package claims).
	Roles []string
	// Scopes: the token's OAuth scopes (its "scope" or "scp" claim) must
	// include every one of them.
	Scopes []string
}

func (r Require) zero() bool { return len(r.Roles) == 0 && len(r.Scopes) == 0 }

// allows reports whether a caller with scope sc and OAuth scopes oauth
// meets r. A zero scope meets nothing (it is denied earlier anyway).
func (r Require) allows(sc scope.Scope, oauth []string) bool {
	if sc.IsZero() {
		return false
	}
	if len(r.Roles) > 0 && !slices.ContainsFunc(r.Roles, sc.HasRole) {
		return false
	}
	for _, s := range r.Scopes {
		if !slices.Contains(oauth, s) {
			return false
		}
	}
	return true
}

// denial is the DenyError of a caller that does not meet r. Its witness
// names what is required, never what the caller holds.
func (r Require) denial(kind, name string) *DenyError {
	w := map[string]any{"kind": kind}
	if len(r.Roles) > 0 {
		w["roles_any_of"] = r.Roles
	}
	if len(r.Scopes) > 0 {
		w["scope"] = strings.Join(r.Scopes, " ")
	}
	return &DenyError{Rule: RuleInsufficientScope, Reason: fmt.Sprintf("this %s requires %s", kind, r.describe()), Tool: name, Witness: w}
}

func (r Require) describe() string {
	var parts []string
	if len(r.Roles) > 0 {
		parts = append(parts, "one of the roles "+strings.Join(r.Roles, ", "))
	}
	if len(r.Scopes) > 0 {
		parts = append(parts, "the OAuth scopes "+strings.Join(r.Scopes, " "))
	}
	return strings.Join(parts, " and ")
}

// caller is who makes a request: the scope and OAuth scopes of the
// request's own verified token (or of the stdio token).
type caller struct {
	scope  scope.Scope
	oauth  []string
	expiry time.Time  // the token's expiry (zero if unknown)
	deny   *DenyError // set when no scope could be derived
}

// callerOf derives the caller from the current request's verified token
// (extra.TokenInfo, never the session's first token), or from the stdio
// token.
func (s *Server) callerOf(ctx context.Context, extra *mcp.RequestExtra) caller {
	if extra != nil && extra.TokenInfo != nil {
		if x := exchangeOf(extra.TokenInfo); x != nil {
			return x.caller // derived when the token was verified
		}
		return tokenCaller(extra.TokenInfo)
	}
	s.mu.Lock()
	st := s.surface.stdio
	s.mu.Unlock()
	if st != nil {
		sc, oauth, err := st.current(ctx)
		if err != nil {
			return caller{deny: &DenyError{Rule: RuleTokenExpired, Reason: s.logRedactor().Error(err)}}
		}
		return caller{scope: sc, oauth: oauth}
	}
	return caller{deny: &DenyError{Rule: RuleScopeRequired, Reason: "the call carries no verified bearer token"}}
}

// tokenCaller derives the caller of a verified token's TokenInfo.
func tokenCaller(ti *auth.TokenInfo) caller {
	if sc, ok := claims.ScopeFromTokenInfo(ti); ok {
		return caller{scope: sc, oauth: ti.Scopes, expiry: ti.Expiration}
	}
	return caller{deny: &DenyError{Rule: RuleScopeRequired, Reason: "the verified token carries no tenant scope"}}
}

// Kinds of item a Require guards, as they appear in witnesses, and the
// MCP methods that use one.
const (
	methodCallTool     = "tools/call"
	methodGetPrompt    = "prompts/get"
	methodReadResource = "resources/read"
	methodComplete     = "completion/complete"

	kindTool     = "tool"
	kindPrompt   = "prompt"
	kindResource = "resource"
)

// setRequireLocked records r for the item; it is consulted by the list
// filter, the HTTP front and the pipeline.
func (s *Server) setRequireLocked(kind, name string, r Require) {
	if r.zero() {
		return
	}
	if s.surface.requires == nil {
		s.surface.requires = map[string]Require{}
	}
	s.surface.requires[kind+"\x00"+name] = r
}

func (s *Server) requireOf(kind, name string) Require {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.surface.requires[kind+"\x00"+name]
}

// authorize is the call-time check: the item's Require against the
// caller. It runs on every transport, whether or not the HTTP front
// already refused the request.
func (s *Server) authorize(kind, name string, c caller) *DenyError {
	if r := s.requireOf(kind, name); !r.zero() && !r.allows(c.scope, c.oauth) {
		return r.denial(kind, name)
	}
	return nil
}

// requiredScopes is every OAuth scope some Require names, for the
// protected-resource metadata's scopes_supported.
func (s *Server) requiredScopes() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, r := range s.surface.requires {
		for _, sc := range r.Scopes {
			if !slices.Contains(out, sc) {
				out = append(out, sc)
			}
		}
	}
	sort.Strings(out)
	return out
}

// filterList keeps, in the result of tools/list, prompts/list,
// resources/list or resources/templates/list, only the items whose Require
// the caller meets. (It only hides; the pipeline enforces.)
func (s *Server) filterList(ctx context.Context, req mcp.Request, res mcp.Result) {
	var c *caller
	may := func(kind, name string) bool {
		r := s.requireOf(kind, name)
		if r.zero() {
			return true
		}
		if c == nil {
			cc := s.callerOf(ctx, req.GetExtra())
			c = &cc
		}
		return c.deny == nil && r.allows(c.scope, c.oauth)
	}
	switch r := res.(type) {
	case *mcp.ListToolsResult:
		r.Tools = slices.DeleteFunc(r.Tools, func(t *mcp.Tool) bool { return !may(kindTool, t.Name) })
	case *mcp.ListPromptsResult:
		r.Prompts = slices.DeleteFunc(r.Prompts, func(p *mcp.Prompt) bool { return !may(kindPrompt, p.Name) })
	case *mcp.ListResourcesResult:
		r.Resources = slices.DeleteFunc(r.Resources, func(x *mcp.Resource) bool { return !may(kindResource, x.URI) })
	case *mcp.ListResourceTemplatesResult:
		r.ResourceTemplates = slices.DeleteFunc(r.ResourceTemplates, func(x *mcp.ResourceTemplate) bool { return !may(kindResource, x.URITemplate) })
	}
}

// challenge is the front's Require check of the messages of one HTTP
// request. For the first that c does not meet where a token could: the
// OAuth scopes its operation needs (the item's, plus the scope roleScopes
// maps one of its roles to when c holds none of them). A missing role no
// scope grants (or whose scope c holds already) is left to the pipeline:
// a JSON-RPC error that keeps the session, since no new token would
// change the answer.
func (s *Server) challenge(c caller, msgs []rpcMessage, roleScopes map[string]string) []string {
	for _, m := range msgs {
		kind, name := s.itemKey(m.Method, m.Params.Name, m.Params.URI)
		r := s.requireOf(kind, name)
		if kind == "" || r.zero() || r.allows(c.scope, c.oauth) {
			continue
		}
		need := slices.Clone(r.Scopes)
		if len(r.Roles) > 0 && !slices.ContainsFunc(r.Roles, c.scope.HasRole) {
			for _, role := range r.Roles {
				if sc := roleScopes[role]; sc != "" {
					need = append(need, sc)
					break
				}
			}
		}
		if len(missing(need, c.oauth)) > 0 {
			return need
		}
	}
	return nil
}

// offlineAccess is the OpenID refresh-token scope: never asked for in a
// challenge nor advertised in the metadata (SEP-2350).
const offlineAccess = "offline_access"

// missing is the scopes of want that have does not hold.
func missing(want, have []string) []string {
	var out []string
	for _, sc := range want {
		if !slices.Contains(have, sc) {
			out = append(out, sc)
		}
	}
	return out
}

// itemKey is the kind and Require key of the item a tools/call,
// prompts/get or resources/read names; "" for other methods.
func (s *Server) itemKey(method, name, uri string) (kind, key string) {
	switch method {
	case methodCallTool:
		return kindTool, name
	case methodGetPrompt:
		return kindPrompt, name
	case methodReadResource:
		return kindResource, s.resourceKey(uri)
	}
	return "", ""
}

// mergeScopes is a ∪ b, sorted, without duplicates.
func mergeScopes(a, b []string) []string {
	out := append(slices.Clone(a), b...)
	sort.Strings(out)
	return slices.Compact(out)
}
