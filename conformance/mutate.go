package conformance

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tenantmcp/tenantmcp/internal/guardfault"
)

// MutateOptions configures [Mutate]. The zero value breaks every
// tenant-bound table of the target's graph, and every table owned by
// reference, in turn.
type MutateOptions struct {
	// Tables are the tables to break, one at a time; nil means every
	// tenant-bound table of the graph and every table owned by reference.
	Tables []string
}

// Mutation is the outcome of one fault of a [Mutate] run.
type Mutation struct {
	Table string
	// Fault is "guard" (the guard drops the table's tenant predicate) or,
	// on PostgreSQL, "guard+rls" (and the table's row-level security is
	// disabled by its owner, since it alone still confines the app role).
	Fault string
	// Caught lists the properties that failed with the fault in place.
	Caught []int
	// Example is the first failure message of the first property caught.
	Example string
}

// MustCatch are the properties every fault of [Mutate] must make fail:
// the scoped read (1) and the catalog oracle (58) read every row of the
// broken table as every tenant, so a predicate missing for it must show,
// whatever the schema.
var MustCatch = []int{1, 58}

// Mutate is the mutation check on the caller's own target: a suite that
// cannot fail proves nothing. It sets the target up once, runs every
// property with nothing broken (each must pass: otherwise the failures
// below would prove nothing and Mutate stops), then for each table breaks
// its isolation (the guard drops the table's tenant predicate through a
// fault hook that works in test binaries only; on PostgreSQL its
// row-level security is disabled too) and runs every property again. Each
// fault must make every property of [MustCatch] fail; Mutate reports an
// error naming the table otherwise. It logs, and returns, which properties
// caught which fault, and restores the table before the next.
//
// Call it from a test of your module, as Run; it must not run in parallel
// with other tests of the binary (the fault hook is process-wide):
//
//	func TestMutation(t *testing.T) {
//		conformance.Mutate(t, myTarget(), conformance.MutateOptions{})
//	}
//
// The fault hook is compiled only with the build tag tenantmcp_faults, so
// that no program built without it contains a fault check. Run the check
// with the tag:
//
//	go test -tags tenantmcp_faults -run TestMutation ./...
//
// Without the tag Mutate skips the test (t.Skip), saying why and giving
// that command, and returns nil; nothing else of the package needs it.
func Mutate(t *testing.T, target Target, opts MutateOptions) []Mutation {
	t.Helper()
	if !guardfault.Enabled {
		t.Skip(needFaults("conformance.Mutate", t))
		return nil
	}
	r, err := newRunner(target)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := r.setup(ctx); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := r.teardown(); err != nil {
			t.Errorf("dropping the scratch database: %v", err)
		}
	}()
	var props []*property
	for _, p := range properties {
		if !p.last && (p.only == "" || p.only == r.engine) {
			props = append(props, p)
		}
	}
	for _, p := range props {
		if o := r.runProperty(ctx, p, nil, 1); o.failed {
			t.Fatalf("control: P%d fails with nothing broken, so the mutation check would prove nothing: %s", p.id, strings.Join(o.msgs, "; "))
		}
	}
	tables := opts.Tables
	if tables == nil {
		tables = r.g.mutable()
	}
	var out []Mutation
	for _, table := range tables {
		if !slices.Contains(r.g.mutable(), table) {
			t.Errorf("MutateOptions.Tables: %q is not a tenant-bound table (or one owned by reference) of the graph", table)
			continue
		}
		f := r.mutation(table)
		m := Mutation{Table: table, Fault: f.kind}
		first := map[int]string{}
		for _, p := range props {
			if err := f.inject(); err != nil {
				t.Fatalf("breaking %s: %v", table, err)
			}
			if o := r.runProperty(ctx, p, nil, 1); o.failed {
				m.Caught = append(m.Caught, p.id)
				if len(o.msgs) > 0 {
					first[p.id] = o.msgs[0]
				}
			}
		}
		if err := f.clear(); err != nil {
			t.Fatalf("restoring %s: %v", table, err)
		}
		for _, id := range MustCatch {
			if !slices.Contains(m.Caught, id) {
				t.Errorf("%s fault on %s: P%d did not fail; the suite cannot see this table's isolation broken", f.kind, table, id)
			}
		}
		if len(m.Caught) > 0 {
			m.Example = fmt.Sprintf("P%d: %s", m.Caught[0], first[m.Caught[0]])
		}
		out = append(out, m)
		// On PostgreSQL the DB's row-level security re-check may have
		// noticed the fault and refuse to serve (failing closed) until its
		// next check passes, retried every second while failing.
		o := r.runProperty(ctx, propertyByID(1), nil, 1)
		for i := 0; o.failed && failedClosed(o) && i < 5; i++ {
			time.Sleep(time.Second)
			o = r.runProperty(ctx, propertyByID(1), nil, 1)
		}
		if o.failed {
			t.Fatalf("after restoring %s: P1 still fails: %v", table, o.msgs)
		}
	}
	var lines []string
	for _, m := range out {
		lines = append(lines, fmt.Sprintf("%-9s %-16s caught by %v; e.g. %s", m.Fault, m.Table, m.Caught, m.Example))
	}
	t.Logf("mutation check (%s), %d properties each:\n%s", r.engine, len(props), strings.Join(lines, "\n"))
	return out
}

