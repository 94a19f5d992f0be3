package claimstest_test

import (
	"context"
	"errors"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tenantmcp/tenantmcp/claims"
	"github.com/tenantmcp/tenantmcp/claims/claimstest"
)

var mapping = claims.Mapping{Patterns: []string{"/tenants/{chain}"}, Levels: []string{"chain"}}

func TestMintedTokensVerify(t *testing.T) {
	is := claimstest.Start(t, "")
	v := is.Verifier(t, mapping)
	ctx := context.Background()

	s, c, err := v.Verify(ctx, is.Mint(t, claimstest.Token{
		Subject: "alice", Groups: []string{"/tenants/acme", "/tenants/globex"}, Roles: []string{"manager"},
		Claims: map[string]any{"scope": "bookings:read bookings:write"},
	}))
	if err != nil {
		t.Fatalf("Verify: %v", err)
	}
	if got := s.GrantsAt("chain"); strings.Join(got, ",") != "acme,globex" {
		t.Errorf("chains = %v, want [acme globex]", got)
	}
	// Two grants: the token-wide roles claim is bound to neither (see
	// claims.Mapping), so no role holds; with one grant it does.
	if s.Subject() != "alice" || s.HasRole("manager") {
		t.Errorf("subject %q, roles %v", s.Subject(), s.Roles())
	}
	one, _, err := v.Verify(ctx, is.Mint(t, claimstest.Token{Subject: "alice", Groups: []string{"/tenants/acme"}, Roles: []string{"manager"}}))
	if err != nil || !one.HasRole("manager") {
		t.Errorf("one grant: roles %v, %v", one.Roles(), err)
	}
	if strings.Join(c.OAuthScopes, " ") != "bookings:read bookings:write" {
		t.Errorf("OAuth scopes = %v", c.OAuthScopes)
	}
}

func TestRefusals(t *testing.T) {
	is := claimstest.Start(t, "")
	v := is.Verifier(t, mapping)
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		tok  claimstest.Token
		want error
	}{
		{"expired", claimstest.Token{Subject: "a", Groups: []string{"/tenants/acme"}, TTL: -time.Minute}, claims.ErrExpired},
		{"not yet valid", claimstest.Token{Subject: "a", Groups: []string{"/tenants/acme"}, NotBefore: time.Now().Add(time.Hour)}, claims.ErrNotYetValid},
		{"wrong audience", claimstest.Token{Subject: "a", Groups: []string{"/tenants/acme"}, Audience: "https://other.invalid"}, claims.ErrWrongAudience},
		{"forged issuer", claimstest.Token{Subject: "a", Groups: []string{"/tenants/acme"}, Claims: map[string]any{"iss": "https://evil.invalid"}}, claims.ErrWrongIssuer},
		{"no tenant group", claimstest.Token{Subject: "a", Groups: []string{"offline_access"}}, claims.ErrNoScope},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, _, err := v.Verify(ctx, is.Mint(t, tc.tok)); !errors.Is(err, tc.want) {
				t.Fatalf("Verify = %v, want %v", err, tc.want)
			}
		})
	}
	// A second issuer's tokens name a key this verifier has never seen.
	other := claimstest.Start(t, is.Audience)
	tok := other.Mint(t, claimstest.Token{Subject: "a", Groups: []string{"/tenants/acme"}, Claims: map[string]any{"iss": is.URL}})
	if _, _, err := v.Verify(ctx, tok); !errors.Is(err, claims.ErrUnknownKey) {
		t.Fatalf("other issuer's key: %v, want ErrUnknownKey", err)
	}
}

// TestRefusesOutsideTests builds a real (non-test) binary that calls Start
// and checks that it panics rather than serve an issuer.
func TestRefusesOutsideTests(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a binary; skipped in -short mode")
	}
	bin := filepath.Join(t.TempDir(), "prod")
	if out, err := exec.Command("go", "build", "-o", bin, "./testdata/prod").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	out, err := exec.Command(bin).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "claimstest: used outside a test binary") || strings.Contains(string(out), "started") {
		t.Fatalf("err %v, output:\n%s", err, out)
	}
}
