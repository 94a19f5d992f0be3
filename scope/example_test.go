package scope_test

import (
	"context"
	"fmt"

	"github.com/tenantmcp/tenantmcp/scope"
	"github.com/tenantmcp/tenantmcp/scope/scopetest"
)

// Tool code reads the scope the server attached to the call's context; it
// can never attach one itself.
func ExampleFromContext() {
	// In a unit test, scopetest plays the part of the server.
	ctx := scopetest.NewContext(context.Background(),
		scopetest.New("alice", []scope.Grant{{Level: "chain", ID: "acme"}, {Level: "hotel", ID: "h-17"}}, "front_desk"))

	s, ok := scope.FromContext(ctx)
	if !ok {
		fmt.Println("no scope: deny")
		return
	}
	fmt.Println(s.Subject(), s.GrantsAt("chain"), s.HasRole("front_desk"))
	fmt.Println(string(s.GrantJSON()))
	// Output:
	// alice [acme] true
	// [{"level":"chain","id":"acme"},{"level":"hotel","id":"h-17"}]
}
