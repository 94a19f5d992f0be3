package devtoken

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/tenantmcp/tenantmcp/claims"
)

var mapping = claims.Mapping{Patterns: []string{"/tenants/{chain}"}}

// start runs an issuer logging into buf, closed when the test ends.
func start(t *testing.T, buf *bytes.Buffer) *Issuer {
	t.Helper()
	is, err := Start(Options{Audience: "http://127.0.0.1:8080/mcp", Logger: slog.New(slog.NewTextHandler(buf, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { is.Close() })
	return is
}

// verifier is the normal claims verifier of is, reading its served JWKS.
func verifier(t *testing.T, is *Issuer) *claims.Verifier {
	t.Helper()
	v, err := claims.New(is.ClaimsOptions(mapping))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { v.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := v.WaitReady(ctx); err != nil {
		t.Fatalf("verifier did not load the served JWKS: %v", err)
	}
	return v
}

// TestMintedTokenVerifies: a token it mints passes the claims verifier,
// which fetched the key from the issuer's JWKS URL, and grants its groups
// and roles.
func TestMintedTokenVerifies(t *testing.T) {
	is := start(t, &bytes.Buffer{})
	v := verifier(t, is)
	tok, err := is.Mint(Token{Subject: "alice", Groups: []string{"/tenants/acme"}, Roles: []string{"manager"}})
	if err != nil {
		t.Fatal(err)
	}
	s, info, err := v.Verify(context.Background(), tok)
	if err != nil {
		t.Fatalf("minted token refused: %v", err)
	}
	if got := s.GrantsAt("chain"); len(got) != 1 || got[0] != "acme" || info.Subject != "alice" {
		t.Fatalf("scope %v, subject %q; want chain acme for alice", got, info.Subject)
	}
	if expired, _ := is.Mint(Token{Subject: "alice", Groups: []string{"/tenants/acme"}, TTL: -time.Hour}); expired != "" {
		if _, _, err := v.Verify(context.Background(), expired); !errors.Is(err, claims.ErrExpired) {
			t.Fatalf("expired token: %v, want ErrExpired", err)
		}
	}
}

// TestForeignTokenRefused: a token signed by another key (another dev
// issuer, or a forged one with this issuer's kid and iss) is refused, and
// so is a token of this issuer whose payload was altered.
func TestForeignTokenRefused(t *testing.T) {
	is := start(t, &bytes.Buffer{})
	v := verifier(t, is)
	ctx := context.Background()

	other := start(t, &bytes.Buffer{})
	tok, err := other.Mint(Token{Subject: "mallory", Groups: []string{"/tenants/acme"}, Extra: map[string]any{"iss": is.URL}})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := v.Verify(ctx, tok); err == nil {
		t.Fatal("a token of another issuer's key verified")
	}

	_, forgedKey, _ := ed25519.GenerateKey(rand.Reader)
	forged := jwt.NewWithClaims(jwt.SigningMethodEdDSA, jwt.MapClaims{
		"iss": is.URL, "sub": "mallory", "aud": is.Audience, "groups": []string{"/tenants/acme"},
		"iat": time.Now().Unix(), "exp": time.Now().Add(time.Hour).Unix(),
	})
	forged.Header["kid"] = is.kid
	ftok, err := forged.SignedString(forgedKey)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := v.Verify(ctx, ftok); err == nil {
		t.Fatal("a token forged with this issuer's kid but another key verified")
	}

	good, _ := is.Mint(Token{Subject: "bob", Groups: []string{"/tenants/globex"}})
	parts := strings.Split(good, ".")
	payload := base64.RawURLEncoding.EncodeToString([]byte(`{"iss":"` + is.URL + `","sub":"bob","aud":"` + is.Audience + `","groups":["/tenants/acme"],"exp":` + "9999999999" + `}`))
	if _, _, err := v.Verify(ctx, parts[0]+"."+payload+"."+parts[2]); err == nil {
		t.Fatal("a token with an altered payload verified")
	}
}

// TestRefusesNonLoopback: every address that is not loopback, including
// one with no host (all interfaces), is refused with ErrNotLoopback before
// anything listens.
func TestRefusesNonLoopback(t *testing.T) {
	for _, addr := range []string{"0.0.0.0:0", ":0", "[::]:0", "10.0.0.1:0", "192.168.1.1:8080", "example.com:0", "[2001:db8::1]:0"} {
		is, err := Start(Options{Addr: addr, Audience: "http://127.0.0.1:8080/mcp", Logger: slog.New(slog.DiscardHandler)})
		if err == nil {
			is.Close()
			t.Fatalf("Start(%q) listened on a non-loopback address", addr)
		}
		if !errors.Is(err, ErrNotLoopback) {
			t.Errorf("Start(%q): %v, want ErrNotLoopback", addr, err)
		}
	}
	for _, addr := range []string{"127.0.0.1:0", "127.0.0.2:0", "localhost:0"} {
		is, err := Start(Options{Addr: addr, Audience: "a", Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Errorf("Start(%q): %v", addr, err)
			continue
		}
		is.Close()
	}
	if _, err := Start(Options{Logger: slog.New(slog.DiscardHandler)}); err == nil {
		t.Error("Start with no audience succeeded")
	}
}

// TestStartupLogSaysDevelopmentOnly: start-up logs exactly one line, a
// warning that the issuer is for development, and neither it nor minting
// ever logs the private key or a token.
func TestStartupLogSaysDevelopmentOnly(t *testing.T) {
	var buf bytes.Buffer
	is := start(t, &buf)
	tok, err := is.Mint(Token{Subject: "alice", Groups: []string{"/tenants/acme"}})
	if err != nil {
		t.Fatal(err)
	}
	v := verifier(t, is)
	if _, _, err := v.Verify(context.Background(), tok); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 1 || !strings.Contains(lines[0], "level=WARN") || !strings.Contains(lines[0], "DEVELOPMENT") || !strings.Contains(lines[0], is.URL) {
		t.Fatalf("start-up log = %q; want one warning naming the issuer as development-only", out)
	}
	seed := is.priv.Seed()
	for name, secret := range map[string]string{
		"private key (base64url)": base64.RawURLEncoding.EncodeToString(seed),
		"private key (base64)":    base64.StdEncoding.EncodeToString(seed),
		"private key (hex)":       hex.EncodeToString(seed),
		"token":                   tok,
		"token signature":         tok[strings.LastIndex(tok, ".")+1:],
	} {
		if strings.Contains(out, secret) {
			t.Errorf("the log contains the %s:\n%s", name, out)
		}
	}
}
