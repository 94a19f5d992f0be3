package claims_test

import (
	"context"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/modelcontextprotocol/go-sdk/auth"

	"github.com/tenantmcp/tenantmcp/claims"
	"github.com/tenantmcp/tenantmcp/scope"
)

func TestVerifyAcceptsEachAlgorithm(t *testing.T) {
	k := testKeys(t)
	v := staticVerifier(t, nil)
	for _, s := range []signer{k.rsa, k.ec, k.ed} {
		t.Run(s.alg, func(t *testing.T) {
			c := claimsFor("alice", "/tenants/acme", "/tenants/globex/hotels/h-17", "unrelated")
			c["jti"] = "token-1"
			c["scope"] = "openid hotels:read"
			c["nbf"] = time.Now().Add(-time.Minute).Unix()
			sc, info, err := v.Verify(context.Background(), sign(t, s, c))
			if err != nil {
				t.Fatalf("Verify: %v", err)
			}
			if sc.IsZero() || sc.Subject() != "alice" {
				t.Fatalf("scope = %v", sc)
			}
			want := []scope.Grant{{Level: "chain", ID: "acme"}, {Level: "hotel", ID: "h-17", Within: []scope.Grant{{Level: "chain", ID: "globex"}}}}
			if got := sc.Grants(); !sameGrants(got, want) {
				t.Errorf("grants = %v, want %v", got, want)
			}
			if sc.Has("chain", "globex") {
				t.Error("a hotel group granted its chain")
			}
			if info.Subject != "alice" || info.Issuer != testIssuer || info.Algorithm != s.alg || info.KeyID != s.kid ||
				info.ID != "token-1" || len(info.Audience) != 1 || info.Audience[0] != testAudience {
				t.Errorf("claims = %+v", info)
			}
			if info.Expiry.IsZero() || info.NotBefore.IsZero() || info.IssuedAt.IsZero() {
				t.Errorf("times missing: %+v", info)
			}
			if strings.Join(info.OAuthScopes, " ") != "openid hotels:read" {
				t.Errorf("OAuth scopes = %q", info.OAuthScopes)
			}
			if len(info.Groups) != 3 || len(info.Matches) != 2 {
				t.Errorf("groups %q, matches %+v", info.Groups, info.Matches)
			}
		})
	}
}

func TestVerifyWithinLeeway(t *testing.T) {
	k := testKeys(t)
	v := staticVerifier(t, nil) // default leeway 30 s
	c := validClaims()
	c["exp"] = time.Now().Add(-10 * time.Second).Unix()
	c["nbf"] = time.Now().Add(10 * time.Second).Unix()
	if _, _, err := v.Verify(context.Background(), sign(t, k.ed, c)); err != nil {
		t.Fatalf("token within the 30 s leeway refused: %v", err)
	}
	strict := staticVerifier(t, func(c *claims.Options) { c.Leeway = -1 })
	if _, _, err := strict.Verify(context.Background(), sign(t, k.ed, c)); !errors.Is(err, claims.ErrExpired) || !errors.Is(err, claims.ErrNotYetValid) {
		t.Fatalf("with no leeway: %v, want ErrExpired and ErrNotYetValid", err)
	}
}

func TestVerifyTokenWithoutKID(t *testing.T) {
	k := testKeys(t)
	v := staticVerifier(t, nil)
	for _, s := range []signer{k.rsa, k.ec, k.ed} {
		s.kid = ""
		if _, _, err := v.Verify(context.Background(), sign(t, s, validClaims())); err != nil {
			t.Errorf("%s without kid: %v", s.alg, err)
		}
	}
	other := k.rsaOther
	other.kid = ""
	if _, _, err := v.Verify(context.Background(), sign(t, other, validClaims())); !errors.Is(err, claims.ErrBadSignature) {
		t.Errorf("unpublished key without kid: %v, want ErrBadSignature", err)
	}
}

type forgery struct {
	name  string
	token string
	want  []error
}

