package claims_test

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/MicahParks/jwkset"
	"github.com/golang-jwt/jwt/v5"

	"github.com/tenantmcp/tenantmcp/claims"
)

const (
	testIssuer   = "https://idp.test/realms/hotels"
	testAudience = "https://mcp.test/"
)

var quietLog = slog.New(slog.DiscardHandler)

// signer is one real key pair with the kid and alg it is published under.
type signer struct {
	kid  string
	alg  string
	priv crypto.Signer
}

func (s signer) public() crypto.PublicKey { return s.priv.Public() }

type testKeySet struct {
	rsa, rsa2, rsaOther signer // rsaOther is never published
	ec, ec384           signer
	ed                  signer
}

var (
	keysOnce sync.Once
	keysVal  *testKeySet
)

// testKeys generates the keys once per test binary: RSA generation is slow.
func testKeys(t testing.TB) *testKeySet {
	t.Helper()
	keysOnce.Do(func() {
		mustRSA := func() *rsa.PrivateKey {
			k, err := rsa.GenerateKey(rand.Reader, 2048)
			if err != nil {
				panic(err)
			}
			return k
		}
		mustEC := func(c elliptic.Curve) *ecdsa.PrivateKey {
			k, err := ecdsa.GenerateKey(c, rand.Reader)
			if err != nil {
				panic(err)
			}
			return k
		}
		_, ed, err := ed25519.GenerateKey(rand.Reader)
		if err != nil {
			panic(err)
		}
		keysVal = &testKeySet{
			rsa:      signer{"rsa-1", "RS256", mustRSA()},
			rsa2:     signer{"rsa-2", "RS256", mustRSA()},
			rsaOther: signer{"rsa-other", "RS256", mustRSA()},
			ec:       signer{"ec-1", "ES256", mustEC(elliptic.P256())},
			ec384:    signer{"ec-384", "ES384", mustEC(elliptic.P384())},
			ed:       signer{"ed-1", "EdDSA", ed},
		}
	})
	return keysVal
}

// jwksOf builds a JWKS document of the signers' public keys with jwkset.
func jwksOf(t testing.TB, signers ...signer) []byte {
	t.Helper()
	var set jwkset.JWKSMarshal
	for _, s := range signers {
		j, err := jwkset.NewJWKFromKey(s.public(), jwkset.JWKOptions{
			Metadata: jwkset.JWKMetadataOptions{KID: s.kid, ALG: jwkset.ALG(s.alg), USE: jwkset.UseSig},
		})
		if err != nil {
			t.Fatalf("JWK for %s: %v", s.kid, err)
		}
		set.Keys = append(set.Keys, j.Marshal())
	}
	doc, err := json.Marshal(set)
	if err != nil {
		t.Fatal(err)
	}
	return doc
}

// claimsFor returns valid claims for alice in chain acme.
func claimsFor(sub string, groups ...any) jwt.MapClaims {
	now := time.Now()
	return jwt.MapClaims{
		"iss":    testIssuer,
		"aud":    []any{testAudience},
		"sub":    sub,
		"iat":    now.Unix(),
		"exp":    now.Add(5 * time.Minute).Unix(),
		"groups": groups,
	}
}

func validClaims() jwt.MapClaims { return claimsFor("alice", "/tenants/acme") }

// sign signs c with s's key, alg and kid.
func sign(t testing.TB, s signer, c jwt.MapClaims) string {
	t.Helper()
	tok := jwt.NewWithClaims(jwt.GetSigningMethod(s.alg), c)
	if s.kid != "" {
		tok.Header["kid"] = s.kid
	}
	out, err := tok.SignedString(s.priv)
	if err != nil {
		t.Fatalf("sign %s: %v", s.alg, err)
	}
	return out
}

func rsaPublicPEM(t testing.TB, k *rsa.PrivateKey) []byte {
	t.Helper()
	der, err := x509.MarshalPKIXPublicKey(&k.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
}

func defaultMapping() claims.Mapping {
	return claims.Mapping{
		Patterns: []string{"/tenants/{chain}", "/tenants/{chain}/hotels/{hotel}", "tenant:{chain}"},
		Levels:   []string{"chain", "hotel"},
	}
}

// staticVerifier returns a verifier over a static JWKS of all published test
// keys, after applying mutate to the config.
func staticVerifier(t testing.TB, mutate func(*claims.Options)) *claims.Verifier {
	t.Helper()
	k := testKeys(t)
	cfg := claims.Options{
		Issuer:   testIssuer,
		Audience: []string{testAudience},
		JWKS:     jwksOf(t, k.rsa, k.ec, k.ec384, k.ed),
		Mapping:  defaultMapping(),
		Logger:   quietLog,
	}
	if mutate != nil {
		mutate(&cfg)
	}
	v, err := claims.New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { v.Close() })
	return v
}

// jwksServer is a loopback JWKS endpoint whose document can be swapped and
// which counts the requests it answers.
type jwksServer struct {
	*httptest.Server
	doc  atomic.Pointer[[]byte]
	down atomic.Bool
	hits atomic.Int64
}

func newJWKSServer(t testing.TB, doc []byte) *jwksServer {
	t.Helper()
	s := &jwksServer{}
	s.set(doc)
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.hits.Add(1)
		if s.down.Load() {
			http.Error(w, "unavailable", http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Content-Type", "application/jwk-set+json")
		w.Write(*s.doc.Load())
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *jwksServer) set(doc []byte) { s.doc.Store(&doc) }

func remoteVerifier(t testing.TB, srv *jwksServer, mutate func(*claims.Options)) *claims.Verifier {
	t.Helper()
	cfg := claims.Options{
		Issuer:             testIssuer,
		Audience:           []string{testAudience},
		JWKSURL:            srv.URL + "/certs",
		Mapping:            defaultMapping(),
		RefreshInterval:    time.Hour,
		UnknownKIDInterval: time.Hour,
		HTTPTimeout:        5 * time.Second,
		Logger:             quietLog,
	}
	if mutate != nil {
		mutate(&cfg)
	}
	v, err := claims.New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { v.Close() })
	return v
}

// eventually polls cond every 10 ms until it holds or d passes.
func eventually(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", d, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
