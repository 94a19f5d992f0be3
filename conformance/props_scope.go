package conformance

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/tenantmcp/tenantmcp/builder"
	"github.com/tenantmcp/tenantmcp/guardedsql"
	"github.com/tenantmcp/tenantmcp/internal/mint"
	"github.com/tenantmcp/tenantmcp/scope"
)

// children maps each id of level upper to the ids of level lower that
// rows of the data place under it (hotels under a chain).
func (r *runner) children(upper, lower string) map[string][]string {
	seen := map[string]map[string]bool{}
	for _, name := range r.g.bound {
		for _, lv := range r.or.lv[name] {
			u, okU := lv[upper]
			l, okL := lv[lower]
			if okU && okL {
				if seen[u] == nil {
					seen[u] = map[string]bool{}
				}
				seen[u][l] = true
			}
		}
	}
	out := map[string][]string{}
	for u, ls := range seen {
		out[u] = sortedKeys(ls)
	}
	return out
}

// guardKeys returns the keys of table a scope with grants reads.
func (r *runner) guardKeys(p *pt, grants []scope.Grant, table string) (map[string]bool, error) {
	t := r.g.tables[table]
	x := r.ref(table, "x")
	got, _, err := r.keySet(grantsCtx(p.ctx, grants), p.q(builder.Select(keyCols(x, t)...).From(x).Build()), len(t.pk))
	return got, err
}

// P11: a grant at an upper level reaches everything below it: for every
// table, what an upper grant reads is what the oracle says, and includes
// exactly the union of what the grants of its lower-level children read;
// a lower grant reads only its own subtree (a hotel sees itself, not its
// chain's other hotels).
func propHierarchy(p *pt, r *runner) {
	if len(r.g.levels) < 2 {
		p.Skipf("the graph declares a single level; there is no hierarchy")
	}
	checked := 0
	for li := 0; li+1 < len(r.g.levels); li++ {
		upper, lower := r.g.levels[li].Name, r.g.levels[li+1].Name
		kids := r.children(upper, lower)
		var uppers []string
		for u, ls := range kids {
			if len(ls) >= 2 {
				uppers = append(uppers, u)
			}
		}
		sort.Strings(uppers)
		for _, u := range pick(p.rng, uppers, 2) {
			ug := []scope.Grant{{Level: upper, ID: u}}
			for _, name := range r.g.bound {
				gotU, err := r.guardKeys(p, ug, name)
				if err != nil {
					p.Errorf("%s as %s:%s: %v", name, upper, u, err)
					continue
				}
				if d := diff(gotU, r.or.visible(name, ug)); d != "" {
					p.Errorf("%s as %s:%s: %s", name, upper, u, d)
				}
				union := map[string]bool{}
				for _, l := range kids[u] {
					lg := []scope.Grant{{Level: lower, ID: l}}
					gotL, err := r.guardKeys(p, lg, name)
					if err != nil {
						p.Errorf("%s as %s:%s: %v", name, lower, l, err)
						continue
					}
					if d := diff(gotL, r.or.visible(name, lg)); d != "" {
						p.Errorf("%s as %s:%s (under %s:%s): %s", name, lower, l, upper, u, d)
					}
					for k := range gotL {
						if !gotU[k] {
							p.Errorf("%s: %s:%s reads %s, which its parent %s:%s does not", name, lower, l, k, upper, u)
						}
						union[k] = true
					}
				}
				// Rows of the upper grant that lie under some lower id are
				// exactly the union of the children's rows.
				below := map[string]bool{}
				for i, k := range r.or.keys[name] {
					if _, ok := r.or.lv[name][i][lower]; ok && gotU[k] {
						below[k] = true
					}
				}
				if d := diff(union, below); d != "" {
					p.Errorf("%s: the %s grants under %s:%s read %s", name, lower, upper, u, d)
				}
				checked++
			}
			// A lower grant reads itself only, in the tables that carry its
			// level in a column.
			for _, l := range kids[u] {
				for _, name := range r.g.bound {
					for _, lc := range r.g.tables[name].levelCols {
						if lc.level != lower {
							continue
						}
						got, err := r.guardKeys(p, []scope.Grant{{Level: lower, ID: l}}, name)
						if err != nil {
							continue // reported above
						}
						for k := range got {
							if v := canon(r.or.row(name, k)[lc.col]); v != l {
								p.Errorf("%s as %s:%s reads %s, whose %s is %s", name, lower, l, k, lc.col, v)
							}
						}
					}
				}
			}
		}
	}
	if checked == 0 {
		p.Skipf("no id of an upper level has two lower-level ids under it in the seed")
	}
}

