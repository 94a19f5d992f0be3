package conformance

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/tenantmcp/tenantmcp/internal/guardfault"
)

// TestUserModule runs the tests of examples/usermodule, a module of its
// own that depends on this one through a replace directive, as a user's
// application does: its tests run Run with claimstest on a composite-key
// schema with per-tenant unique constraints, importing public packages
// only (the go command refuses an internal import from another module).
// A nested module is outside this module's ./..., so this test is what
// makes go test ./... build and run it; it fails when they fail. Built
// with -tags tenantmcp_faults, it passes the tag on, so the module's
// mutation check (conformance.Mutate) runs instead of skipping.
func TestUserModule(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and tests a separate module (examples/usermodule); skipped with -short")
	}
	if os.Getenv(EnvMutate) != "" {
		t.Skipf("%s is set", EnvMutate)
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command on PATH to build examples/usermodule with")
	}
	dir, err := filepath.Abs(filepath.Join("..", "examples", "usermodule"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "go.mod")); err != nil {
		t.Fatalf("examples/usermodule: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	args := []string{"test", "-count=1"}
	if guardfault.Enabled {
		// Built with the fault hook: so is the module's mutation check.
		args = append(args, "-tags", guardfault.Tag)
	}
	cmd := exec.CommandContext(ctx, goBin, append(args, "./...")...)
	cmd.Dir = dir
	// -mod=mod: the nested go.mod lists this module's requirements as
	// indirect ones; when they move, the go command updates them from the
	// shared module cache instead of refusing to build.
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod")
	out, err := cmd.CombinedOutput()
	if err != nil {
		const keep = 16 << 10
		if len(out) > keep {
			out = append([]byte("…\n"), out[len(out)-keep:]...)
		}
		t.Fatalf("go test ./... in examples/usermodule: %v\n%s", err, out)
	}
	t.Logf("examples/usermodule:\n%s", out)
}
