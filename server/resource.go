package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"slices"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/yosida95/uritemplate/v3"

	"github.com/tenantmcp/tenantmcp/flow"
	"github.com/tenantmcp/tenantmcp/guardedsql"
	"github.com/tenantmcp/tenantmcp/internal/guardfault"
	"github.com/tenantmcp/tenantmcp/internal/mint"
)

// Resource describes a resource with a fixed URI to AddResource.
type Resource struct {
	URI         string
	Name        string
	Title       string
	Description string
	// Require restricts who may list and read it.
	Require Require
	// Flow declares the information-flow label of what it returns (see
	// package flow); a resource cannot be a sink.
	Flow flow.Decl
	// TTL is the cache hint (ttlMs) of its reads. A read runs under the
	// caller's scope, so it is always cacheScope "private".
	TTL time.Duration
}

// ResourceTemplate describes a family of resources to AddResourceTemplate,
// addressed by an RFC 6570 URI template such as "hotel://bookings/{id}".
type ResourceTemplate struct {
	URITemplate string
	Name        string
	Title       string
	Description string
	Require     Require
	Flow        flow.Decl
	// Complete offers completions (completion/complete) for the named
	// template variables.
	Complete map[string]Completion
	// TTL is the cache hint (ttlMs) of its reads, as Resource.TTL.
	TTL time.Duration
}

// ResourceHandler reads a resource. vars holds the URI template's
// variables (nil for a Resource). ctx carries the caller's scope and the
// call's deadline; db adds the tenant predicates. Return
// guardedsql.ErrNotFound for "no such resource (for you)": the client then
// gets exactly the answer of a URI that matches nothing.
type ResourceHandler[Out any] func(ctx context.Context, db *guardedsql.DB, vars map[string]string) (Out, error)

// readFunc runs a resource handler, untyped.
type readFunc func(ctx context.Context, db *guardedsql.DB, vars map[string]string) (any, error)

// resourceEntry is one registered resource or template.
type resourceEntry struct {
	key   string // the URI, or the URI template
	name  string
	tmpl  *uritemplate.Template // nil for a fixed URI
	read  readFunc
	ft    *flow.Tool
	compl map[string]Completion
	ttl   time.Duration
}

// surfaceState is what the server keeps of resources, prompts,
// completions, per-item requirements and subscriptions. Guarded by
// Server.mu.
type surfaceState struct {
	requires  map[string]Require
	resources []*resourceEntry
	prompts   map[string]*promptEntry
	subs      map[*mcp.ServerSession]map[string]caller
	stdio     *stdioToken
}

// MIMEJSON is the MIME type of a resource's contents, the redacted JSON of
// the handler's result, unless the handler returns a Blob.
const MIMEJSON = "application/json"

// AddResource registers a resource with a fixed URI. It reads through the
// same path as a tool call: scope from the request's verified token, the
// Require check, the guarded DB, the result through package redact, its
// flow label recorded, one audit record per read.
func AddResource[Out any](s *Server, r Resource, h ResourceHandler[Out]) error {
	if r.URI == "" || r.Name == "" || h == nil || r.TTL < 0 {
		return fmt.Errorf("%w: a resource needs a URI, a name and a handler (and a TTL not negative)", ErrConfig)
	}
	e := &resourceEntry{key: r.URI, name: r.Name, read: typedRead(h), ttl: r.TTL}
	return s.addResource(e, reflect.TypeFor[Out](), r.Flow, r.Require, func() {
		s.mcp.AddResource(&mcp.Resource{URI: r.URI, Name: r.Name, Title: r.Title, Description: r.Description, MIMEType: resourceMIME(reflect.TypeFor[Out]())}, s.readHandler(e))
	})
}

