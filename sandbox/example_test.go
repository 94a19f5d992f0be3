package sandbox_test

import (
	"context"
	"errors"
	"log"
	"os"

	"github.com/tenantmcp/tenantmcp/sandbox"
)

// A server confines itself before it opens anything and refuses to start
// if Landlock cannot enforce the policy. (It restricts the whole process
// for good, so the example does not run as a test.)
func Example() {
	ctx := context.Background()
	tmp, err := os.MkdirTemp("", "app-")
	if err != nil {
		log.Fatal(err)
	}
	db, err := sandbox.SQLiteDir("/var/lib/app/db/app.db")
	if err != nil {
		log.Fatal(err)
	}
	sb, err := sandbox.Install(ctx, sandbox.Policy{
		Paths:      append(sandbox.SystemFiles(), db, sandbox.ReadWriteDirs(tmp)),
		ConnectTCP: []uint16{443}, // the identity provider's JWKS
		BindTCP:    []uint16{8080},
	}, sandbox.Options{})
	switch {
	case errors.Is(err, sandbox.ErrUnsupported), errors.Is(err, sandbox.ErrABITooOld):
		log.Fatalf("sandbox required but this kernel cannot enforce it: %v", err)
	case err != nil:
		log.Fatalf("sandbox: %v", err)
	}
	log.Printf("sandbox: %s", sb.Enforced())
	// Only now: open the database, listen on :8080, serve.
}