// forgeries are real tokens, each wrong in one (or two) ways.
func forgeries(t *testing.T) []forgery {
	k := testKeys(t)
	now := time.Now()
	edit := func(f func(jwt.MapClaims)) jwt.MapClaims {
		c := validClaims()
		f(c)
		return c
	}
	rsaPriv := k.rsa.priv.(*rsa.PrivateKey)

	algNone := jwt.NewWithClaims(jwt.SigningMethodNone, validClaims())
	algNone.Header["kid"] = k.rsa.kid
	noneTok, err := algNone.SignedString(jwt.UnsafeAllowNoneSignatureType)
	if err != nil {
		t.Fatal(err)
	}

	hs := jwt.NewWithClaims(jwt.SigningMethodHS256, validClaims())
	hs.Header["kid"] = k.rsa.kid
	hsTok, err := hs.SignedString(rsaPublicPEM(t, rsaPriv))
	if err != nil {
		t.Fatal(err)
	}

	// Sign for chain acme, then swap the payload for one naming globex.
	good := sign(t, k.rsa, validClaims())
	parts := strings.Split(good, ".")
	payload, _ := json.Marshal(claimsFor("alice", "/tenants/globex"))
	tampered := parts[0] + "." + base64.RawURLEncoding.EncodeToString(payload) + "." + parts[2]

	unknownKid := k.rsaOther
	unknownKid.kid = "no-such-kid"
	impostor := k.rsaOther
	impostor.kid = k.rsa.kid // claims the published kid, signs with another key
	ecWithRSAKid := k.ec
	ecWithRSAKid.kid = k.rsa.kid
	// jwt refuses to sign ES256 with a P-384 key, so build it by hand.
	mixed := jwt.NewWithClaims(jwt.SigningMethodES384, validClaims())
	mixed.Header["alg"] = "ES256"
	mixed.Header["kid"] = k.ec384.kid
	mixedInput, err := mixed.SigningString()
	if err != nil {
		t.Fatal(err)
	}
	mixedSig, err := jwt.SigningMethodES384.Sign(mixedInput, k.ec384.priv)
	if err != nil {
		t.Fatal(err)
	}
	es256OnP384 := mixedInput + "." + base64.RawURLEncoding.EncodeToString(mixedSig)

	bigGroups := make([]any, 0, 1000)
	for i := range 1000 {
		bigGroups = append(bigGroups, fmt.Sprintf("/tenants/chain-%04d", i))
	}

	big := sign(t, k.ed, edit(func(c jwt.MapClaims) { c["groups"] = bigGroups }))
	if len(big) <= claims.DefaultMaxTokenBytes {
		t.Fatalf("the oversized token is only %d bytes", len(big))
	}

	crit := jwt.NewWithClaims(jwt.SigningMethodEdDSA, validClaims())
	crit.Header["kid"] = k.ed.kid
	crit.Header["crit"] = []string{"exp"}
	critTok, err := crit.SignedString(k.ed.priv)
	if err != nil {
		t.Fatal(err)
	}

	return []forgery{
		{"alg none", noneTok, []error{claims.ErrAlgNotAllowed}},
		{"HS256 signed with the RSA public key", hsTok, []error{claims.ErrAlgNotAllowed}},
		{"unknown key", sign(t, unknownKid, validClaims()), []error{claims.ErrUnknownKey}},
		{"published kid, other key", sign(t, impostor, validClaims()), []error{claims.ErrBadSignature}},
		{"tampered payload", tampered, []error{claims.ErrBadSignature}},
		{"ES256 naming an RSA key", sign(t, ecWithRSAKid, validClaims()), []error{claims.ErrAlgNotAllowed}},
		{"ES256 header on a P-384 key", es256OnP384, []error{claims.ErrAlgNotAllowed}},
		{"expired", sign(t, k.rsa, edit(func(c jwt.MapClaims) { c["exp"] = now.Add(-2 * time.Minute).Unix() })), []error{claims.ErrExpired}},
		{"nbf in the future", sign(t, k.ec, edit(func(c jwt.MapClaims) { c["nbf"] = now.Add(2 * time.Minute).Unix() })), []error{claims.ErrNotYetValid}},
		{"iat in the future", sign(t, k.ec, edit(func(c jwt.MapClaims) { c["iat"] = now.Add(2 * time.Minute).Unix() })), []error{claims.ErrNotYetValid}},
		{"wrong iss", sign(t, k.ed, edit(func(c jwt.MapClaims) { c["iss"] = "https://evil.test/" })), []error{claims.ErrWrongIssuer}},
		{"no iss", sign(t, k.ed, edit(func(c jwt.MapClaims) { delete(c, "iss") })), []error{claims.ErrWrongIssuer}},
		{"wrong aud", sign(t, k.ed, edit(func(c jwt.MapClaims) { c["aud"] = "https://other.test/" })), []error{claims.ErrWrongAudience}},
		{"no aud", sign(t, k.ed, edit(func(c jwt.MapClaims) { delete(c, "aud") })), []error{claims.ErrWrongAudience}},
		{"no exp", sign(t, k.ed, edit(func(c jwt.MapClaims) { delete(c, "exp") })), []error{claims.ErrMissingExpiry}},
		{"exp zero", sign(t, k.ed, edit(func(c jwt.MapClaims) { c["exp"] = 0 })), []error{claims.ErrMissingExpiry}},
		{"expired and wrong aud", sign(t, k.ed, edit(func(c jwt.MapClaims) {
			c["exp"] = now.Add(-time.Hour).Unix()
			c["aud"] = "https://other.test/"
		})), []error{claims.ErrExpired, claims.ErrWrongAudience}},
		{"over 16 KiB", big, []error{claims.ErrTooLarge}},
		{"no sub", sign(t, k.ed, edit(func(c jwt.MapClaims) { delete(c, "sub") })), []error{claims.ErrNoSubject}},
		{"sub not a string", sign(t, k.ed, edit(func(c jwt.MapClaims) { c["sub"] = 42 })), []error{claims.ErrNoSubject}},
		{"no matching group", sign(t, k.ed, claimsFor("alice", "/staff", "tenant:", "/tenants/acme/extra")), []error{claims.ErrNoScope}},
		{"no groups claim", sign(t, k.ed, edit(func(c jwt.MapClaims) { delete(c, "groups") })), []error{claims.ErrNoScope}},
		{"groups claim is a number", sign(t, k.ed, edit(func(c jwt.MapClaims) { c["groups"] = 7 })), []error{claims.ErrMalformed}},
		{"group is not a string", sign(t, k.ed, claimsFor("alice", "/tenants/acme", 7)), []error{claims.ErrMalformed}},
		{"exp is a string", sign(t, k.ed, edit(func(c jwt.MapClaims) { c["exp"] = "tomorrow" })), []error{claims.ErrMalformed}},
		{"Entra overage", sign(t, k.ed, edit(func(c jwt.MapClaims) {
			c["_claim_names"] = map[string]any{"groups": "src1"}
			c["_claim_sources"] = map[string]any{"src1": map[string]any{"endpoint": "https://graph.microsoft.com/v1.0/users/x/getMemberObjects"}}
		})), []error{claims.ErrGroupOverage}},
		{"Entra hasgroups", sign(t, k.ed, edit(func(c jwt.MapClaims) { delete(c, "groups"); c["hasgroups"] = true })), []error{claims.ErrGroupOverage}},
		{"crit header", critTok, []error{claims.ErrMalformed}},
		{"two segments", "eyJhbGciOiJSUzI1NiJ9.e30", []error{claims.ErrMalformed}},
		{"not base64", "!!!.e30.sig", []error{claims.ErrMalformed}},
		{"header not JSON", base64.RawURLEncoding.EncodeToString([]byte("nope")) + ".e30.c2ln", []error{claims.ErrMalformed}},
		{"empty", "", []error{claims.ErrMalformed}},
	}
}

