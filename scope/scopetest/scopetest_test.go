package scopetest_test

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestRefusesOutsideTests builds a real (non-test) binary that calls New and
// checks that it panics rather than mint a scope.
func TestRefusesOutsideTests(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a binary; skipped in -short mode")
	}
	bin := filepath.Join(t.TempDir(), "prod")
	if out, err := exec.Command("go", "build", "-o", bin, "./testdata/prod").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	out, err := exec.Command(bin).CombinedOutput()
	if err == nil {
		t.Fatalf("binary minted a scope outside tests:\n%s", out)
	}
	if !strings.Contains(string(out), "scopetest: used outside a test binary") || strings.Contains(string(out), "minted") {
		t.Fatalf("unexpected output:\n%s", out)
	}
}
