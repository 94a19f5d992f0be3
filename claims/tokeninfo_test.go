package claims_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"

	"github.com/tenantmcp/tenantmcp/claims"
	"github.com/tenantmcp/tenantmcp/scope"
)

// The verifier plugged into the go-sdk's real bearer-token middleware.
func TestTokenVerifierWithRequireBearerToken(t *testing.T) {
	k := testKeys(t)
	jwks := newJWKSServer(t, jwksOf(t, k.rsa, k.ed))
	jwks.down.Store(true) // start with the IdP unreachable
	v := remoteVerifier(t, jwks, func(c *claims.Options) { c.RefreshInterval = 50 * time.Millisecond })

	var seen scope.Scope
	var seenInfo *auth.TokenInfo
	handler := auth.RequireBearerToken(v.TokenVerifier(), &auth.RequireBearerTokenOptions{
		ResourceMetadataURL: "https://mcp.test/.well-known/oauth-protected-resource",
		ClockSkew:           v.Leeway(),
	})(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seenInfo = auth.TokenInfoFromContext(r.Context())
		s, ok := claims.ScopeFromTokenInfo(seenInfo)
		if !ok {
			http.Error(w, "no scope", http.StatusInternalServerError)
			return
		}
		seen = s
		io.WriteString(w, "ok")
	}))
	srv := httptest.NewServer(handler)
	defer srv.Close()

	call := func(token string) (int, string) {
		req, _ := http.NewRequest(http.MethodPost, srv.URL, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}

	c := validClaims()
	c["scope"] = "hotels:read"
	c["roles"] = []any{"manager"}
	good := sign(t, k.rsa, c)

	if code, body := call(good); code != http.StatusInternalServerError || !strings.Contains(body, "not ready") {
		t.Fatalf("before keys load: %d %q, want 500 not ready", code, body)
	}
	jwks.down.Store(false)
	if err := v.WaitReady(context.Background()); err != nil {
		t.Fatal(err)
	}

	if code, body := call(good); code != http.StatusOK {
		t.Fatalf("valid token: %d %q", code, body)
	}
	if seen.Subject() != "alice" || !seen.Has("chain", "acme") || !seen.HasRole("manager") {
		t.Errorf("handler saw scope %v", seen)
	}
	if seenInfo.UserID != "alice" || !slices.Equal(seenInfo.Scopes, []string{"hotels:read"}) || seenInfo.Expiration.IsZero() {
		t.Errorf("TokenInfo = %+v", seenInfo)
	}
	if info, ok := claims.FromTokenInfo(seenInfo); !ok || info.Subject != "alice" {
		t.Errorf("FromTokenInfo = %+v, %v", info, ok)
	}

	expired := validClaims()
	expired["exp"] = time.Now().Add(-time.Hour).Unix()
	tampered := sign(t, k.ed, validClaims())
	tampered = tampered[:len(tampered)-4] + "AAAA"
	for name, tok := range map[string]string{
		"expired":  sign(t, k.ed, expired),
		"tampered": tampered,
		"no scope": sign(t, k.ed, claimsFor("alice", "/elsewhere")),
	} {
		code, body := call(tok)
		if code != http.StatusUnauthorized {
			t.Errorf("%s: status %d, want 401", name, code)
		}
		for _, part := range strings.Split(tok, ".") {
			if len(part) > 8 && strings.Contains(body, part[:8]) {
				t.Errorf("%s: response body %q echoes the token", name, body)
			}
		}
	}
}

func TestScopeFromTokenInfo(t *testing.T) {
	if _, ok := claims.ScopeFromTokenInfo(nil); ok {
		t.Error("nil TokenInfo gave a scope")
	}
	if _, ok := claims.ScopeFromTokenInfo(&auth.TokenInfo{}); ok {
		t.Error("empty TokenInfo gave a scope")
	}
	if _, ok := claims.ScopeFromTokenInfo(&auth.TokenInfo{Extra: map[string]any{claims.TokenInfoScopeKey: scope.Scope{}}}); ok {
		t.Error("zero scope reported as present")
	}
	if _, ok := claims.ScopeFromTokenInfo(&auth.TokenInfo{Extra: map[string]any{claims.TokenInfoScopeKey: "chain:acme"}}); ok {
		t.Error("a string in Extra was taken for a scope")
	}
	if _, ok := claims.FromTokenInfo(&auth.TokenInfo{Extra: map[string]any{claims.TokenInfoClaimsKey: (*claims.Claims)(nil)}}); ok {
		t.Error("nil *Claims reported as present")
	}
}

func TestTokenVerifierErrorsWrapInvalidToken(t *testing.T) {
	v := staticVerifier(t, nil)
	_, err := v.TokenVerifier()(context.Background(), "not-a-token", nil)
	if !errors.Is(err, auth.ErrInvalidToken) || !errors.Is(err, claims.ErrMalformed) {
		t.Fatalf("error %v, want ErrMalformed wrapping auth.ErrInvalidToken", err)
	}
}