func TestVerifyRejectsForgeries(t *testing.T) {
	v := staticVerifier(t, nil)
	for _, f := range forgeries(t) {
		t.Run(f.name, func(t *testing.T) {
			sc, info, err := v.Verify(context.Background(), f.token)
			if err == nil {
				t.Fatalf("accepted: scope %v", sc)
			}
			if !sc.IsZero() || info != nil {
				t.Errorf("refusal returned scope %v, claims %+v", sc, info)
			}
			for _, w := range f.want {
				if !errors.Is(err, w) {
					t.Errorf("error %q does not match %q", err, w)
				}
			}
			if !errors.Is(err, auth.ErrInvalidToken) {
				t.Errorf("error %q does not wrap auth.ErrInvalidToken", err)
			}
			assertNoEcho(t, err, f.token)
		})
	}
}

// assertNoEcho fails if the error text contains any part of the token.
func assertNoEcho(t *testing.T, err error, token string) {
	t.Helper()
	msg := err.Error()
	for _, part := range strings.Split(token, ".") {
		if len(part) >= 8 && strings.Contains(msg, part[:8]) {
			t.Errorf("error %q echoes the token", msg)
		}
	}
	for _, kid := range []string{"no-such-kid", "rsa-1", "ec-1", "ed-1"} {
		if strings.Contains(msg, kid) {
			t.Errorf("error %q echoes the kid %q", msg, kid)
		}
	}
}