// needFaults is why what needs the fault hook (what) cannot run in this
// build, and the command that runs t's test with it.
func needFaults(what string, t *testing.T) string {
	name, _, _ := strings.Cut(t.Name(), "/")
	return fmt.Sprintf("%s needs the fault hook, compiled only with the build tag %s (no program built without it contains a fault check); run: go test -tags %s -run '^%s$' ./...",
		what, guardfault.Tag, guardfault.Tag, name)
}

// mutation is the fault Mutate injects for table: the guard's predicate,
// and on PostgreSQL the table's row-level security with it.
func (r *runner) mutation(table string) fault {
	for _, f := range r.faults(table) {
		if (r.engine == Postgres && f.kind == "guard+rls") || (r.engine != Postgres && f.kind == "guard") {
			return f
		}
	}
	panic("conformance: no fault for " + table)
}

// mutateFromEnv applies TENANTMCP_CONFORMANCE_MUTATE to one Run, in
// any test binary built with the tag tenantmcp_faults (without it, an
// error saying so): the guard drops the named table's tenant predicate
// (on PostgreSQL the table's row-level security is disabled too) for the
// whole run, whose properties are then expected to fail. It returns what
// restores the table, or nil when the variable is unset.
func (r *runner) mutateFromEnv(t *testing.T) (restore func(), err error) {
	table := os.Getenv(EnvMutate)
	if table == "" {
		return nil, nil
	}
	if !guardfault.Enabled {
		return nil, fmt.Errorf("conformance: %s=%s: %s", EnvMutate, table, needFaults("breaking a table", t))
	}
	if !slices.Contains(r.g.mutable(), table) {
		return nil, fmt.Errorf("conformance: %s=%q is not a tenant-bound table (or one owned by reference) of target %s", EnvMutate, table, r.target.Name)
	}
	f := r.mutation(table)
	if err := f.inject(); err != nil {
		return nil, err
	}
	t.Logf("%s=%s: %s fault on %s for this run; properties are expected to FAIL", EnvMutate, table, f.kind, table)
	return func() {
		if err := f.clear(); err != nil {
			t.Errorf("restoring %s: %v", table, err)
		}
	}, nil
}

// fault is one way of breaking the isolation of one table.
type fault struct {
	kind   string // "guard", "rls", "guard+rls"
	table  string
	inject func() error // idempotent; called before every property
	clear  func() error
}

func (r *runner) faults(table string) []fault {
	guard := hookFault("guard", table, func() func() { return guardfault.DropPredicate(table) })
	if r.engine != Postgres {
		return []fault{guard}
	}
	// PostgreSQL has a second boundary: the table's row-level security,
	// switched off by its owner (the start-up check would refuse to open
	// a DB like that; the one open already carries on).
	rls := fault{kind: "rls", table: table,
		inject: func() error {
			_, err := r.sc.owner.Exec(`ALTER TABLE ` + Postgres.quote(table) + ` DISABLE ROW LEVEL SECURITY`)
			return err
		},
		clear: func() error { return prepareEngine(context.Background(), r.sc, r.sch) }}
	both := fault{kind: "guard+rls", table: table,
		inject: func() error { return errors.Join(guard.inject(), rls.inject()) },
		clear:  func() error { return errors.Join(guard.clear(), rls.clear()) }}
	// The policies trust the scope setting as written (the verifying
	// function replaced by one that reads the document, signed or not,
	// without checking the signature).
	unsigned := fault{kind: "unsigned", table: table,
		inject: func() error {
			_, err := r.sc.owner.Exec(`CREATE OR REPLACE FUNCTION tenantmcp_scope_doc() RETURNS jsonb LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
SELECT CASE WHEN left(v, 3) = 'v1.' THEN substr(v, 6 + length(split_part(v, '.', 2)) + 64)::jsonb ELSE nullif(v, '')::jsonb END
FROM (SELECT current_setting('tenantmcp.scope', true) AS v) AS s $$`)
			return err
		},
		clear: func() error { return prepareEngine(context.Background(), r.sc, r.sch) }}
	norecheck := hookFault("no-recheck", table, guardfault.NoRecheck)
	return []fault{guard, rls, both, unsigned, norecheck}
}

// failedClosed reports whether the failures of o are the DB refusing to
// serve because its row-level security check failed (and the rows it
// therefore did not read), with no other finding.
func failedClosed(o outcome) bool {
	if len(o.msgs) == 0 {
		return false
	}
	refused := false
	for _, m := range o.msgs {
		switch {
		case strings.Contains(m, "row-level security is not in force"):
			refused = true
		case strings.Contains(m, "only 0 tenant(s) see rows"): // the consequence: nothing read
		default:
			return false
		}
	}
	return refused
}

// hookFault is a fault switched by a guardfault hook: start switches it on
// and returns what switches it off.
func hookFault(kind, table string, start func() (restore func())) fault {
	var restore func()
	return fault{kind: kind, table: table,
		inject: func() error {
			if restore == nil {
				restore = start()
			}
			return nil
		},
		clear: func() error {
			if restore != nil {
				restore()
				restore = nil
			}
			return nil
		}}
}
