package server

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tenantmcp/tenantmcp/scope"
)

// ErrNoToken is returned when a TokenSource has no token to give.
var ErrNoToken = errors.New("server: no bearer token configured")

// A TokenSource returns the current bearer token for a stdio server. It is
// called at start and again whenever the last token has expired, so a file
// rewritten by a token refresher is picked up.
type TokenSource func(ctx context.Context) (string, error)

// TokenFromEnv reads the token from the environment variable name.
func TokenFromEnv(name string) TokenSource {
	return func(context.Context) (string, error) {
		t := strings.TrimSpace(os.Getenv(name))
		if t == "" {
			return "", fmt.Errorf("%w: environment variable %s is empty", ErrNoToken, name)
		}
		return t, nil
	}
}

// TokenFromFile reads the token from the file at path (surrounding white
// space ignored). The file should be readable by the server's user only.
func TokenFromFile(path string) TokenSource {
	return func(context.Context) (string, error) {
		b, err := os.ReadFile(path)
		if err != nil {
			return "", fmt.Errorf("%w: %v", ErrNoToken, err)
		}
		t := strings.TrimSpace(string(b))
		if t == "" {
			return "", fmt.Errorf("%w: file %s is empty", ErrNoToken, path)
		}
		return t, nil
	}
}

// RunStdio serves one client over standard input and output. See Run.
func (s *Server) RunStdio(ctx context.Context, src TokenSource) error {
	return s.Run(ctx, &mcp.StdioTransport{}, src)
}

// Run serves one client over t with the token from src: the token is
// verified before anything is served (an error here means nothing was),
// and verified afresh from src whenever it has expired; a call made while
// no valid token is available is denied with RuleTokenExpired.
func (s *Server) Run(ctx context.Context, t mcp.Transport, src TokenSource) error {
	if src == nil {
		return fmt.Errorf("%w: a TokenSource is required", ErrConfig)
	}
	ts := &stdioToken{src: src, s: s}
	if _, _, err := ts.current(ctx); err != nil {
		return fmt.Errorf("server: stdio token: %w", err)
	}
	s.mu.Lock()
	if s.surface.stdio != nil {
		s.mu.Unlock()
		return fmt.Errorf("%w: Run called twice", ErrConfig)
	}
	s.surface.stdio = ts
	s.mu.Unlock()
	return s.mcp.Run(ctx, t)
}

type stdioToken struct {
	s   *Server
	src TokenSource

	mu     sync.Mutex
	scope  scope.Scope
	oauth  []string // the token's OAuth scopes
	expiry time.Time
}

// current is the scope and OAuth scopes of the token, verified afresh
// from src once the last one has expired.
func (t *stdioToken) current(ctx context.Context) (scope.Scope, []string, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.s.opts.Now()
	if !t.scope.IsZero() && now.Before(t.expiry) {
		return t.scope, t.oauth, nil
	}
	t.scope = scope.Scope{}
	tok, err := t.src(ctx)
	if err != nil {
		return scope.Scope{}, nil, err
	}
	sc, c, err := t.s.opts.Verifier.Verify(ctx, tok)
	if err != nil {
		return scope.Scope{}, nil, err
	}
	if err := t.s.checkLifetime(c.Expiry); err != nil {
		return scope.Scope{}, nil, err
	}
	t.scope, t.oauth, t.expiry = sc, c.OAuthScopes, c.Expiry
	return sc, t.oauth, nil
}