func TestJWKAlgMustMatchTokenAlg(t *testing.T) {
	k := testKeys(t)
	// The JWK says RS384; a token claiming RS256 under its kid is refused
	// even though both algorithms are allowed.
	published := k.rsa
	published.alg = "RS384"
	v := staticVerifier(t, func(c *claims.Options) {
		c.JWKS = jwksOf(t, published)
		c.Algorithms = []string{"RS256", "RS384"}
	})
	if _, _, err := v.Verify(context.Background(), sign(t, k.rsa, validClaims())); !errors.Is(err, claims.ErrAlgNotAllowed) {
		t.Fatalf("RS256 token on an RS384 JWK: %v, want ErrAlgNotAllowed", err)
	}
	if _, _, err := v.Verify(context.Background(), sign(t, published, validClaims())); err != nil {
		t.Fatalf("RS384 token: %v", err)
	}
}

func TestHMACOnlyWithExplicitKey(t *testing.T) {
	k := testKeys(t)
	secret := []byte("0123456789abcdef0123456789abcdef")
	v := staticVerifier(t, func(c *claims.Options) {
		c.HMACKey = secret
		c.Algorithms = []string{"RS256", "HS256"}
	})
	hs := jwt.NewWithClaims(jwt.SigningMethodHS256, validClaims())
	good, err := hs.SignedString(secret)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := v.Verify(context.Background(), good); err != nil {
		t.Fatalf("HS256 with the configured key: %v", err)
	}
	// Alg confusion still fails when HS256 is enabled: the RSA public key is
	// never an HMAC secret, whatever the kid says.
	for _, keyBytes := range [][]byte{rsaPublicPEM(t, k.rsa.priv.(*rsa.PrivateKey)), []byte("wrong-secret-wrong-secret-wrong-secret")} {
		forged := jwt.NewWithClaims(jwt.SigningMethodHS256, validClaims())
		forged.Header["kid"] = k.rsa.kid
		tok, err := forged.SignedString(keyBytes)
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := v.Verify(context.Background(), tok); !errors.Is(err, claims.ErrBadSignature) {
			t.Errorf("HS256 with another key: %v, want ErrBadSignature", err)
		}
	}
	if _, _, err := v.Verify(context.Background(), sign(t, k.rsa, validClaims())); err != nil {
		t.Fatalf("RS256 beside HS256: %v", err)
	}
	if _, _, err := v.Verify(context.Background(), sign(t, k.ed, validClaims())); !errors.Is(err, claims.ErrAlgNotAllowed) {
		t.Fatalf("EdDSA not listed: %v, want ErrAlgNotAllowed", err)
	}
}

func TestTokenSizeLimit(t *testing.T) {
	k := testKeys(t)
	v := staticVerifier(t, func(c *claims.Options) { c.MaxTokenBytes = 1024 })
	small := sign(t, k.ed, validClaims())
	if len(small) > 1024 {
		t.Fatalf("test token is %d bytes", len(small))
	}
	if _, _, err := v.Verify(context.Background(), small); err != nil {
		t.Fatalf("small token: %v", err)
	}
	if _, _, err := v.Verify(context.Background(), small+strings.Repeat("A", 1025-len(small))); !errors.Is(err, claims.ErrTooLarge) {
		t.Fatalf("1025-byte token: %v, want ErrTooLarge", err)
	}
}

func TestInvalidScopeRefusesWholeToken(t *testing.T) {
	k := testKeys(t)
	v := staticVerifier(t, nil)
	c := validClaims()
	c["roles"] = []any{"manager", "bad\x00role"}
	_, _, err := v.Verify(context.Background(), sign(t, k.ed, c))
	if !errors.Is(err, claims.ErrNoScope) || !errors.Is(err, scope.ErrInvalid) {
		t.Fatalf("role with a NUL: %v, want ErrNoScope and scope.ErrInvalid", err)
	}
}

