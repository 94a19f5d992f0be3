//go:build tenantmcp_faults

package conformance

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tenantmcp/tenantmcp/guardedsql/postgres"
	"github.com/tenantmcp/tenantmcp/internal/guardfault"
)

// TestMutationIsCaught is the mutation check: a suite that cannot fail
// proves nothing. On every target engine (the embedded SQLite database
// without TENANTMCP_DSN) it breaks the isolation of one table at a time
// and runs every property once against the broken database:
//
//   - guard: the guard drops the table's tenant predicate (the test-only
//     fault hook internal/guardfault). On SQLite and MySQL/MariaDB the
//     read properties that cover every table (1, 2, 5, 6) and the
//     UPDATE/DELETE properties (7, 8) must fail, and the foreign-parent
//     INSERT property (9) for every table a child row references. On
//     PostgreSQL row-level security still confines the app role, so the
//     scoped read (1) must still pass: defence in depth, recorded.
//
//   - rls (PostgreSQL): the table's owner disables its row-level
//     security. The guard still confines reads (1 passes); the raw-SQL
//     property (16) and the start-up check property (17) must fail.
//
//   - guard+rls (PostgreSQL): both; 1, 2, 5, 6, 7, 8 (and 9) must fail.
//
//   - ancestors: grants confined to ancestors are encoded as plain grants
//     of their id (guardfault.IgnoreAncestors), undoing the check along
//     the whole group path for the guard and the RLS policies alike; P21
//     must fail.
//
//   - roles: the token-wide roles claim is bound to every grant of a token
//     (guardfault.BindTokenRolesEverywhere), undoing roles per grant; P22
//     must fail.
//
// First, with no fault, every property must pass, so that the failures
// are the faults' doing; after each fault is cleared, 1 must pass again.
// SQLite mutates every tenant-bound table of the hotel graph; the server
// engines (slower) mutate bookings and hotels. The matrix of which
// properties caught which fault is logged.
func TestMutationIsCaught(t *testing.T) {
	env, err := FromEnv()
	if err != nil {
		t.Fatal(err)
	}
	if env.Mutate != "" {
		t.Skipf("%s is set: the whole run is mutated already", EnvMutate)
	}
	dsns := env.DSNs
	if len(dsns) == 0 {
		dsns = []string{""}
	}
	for _, dsn := range dsns {
		e, _ := EngineOf(dsn)
		t.Run(string(e), func(t *testing.T) { mutationCheck(t, dsn) })
	}
}