// AddResourceTemplate registers a resource template. Its variables are
// tool inputs by another name and obey the same rule: a variable named
// like a scope key (tenant_id, a scope level, "<level>_id", …) makes it
// fail with a *TenantInputError, because the tenant comes only from the
// token. A URI of another tenant's row reads exactly like a URI that
// matches nothing (mcp.ResourceNotFoundError).
func AddResourceTemplate[Out any](s *Server, t ResourceTemplate, h ResourceHandler[Out]) error {
	if t.URITemplate == "" || t.Name == "" || h == nil || t.TTL < 0 {
		return fmt.Errorf("%w: a resource template needs a URI template, a name and a handler (and a TTL not negative)", ErrConfig)
	}
	tmpl, err := uritemplate.New(t.URITemplate)
	if err != nil {
		return fmt.Errorf("%w: resource template %q: %v", ErrConfig, t.URITemplate, err)
	}
	for _, v := range tmpl.Varnames() {
		if k, bad := s.forbidden[normalizeKey(v)]; bad {
			return &TenantInputError{Tool: t.Name, Property: "{" + v + "}", Key: k}
		}
	}
	for v := range t.Complete {
		if !slices.Contains(tmpl.Varnames(), v) {
			return fmt.Errorf("%w: resource template %q completes %q, which is not one of its variables", ErrConfig, t.URITemplate, v)
		}
	}
	e := &resourceEntry{key: t.URITemplate, name: t.Name, tmpl: tmpl, read: typedRead(h), compl: t.Complete, ttl: t.TTL}
	return s.addResource(e, reflect.TypeFor[Out](), t.Flow, t.Require, func() {
		s.mcp.AddResourceTemplate(&mcp.ResourceTemplate{URITemplate: t.URITemplate, Name: t.Name, Title: t.Title, Description: t.Description, MIMEType: resourceMIME(reflect.TypeFor[Out]())}, s.readHandler(e))
	})
}

func typedRead[Out any](h ResourceHandler[Out]) readFunc {
	return func(ctx context.Context, db *guardedsql.DB, vars map[string]string) (any, error) {
		return h(ctx, db, vars)
	}
}

func (s *Server) addResource(e *resourceEntry, out reflect.Type, decl flow.Decl, req Require, register func()) error {
	if decl.Sink != nil {
		return fmt.Errorf("%w: resource %q: a resource cannot be a sink", ErrConfig, e.key)
	}
	s.mu.Lock()
	for _, o := range s.surface.resources {
		if o.key == e.key {
			s.mu.Unlock()
			return fmt.Errorf("%w: resource %q registered twice", ErrConfig, e.key)
		}
	}
	s.mu.Unlock()
	if s.opts.Flow != nil {
		ft, err := s.opts.Flow.Register("resource:"+e.name, reflect.TypeFor[struct{}](), out, decl)
		if err != nil {
			return fmt.Errorf("%w: resource %q: %w", ErrConfig, e.key, err)
		}
		e.ft = ft
	}
	// Known to the pipeline before the go-sdk can dispatch to it.
	s.mu.Lock()
	s.surface.resources = append(s.surface.resources, e)
	s.setRequireLocked(kindResource, e.key, req)
	s.mu.Unlock()
	if _, err := safely(func() (any, error) { register(); return nil, nil }); err != nil {
		s.mu.Lock()
		s.surface.resources = slices.DeleteFunc(s.surface.resources, func(x *resourceEntry) bool { return x == e })
		delete(s.surface.requires, kindResource+"\x00"+e.key)
		s.mu.Unlock()
		return fmt.Errorf("%w: resource %q: %v", ErrConfig, e.key, err)
	}
	return nil
}

// lookupResource finds the resource or template uri addresses, and the
// template's variables.
func (s *Server) lookupResource(uri string) (*resourceEntry, map[string]string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lookupResourceLocked(uri)
}

func (s *Server) lookupResourceLocked(uri string) (*resourceEntry, map[string]string) {
	for _, e := range s.surface.resources {
		if e.tmpl == nil && e.key == uri {
			return e, nil
		}
	}
	for _, e := range s.surface.resources {
		if e.tmpl == nil {
			continue
		}
		if vals := e.tmpl.Match(uri); vals != nil {
			vars := map[string]string{}
			for _, n := range e.tmpl.Varnames() {
				vars[n] = vals.Get(n).String()
			}
			return e, vars
		}
	}
	return nil, nil
}

// resourceKey is the Require key of uri: the fixed URI or the template.
func (s *Server) resourceKey(uri string) string {
	if e, _ := s.lookupResource(uri); e != nil {
		return e.key
	}
	return uri
}

// listMethods are the methods whose results ListTTL sets the ttlMs of.
var listMethods = []string{"tools/list", "prompts/list", "resources/list", "resources/templates/list"}

func checkListTTL(ttl map[string]time.Duration) error {
	for m, d := range ttl {
		if !slices.Contains(listMethods, m) || d < 0 {
			return fmt.Errorf("%w: ListTTL names %q: want one of %v, with a duration not negative", ErrConfig, m, listMethods)
		}
	}
	return nil
}

