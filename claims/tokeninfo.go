package claims

import (
	"context"
	"net/http"

	"github.com/modelcontextprotocol/go-sdk/auth"

	"github.com/tenantmcp/tenantmcp/scope"
)

// Keys under which TokenVerifier stores its results in auth.TokenInfo.Extra.
const (
	// TokenInfoScopeKey holds the minted scope.Scope (a value, never zero).
	TokenInfoScopeKey = "github.com/tenantmcp/tenantmcp/claims.Scope"
	// TokenInfoClaimsKey holds the *Claims.
	TokenInfoClaimsKey = "github.com/tenantmcp/tenantmcp/claims.Claims"
)

// TokenVerifier adapts v to the go-sdk's auth.RequireBearerToken. The
// TokenInfo it returns has
//
//   - UserID: the sub claim (the go-sdk binds sessions to it),
//   - Expiration: the exp claim,
//   - Scopes: the token's OAuth scopes (Claims.OAuthScopes), which is what
//     RequireBearerTokenOptions.Scopes is checked against; roles are in the
//     scope, not here,
//   - Extra[TokenInfoScopeKey]: the scope.Scope, read it with
//     ScopeFromTokenInfo,
//   - Extra[TokenInfoClaimsKey]: the *Claims, read it with
//     FromTokenInfo.
//
// Token errors wrap auth.ErrInvalidToken, so the middleware answers 401 with
// the error's fixed text; ErrNotReady does not, so it answers 500.
//
// With stateful streamable HTTP, auth.TokenInfoFromContext inside a tool
// handler returns the TokenInfo of the request that created the session;
// derive the scope from the current request's TokenInfo (req.Extra.TokenInfo).
func (v *Verifier) TokenVerifier() auth.TokenVerifier {
	return func(ctx context.Context, token string, _ *http.Request) (*auth.TokenInfo, error) {
		s, c, err := v.Verify(ctx, token)
		if err != nil {
			return nil, err
		}
		return &auth.TokenInfo{
			UserID:     c.Subject,
			Expiration: c.Expiry,
			Scopes:     c.OAuthScopes,
			Extra: map[string]any{
				TokenInfoScopeKey:  s,
				TokenInfoClaimsKey: c,
			},
		}, nil
	}
}

// ScopeFromTokenInfo returns the scope TokenVerifier stored in ti, and
// whether there was a non-zero one. A nil ti reports false.
func ScopeFromTokenInfo(ti *auth.TokenInfo) (scope.Scope, bool) {
	if ti == nil {
		return scope.Scope{}, false
	}
	s, ok := ti.Extra[TokenInfoScopeKey].(scope.Scope)
	if !ok || s.IsZero() {
		return scope.Scope{}, false
	}
	return s, true
}

// FromTokenInfo returns the *Claims TokenVerifier stored in ti.
func FromTokenInfo(ti *auth.TokenInfo) (*Claims, bool) {
	if ti == nil {
		return nil, false
	}
	c, ok := ti.Extra[TokenInfoClaimsKey].(*Claims)
	return c, ok && c != nil
}
