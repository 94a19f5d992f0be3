package server

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
)

// WellKnownProtectedResource is the RFC 9728 metadata path prefix.
const WellKnownProtectedResource = "/.well-known/oauth-protected-resource"

// HTTPOptions configures the streamable HTTP transport.
type HTTPOptions struct {
	// ResourceURL is this server's MCP endpoint as clients address it, for
	// example "https://mcp.example.com/mcp". It is the "resource" of the
	// RFC 9728 metadata and what tokens' aud should name (RFC 8707).
	// Required; its path is where the MCP endpoint is served.
	ResourceURL string
	// AuthorizationServers are the issuer URLs advertised in the metadata.
	AuthorizationServers []string
	// ScopesSupported are the OAuth scopes advertised in the metadata, in
	// addition to every scope a registered tool, prompt or resource
	// requires (Require.Scopes) when Handler is called.
	ScopesSupported []string
	// RequiredScopes are OAuth scopes every token must carry: a token
	// without them is answered 403 with an insufficient_scope challenge
	// naming the ones it lacks (and those of the request's item).
	RequiredScopes []string
	// RoleScopes maps a role (Require.Roles) to the OAuth scope whose
	// grant gives it, where the authorization server can grant roles that
	// way. A call refused for a missing role that maps to a scope the token
	// lacks is answered 403 with an insufficient_scope challenge naming
	// that scope, so the client can step up; any other missing role is a
	// JSON-RPC error (CodeDenied) and the session goes on. The scopes are
	// advertised in the metadata.
	RoleScopes map[string]string
	// Sessions adds 2025-era stateful sessions to the endpoint. Without it
	// every request is served statelessly: MCP 2026-07-28 (no handshake,
	// per-request _meta, server/discover), and 2025-era versions
	// negotiated per request, each in a session that lives as long as its
	// HTTP request. With it, a POST initialize without Mcp-Session-Id and
	// every request that carries one (GET and DELETE too) go to a
	// stateful session on the same server: what needs one (consent by
	// elicitation, resource subscriptions, a server-to-client SSE stream,
	// per-session flow taint) keeps working for 2025-era clients, which
	// pins each of them to one replica. Requests without Mcp-Session-Id
	// stay stateless either way.
	Sessions bool
	// SessionTimeout closes stateful sessions idle this long (no request
	// from the client); zero means DefaultSessionTimeout, negative keeps
	// them until the client ends them.
	SessionTimeout time.Duration
	// Health configures the liveness and readiness probes at HealthPath
	// and ReadyPath (see HealthOptions).
	Health HealthOptions
	// MetricsPath, if set (for example "/metrics"), serves Metrics there,
	// without authentication. Leave it empty to serve the metrics on a
	// listener of its own that only the monitoring system reaches.
	MetricsPath string
	// Metrics serves the metrics at MetricsPath, for example
	// otelserver.Telemetry.Handler; it must be set with MetricsPath.
	Metrics http.Handler

	// MaxSessionsPerSubject caps the open stateful sessions of one token
	// subject; an initialize past it is refused with 429 (RuleSessions).
	// Zero means DefaultSessionsPerSubject, negative no cap.
	MaxSessionsPerSubject int

	// ReadTimeout bounds reading a request's body: a client that stops
	// sending its body is answered 408 Request Timeout once it runs out and
	// its connection is closed (a body over MaxRequestBytes is 413); zero
	// means DefaultReadTimeout, negative none. Headers are bounded
	// separately (10 s).
	ReadTimeout time.Duration
	// WriteTimeout bounds writing a non-streaming response (every request
	// but the GET that holds a session's SSE stream); zero means the call
	// timeout (plus Limits.QueueWait) plus 10 s, negative none.
	WriteTimeout time.Duration
	// IdleTimeout closes keep-alive connections idle this long (Serve);
	// zero means DefaultIdleTimeout, negative none.
	IdleTimeout time.Duration
	// DrainTimeout is how long Serve, once its context ends, lets tool
	// calls in flight finish before it closes every session and its SSE
	// stream; zero means DefaultDrainTimeout, negative closes them at once.
	DrainTimeout time.Duration

	// FailedTokens limits the bearer tokens that fail verification per
	// client address (see FailedTokenLimit): after Burst failures
	// (DefaultFailedTokenBurst, 10) an address is answered 429 with
	// Retry-After until its bucket refills (DefaultFailedTokenRate, one
	// attempt every 10 s). On by default; a negative Rate disables it.
	FailedTokens FailedTokenLimit

	// AllowedOrigins are the browser origins (scheme://host[:port]) besides
	// ResourceURL's own whose requests are served; a request with any
	// other Origin header is refused with 403. Requests without Origin
	// (non-browser clients) are served.
	AllowedOrigins []string
}

