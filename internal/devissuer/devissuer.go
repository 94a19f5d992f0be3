// Package devissuer is a development-only identity provider: it generates
// an Ed25519 signing key in memory, serves its JWKS on a loopback listener
// and mints tokens for whatever subject, groups and roles it is asked to.
//
// It exists so that the hotel example and the library's end-to-end tests
// run on a fresh machine with no identity provider. Anyone who can call
// Mint can become any tenant: it must never back a real deployment, which
// is why it is internal, listens only on loopback and refuses any other
// address.
package devissuer

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// JWKSPath is where the issuer serves its key set.
const JWKSPath = "/.well-known/jwks.json"

// Issuer is a running development issuer.
type Issuer struct {
	URL      string // the issuer identifier (iss), http://127.0.0.1:PORT
	JWKSURL  string
	Audience string

	kid  string
	priv ed25519.PrivateKey
	jwks []byte
	srv  *http.Server
	ln   net.Listener
	once sync.Once
}

// Start generates a key and serves its JWKS on addr, which must be a
// loopback address ("127.0.0.1:0" picks a free port). Tokens it mints name
// audience as their aud.
func Start(addr, audience string) (*Issuer, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("devissuer: address %q: %w", addr, err)
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return nil, fmt.Errorf("devissuer: refusing to listen on non-loopback address %q", addr)
	}
	if audience == "" {
		return nil, errors.New("devissuer: an audience is required")
	}
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, err
	}
	var kb [8]byte
	_, _ = rand.Read(kb[:])
	kid := "dev-" + hex.EncodeToString(kb[:])
	jwks, err := json.Marshal(map[string]any{"keys": []map[string]string{{
		"kty": "OKP", "crv": "Ed25519", "alg": "EdDSA", "use": "sig", "kid": kid,
		"x": base64.RawURLEncoding.EncodeToString(pub),
	}}})
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("devissuer: %w", err)
	}
	base := "http://" + ln.Addr().String()
	is := &Issuer{URL: base, JWKSURL: base + JWKSPath, Audience: audience, kid: kid, priv: priv, jwks: jwks, ln: ln}
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+JWKSPath, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(is.jwks)
	})
	is.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = is.srv.Serve(ln) }()
	return is, nil
}

// JWKS returns the key set document.
func (is *Issuer) JWKS() []byte { return append([]byte(nil), is.jwks...) }

// Token describes a token to mint.
type Token struct {
	Subject string
	Groups  []string
	Roles   []string
	TTL     time.Duration // default one hour
	// Audience overrides the issuer's audience (tests of wrong audiences).
	Audience string
	// NotBefore, if set, becomes nbf.
	NotBefore time.Time
	// Extra claims are set after the standard ones, so a test can add
	// claims (scope, scp, namespaced groups) or override any standard one.
	Extra map[string]any
}

// Mint signs a token. It is the whole point of a development issuer, and
// the reason this package must never serve production.
func (is *Issuer) Mint(t Token) (string, error) {
	ttl := t.TTL
	if ttl == 0 {
		ttl = time.Hour
	}
	aud := t.Audience
	if aud == "" {
		aud = is.Audience
	}
	now := time.Now()
	c := jwt.MapClaims{
		"iss": is.URL, "sub": t.Subject, "aud": aud,
		"iat": now.Unix(), "exp": now.Add(ttl).Unix(),
		"groups": t.Groups, "roles": t.Roles,
	}
	if !t.NotBefore.IsZero() {
		c["nbf"] = t.NotBefore.Unix()
	}
	for k, v := range t.Extra {
		c[k] = v
	}
	tok := jwt.NewWithClaims(jwt.SigningMethodEdDSA, c)
	tok.Header["kid"] = is.kid
	return tok.SignedString(is.priv)
}

// Close stops serving the JWKS.
func (is *Issuer) Close() error {
	var err error
	is.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		err = is.srv.Shutdown(ctx)
	})
	return err
}
