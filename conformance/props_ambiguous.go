package conformance

import (
	"context"
	"errors"
	"slices"
	"strings"

	"github.com/tenantmcp/tenantmcp/builder"
	"github.com/tenantmcp/tenantmcp/guardedsql"
	"github.com/tenantmcp/tenantmcp/scope"
	"github.com/tenantmcp/tenantmcp/scope/scopetest"
)

// Properties of callers with several grants (issue 15).
func init() {
	register(
		&property{id: 45, name: "ambiguous_match", title: "Ambiguous matches fail visibly and change nothing", criterion: "2 grants, 2 rows: QueryRow/ExpectOne ErrAmbiguous, db = seed; 1 grant: its row", fn: propAmbiguous},
		&property{id: 46, name: "narrow_never_widens", title: "A narrowing selector never widens", criterion: "own grant: oracle of that grant; any other: ErrNotGranted, no statement", fn: propNarrow},
	)
}

// P45: a scope with two root grants A and B, and for every tenant-bound
// table a row of A and a row of B named by one predicate (pk = a OR
// pk = b; on composite keys such as (company_id, id) this is what an id
// shared by both companies names). As A+B, QueryRow fails with
// ErrAmbiguous and scans nothing, and an ExpectOne update (and delete, of
// leaf rows) fails with ErrAmbiguous — also inside Tx, which carries on —
// and leaves both rows as seeded. Controls: as A alone QueryRow reads
// exactly A's row and the ExpectOne update (rolled back) affects 1 row.
func propAmbiguous(p *pt, r *runner) {
	roots := r.or.levelIDs()[r.g.levels[0].Name]
	if len(roots) < 2 {
		p.Skipf("the seed has fewer than two ids of the root level %q", r.g.levels[0].Name)
	}
	ga := scope.Grant{Level: r.g.levels[0].Name, ID: roots[0]}
	gb := scope.Grant{Level: r.g.levels[0].Name, ID: roots[1]}
	both, onlyA := grantsCtx(p.ctx, []scope.Grant{ga, gb}), grantsCtx(p.ctx, []scope.Grant{ga})
	tried := 0
	for _, name := range r.g.bound {
		visA, visB := r.or.visible(name, []scope.Grant{ga}), r.or.visible(name, []scope.Grant{gb})
		ka, kb := firstKey(visA, nil), firstKey(visB, visA)
		if ka == "" || kb == "" {
			continue
		}
		tried++
		t, tb, x := r.g.tables[name], r.sch.Table(name), r.ref(name, "x")
		rowA, rowB := r.or.row(name, ka), r.or.row(name, kb)
		q := p.q(builder.Select(keyCols(x, t)...).From(x).Where(builder.Or(pkIs(x, t, rowA), pkIs(x, t, rowB))).Build())
		r.touch(q)
		got, err := scanKey(r.db.QueryRow(both, q), len(t.pk))
		if !errors.Is(err, guardedsql.ErrAmbiguous) {
			p.Errorf("%s: QueryRow of a row of each grant = %q, %v; want ErrAmbiguous", name, got, err)
		} else if strings.Trim(got, "\x1f") != "" {
			p.Errorf("%s: the ambiguous QueryRow left a key scanned", name)
		}
		if got, err := scanKey(r.db.QueryRow(onlyA, q), len(t.pk)); err != nil || got != ka {
			p.Errorf("%s: QueryRow as %s alone = %q, %v; want its row %q", name, ga, got, err, ka)
		}
		where := builder.Or(pkIs(tb, t, rowA), pkIs(tb, t, rowB))
		if col := r.mutable[name]; col != "" {
			if v, ok := r.otherValue(name, col, r.raw.byKey[name][ka], r.raw.byKey[name][kb]); ok {
				up := p.u(builder.UpdateTable(tb).Set(col, v).Where(where).ExpectOne().Build())
				if _, err := r.exec(both, r.db, up); !errors.Is(err, guardedsql.ErrAmbiguous) {
					p.Errorf("%s: ExpectOne UPDATE of a row of each grant = %v; want ErrAmbiguous", name, err)
				}
				r.sameAsSeed(p, both, name, col, ka, kb)
				err := r.control(both, func(tx *guardedsql.Tx) error {
					if _, err := r.exec(both, tx, up); !errors.Is(err, guardedsql.ErrAmbiguous) {
						p.Errorf("%s: ExpectOne UPDATE in Tx = %v; want ErrAmbiguous", name, err)
					}
					// The transaction carries on, both rows still there.
					rows, err := tx.Query(both, q)
					if err != nil {
						return err
					}
					keys, err := guardedsql.CollectRows(rows, func(rs *guardedsql.Rows) (int, error) { return 1, nil })
					if err == nil && len(keys) != 2 {
						p.Errorf("%s: after the ambiguous update in Tx, %d of the 2 rows read", name, len(keys))
					}
					return err
				})
				if err != nil {
					p.Errorf("%s: transaction after the ambiguous update: %v", name, err)
				}
				err = r.control(onlyA, func(tx *guardedsql.Tx) error {
					res, err := r.exec(onlyA, tx, up)
					if err == nil && res.RowsAffected != 1 {
						p.Errorf("%s: ExpectOne UPDATE as %s alone affected %d rows", name, ga, res.RowsAffected)
					}
					return err
				})
				if err != nil {
					p.Errorf("%s: ExpectOne UPDATE as %s alone: %v", name, ga, err)
				}
			}
		}
		if r.or.isLeaf(name, ka) && r.or.isLeaf(name, kb) {
			del := p.d(builder.DeleteFrom(tb).Where(where).ExpectOne().Build())
			if _, err := r.exec(both, r.db, del); !errors.Is(err, guardedsql.ErrAmbiguous) {
				p.Errorf("%s: ExpectOne DELETE of a row of each grant = %v; want ErrAmbiguous", name, err)
			}
			r.sameAsSeed(p, both, name, "", ka, kb)
		}
	}
	if tried == 0 {
		p.Skipf("no tenant-bound table has rows of both %s and %s", ga, gb)
	}
}