// foreignWrites tries an ExpectOne UPDATE (of the table's mutable column)
// and, for a leaf row, an ExpectOne DELETE of row k of table, which the
// scope in ctx must not reach: both must fail with ErrNotFound.
func (r *runner) foreignWrites(p *pt, ctx context.Context, table, k, who string) {
	t, tb := r.g.tables[table], r.sch.Table(table)
	row := r.or.row(table, k)
	if col := r.mutable[table]; col != "" {
		if v, ok := r.otherValue(table, col, r.raw.byKey[table][k]); ok {
			_, err := r.exec(ctx, r.db, p.u(builder.UpdateTable(tb).Set(col, v).Where(pkIs(tb, t, row)).ExpectOne().Build()))
			if !errors.Is(err, guardedsql.ErrNotFound) {
				p.Errorf("UPDATE %s %s as %s = %v, want ErrNotFound", table, k, who, err)
			}
		}
	}
	if r.or.isLeaf(table, k) {
		_, err := r.exec(ctx, r.db, p.d(builder.DeleteFrom(tb).Where(pkIs(tb, t, row)).ExpectOne().Build()))
		if !errors.Is(err, guardedsql.ErrNotFound) {
			p.Errorf("DELETE %s %s as %s = %v, want ErrNotFound", table, k, who, err)
		}
	}
}

// P12: two siblings (lower-level ids under one upper id, such as two
// hotels of one chain) read none of each other's rows, and cannot update
// or delete them.
func propSiblings(p *pt, r *runner) {
	if len(r.g.levels) < 2 {
		p.Skipf("the graph declares a single level; there are no siblings")
	}
	checked := 0
	for li := 0; li+1 < len(r.g.levels); li++ {
		upper, lower := r.g.levels[li].Name, r.g.levels[li+1].Name
		kids := r.children(upper, lower)
		var ups []string
		for u, ls := range kids {
			if len(ls) >= 2 {
				ups = append(ups, u)
			}
		}
		sort.Strings(ups)
		for _, u := range pick(p.rng, ups, 1) {
			pair := pick(p.rng, kids[u], 2)
			for _, ab := range [][2]string{{pair[0], pair[1]}, {pair[1], pair[0]}} {
				a := []scope.Grant{{Level: lower, ID: ab[0]}}
				b := []scope.Grant{{Level: lower, ID: ab[1]}}
				ctx := grantsCtx(p.ctx, a)
				for _, name := range r.g.bound {
					got, err := r.guardKeys(p, a, name)
					if err != nil {
						p.Errorf("%s as %s:%s: %v", name, lower, ab[0], err)
						continue
					}
					va, vb := r.or.visible(name, a), r.or.visible(name, b)
					for k := range got {
						if vb[k] && !va[k] {
							p.Errorf("%s: %s:%s reads %s of its sibling %s", name, lower, ab[0], k, ab[1])
						}
					}
					if d := diff(got, va); d != "" {
						p.Errorf("%s as %s:%s: %s", name, lower, ab[0], d)
					}
					checked++
					var theirs []string
					for k := range vb {
						if !va[k] {
							theirs = append(theirs, k)
						}
					}
					slices.Sort(theirs)
					for _, k := range pick(p.rng, theirs, 1) {
						r.foreignWrites(p, ctx, name, k, fmt.Sprintf("%s:%s (a sibling's row)", lower, ab[0]))
					}
				}
			}
		}
	}
	if checked == 0 {
		p.Skipf("no upper-level id has two lower-level ids under it in the seed")
	}
}

