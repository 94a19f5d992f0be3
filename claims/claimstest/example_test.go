package claimstest_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/tenantmcp/tenantmcp/claims"
	"github.com/tenantmcp/tenantmcp/claims/claimstest"
)

// A test of code that takes verified tokens: mint a token for a front-desk
// user of chain acme and verify it with the real verifier.
func ExampleIssuer_Mint() {
	t := &testing.T{} // in a real test, the *testing.T of the test
	is := claimstest.Start(t, "")
	v := is.Verifier(t, claims.Mapping{Patterns: []string{"/tenants/{chain}"}})

	token := is.Mint(t, claimstest.Token{Subject: "alice", Groups: []string{"/tenants/acme"}, Roles: []string{"front_desk"}})
	s, _, err := v.Verify(context.Background(), token)
	fmt.Println(s.GrantsAt("chain"), s.Roles(), err)
	// Output: [acme] [front_desk] <nil>
}
