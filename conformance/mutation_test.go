package conformance

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/tenantmcp/tenantmcp/internal/guardfault"
)

// TestMutationIsCaught is the mutation check: a suite that cannot fail
// proves nothing. For every tenant-bound table of the hotel graph it makes
// the guard drop that table's tenant predicate (the test-only fault hook
// internal/guardfault) and runs every property once against the broken
// guard on the embedded SQLite database (or the first TENANTMCP_DSN
// target). The read properties that cover every table (1, 2, 5, 6) and the
// UPDATE/DELETE properties (7, 8) must fail for every table, and the
// foreign-parent INSERT property (9) for every table a child row
// references. First, with no fault, every property must pass, so that the
// failures are the fault's doing. The matrix of which properties caught
// which fault is logged.
func TestMutationIsCaught(t *testing.T) {
	env, err := FromEnv()
	if err != nil {
		t.Fatal(err)
	}
	if env.Mutate != "" {
		t.Skipf("%s is set: the whole run is mutated already", EnvMutate)
	}
	dsn := ""
	if len(env.DSNs) > 0 {
		dsn = env.DSNs[0]
	}
	tg := hotelTarget(dsn, 1)
	r, err := newRunner(tg)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := r.setup(ctx); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := r.teardown(); err != nil {
			t.Errorf("teardown: %v", err)
		}
	}()
	var props []*property
	for _, p := range properties {
		// Coverage audits the others within one repetition; it has no
		// guard behaviour of its own to break.
		if p.id != 18 && (p.only == "" || p.only == r.engine) {
			props = append(props, p)
		}
	}
	// Control: the intact guard passes every property.
	for _, p := range props {
		if o := r.runProperty(ctx, p, nil, 1); o.failed {
			t.Fatalf("control: P%d fails with the guard intact: %s", p.id, strings.Join(o.msgs, "; "))
		}
	}
	// Tables a child row (one with a scope parent) references: an insert
	// under a foreign one is what P9 tries.
	parents := map[string]bool{}
	for _, name := range r.g.bound {
		if t := r.g.tables[name]; t.parent != nil {
			for _, f := range r.g.tenantFKs(t) {
				parents[f.to] = true
			}
		}
	}
	var matrix []string
	for _, table := range r.g.bound {
		var caught []int
		first := map[int]string{}
		restore := guardfault.DropPredicate(table)
		for _, p := range props {
			o := r.runProperty(ctx, p, nil, 1)
			if o.failed {
				caught = append(caught, p.id)
				if len(o.msgs) > 0 {
					first[p.id] = o.msgs[0]
				}
			}
		}
		restore()
		must := []int{1, 2, 5, 6, 7, 8}
		if parents[table] {
			must = append(must, 9)
		}
		for _, id := range must {
			if !slices.Contains(caught, id) {
				t.Errorf("predicate of %s dropped: P%d did not fail", table, id)
			}
		}
		matrix = append(matrix, fmt.Sprintf("%-9s caught by %v (required %v); e.g. P1: %s", table, caught, must, first[1]))
		// The fault is gone: the guard is whole again.
		if o := r.runProperty(ctx, propertyByID(1), nil, 1); o.failed {
			t.Fatalf("after restoring %s: P1 still fails: %v", table, o.msgs)
		}
	}
	t.Logf("mutation matrix (%s):\n%s", r.engine, strings.Join(matrix, "\n"))
	if path := os.Getenv("TENANTMCP_CONFORMANCE_MUTATION_LOG"); path != "" {
		_ = os.WriteFile(path, []byte(strings.Join(matrix, "\n")+"\n"), 0o644)
	}
}
