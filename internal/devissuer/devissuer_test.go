package devissuer

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/golang-jwt/jwt/v5"
)

func TestRefusesNonLoopback(t *testing.T) {
	for _, addr := range []string{"0.0.0.0:0", "10.0.0.1:0", ":0"} {
		if is, err := Start(addr, "aud"); err == nil {
			is.Close()
			t.Fatalf("Start(%q) listened on a non-loopback address", addr)
		}
	}
}

func TestMintVerifiesAgainstServedJWKS(t *testing.T) {
	is, err := Start("127.0.0.1:0", "https://mcp.test/mcp")
	if err != nil {
		t.Fatal(err)
	}
	defer is.Close()
	resp, err := http.Get(is.JWKSURL)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(body), `"kty":"OKP"`) {
		t.Fatalf("JWKS = %s", body)
	}
	tok, err := is.Mint(Token{Subject: "alice", Groups: []string{"/tenants/acme"}})
	if err != nil {
		t.Fatal(err)
	}
	parsed, err := jwt.Parse(tok, func(*jwt.Token) (any, error) { return is.priv.Public(), nil },
		jwt.WithValidMethods([]string{"EdDSA"}), jwt.WithIssuer(is.URL), jwt.WithAudience("https://mcp.test/mcp"), jwt.WithExpirationRequired())
	if err != nil || !parsed.Valid {
		t.Fatalf("minted token does not verify: %v", err)
	}
}