// cacheable sets the cache hints of a result. Invariant: every result
// that depends on the caller is cacheScope "private" (the lists, filtered
// by Require; every resource read, run under the caller's scope); only
// server/discover, the same for everyone, is "public" (the go-sdk's
// default for an unset scope). ttlMs: Options.ListTTL or the resource's
// TTL, else 0.
func (s *Server) cacheable(_ context.Context, req mcp.Request, c *mcp.Cacheable) {
	c.CacheScope, c.TTLMs = "private", 0
	var ttl time.Duration
	switch r := req.(type) {
	case *mcp.ServerRequest[*mcp.DiscoverParams]:
		c.CacheScope = "public"
	case *mcp.ReadResourceRequest:
		if e, _ := s.lookupResource(r.Params.URI); e != nil {
			ttl = e.ttl
		}
	case *mcp.ListToolsRequest:
		ttl = s.opts.ListTTL[listMethods[0]]
	case *mcp.ListPromptsRequest:
		ttl = s.opts.ListTTL[listMethods[1]]
	case *mcp.ListResourcesRequest:
		ttl = s.opts.ListTTL[listMethods[2]]
	case *mcp.ListResourceTemplatesRequest:
		ttl = s.opts.ListTTL[listMethods[3]]
	}
	c.TTLMs = int(ttl.Milliseconds())
	if guardfault.Off(guardfault.PrivateCache) {
		c.CacheScope = "public"
	}
}

// readHandler is a resource's part of the pipeline: its handler under
// the caller's scope, the result redacted (a Blob's bytes are sent as is)
// and labelled.
func (s *Server) readHandler(e *resourceEntry) mcp.ResourceHandler {
	return func(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		rq, uri := requestOf(ctx), req.Params.URI
		rq.in.retry(req.Params.InputResponses, req.Params.RequestState)
		_, vars := s.lookupResource(uri)
		ctx, fc, cancel, _ := s.enter(ctx, rq, rq.caller.scope, e.ft, json.RawMessage(`{}`)) // not a sink: never denied
		defer cancel()
		out, err := safely(func() (any, error) { return e.read(ctx, s.opts.DB, vars) })
		if ir, werr, ok := s.mrtrAnswer(rq, err); ok {
			if werr != nil {
				return nil, werr
			}
			// Contents not nil: the go-sdk refuses a nil one before it
			// reaches a 2025-era session's retry.
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{}, InputRequests: ir.reqs, RequestState: ir.state}, nil
		}
		if err != nil {
			return nil, s.rpcError(ctx, rq, err, func() error { return mcp.ResourceNotFoundError(uri) })
		}
		cs, err := contents(rq.red, uri, out)
		if err == nil {
			err = s.record(ctx, rq, fc, out)
		}
		if err != nil {
			return nil, s.rpcError(ctx, rq, err, nil)
		}
		return &mcp.ReadResourceResult{Contents: cs}, nil
	}
}

// rpcError maps a handler error of a resource read, prompt or completion
// to the JSON-RPC error the client gets, as handlerError does for tools:
// notFound (if not nil) for guardedsql.ErrNotFound, the redacted message
// of InvalidInput as invalid params, a DenyError as itself, anything else
// logged behind a correlation id.
func (s *Server) rpcError(ctx context.Context, a *request, err error, notFound func() error) error {
	var deny *DenyError
	var input *inputError
	switch {
	case errors.As(err, &deny):
		d := *deny
		return s.deny(a, &d)
	case errors.Is(err, guardedsql.ErrNoScope):
		return s.deny(a, &DenyError{Rule: RuleScopeRequired, Reason: "the request reached the database without a tenant scope"})
	case errors.Is(err, guardedsql.ErrNotFound) && notFound != nil:
		a.outcome = OutcomeNotFound
		return notFound()
	case errors.As(err, &input):
		a.outcome = OutcomeInvalid
		return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: a.red.String(input.msg)}
	case errors.Is(err, context.DeadlineExceeded) && ctx.Err() != nil:
		a.outcome = OutcomeTimeout
		return &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: fmt.Sprintf("timed out after %s", s.opts.CallTimeout)}
	}
	a.outcome = OutcomeError
	s.opts.Logger.Error(a.method+" failed",
		slog.String("name", a.name),
		slog.String("call_id", a.callID),
		slog.String("error", s.logRedactor().Error(err)))
	return &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: fmt.Sprintf("internal error (correlation id %s)", a.callID)}
}

