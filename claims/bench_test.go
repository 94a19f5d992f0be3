package claims_test

import (
	"context"
	"testing"

	"github.com/golang-jwt/jwt/v5"
)

// BenchmarkVerify measures Verify of a token whose key is cached, per
// algorithm. The baseline sub-benchmark is golang-jwt alone verifying the
// same token with the key in hand and no claim checks, so the figures show
// what claims adds (header check, key lookup, claim validation, mapping,
// minting) on top of the signature check. Verify is a cache hit (the same
// token every time, as a client sends it on every call); Verify-uncached has
// the token cache disabled.
func BenchmarkVerify(b *testing.B) {
	k := testKeys(b)
	v := staticVerifier(b, nil)
	vu := staticVerifier(b, uncached)
	ctx := context.Background()
	for _, s := range []signer{k.rsa, k.ec, k.ed} {
		tok := sign(b, s, claimsFor("alice", "/tenants/acme", "/tenants/globex/hotels/h-17", "offline_access"))
		if _, _, err := v.Verify(ctx, tok); err != nil {
			b.Fatal(err)
		}
		b.Run(s.alg+"/baseline-jwt-only", func(b *testing.B) {
			p := jwt.NewParser(jwt.WithValidMethods([]string{s.alg}), jwt.WithoutClaimsValidation())
			pub := s.public()
			keyFn := func(*jwt.Token) (any, error) { return pub, nil }
			b.ReportAllocs()
			for b.Loop() {
				if _, err := p.Parse(tok, keyFn); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(s.alg+"/Verify-uncached", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, _, err := vu.Verify(ctx, tok); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(s.alg+"/Verify", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, _, err := v.Verify(ctx, tok); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