func mutationCheck(t *testing.T, dsn string) {
	r, err := newRunner(hotelTarget(dsn, 1))
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
		// isolation behaviour of its own to break.
		if p.id != 18 && p.id != 59 && (p.only == "" || p.only == r.engine) {
			props = append(props, p)
		}
	}
	for _, p := range props {
		if o := r.runProperty(ctx, p, nil, 1); o.failed {
			t.Fatalf("control: P%d fails with nothing broken: %s", p.id, strings.Join(o.msgs, "; "))
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
	tables := r.g.bound
	if r.engine != SQLite {
		tables = []string{"bookings", "hotels"}
	}
	var matrix []string
	type tableFault struct {
		table string
		f     fault
	}
	var all []tableFault
	for _, table := range tables {
		for _, f := range r.faults(table) {
			if (f.kind == "unsigned" || f.kind == "no-recheck") && table != tables[0] {
				continue // not table-specific: once is enough
			}
			all = append(all, tableFault{table, f})
		}
	}
	for _, f := range r.engineFaults() {
		all = append(all, tableFault{f.table, f})
	}
	for _, tf := range all {
		table, f := tf.table, tf.f
		{
			// caught: the property failed; closed: it failed only
			// because the DB refused to serve (the row-level security
			// re-check noticed the fault: fail closed, no leak).
			var caught, closed []int
			first := map[int]string{}
			for _, p := range props {
				if err := f.inject(); err != nil {
					t.Fatalf("injecting %s fault on %s: %v", f.kind, table, err)
				}
				o := r.runProperty(ctx, p, nil, 1)
				if o.failed && failedClosed(o) {
					closed = append(closed, p.id)
				} else if o.failed {
					caught = append(caught, p.id)
					if len(o.msgs) > 0 {
						first[p.id] = o.msgs[0]
					}
				}
			}
			if err := f.clear(); err != nil {
				t.Fatalf("clearing %s fault on %s: %v", f.kind, table, err)
			}
			var must, mustPass []int
			switch {
			case f.kind == "rls":
				must, mustPass = []int{16, 17, 35, 37}, []int{1}
			case f.kind == "unsigned":
				must, mustPass = []int{17, 35}, []int{1, 16}
			case f.kind == "no-recheck":
				must, mustPass = []int{37}, []int{1, 16, 35}
			case f.kind == "raw-errors":
				must, mustPass = []int{36, 38}, []int{1}
			case f.kind == "guard" && r.engine == Postgres:
				mustPass = []int{1}
			default:
				must = []int{1, 2, 5, 6, 7, 8, 58}
				if parents[table] {
					must = append(must, 9)
				}
			}
			for _, id := range must {
				if !slices.Contains(caught, id) && !slices.Contains(closed, id) {
					t.Errorf("%s fault on %s: P%d did not fail", f.kind, table, id)
				}
			}
			for _, id := range mustPass {
				if slices.Contains(caught, id) {
					t.Errorf("%s fault on %s: P%d failed; the other boundary should have held: %s", f.kind, table, id, first[id])
				}
			}
			example := first[1]
			if example == "" && len(caught) > 0 {
				example = fmt.Sprintf("P%d: %s", caught[0], first[caught[0]])
			}
			matrix = append(matrix, fmt.Sprintf("%-10s %-9s caught by %v, failed closed %v (required %v, must not leak %v); e.g. %s", f.kind, table, caught, closed, must, mustPass, example))
			// A DB that failed closed serves again once its re-check
			// passes (retried every second while failing).
			o := r.runProperty(ctx, propertyByID(1), nil, 1)
			for i := 0; o.failed && failedClosed(o) && i < 5; i++ {
				time.Sleep(time.Second)
				o = r.runProperty(ctx, propertyByID(1), nil, 1)
			}
			if o.failed {
				t.Fatalf("after clearing the %s fault on %s: P1 still fails: %v", f.kind, table, o.msgs)
			}
		}
	}
	// Faults that remove one fix for the whole run rather than one table's
	// predicate, each in turn, every property running once: grants checked
	// along the whole group path (P21 must catch it), roles bound per grant
	// (P22), and the modelling-gap checks of issue 13 §3–7
	// (internal/guardfault.Disable; 25–29). MySQL needs no collation check
	// (the guard compares text level ids a second time as binary strings),
	// so removing it there must change nothing.
	disable := func(f guardfault.Fix) func() func() { return func() func() { return guardfault.Disable(f) } }
	// A fault in a function ApplyRLS generates takes effect once the
	// owner has installed it: reinstall re-applies the DDL (PostgreSQL).
	reinstall := func() {
		if r.engine != Postgres {
			return
		}
		conn, err := pgx.Connect(ctx, r.sc.ownerDSN)
		if err != nil {
			t.Fatalf("connecting as the owner: %v", err)
		}
		defer conn.Close(ctx)
		if err := postgres.ApplyRLS(ctx, conn, r.sch, postgres.Options{Key: r.sc.rlsKey}); err != nil {
			t.Fatalf("re-applying row-level security: %v", err)
		}
	}
	installed := func(f guardfault.Fix) func() func() {
		return func() func() {
			restore := guardfault.Disable(f)
			reinstall()
			return func() { restore(); reinstall() }
		}
	}
	for _, gf := range []struct {
		kind   string
		inject func() (restore func())
		must   []int
	}{
		{"ancestors", guardfault.IgnoreAncestors, []int{21}},
		{"roles", guardfault.BindTokenRolesEverywhere, []int{22}},
		{string(guardfault.NullableFK), disable(guardfault.NullableFK), []int{25}},
		{string(guardfault.PathKey), disable(guardfault.PathKey), []int{26}},
		{string(guardfault.Catalog), disable(guardfault.Catalog), []int{27}},
		{string(guardfault.Collation), disable(guardfault.Collation), []int{28}},
		{string(guardfault.Typed), disable(guardfault.Typed), []int{29}},
		{string(guardfault.SetBranch), disable(guardfault.SetBranch), []int{42}},
		{string(guardfault.CTEBody), disable(guardfault.CTEBody), []int{43}},
		{string(guardfault.Ambiguous), disable(guardfault.Ambiguous), []int{45}},
		{string(guardfault.NarrowCheck), disable(guardfault.NarrowCheck), []int{46}},
		{string(guardfault.Windows), disable(guardfault.Windows), []int{44}},
		{string(guardfault.UpsertConflict), disable(guardfault.UpsertConflict), []int{47}},
		{string(guardfault.RecheckOffCaller), disable(guardfault.RecheckOffCaller), []int{48}},
		{string(guardfault.KeyedWrites), disable(guardfault.KeyedWrites), []int{49}},
		{string(guardfault.GuardFirst), disable(guardfault.GuardFirst), []int{50}},
		{string(guardfault.UndeclaredFK), disable(guardfault.UndeclaredFK), []int{54}},
		{string(guardfault.GlobalNamedRef), disable(guardfault.GlobalNamedRef), []int{27}},
		{string(guardfault.GlobalPolymorphic), disable(guardfault.GlobalPolymorphic), []int{27}},
		{string(guardfault.GlobalRoot), disable(guardfault.GlobalRoot), []int{27}},
		{string(guardfault.LevelAnchor), disable(guardfault.LevelAnchor), []int{27}},
		{string(guardfault.UndeclaredLevel), disable(guardfault.UndeclaredLevel), []int{27}},
		{string(guardfault.GlobalReadOnly), disable(guardfault.GlobalReadOnly), []int{55}},
		{string(guardfault.SharedUnique), disable(guardfault.SharedUnique), []int{56}},
		{string(guardfault.Triggers), disable(guardfault.Triggers), []int{57}},
		{string(guardfault.FKActions), disable(guardfault.FKActions), []int{57}},
		{string(guardfault.FKActionAck), disable(guardfault.FKActionAck), []int{57}},
		{string(guardfault.SearchPath), disable(guardfault.SearchPath), []int{57}},
		{string(guardfault.BypassPaths), disable(guardfault.BypassPaths), []int{17}},
		{string(guardfault.PolicyFuncs), disable(guardfault.PolicyFuncs), []int{17}},
		{string(guardfault.ByRef), disable(guardfault.ByRef), []int{52}},
		{string(guardfault.ByRefExists), disable(guardfault.ByRefExists), []int{52}},
		{string(guardfault.ConsistencyPaths), disable(guardfault.ConsistencyPaths), []int{53}},
		{string(guardfault.GrantPairing), disable(guardfault.GrantPairing), []int{53}},
		{string(guardfault.CheckLockBound), disable(guardfault.CheckLockBound), []int{51}},
		{string(guardfault.ExchangeCounter), installed(guardfault.ExchangeCounter), []int{35}},
		{string(guardfault.LevelColumnCheck), installed(guardfault.LevelColumnCheck), []int{16}},
		{string(guardfault.ScopeCacheKey), disable(guardfault.ScopeCacheKey), []int{1}},
		{string(guardfault.RenderCacheKey), disable(guardfault.RenderCacheKey), []int{1}},
	} {
		must := gf.must
		if gf.kind == string(guardfault.Collation) && r.engine == MySQL {
			must = nil
		}
		if (gf.kind == string(guardfault.SetBranch) || gf.kind == string(guardfault.CTEBody) || gf.kind == string(guardfault.Windows)) && r.engine == Postgres {
			must = nil // row-level security still confines the branch, body or window
		}
		// PostgreSQL's row-level security filters the UPDATE of a foreign
		// conflicting row on its own: removing the guard's check there
		// must change nothing.
		if gf.kind == string(guardfault.UpsertConflict) && r.engine == Postgres {
			must = nil
		}
		// Only PostgreSQL resolves table names through pg_temp and has
		// row-level security to go around.
		if (gf.kind == string(guardfault.SearchPath) || gf.kind == string(guardfault.BypassPaths) || gf.kind == string(guardfault.PolicyFuncs)) && r.engine != Postgres {
			must = nil
		}
		// (h4-ref) PostgreSQL's policies enforce the rules of tables owned
		// by reference and of consistency paths on their own (WITH CHECK,
		// the restrictive policies): removing the guard's checks there must
		// change nothing.
		if (gf.kind == string(guardfault.ByRef) || gf.kind == string(guardfault.ConsistencyPaths)) && r.engine == Postgres {
			must = nil
		}
		// Only PostgreSQL re-checks its row-level security while serving
		// and signs its scope context.
		if (gf.kind == string(guardfault.RecheckOffCaller) || gf.kind == string(guardfault.CheckLockBound) || gf.kind == string(guardfault.ExchangeCounter) ||
			gf.kind == string(guardfault.LevelColumnCheck)) && r.engine != Postgres {
			must = nil
		}
		// Issue 26: only InnoDB locks what it scans (PostgreSQL tests its
		// row-level security before the row lock; SQLite locks the whole
		// database, P49 skips there), and only MariaDB/MySQL evaluate the
		// caller's condition on another tenant's row first (PostgreSQL's
		// row-level security quals come first; SQLite's integers overflow
		// into reals without an error).
		if (gf.kind == string(guardfault.KeyedWrites) || gf.kind == string(guardfault.GuardFirst)) && r.engine != MySQL {
			must = nil
		}
		// Only SQLite's renders are cached (guardedsql/internal/guard,
		// cache.go).
		if gf.kind == string(guardfault.RenderCacheKey) && r.engine != SQLite {
			must = nil
		}
		restore := gf.inject()
		var caught []int
		first := map[int]string{}
		for _, p := range props {
			if o := r.runProperty(ctx, p, nil, 1); o.failed {
				caught = append(caught, p.id)
				if len(o.msgs) > 0 {
					first[p.id] = o.msgs[0]
				}
			}
		}
		restore()
		for _, id := range must {
			if !slices.Contains(caught, id) {
				t.Errorf("%s fault: P%d did not fail", gf.kind, id)
			}
		}
		for _, id := range gf.must {
			if o := r.runProperty(ctx, propertyByID(id), nil, 1); o.failed {
				t.Fatalf("after clearing the %s fault: P%d still fails: %v", gf.kind, id, o.msgs)
			}
		}
		matrix = append(matrix, fmt.Sprintf("%-13s %-9s caught by %v (required %v); e.g. %s", gf.kind, "(all)", caught, must, first[gf.must[0]]))
	}
	t.Logf("mutation matrix (%s):\n%s", r.engine, strings.Join(matrix, "\n"))
	if path := os.Getenv("TENANTMCP_CONFORMANCE_MUTATION_LOG"); path != "" {
		f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
		if err == nil {
			fmt.Fprintf(f, "mutation matrix (%s):\n%s\n", r.engine, strings.Join(matrix, "\n"))
			f.Close()
		}
	}
}

// TestMutateExported runs the exported mutation check, as a user's module
// calls it, on the franchise fixture on every
// target engine: P1 and P58 must catch the broken table (rental; one, for
// time: TestMutationIsCaught breaks every hotel table).
func TestMutateExported(t *testing.T) {
	forEachDSN(t, func(t *testing.T, dsn string) {
		ms := Mutate(t, franchiseTarget(dsn, false), MutateOptions{Tables: []string{"rental"}})
		if len(ms) != 1 {
			t.Fatalf("Mutate returned %d mutations, want 1", len(ms))
		}
	})
}

// engineFaults break what does not depend on a table: engine errors
// returned untranslated.
func (r *runner) engineFaults() []fault {
	return []fault{hookFault("raw-errors", "*", guardfault.RawEngineErrors)}
}