// P13: a call without a scope (no scope in the context, or the zero Scope
// attached) fails with ErrNoScope for every statement kind and for Tx,
// and the database is sent nothing: the statement observer sees zero
// statements. A scope whose grants name no level of the graph reads no
// rows.
func propMissingScope(p *pt, r *runner) {
	var sent atomic.Int64
	var first atomic.Pointer[string]
	fn := func(_ context.Context, s guardedsql.Statement) {
		sent.Add(1)
		txt := s.Kind + ": " + s.SQL
		first.CompareAndSwap(nil, &txt)
	}
	r.observer.Store(&fn)
	defer r.observer.Store(nil)

	contexts := map[string]context.Context{
		"no scope in context": p.ctx,
		"zero Scope attached": mint.NewContext(p.ctx, scope.Scope{}),
	}
	calls := 0
	for what, ctx := range contexts {
		for _, name := range r.g.bound {
			t := r.g.tables[name]
			x, tb := r.ref(name, "x"), r.sch.Table(name)
			q := p.q(builder.Select(keyCols(x, t)...).From(x).Build())
			if _, err := r.db.Query(ctx, q); !errors.Is(err, guardedsql.ErrNoScope) {
				p.Errorf("Query %s with %s: %v, want ErrNoScope", name, what, err)
			}
			var v any
			if err := r.db.QueryRow(ctx, q).Scan(&v); !errors.Is(err, guardedsql.ErrNoScope) {
				p.Errorf("QueryRow %s with %s: %v, want ErrNoScope", name, what, err)
			}
			row := r.data.Tables[name][0]
			var muts []builder.Mutation
			muts = append(muts, p.d(builder.DeleteFrom(tb).Where(pkIs(tb, t, row)).Build()))
			if col := r.mutable[name]; col != "" {
				muts = append(muts, p.u(builder.UpdateTable(tb).Set(col, row[col]).Where(pkIs(tb, t, row)).Build()))
			}
			muts = append(muts, r.insertOf(p, t, r.fresh(t, r.raw.byKey[name][Key(row, t.pk)])))
			for _, m := range muts {
				if _, err := r.db.Exec(ctx, m); !errors.Is(err, guardedsql.ErrNoScope) {
					p.Errorf("Exec %T on %s with %s: %v, want ErrNoScope", m, name, what, err)
				}
			}
			ran := false
			if err := r.db.Tx(ctx, func(*guardedsql.Tx) error { ran = true; return nil }); !errors.Is(err, guardedsql.ErrNoScope) || ran {
				p.Errorf("Tx with %s: %v (body ran: %v), want ErrNoScope and no body", what, err, ran)
			}
			calls += 4 + len(muts)
		}
	}
	if n := sent.Load(); n != 0 {
		p.Errorf("%d statements reached the database without a scope; first: %s", n, *first.Load())
	}
	// Control: the observer does see a scoped statement, so zero means zero.
	tn := r.tenants[0]
	name := r.g.bound[0]
	if _, err := r.guardKeys(p, tn.Grants, name); err != nil {
		p.Errorf("control read as %s: %v", tn, err)
	}
	if sent.Load() == 0 {
		p.Errorf("control: the observer saw nothing for a scoped read; it proves nothing")
	}
	p.Logf("%d unscoped calls, 0 statements sent; a scoped read sent %d", calls, sent.Load())
	// Grants at levels the graph does not have read nothing.
	alien := []scope.Grant{{Level: "tm_conformance_no_such_level", ID: "x"}}
	for _, name := range r.g.bound {
		got, err := r.guardKeys(p, alien, name)
		if err != nil || len(got) != 0 {
			p.Errorf("%s with a grant at an undeclared level: %d rows, %v; want none", name, len(got), err)
		}
	}
}

