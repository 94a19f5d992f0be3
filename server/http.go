package server

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
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
	// RequiredScopes are OAuth scopes every token must carry (403 if not).
	RequiredScopes []string
	// Stateless selects the go-sdk's stateless mode: no Mcp-Session-Id,
	// and no server-to-client requests.
	Stateless bool
	// SessionTimeout closes stateful sessions idle this long; zero keeps
	// them until the client ends them.
	SessionTimeout time.Duration
	// Health configures the liveness and readiness probes at HealthPath
	// and ReadyPath (see HealthOptions).
	Health HealthOptions
	// MetricsPath, if set (for example "/metrics"), serves
	// Options.Telemetry's Prometheus metrics there, without
	// authentication. Leave it empty to serve Telemetry.Handler on a
	// listener of its own that only the monitoring system reaches.
	MetricsPath string
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
	path := u.Path
	if path == "" {
		path = "/"
	}
	metaPath := WellKnownProtectedResource + strings.TrimSuffix(path, "/")
	metaURL := u.Scheme + "://" + u.Host + metaPath

	mcpHandler := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s.mcp }, &mcp.StreamableHTTPOptions{
		Stateless:           o.Stateless,
		SessionTimeout:      o.SessionTimeout,
		Logger:              s.opts.Logger,
		MaxRequestBodyBytes: s.opts.MaxRequestBytes,
	})
	protected := auth.RequireBearerToken(s.opts.Verifier.TokenVerifier(), &auth.RequireBearerTokenOptions{
		ResourceMetadataURL: metaURL,
		Scopes:              o.RequiredScopes,
		ClockSkew:           s.opts.Verifier.Leeway(),
	})(s.httpPrecheck(metaURL, noEcho(mcpHandler)))

	meta := auth.ProtectedResourceMetadataHandler(&oauthex.ProtectedResourceMetadata{
		Resource:               o.ResourceURL,
		AuthorizationServers:   o.AuthorizationServers,
		ScopesSupported:        mergeScopes(o.ScopesSupported, s.requiredScopes()),
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
		if s.opts.Telemetry == nil {
			return nil, fmt.Errorf("%w: MetricsPath is set but Options.Telemetry is nil", ErrConfig)
		}
		if err := claim(o.MetricsPath, "MetricsPath"); err != nil {
			return nil, err
		}
		mux.Handle(o.MetricsPath, s.opts.Telemetry.Handler())
	}
	return mux, nil
}

// Serve serves Handler(o) on ln until ctx is done, then shuts down
// gracefully: new connections are refused and calls in flight get up to
// the call timeout to finish.
func (s *Server) Serve(ctx context.Context, ln net.Listener, o HTTPOptions) error {
	h, err := s.Handler(o)
	if err != nil {
		ln.Close()
		return err
	}
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
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
	shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.opts.CallTimeout)
	defer cancel()
	err = srv.Shutdown(shutdownCtx)
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