// firstKey returns the smallest key of vis that is not in not.
func firstKey(vis, not map[string]bool) string {
	for _, k := range sortedKeys(vis) {
		if !not[k] {
			return k
		}
	}
	return ""
}

// scanKey scans a row of n key columns into its canonical key.
func scanKey(row *guardedsql.Row, n int) (string, error) {
	vals := make([]any, n)
	ptrs := make([]any, n)
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	err := row.Scan(ptrs...)
	parts := make([]string, n)
	for i, v := range vals {
		if v != nil {
			parts[i] = canon(v)
		}
	}
	return strings.Join(parts, "\x1f"), err
}

// sameAsSeed checks, reading as the scope in ctx, that the rows keys of
// table still exist and (col != "") hold their seeded value of col.
func (r *runner) sameAsSeed(p *pt, ctx context.Context, table, col string, keys ...string) {
	t, x := r.g.tables[table], r.ref(table, "x")
	for _, k := range keys {
		sel := keyCols(x, t)
		if col != "" {
			sel = append(sel, x.Col(col))
		}
		rows, err := r.rows(ctx, p.q(builder.Select(sel...).From(x).Where(pkIs(x, t, r.or.row(table, k))).Build()))
		switch {
		case err != nil:
			p.Errorf("%s: reading row %q back: %v", table, k, err)
		case len(rows) != 1:
			p.Errorf("%s: row %q is gone after an ambiguous write", table, k)
		case col != "" && rows[0][len(t.pk)] != canon(r.raw.byKey[table][k][col]):
			p.Errorf("%s: row %q changed by an ambiguous write", table, k)
		}
	}
}

