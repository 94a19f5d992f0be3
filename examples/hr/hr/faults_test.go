//go:build tenantmcp_faults

package hr_test

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/tenantmcp/tenantmcp/internal/guardfault"
)

// recorder is a testing.TB whose failures are recorded instead of failing
// the test: Errorf marks it failed, Fatalf and Fatal also stop the check
// (a panic its caller recovers).
type recorder struct {
	testing.TB
	failed bool
	first  string
}

var errStopped = errors.New("check stopped")

func (r *recorder) note(msg string) {
	if !r.failed {
		r.first = msg
	}
	r.failed = true
}

func (r *recorder) Errorf(format string, args ...any) { r.note(fmt.Sprintf(format, args...)) }
func (r *recorder) Error(args ...any)                 { r.note(fmt.Sprint(args...)) }
func (r *recorder) Fatalf(format string, args ...any) {
	r.note(fmt.Sprintf(format, args...))
	panic(errStopped)
}
func (r *recorder) Fatal(args ...any) { r.note(fmt.Sprint(args...)); panic(errStopped) }
func (r *recorder) FailNow()          { r.note("FailNow"); panic(errStopped) }

// run runs check as r, recovering the panic of a stopped check.
func (r *recorder) run(check func(testing.TB)) {
	defer func() {
		if p := recover(); p != nil && p != errStopped {
			panic(p)
		}
	}()
	check(r)
}

// TestToolLeaksCatchFaults shows that the leak checks of TestToolLeaks can
// fail: with one isolation fix of the guard removed at a time (the
// test-only hook internal/guardfault, compiled in with -tags
// tenantmcp_faults like this file), on a fresh SQLite database each,
// the checks that cover it fail; with no fault they all pass. (SQLite:
// on PostgreSQL row-level security would still confine the reads.)
func TestToolLeaksCatchFaults(t *testing.T) {
	checks := map[string]func(testing.TB, *served){
		"reads": func(t testing.TB, s *served) {
			for _, c := range []string{"acme", "globex"} {
				checkReads(t, s, c)
			}
		},
		"locations":   checkLocationWrites,
		"guard paths": checkGuardPaths,
		"legacy row":  checkLegacyRow,
	}
	for _, f := range []struct {
		name   string
		apply  func() func()
		caught []string // the checks that must fail
	}{
		{"none", func() func() { return func() {} }, nil},
		{"predicate of locations dropped", func() func() { return guardfault.DropPredicate("locations") }, []string{"reads"}},
		{"predicate of departments dropped", func() func() { return guardfault.DropPredicate("departments") }, []string{"reads"}},
		{"predicate of employees dropped", func() func() { return guardfault.DropPredicate("employees") }, []string{"reads"}},
		{"write rules of tables owned by reference off", func() func() { return guardfault.Disable(guardfault.ByRef) }, []string{"locations", "guard paths"}},
		{"consistency paths unchecked on UPDATE/DELETE", func() func() { return guardfault.Disable(guardfault.ConsistencyPaths) }, []string{"legacy row"}},
	} {
		t.Run(f.name, func(t *testing.T) {
			for name, check := range checks {
				if f.caught != nil && !slices.Contains(f.caught, name) {
					continue // only what must catch the fault (the control runs all)
				}
				s := serve(t, "sqlite", "")
				rec := &recorder{TB: t}
				restore := f.apply()
				rec.run(func(tb testing.TB) { check(tb, s) })
				restore()
				must := f.caught != nil
				switch {
				case must && !rec.failed:
					t.Errorf("%s: check %s passed", f.name, name)
				case f.caught == nil && rec.failed:
					t.Errorf("check %s fails with no fault: %s", name, rec.first)
				case rec.failed:
					t.Logf("%s: check %s fails: %s", f.name, name, rec.first)
				}
			}
		})
	}
}
