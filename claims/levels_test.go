package claims_test

import (
	"slices"
	"testing"

	"github.com/tenantmcp/tenantmcp/claims"
	"github.com/tenantmcp/tenantmcp/scope"
)

// TestVerifierLevels: the levels a mapping may grant are its declared
// Levels, or else every level its patterns and table name (ancestors
// included, the role placeholder excluded), sorted and once each.
func TestVerifierLevels(t *testing.T) {
	cases := []struct {
		m    claims.Mapping
		want []string
	}{
		{claims.Mapping{Patterns: []string{"/t/{chain}/h/{hotel}/{@role}", "tenant:{chain}"}}, []string{"chain", "hotel"}},
		{claims.Mapping{Table: map[string]scope.Grant{"g": {Level: "hotel", ID: "1", Within: []scope.Grant{{Level: "brand", ID: "b"}}}}}, []string{"brand", "hotel"}},
		{claims.Mapping{Patterns: []string{"/t/{chain}"}, Levels: []string{"region", "chain"}}, []string{"chain", "region"}},
	}
	for _, c := range cases {
		v, err := claims.New(claims.Options{Issuer: "https://idp.example", Audience: []string{"a"}, HMACKey: []byte("0123456789abcdef0123456789abcdef"), Algorithms: []string{"HS256"}, Mapping: c.m})
		if err != nil {
			t.Fatal(err)
		}
		if got := v.Levels(); !slices.Equal(got, c.want) {
			t.Errorf("%+v: Levels() = %q, want %q", c.m, got, c.want)
		}
		v.Close()
	}
}
