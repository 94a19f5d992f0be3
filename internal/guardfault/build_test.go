package guardfault_test

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/tenantmcp/tenantmcp/internal/guardfault"
)

const module = "github.com/tenantmcp/tenantmcp/"

// library are the library's packages a program links: none may link
// package testing or call into guardfault in a default build. Packages
// named *test (scopetest, claimstest) are test helpers and exempt.
var library = []string{"scope/...", "claims/...", "builder/...", "guardedsql/...", "redact/...", "server/...", "flow/..."}

// goList runs go list for the default build (no tags, whatever GOFLAGS
// says) on the library's packages.
func goList(t *testing.T, args ...string) []string {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command on PATH")
	}
	args = append([]string{"list", "-tags="}, args...)
	for _, p := range library {
		args = append(args, module+p)
	}
	out, err := exec.Command(goBin, args...).Output()
	if err != nil {
		if ee, ok := err.(*exec.ExitError); ok {
			t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, ee.Stderr)
		}
		t.Fatalf("go %s: %v", strings.Join(args, " "), err)
	}
	return strings.Split(strings.TrimSpace(string(out)), "\n")
}

// TestDefaultBuildLinksNoTesting: the library's packages link no package
// testing in a default build (issue 28 §3); the faults, which need it,
// are compiled only with the build tag.
func TestDefaultBuildLinksNoTesting(t *testing.T) {
	checked := 0
	for _, line := range goList(t, "-f", "{{.ImportPath}} {{join .Deps \" \"}}") {
		pkg, deps, _ := strings.Cut(line, " ")
		if strings.HasSuffix(pkg, "test") {
			continue
		}
		checked++
		for _, d := range strings.Fields(deps) {
			if d == "testing" || strings.HasPrefix(d, "testing/") {
				t.Errorf("%s links %s in a default build (go list -deps %s)", pkg, d, pkg)
			}
		}
	}
	if checked < 7 {
		t.Fatalf("checked %d packages, want the 7 of the library at least", checked)
	}
}

// TestDefaultBuildHasNoFaultChecks: in a default build no compiled
// package of this module calls into guardfault: its queries are constant
// false and inlined away, so the guard's hot path holds no fault check.
// The compiled archives' symbol tables show it (go tool nm: a call left
// would be an undefined reference to guardfault.<Func>).
func TestDefaultBuildHasNoFaultChecks(t *testing.T) {
	if guardfault.Enabled {
		t.Log("this binary is built with the tag; the check below is of the default build")
	}
	goBin, _ := exec.LookPath("go")
	const ref = " U " + module + "internal/guardfault."
	checked := 0
	for _, line := range goList(t, "-deps", "-export", "-f", "{{if .Export}}{{.ImportPath}} {{.Export}}{{end}}") {
		pkg, archive, ok := strings.Cut(line, " ")
		if !ok || !strings.HasPrefix(pkg, module) || pkg == module+"internal/guardfault" {
			continue
		}
		out, err := exec.Command(goBin, "tool", "nm", archive).Output()
		if err != nil {
			t.Fatalf("go tool nm %s (%s): %v", archive, pkg, err)
		}
		checked++
		for _, sym := range strings.Split(string(out), "\n") {
			if strings.Contains(sym, ref) {
				t.Errorf("%s references %s in a default build: a fault check survives", pkg, strings.TrimSpace(sym[strings.Index(sym, " U ")+3:]))
			}
		}
	}
	if checked < 7 {
		t.Fatalf("checked %d archives, want the library's packages", checked)
	}
}