// P14: many goroutines reading (and aiming updates at foreign rows) as
// different tenants at once: every result equals the tenant's own
// expected rows; zero foreign rows are seen.
func propConcurrent(p *pt, r *runner) {
	const workers, perWorker = 8, 40
	var ops, foreignSeen, mismatches atomic.Int64
	var wg sync.WaitGroup
	seeds := make([]uint64, workers)
	for i := range seeds {
		seeds[i] = p.rng.Uint64()
	}
	for w := range workers {
		wg.Add(1)
		go func(seed uint64) {
			defer wg.Done()
			rng := newRand(seed)
			for range perWorker {
				tn := r.tenants[rng.IntN(len(r.tenants))]
				name := r.g.bound[rng.IntN(len(r.g.bound))]
				t := r.g.tables[name]
				ctx := r.scoped(p.ctx, tn)
				want := r.or.visible(name, tn.Grants)
				x := r.ref(name, "x")
				switch rng.IntN(3) {
				case 0, 1:
					q, err := builder.Select(keyCols(x, t)...).From(x).Build()
					if err != nil {
						p.Errorf("build: %v", err)
						return
					}
					got, _, err := r.keySet(ctx, q, len(t.pk))
					ops.Add(1)
					if err != nil {
						p.Errorf("%s as %s: %v", name, tn, err)
						continue
					}
					for k := range got {
						if !want[k] {
							foreignSeen.Add(1)
						}
					}
					if diff(got, want) != "" {
						mismatches.Add(1)
						p.Errorf("%s as %s under load: %s", name, tn, diff(got, want))
					}
				case 2:
					foreign := r.or.foreign(name, tn.Grants)
					col := r.mutable[name]
					if len(foreign) == 0 || col == "" {
						continue
					}
					k := foreign[rng.IntN(len(foreign))]
					v, ok := r.otherValue(name, col, r.raw.byKey[name][k])
					if !ok {
						continue
					}
					tb := r.sch.Table(name)
					u, err := builder.UpdateTable(tb).Set(col, v).Where(pkIs(tb, t, r.or.row(name, k))).ExpectOne().Build()
					if err != nil {
						p.Errorf("build: %v", err)
						return
					}
					_, err = r.exec(ctx, r.db, u)
					ops.Add(1)
					if !errors.Is(err, guardedsql.ErrNotFound) {
						foreignSeen.Add(1)
						p.Errorf("UPDATE foreign %s %s as %s under load: %v, want ErrNotFound", name, k, tn, err)
					}
				}
			}
		}(seeds[w])
	}
	wg.Wait()
	if n := foreignSeen.Load(); n != 0 {
		p.Errorf("%d foreign rows seen or touched in %d concurrent operations", n, ops.Load())
	}
	if ops.Load() < workers*perWorker/2 {
		p.Errorf("only %d operations ran", ops.Load())
	}
	p.Logf("%d concurrent operations by %d goroutines over %d tenants: %d foreign rows, %d mismatched results", ops.Load(), workers, len(r.tenants), foreignSeen.Load(), mismatches.Load())
}

// P18: every tenant-bound table of the graph was queried by at least one
// property of this repetition, and holds rows of at least two tenants, so
// no table's isolation goes untested.
func propCoverage(p *pt, r *runner) {
	r.mu.Lock()
	touched := map[string][]int{}
	for name, ps := range r.touched {
		for id := range ps {
			if id != 18 {
				touched[name] = append(touched[name], id)
			}
		}
		slices.Sort(touched[name])
	}
	r.mu.Unlock()
	root := r.g.levels[0].Name
	var lines []string
	for _, name := range r.g.bound {
		owners := map[string]bool{}
		for _, lv := range r.or.lv[name] {
			if id, ok := lv[root]; ok {
				owners[id] = true
			}
		}
		tenantsWithRows := 0
		for _, tn := range r.tenants {
			if len(r.or.visible(name, tn.Grants)) > 0 {
				tenantsWithRows++
			}
		}
		switch {
		case len(touched[name]) == 0:
			p.Errorf("table %s: no property queried it", name)
		case tenantsWithRows < 2:
			p.Errorf("table %s: rows of only %d tenant(s); a leak could not show", name, tenantsWithRows)
		}
		lines = append(lines, fmt.Sprintf("%s: %d %s ids, %d tenants with rows, properties %v", name, len(owners), root, tenantsWithRows, touched[name]))
	}
	p.Logf("coverage:\n  %s", strings.Join(lines, "\n  "))
}
