package conformance

// Properties 42 and 43: the read structure of issue 15. Every branch of a
// set operation and every CTE body (and derived table) is guarded on its
// own: the statements below read each tenant-bound table only through the
// part under test, for every tenant, and compare the keys with the oracle.

import (
	"errors"
	"strings"

	"github.com/tenantmcp/tenantmcp/builder"
	"github.com/tenantmcp/tenantmcp/guardedsql"
)

func init() {
	register(
		&property{id: 42, name: "union_branches", title: "Every branch of a set operation is confined",
			criterion: "UNION ALL = own keys twice; UNION, INTERSECT = oracle; EXCEPT of own = empty", fn: propSetBranches},
		&property{id: 43, name: "cte_bodies", title: "CTE bodies and derived tables are confined",
			criterion: "WITH c AS (T) SELECT FROM c = oracle; FROM (T) AS d = oracle", fn: propCTEBodies},
	)
}

// propSetBranches (P42): for every tenant and tenant-bound table T, the
// two branches read T under two aliases. UNION ALL returns each own key
// exactly twice and no other (a foreign key from either branch shows);
// UNION and INTERSECT return the oracle's keys; T EXCEPT T is empty.
// INTERSECT and EXCEPT are skipped on a server that lacks them.
func propSetBranches(p *pt, r *runner) {
	for _, tn := range r.tenants {
		ctx := r.scoped(p.ctx, tn)
		for _, name := range r.g.bound {
			t := r.g.tables[name]
			want := r.or.visible(name, tn.Grants)
			branch := func(alias string) builder.Query {
				x := r.ref(name, alias)
				return p.q(builder.Select(keyCols(x, t)...).From(x).Build())
			}
			all := p.q(builder.UnionAll(branch("a"), branch("b")).Build())
			rows, err := r.rows(ctx, all)
			if err != nil {
				p.Errorf("%s UNION ALL as %s: %v", name, tn, err)
				continue
			}
			count := map[string]int{}
			for _, row := range rows {
				count[strings.Join(row[:len(t.pk)], "\x1f")]++
			}
			got := map[string]bool{}
			for k, n := range count {
				got[k] = true
				if n != 2 && want[k] {
					p.Errorf("%s UNION ALL as %s: own key %s returned %d times, want 2", name, tn, head([]string{k}), n)
				}
			}
			if d := diff(got, want); d != "" {
				p.Errorf("%s UNION ALL as %s: %s", name, tn, d)
			}
			for _, op := range []struct {
				name string
				q    func(a, b builder.Query) builder.SetBuilder
				want map[string]bool
			}{
				{"UNION", func(a, b builder.Query) builder.SetBuilder { return builder.Union(a, b) }, want},
				{"INTERSECT", func(a, b builder.Query) builder.SetBuilder { return builder.Intersect(a, b) }, want},
				{"EXCEPT", builder.Except, map[string]bool{}},
			} {
				got, _, err := r.keySet(ctx, p.q(op.q(branch("a"), branch("b")).Build()), len(t.pk))
				if errors.Is(err, guardedsql.ErrSetOpUnsupported) {
					continue
				}
				if err != nil {
					p.Errorf("%s %s as %s: %v", name, op.name, tn, err)
					continue
				}
				if d := diff(got, op.want); d != "" {
					p.Errorf("%s %s as %s: %s", name, op.name, tn, d)
				}
			}
		}
	}
}

// propCTEBodies (P43): for every tenant and tenant-bound table T, a query
// reading T only through a CTE, through a CTE read by a second CTE, and
// through a derived table returns exactly the oracle's keys.
func propCTEBodies(p *pt, r *runner) {
	for _, tn := range r.tenants {
		ctx := r.scoped(p.ctx, tn)
		for _, name := range r.g.bound {
			t := r.g.tables[name]
			want := r.or.visible(name, tn.Grants)
			body := func() builder.Query {
				x := r.ref(name, "x")
				return p.q(builder.Select(keyCols(x, t)...).From(x).Build())
			}
			keys := func(v builder.TableRef) []builder.Selectable {
				out := make([]builder.Selectable, len(t.pk))
				for i, c := range t.pk {
					out[i] = v.Col(c)
				}
				return out
			}
			c := builder.With("c", body())
			cr := c.Ref()
			cr2 := c.As("c2")
			d := builder.With("d", p.q(builder.Select(keys(cr2)...).From(cr2).Build()))
			dr := d.Ref()
			der := builder.Derived(body(), "dt")
			for _, q := range []struct {
				name string
				q    builder.Query
			}{
				{"CTE", p.q(builder.Select(keys(cr)...).From(cr).With(c).Build())},
				{"CTE of a CTE", p.q(builder.Select(keys(dr)...).From(dr).With(c, d).Build())},
				{"derived table", p.q(builder.Select(keys(der)...).From(der).Build())},
			} {
				got, _, err := r.keySet(ctx, q.q, len(t.pk))
				if err != nil {
					p.Errorf("%s through a %s as %s: %v", name, q.name, tn, err)
					continue
				}
				if diff := diff(got, want); diff != "" {
					p.Errorf("%s through a %s as %s: %s", name, q.name, tn, diff)
				}
			}
		}
	}
}
