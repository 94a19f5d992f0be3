package egress_test

import (
	"context"
	"errors"
	"log"
	"log/slog"
	"net"
	"net/netip"

	"github.com/tenantmcp/tenantmcp/egress"
)

// A server installs the guard before it opens anything, refuses to start if
// the guard cannot be installed, and drains denials into its audit log. (It
// needs root and cgroup v2, so the example does not run as a test.)
func Example() {
	ctx := context.Background()
	db := netip.MustParseAddrPort("127.0.0.1:5432")
	jwks, err := egress.ParseRule("[::1]:8443")
	if err != nil {
		log.Fatal(err)
	}

	g, err := egress.Install(ctx, egress.Policy{Allow: []egress.Rule{
		egress.AllowAddrPort(db),
		jwks,
	}}, egress.Options{})
	switch {
	case errors.Is(err, egress.ErrNotPermitted), errors.Is(err, egress.ErrNoCgroup2):
		log.Fatalf("egress guard required but unavailable here: %v", err)
	case err != nil:
		log.Fatalf("egress guard: %v", err)
	}
	defer g.Close()

	audit := slog.Default()
	go func() {
		for d := range g.Denials() {
			audit.Warn("egress denied", "denial", d)
		}
	}()

	// Only now open the listener and the database pool.
	ln, err := net.Listen("tcp", "127.0.0.1:8080")
	if err != nil {
		log.Fatal(err)
	}
	defer ln.Close()

	// Later, at run time: stop allowing the identity provider. Established
	// connections to it are aborted.
	if err := g.Remove(jwks); err != nil {
		log.Print(err)
	}
	log.Printf("denied so far: %d, audit records lost: %d", g.Stats().Denied[egress.HookConnect4], g.Dropped())
}

// Best effort: run unguarded where the guard cannot be installed, and say so.
func ExampleInstall_bestEffort() {
	g, err := egress.Install(context.Background(), egress.Policy{}, egress.Options{BestEffort: true})
	if err != nil {
		log.Fatal(err) // only an invalid policy fails in best-effort mode
	}
	defer g.Close()
	if !g.Active() {
		log.Printf("egress guard inactive: %v", g.Err())
	}
}
