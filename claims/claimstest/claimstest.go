// Package claimstest runs a loopback identity provider for tests of code
// built on [claims]: it generates an Ed25519 key, serves its JWKS on
// 127.0.0.1 and mints signed tokens with any subject, groups, roles,
// lifetime and extra claims, so a test exercises the real verifier —
// signature, expiry, audience, mapping — instead of a fabricated scope.
//
// It is [devtoken]'s issuer bound to a test. Like
// [github.com/tenantmcp/tenantmcp/scope/scopetest] it refuses to run
// outside a test binary: [Start] panics unless [testing.Testing] reports
// true, because anyone who can call [Issuer.Mint] can become any tenant.
package claimstest

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/tenantmcp/tenantmcp/claims"
	"github.com/tenantmcp/tenantmcp/claims/devtoken"
)

// DefaultAudience is the audience of an [Issuer] started with an empty one.
const DefaultAudience = "https://mcp.test.invalid"

// Issuer is a running test identity provider. Its fields describe it as a
// verifier must be configured: see [Issuer.Options].
type Issuer struct {
	// URL is the issuer identifier (the iss of every token).
	URL string
	// JWKSURL serves the issuer's public key set.
	JWKSURL string
	// Audience is the aud of every token unless [Token.Audience] overrides it.
	Audience string

	dev *devtoken.Issuer
}

// Token describes a token to mint. The zero value (plus a Subject) is a
// valid one-hour token with no groups.
type Token struct {
	Subject string
	Groups  []string
	Roles   []string
	// TTL is the lifetime from now; zero means one hour and a negative TTL
	// mints a token that has already expired.
	TTL time.Duration
	// NotBefore, if set, becomes the nbf claim.
	NotBefore time.Time
	// Audience overrides the issuer's audience (tests of wrong audiences).
	Audience string
	// Claims are added after the standard ones and may override any of them
	// (scope or scp for OAuth scopes, a namespaced groups claim, a forged
	// iss).
	Claims map[string]any
}

// Start serves a new issuer on a free loopback port until the test ends.
// An empty audience means [DefaultAudience].
func Start(tb testing.TB, audience string) *Issuer {
	if !testing.Testing() {
		panic("claimstest: used outside a test binary; tokens in production come from your identity provider")
	}
	tb.Helper()
	if audience == "" {
		audience = DefaultAudience
	}
	dev, err := devtoken.Start(devtoken.Options{Audience: audience, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		tb.Fatalf("claimstest: %v", err)
	}
	tb.Cleanup(func() { _ = dev.Close() })
	return &Issuer{URL: dev.URL, JWKSURL: dev.JWKSURL, Audience: dev.Audience, dev: dev}
}

// Mint signs a token and fails the test if it cannot.
func (is *Issuer) Mint(tb testing.TB, t Token) string {
	tb.Helper()
	tok, err := is.dev.Mint(devtoken.Token{
		Subject: t.Subject, Groups: t.Groups, Roles: t.Roles, TTL: t.TTL,
		NotBefore: t.NotBefore, Audience: t.Audience, Extra: t.Claims,
	})
	if err != nil {
		tb.Fatalf("claimstest: mint: %v", err)
	}
	return tok
}

// Options returns a [claims.Options] that trusts this issuer and maps groups
// with m. Adjust any field before passing it to [claims.New].
func (is *Issuer) Options(m claims.Mapping) claims.Options {
	return claims.Options{
		Issuer:   is.URL,
		Audience: []string{is.Audience},
		JWKSURL:  is.JWKSURL,
		Mapping:  m,
	}
}

// Verifier returns a ready verifier built from [Issuer.Options], closed when
// the test ends.
func (is *Issuer) Verifier(tb testing.TB, m claims.Mapping) *claims.Verifier {
	tb.Helper()
	v, err := claims.New(is.Options(m))
	if err != nil {
		tb.Fatalf("claimstest: %v", err)
	}
	tb.Cleanup(func() { _ = v.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := v.WaitReady(ctx); err != nil {
		tb.Fatalf("claimstest: verifier not ready: %v", err)
	}
	return v
}