func TestConfigErrors(t *testing.T) {
	k := testKeys(t)
	jwks := jwksOf(t, k.rsa)
	base := func() claims.Options {
		return claims.Options{Issuer: testIssuer, Audience: []string{testAudience}, JWKS: jwks, Mapping: defaultMapping(), Logger: quietLog}
	}
	cases := []struct {
		name   string
		edit   func(*claims.Options)
		substr string
	}{
		{"no issuer", func(c *claims.Options) { c.Issuer = "" }, "Issuer"},
		{"no audience", func(c *claims.Options) { c.Audience = nil }, "Audience"},
		{"no key source", func(c *claims.Options) { c.JWKS = nil }, "no key source"},
		{"two key sources", func(c *claims.Options) { c.JWKSURL = "https://idp.test/certs" }, "not both"},
		{"alg none", func(c *claims.Options) { c.Algorithms = []string{"none"} }, `"none" is not supported`},
		{"HS256 without key", func(c *claims.Options) { c.Algorithms = []string{"HS256"} }, "needs HMACKey"},
		{"HMAC key without HS alg", func(c *claims.Options) { c.HMACKey = make([]byte, 32) }, "never enabled implicitly"},
		{"short HMAC key", func(c *claims.Options) { c.HMACKey = make([]byte, 16); c.Algorithms = []string{"HS256"} }, "at least 32"},
		{"PEM as HMAC key", func(c *claims.Options) {
			c.HMACKey = rsaPublicPEM(t, k.rsa.priv.(*rsa.PrivateKey))
			c.Algorithms = []string{"HS256"}
		}, "PEM"},
		{"RS256 with only an HMAC key", func(c *claims.Options) {
			c.JWKS = nil
			c.HMACKey = make([]byte, 32)
			c.Algorithms = []string{"HS256", "RS256"}
		}, "needs JWKSURL or JWKS"},
		{"huge leeway", func(c *claims.Options) { c.Leeway = time.Hour }, "Leeway"},
		{"plain http JWKS", func(c *claims.Options) { c.JWKS = nil; c.JWKSURL = "http://idp.example.com/certs" }, "must be https"},
		{"relative JWKS URL", func(c *claims.Options) { c.JWKS = nil; c.JWKSURL = "/certs" }, "absolute"},
		{"static JWKS not JSON", func(c *claims.Options) { c.JWKS = []byte("{") }, "static JWKS"},
		{"static JWKS without usable keys", func(c *claims.Options) { c.JWKS = []byte(`{"keys":[{"kty":"oct","k":"c2VjcmV0"}]}`) }, "no usable"},
		{"unquoted URL claim", func(c *claims.Options) { c.GroupsClaim = "https://example.com/groups" }, "quoted segment"},
		{"bad roles path", func(c *claims.Options) { c.RolesClaim = "realm_access..roles" }, "empty segment"},
		{"empty mapping", func(c *claims.Options) { c.Mapping = claims.Mapping{} }, "no patterns"},
		{"bad pattern", func(c *claims.Options) { c.Mapping.Patterns = []string{"/tenants/{Chain}"} }, "not a level name"},
		{"unclosed placeholder", func(c *claims.Options) { c.Mapping.Patterns = []string{"/tenants/{chain"} }, "never closed"},
		{"adjacent placeholders", func(c *claims.Options) { c.Mapping.Patterns = []string{"{chain}{hotel}"} }, "adjacent"},
		{"no placeholder", func(c *claims.Options) { c.Mapping.Patterns = []string{"/admins"} }, "no placeholder"},
		{"shadowed pattern", func(c *claims.Options) { c.Mapping.Patterns = []string{"tenant:{chain}", "tenant:{hotel}"} }, "can never match"},
		{"level not in Levels", func(c *claims.Options) { c.Mapping.Patterns = []string{"/t/{hotle}"} }, "not in Levels"},
		{"table bad level", func(c *claims.Options) {
			c.Mapping.Table = map[string]scope.Grant{"0f3e": {Level: "Chain", ID: "acme"}}
		}, "not a level name"},
		{"table empty id", func(c *claims.Options) { c.Mapping.Table = map[string]scope.Grant{"0f3e": {Level: "chain"}} }, "id must be"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := base()
			tc.edit(&cfg)
			v, err := claims.New(cfg)
			if err == nil {
				v.Close()
				t.Fatal("New accepted the config")
			}
			if !errors.Is(err, claims.ErrConfig) {
				t.Errorf("error %q does not wrap ErrConfig", err)
			}
			if !strings.Contains(err.Error(), tc.substr) {
				t.Errorf("error %q does not say %q", err, tc.substr)
			}
		})
	}
}
