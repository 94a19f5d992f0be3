// Package devissuer is the spelling the library's own tests, the
// conformance suite and the benchmarks use for [devtoken]: the same
// issuer, started without its start-up warning (they are not dev
// servers). New code uses [devtoken] directly.
package devissuer

import (
	"log/slog"

	"github.com/tenantmcp/tenantmcp/claims/devtoken"
)

// Issuer is a running development issuer.
type Issuer = devtoken.Issuer

// Token describes a token to mint.
type Token = devtoken.Token

// Start serves a new issuer on addr, which must be loopback
// (devtoken.ErrNotLoopback otherwise), for tokens naming audience.
func Start(addr, audience string) (*Issuer, error) {
	return devtoken.Start(devtoken.Options{Addr: addr, Audience: audience, Logger: slog.New(slog.DiscardHandler)})
}
