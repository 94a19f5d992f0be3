package claims_test

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/modelcontextprotocol/go-sdk/auth"

	"github.com/tenantmcp/tenantmcp/claims"
	"github.com/tenantmcp/tenantmcp/scope"
)

// A verifier over a static JWKS, as in tests or an air-gapped deployment,
// mapping Keycloak group paths and one Entra-style group id to grants.
func Example() {
	// The identity provider's key pair. Only the public half is configured.
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		log.Fatal(err)
	}
	jwks := fmt.Sprintf(`{"keys":[{"kty":"OKP","crv":"Ed25519","use":"sig","alg":"EdDSA","kid":"idp-1","x":%q}]}`,
		base64.RawURLEncoding.EncodeToString(pub))

	v, err := claims.New(claims.Options{
		Issuer:   "https://idp.example.com/realms/hotels",
		Audience: []string{"https://mcp.example.com"},
		JWKS:     []byte(jwks),
		Mapping: claims.Mapping{
			Patterns: []string{
				"/tenants/{chain}",
				"/tenants/{chain}/hotels/{hotel}",
			},
			Table: map[string]scope.Grant{
				"5f1c0b6e-7d0a-4a51-9d8e-0c4a1e2b3c4d": {Level: "chain", ID: "initech"},
			},
			Levels: []string{"chain", "hotel"},
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	defer v.Close()

	// The identity provider issues tokens for alice.
	issue := func(groups ...string) string {
		tok := jwt.NewWithClaims(jwt.SigningMethodEdDSA, jwt.MapClaims{
			"iss":    "https://idp.example.com/realms/hotels",
			"aud":    "https://mcp.example.com",
			"sub":    "alice",
			"exp":    time.Now().Add(5 * time.Minute).Unix(),
			"groups": groups,
			"roles":  []string{"front-desk"},
		})
		tok.Header["kid"] = "idp-1"
		token, err := tok.SignedString(priv)
		if err != nil {
			log.Fatal(err)
		}
		return token
	}

	s, info, err := v.Verify(context.Background(), issue(
		"/tenants/acme",               // chain acme
		"/tenants/globex/hotels/h-17", // hotel h-17 within chain globex, not chain globex
		"5f1c0b6e-7d0a-4a51-9d8e-0c4a1e2b3c4d",
		"offline_access", // matches no rule: ignored
	))
	if err != nil {
		log.Fatal(err)
	}
	// The token-wide roles claim is not bound: with three grants nothing
	// says which tenant the role was given for (see Mapping).
	fmt.Println(s)
	fmt.Println("chains:", s.GrantsAt("chain"))
	fmt.Println("may reach chain globex:", s.Has("chain", "globex"))
	for _, m := range info.Matches {
		fmt.Printf("%s -> %s (rule %s, within %v)\n", m.Group, m.Grant, m.Rule, m.Within)
	}

	// A valid token whose groups match no rule grants nothing: refused.
	_, _, err = v.Verify(context.Background(), issue("offline_access"))
	fmt.Println(err, errors.Is(err, claims.ErrNoScope), errors.Is(err, auth.ErrInvalidToken))

	// Output:
	// scope(sub="alice" grants=[chain:"acme" chain:"initech" chain:"globex"/hotel:"h-17"] roles=[])
	// chains: [acme initech]
	// may reach chain globex: false
	// /tenants/acme -> chain:acme (rule /tenants/{chain}, within [])
	// /tenants/globex/hotels/h-17 -> chain:globex/hotel:h-17 (rule /tenants/{chain}/hotels/{hotel}, within [chain:globex])
	// 5f1c0b6e-7d0a-4a51-9d8e-0c4a1e2b3c4d -> chain:initech (rule table, within [])
	// claims: token grants no tenant scope true true
}
