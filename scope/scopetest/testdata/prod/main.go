// Command prod is a stand-in for a production binary that imports scopetest
// by mistake: it must panic instead of minting a scope.
package main

import (
	"fmt"

	"github.com/tenantmcp/tenantmcp/scope"
	"github.com/tenantmcp/tenantmcp/scope/scopetest"
)

func main() {
	s := scopetest.New("mallory", []scope.Grant{{Level: "chain", ID: "acme"}})
	fmt.Println("minted", s)
}
