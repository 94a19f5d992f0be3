package claims_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/auth"

	"github.com/tenantmcp/tenantmcp/claims"
)

// FuzzVerify feeds arbitrary strings, seeded with valid and forged tokens,
// to Verify: it must never panic, every refusal must be one of the token
// sentinels, and nothing but the exact valid seed tokens may verify.
func FuzzVerify(f *testing.F) {
	k := testKeys(f)
	v := staticVerifier(f, nil)
	valid := map[string]bool{}
	for _, s := range []signer{k.rsa, k.ec, k.ed} {
		tok := sign(f, s, claimsFor("alice", "/tenants/acme", "/tenants/globex/hotels/h-17"))
		valid[tok] = true
		f.Add(tok)
	}
	other := k.rsaOther
	f.Add(sign(f, other, validClaims()))
	f.Add("eyJhbGciOiJub25lIn0.eyJzdWIiOiJhIn0.")
	f.Add("a.b.c")
	f.Add("..")
	sentinels := []error{
		claims.ErrMalformed, claims.ErrTooLarge, claims.ErrAlgNotAllowed, claims.ErrUnknownKey,
		claims.ErrBadSignature, claims.ErrExpired, claims.ErrNotYetValid, claims.ErrMissingExpiry,
		claims.ErrWrongIssuer, claims.ErrWrongAudience, claims.ErrNoSubject, claims.ErrGroupOverage,
		claims.ErrNoScope,
	}
	f.Fuzz(func(t *testing.T, token string) {
		sc, info, err := v.Verify(context.Background(), token)
		if err == nil {
			if !valid[token] {
				t.Fatalf("a token that was never signed verified: scope %v", sc)
			}
			if sc.IsZero() || info == nil {
				t.Fatal("success without a scope")
			}
			return
		}
		if !sc.IsZero() || info != nil {
			t.Fatal("refusal with a scope")
		}
		if !errors.Is(err, auth.ErrInvalidToken) {
			t.Fatalf("error %v does not wrap auth.ErrInvalidToken", err)
		}
		known := false
		for _, s := range sentinels {
			known = known || errors.Is(err, s)
		}
		if !known {
			t.Fatalf("error %v matches no sentinel", err)
		}
		if len(token) >= 16 && strings.Contains(err.Error(), token[:16]) {
			t.Fatalf("error %q echoes the token", err)
		}
	})
}