// ResourceUpdated tells the sessions subscribed to uri that it changed.
// Each subscriber is told only if the scope it subscribed with can read
// uri now (the read runs under that scope and its result is discarded),
// so a change to a row is announced only to sessions whose scope covers
// it. Call it after a write, with the URI of the changed row.
func (s *Server) ResourceUpdated(ctx context.Context, uri string) error {
	return s.mcp.ResourceUpdated(ctx, &mcp.ResourceUpdatedNotificationParams{URI: uri})
}

// maxSubscriptions bounds one session's subscriptions.
const maxSubscriptions = 256

// subscribe records the subscription of the request's session with the
// caller's scope. Every URI is accepted, whether it exists, is another
// tenant's or is not readable at all: the answer must not tell them apart.
// What the subscription may receive is decided when a change is announced.
func (s *Server) subscribe(ctx context.Context, req *mcp.SubscribeRequest) error {
	c := s.callerOf(ctx, req.Extra)
	if c.deny != nil {
		return c.deny.wire(mustJSON(c.deny.Rule))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.surface.subs == nil {
		s.surface.subs = map[*mcp.ServerSession]map[string]caller{}
	}
	if len(s.surface.subs) >= pruneSubscriptionsAt {
		s.pruneSubscriptionsLocked()
	}
	m := s.surface.subs[req.Session]
	if m == nil {
		m = map[string]caller{}
		s.surface.subs[req.Session] = m
	}
	if _, ok := m[req.Params.URI]; !ok && len(m) >= maxSubscriptions {
		return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("at most %d subscriptions per session", maxSubscriptions)}
	}
	m[req.Params.URI] = c
	return nil
}

// pruneSubscriptionsAt is the number of subscribed sessions past which a
// subscribe first forgets the sessions that have ended.
const pruneSubscriptionsAt = 64

// pruneSubscriptionsLocked drops the subscriptions of sessions that are no
// longer connected (the go-sdk tells no one when a session ends).
func (s *Server) pruneSubscriptionsLocked() {
	live := map[*mcp.ServerSession]bool{}
	for ss := range s.mcp.Sessions() {
		live[ss] = true
	}
	for ss := range s.surface.subs {
		if !live[ss] {
			delete(s.surface.subs, ss)
		}
	}
}

func (s *Server) unsubscribe(_ context.Context, req *mcp.UnsubscribeRequest) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if m := s.surface.subs[req.Session]; m != nil {
		delete(m, req.Params.URI)
		if len(m) == 0 {
			delete(s.surface.subs, req.Session)
		}
	}
	return nil
}

// filterNotifications is a sending middleware: a resources/updated
// notification reaches a session only if the scope it subscribed with can
// read the URI now.
func (s *Server) filterNotifications(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if method != "notifications/resources/updated" {
			return next(ctx, method, req)
		}
		ss, _ := req.GetSession().(*mcp.ServerSession)
		p, _ := req.GetParams().(*mcp.ResourceUpdatedNotificationParams)
		if ss == nil || p == nil {
			return nil, nil
		}
		s.mu.Lock()
		c, ok := s.surface.subs[ss][p.URI]
		s.mu.Unlock()
		if !ok || !s.canRead(ctx, c, p.URI) {
			return nil, nil // not announced: the subscriber's scope does not cover it
		}
		return next(ctx, method, req)
	}
}

// canRead reports whether caller c can read uri: the resource exists, c
// meets its Require, and its handler succeeds under c's scope.
func (s *Server) canRead(ctx context.Context, c caller, uri string) bool {
	e, vars := s.lookupResource(uri)
	if e == nil || c.deny != nil || s.authorize(kindResource, e.key, c) != nil {
		return false
	}
	if !c.expiry.IsZero() && !s.opts.Now().Before(c.expiry) {
		return false // the token the subscription was made with has expired
	}
	ctx, cancel := context.WithTimeout(mint.NewContext(context.WithoutCancel(ctx), c.scope), s.opts.CallTimeout)
	defer cancel()
	_, err := safely(func() (any, error) { return e.read(ctx, s.opts.DB, vars) })
	return err == nil
}
