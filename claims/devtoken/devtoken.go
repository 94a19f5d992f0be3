package devtoken

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/tenantmcp/tenantmcp/claims"
)

// JWKSPath is where an [Issuer] serves its key set.
const JWKSPath = "/.well-known/jwks.json"

// DefaultAddr is the listen address of an [Issuer] started with an empty
// Options.Addr: a free port on the IPv4 loopback.
const DefaultAddr = "127.0.0.1:0"

// ErrNotLoopback is wrapped by the error of [Start] for an address that is
// not loopback (127.0.0.0/8, ::1 or "localhost"), including one with no
// host, which would listen on every interface.
var ErrNotLoopback = errors.New("devtoken: not a loopback address; the development issuer listens only on 127.0.0.1, [::1] or localhost")

// Options configures [Start].
type Options struct {
	// Addr is the loopback address to serve the JWKS on; default
	// [DefaultAddr]. Any other address is refused with [ErrNotLoopback].
	Addr string
	// Audience is the aud of every token unless [Token.Audience] says
	// otherwise: your server's MCP endpoint URL. Required.
	Audience string
	// Logger receives the one start-up line; default slog.Default().
	Logger *slog.Logger
}

// Issuer is a running development issuer. Its fields are what a verifier
// must be configured with: see [Issuer.ClaimsOptions].
type Issuer struct {
	// URL is the issuer identifier (the iss of every token),
	// http://127.0.0.1:PORT.
	URL string
	// JWKSURL serves the public key set.
	JWKSURL string
	// Audience is the aud of every token unless Token.Audience overrides it.
	Audience string

	kid  string
	priv ed25519.PrivateKey
	jwks []byte
	srv  *http.Server
	once sync.Once
}

// Token describes a token to mint. The zero value plus a Subject is a
// valid one-hour token with no groups.
type Token struct {
	Subject string
	Groups  []string
	Roles   []string
	// TTL is the lifetime from now; zero means one hour, and a negative TTL
	// mints a token that has already expired.
	TTL time.Duration
	// Audience overrides the issuer's audience.
	Audience string
	// NotBefore, if set, becomes the nbf claim.
	NotBefore time.Time
	// Extra claims are set after the standard ones and may override any of
	// them (scope or scp for OAuth scopes, a namespaced groups claim).
	Extra map[string]any
}

// Start generates a key and serves its JWKS on opts.Addr until
// [Issuer.Close]. It refuses a non-loopback address with [ErrNotLoopback]
// before listening, and again if the address it got is not loopback (a
// "localhost" that resolves elsewhere).
func Start(opts Options) (*Issuer, error) {
	addr := opts.Addr
	if addr == "" {
		addr = DefaultAddr
	}
	if err := checkLoopback(addr); err != nil {
		return nil, err
	}
	if opts.Audience == "" {
		return nil, errors.New("devtoken: Options.Audience is required (your server's MCP endpoint URL)")
	}
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("devtoken: generating a key: %w", err)
	}
	var kb [8]byte
	_, _ = rand.Read(kb[:])
	kid := "dev-" + hex.EncodeToString(kb[:])
	jwks, err := json.Marshal(map[string]any{"keys": []map[string]string{{
		"kty": "OKP", "crv": "Ed25519", "alg": "EdDSA", "use": "sig", "kid": kid,
		"x": base64.RawURLEncoding.EncodeToString(pub),
	}}})
	if err != nil {
		return nil, fmt.Errorf("devtoken: %w", err)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("devtoken: %w", err)
	}
	if ta, ok := ln.Addr().(*net.TCPAddr); !ok || !ta.IP.IsLoopback() {
		ln.Close()
		return nil, fmt.Errorf("%w: %q listens on %s", ErrNotLoopback, addr, ln.Addr())
	}
	base := "http://" + ln.Addr().String()
	is := &Issuer{URL: base, JWKSURL: base + JWKSPath, Audience: opts.Audience, kid: kid, priv: priv, jwks: jwks}
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+JWKSPath, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(is.jwks)
	})
	is.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = is.srv.Serve(ln) }()
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	log.Warn("devtoken: DEVELOPMENT token issuer, never for production: whoever reaches it can mint tokens for any tenant",
		"issuer", is.URL, "jwks", is.JWKSURL, "audience", is.Audience)
	return is, nil
}

// checkLoopback refuses an address whose host is not a loopback IP or
// "localhost" (an empty host means every interface).
func checkLoopback(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("devtoken: address %q: %w", addr, err)
	}
	if host == "localhost" {
		return nil
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("%w: %q", ErrNotLoopback, addr)
	}
	return nil
}

// JWKS returns the public key set document the issuer serves.
func (is *Issuer) JWKS() []byte { return append([]byte(nil), is.jwks...) }

// ClaimsOptions returns the [claims.Options] of a verifier that trusts this
// issuer, fetching its keys from [Issuer.JWKSURL], and maps groups with m.
// Adjust any field before passing it to [claims.New].
func (is *Issuer) ClaimsOptions(m claims.Mapping) claims.Options {
	return claims.Options{Issuer: is.URL, Audience: []string{is.Audience}, JWKSURL: is.JWKSURL, Mapping: m}
}

// Mint signs a token for t with the issuer's key.
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
	s, err := tok.SignedString(is.priv)
	if err != nil {
		return "", fmt.Errorf("devtoken: signing: %w", err)
	}
	return s, nil
}

// Close stops serving the JWKS. It is safe to call more than once.
func (is *Issuer) Close() error {
	var err error
	is.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		err = is.srv.Shutdown(ctx)
	})
	return err
}