// P46: a narrowed scope is the scope of one of its own grants and never
// more. For every tenant (and a union of two root grants), narrowing to
// each of its grants reads, on every tenant-bound table, exactly the
// oracle's rows of that grant (a subset of the tenant's); narrowing to any
// other grant of the seed — another tenant's, a root above a lower grant,
// a made-up id — fails with scope.ErrNotGranted and yields the zero
// scope, with which the DB sends nothing (ErrNoScope).
func propNarrow(p *pt, r *runner) {
	tenants := slices.Clone(r.tenants)
	if roots := r.or.levelIDs()[r.g.levels[0].Name]; len(roots) >= 2 {
		tenants = append(tenants, Tenant{Name: "two roots", Grants: []scope.Grant{
			{Level: r.g.levels[0].Name, ID: roots[0]}, {Level: r.g.levels[0].Name, ID: roots[1]}}})
	}
	var candidates []scope.Grant
	seen := map[string]bool{}
	add := func(g scope.Grant) {
		if !seen[g.String()] {
			seen[g.String()] = true
			candidates = append(candidates, g)
		}
	}
	for _, tn := range tenants {
		for _, g := range tn.Grants {
			add(scope.Grant{Level: g.Level, ID: g.ID, Within: g.Within})
			for _, w := range g.Within {
				add(w)
			}
		}
	}
	for l, ids := range r.or.levelIDs() {
		for _, id := range ids {
			add(scope.Grant{Level: l, ID: id})
		}
		add(scope.Grant{Level: l, ID: "tmconf-no-such-tenant"})
	}
	for _, tn := range tenants {
		sc := scopetest.New("conformance:"+tn.Name, tn.Grants, tn.Roles...)
		for _, g := range candidates {
			held := slices.ContainsFunc(tn.Grants, func(h scope.Grant) bool { return h.String() == g.String() })
			narrowed, err := sc.Narrow(g)
			if !held {
				if !errors.Is(err, scope.ErrNotGranted) || !narrowed.IsZero() {
					p.Errorf("%s narrowed to %s, not one of its grants: %v, %v; want ErrNotGranted", tn.Name, g, narrowed, err)
					if !narrowed.IsZero() {
						r.narrowedReads(p, tn, g, narrowed)
					}
					continue
				}
				x := r.ref(r.g.bound[0], "x")
				q := p.q(builder.Select(keyCols(x, r.g.tables[r.g.bound[0]])...).From(x).Build())
				if _, err := r.db.Query(scopetest.NewContext(p.ctx, narrowed), q); !errors.Is(err, guardedsql.ErrNoScope) {
					p.Errorf("%s: the refused narrowing's scope reached the database: %v", tn.Name, err)
				}
				continue
			}
			if err != nil {
				p.Errorf("%s narrowing to its own grant %s: %v", tn.Name, g, err)
				continue
			}
			if gs := narrowed.Grants(); len(gs) != 1 || gs[0].String() != g.String() {
				p.Errorf("%s narrowed to %s holds %v", tn.Name, g, gs)
			}
			r.narrowedReads(p, tn, g, narrowed)
		}
	}
}

// narrowedReads checks that narrowed (tn narrowed to g) reads exactly the
// oracle's rows of g on every tenant-bound table, within tn's.
func (r *runner) narrowedReads(p *pt, tn Tenant, g scope.Grant, narrowed scope.Scope) {
	ctx := scopetest.NewContext(p.ctx, narrowed)
	for _, name := range r.g.bound {
		t, x := r.g.tables[name], r.ref(name, "x")
		got, _, err := r.keySet(ctx, p.q(builder.Select(keyCols(x, t)...).From(x).Build()), len(t.pk))
		if err != nil {
			p.Errorf("%s narrowed to %s reading %s: %v", tn.Name, g, name, err)
			continue
		}
		mine := r.or.visible(name, tn.Grants)
		for k := range got {
			if !mine[k] {
				p.Errorf("%s narrowed to %s reads %s row %q outside its own grants", tn.Name, g, name, k)
				break
			}
		}
		if d := diff(got, r.or.visible(name, []scope.Grant{g})); d != "" {
			p.Errorf("%s narrowed to %s, %s: %s", tn.Name, g, name, d)
		}
	}
}
