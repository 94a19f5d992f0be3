// Command prod imports claimstest into a non-test binary: Start must panic.
package main

import (
	"fmt"

	"github.com/tenantmcp/tenantmcp/claims/claimstest"
)

func main() {
	claimstest.Start(nil, "")
	fmt.Println("started an issuer outside a test")
}