// Handler returns the HTTP handler: the MCP endpoint at ResourceURL's path
// behind bearer-token verification, the protected-resource metadata at
// WellKnownProtectedResource (and at that prefix followed by the endpoint
// path, as RFC 9728 section 3.1 derives it), the probes at HealthPath and
// ReadyPath, and the metrics at MetricsPath if set.
func (s *Server) Handler(o HTTPOptions) (http.Handler, error) {
	u, err := url.Parse(o.ResourceURL)
	if err != nil || u.Scheme == "" || u.Host == "" {
		return nil, fmt.Errorf("%w: ResourceURL %q must be an absolute URL", ErrConfig, o.ResourceURL)
	}
	for role, sc := range o.RoleScopes {
		if role == "" || sc == "" || sc == offlineAccess {
			return nil, fmt.Errorf("%w: RoleScopes maps %q to %q: want a role and a scope other than %s", ErrConfig, role, sc, offlineAccess)
		}
	}
	if slices.Contains(o.RequiredScopes, offlineAccess) {
		return nil, fmt.Errorf("%w: RequiredScopes must not name %s (a challenge never asks for it)", ErrConfig, offlineAccess)
	}
	if o.Health.Timeout < 0 {
		return nil, fmt.Errorf("%w: Health.Timeout must not be negative (zero is DefaultReadyTimeout)", ErrConfig)
	}
	path := u.Path
	if path == "" {
		path = "/"
	}
	metaPath := WellKnownProtectedResource + strings.TrimSuffix(path, "/")
	metaURL := u.Scheme + "://" + u.Host + metaPath

	handler := func(stateless bool) http.Handler {
		return noEcho(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s.mcp }, &mcp.StreamableHTTPOptions{
			Stateless:           stateless,
			SessionTimeout:      o.sessionTimeout(),
			Logger:              hideSessionIDs(s.opts.Logger),
			MaxRequestBodyBytes: s.opts.MaxRequestBytes,
		}))
	}
	stateless, stateful := handler(true), http.Handler(nil)
	if o.Sessions {
		stateful = handler(false)
	}
	ft, err := newFailedTokens(o.FailedTokens, s.opts.Now)
	if err != nil {
		return nil, err
	}
	protected := ft.guard(auth.RequireBearerToken(s.tokenVerifier(ft), &auth.RequireBearerTokenOptions{
		ResourceMetadataURL: metaURL,
		ClockSkew:           s.opts.Verifier.Leeway(),
	})(s.front(o, metaURL, stateless, stateful)))

	meta := auth.ProtectedResourceMetadataHandler(&oauthex.ProtectedResourceMetadata{
		Resource:               o.ResourceURL,
		AuthorizationServers:   o.AuthorizationServers,
		ScopesSupported:        o.scopesSupported(s.requiredScopes()),
		BearerMethodsSupported: []string{"header"},
		ResourceName:           s.opts.Name,
	})

	mux := http.NewServeMux()
	mux.Handle(path, http.MaxBytesHandler(protected, s.opts.MaxRequestBytes))
	mux.Handle(metaPath, meta)
	if metaPath != WellKnownProtectedResource {
		mux.Handle(WellKnownProtectedResource, meta)
	}
	// Each extra path must be free: ServeMux panics on a duplicate pattern.
	taken := map[string]bool{path: true, metaPath: true, WellKnownProtectedResource: true}
	claim := func(p, what string) error {
		if !strings.HasPrefix(p, "/") || taken[p] {
			return fmt.Errorf("%w: %s %q must be an absolute path not used by another endpoint", ErrConfig, what, p)
		}
		taken[p] = true
		return nil
	}
	if !o.Health.Disable {
		if err := errors.Join(claim(HealthPath, "health path"), claim(ReadyPath, "readiness path")); err != nil {
			return nil, err
		}
		mux.HandleFunc(HealthPath, healthz)
		mux.Handle(ReadyPath, &readyProbe{s: s, o: o.Health})
	}
	if o.MetricsPath != "" {
		if o.Metrics == nil {
			return nil, fmt.Errorf("%w: MetricsPath is set but Metrics is nil", ErrConfig)
		}
		if err := claim(o.MetricsPath, "MetricsPath"); err != nil {
			return nil, err
		}
		mux.Handle(o.MetricsPath, o.Metrics)
	}
	h, err := o.checkOrigin(mux)
	if err != nil {
		return nil, err
	}
	// A response is written once its call has run: the queue wait and the
	// call timeout come before the write deadline's own slack.
	return o.deadlines(s.opts.CallTimeout+s.opts.Limits.QueueWait, h), nil
}

// scopesSupported is what the metadata advertises: ScopesSupported, the
// scopes of Requires and RoleScopes, never offline_access.
func (o HTTPOptions) scopesSupported(required []string) []string {
	for _, sc := range o.RoleScopes {
		required = append(required, sc)
	}
	out := mergeScopes(o.ScopesSupported, required)
	return slices.DeleteFunc(out, func(sc string) bool { return sc == offlineAccess })
}

// Serve serves Handler(o) on ln until ctx is done, then shuts down
// gracefully: new connections are refused, tool calls in flight get up to
// o.DrainTimeout to finish, then every session is closed (ending its SSE
// stream) and what is still open after a further second is closed hard.
// Keep-alive connections idle for o.IdleTimeout are closed.
func (s *Server) Serve(ctx context.Context, ln net.Listener, o HTTPOptions) error {
	h, err := s.Handler(o)
	if err != nil {
		ln.Close()
		return err
	}
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       o.idleTimeout(),
		MaxHeaderBytes:    64 << 10,
		BaseContext:       func(net.Listener) context.Context { return context.WithoutCancel(ctx) },
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	}
	// Shutdown stops accepting at once and waits for connections to go
	// idle; an SSE stream never does, so the drain closes the sessions.
	shutdownErr := make(chan error, 1)
	go func() { shutdownErr <- srv.Shutdown(context.WithoutCancel(ctx)) }()
	s.drain(o.drainTimeout())
	select {
	case err = <-shutdownErr:
	case <-time.After(time.Second):
		err = srv.Close()
		<-shutdownErr
	}
	if serveErr := <-done; !errors.Is(serveErr, http.ErrServerClosed) && err == nil {
		err = serveErr
	}
	return err
}

// ListenAndServe listens on addr (TCP) and calls Serve.
func (s *Server) ListenAndServe(ctx context.Context, addr string, o HTTPOptions) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	return s.Serve(ctx, ln, o)
}
