package conformance

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"

	"github.com/tenantmcp/tenantmcp/builder"
	"github.com/tenantmcp/tenantmcp/guardedsql"
)

// P1: for every tenant and every tenant-bound table (and every table owned
// by reference), SELECT of the keys returns exactly the rows the oracle
// says the tenant may see.
func propScopedRead(p *pt, r *runner) {
	nonEmpty := map[string]int{}
	for _, tn := range r.tenants {
		ctx := r.scoped(p.ctx, tn)
		// Tables owned by reference too: their rows are the ones the
		// tenant's rows reference (oracle.byRefVisible).
		for _, name := range r.g.mutable() {
			t := r.g.tables[name]
			x := r.ref(name, "x")
			q := p.q(builder.Select(keyCols(x, t)...).From(x).Build())
			got, _, err := r.keySet(ctx, q, len(t.pk))
			if err != nil {
				p.Errorf("%s as %s: %v", name, tn, err)
				continue
			}
			want := r.or.visible(name, tn.Grants)
			if d := diff(got, want); d != "" {
				p.Errorf("%s as %s: %s", name, tn, d)
			}
			if len(want) > 0 {
				nonEmpty[name]++
			}
		}
	}
	for _, name := range r.g.bound {
		if nonEmpty[name] < 2 {
			p.Errorf("%s: only %d tenant(s) see rows; isolation of this table is not tested (seed two tenants' rows)", name, nonEmpty[name])
		}
	}
}

// P2: a key, foreign-key value or level id of another tenant in WHERE
// finds nothing: no rows from Query, ErrNotFound from QueryRow, and an IN
// list mixing foreign keys with one own key returns the own row only.
func propCrossTenantID(p *pt, r *runner) {
	tried := 0
	for _, tn := range r.tenants {
		ctx := r.scoped(p.ctx, tn)
		for _, name := range r.g.bound {
			t := r.g.tables[name]
			foreign := pick(p.rng, r.or.foreign(name, tn.Grants), 4)
			own := sortedKeys(r.or.visible(name, tn.Grants))
			for _, fk := range foreign {
				row := r.or.row(name, fk)
				x := r.ref(name, "x")
				q := p.q(builder.Select(keyCols(x, t)...).From(x).Where(pkIs(x, t, row)).Build())
				got, _, err := r.keySet(ctx, q, len(t.pk))
				tried++
				if err != nil {
					p.Errorf("%s as %s, key %s: %v", name, tn, head([]string{fk}), err)
				} else if len(got) != 0 {
					p.Errorf("%s as %s: foreign key %s in WHERE returned %s", name, tn, head([]string{fk}), head(sortedKeys(got)))
				}
				var dst = make([]any, len(t.pk))
				for i := range dst {
					dst[i] = new(any)
				}
				if err := r.db.QueryRow(ctx, q).Scan(dst...); !errors.Is(err, guardedsql.ErrNotFound) {
					p.Errorf("%s as %s: QueryRow of foreign key %s = %v, want ErrNotFound", name, tn, head([]string{fk}), err)
				}
			}
			if len(t.pk) == 1 && len(foreign) > 0 && len(own) > 0 {
				mine := pick(p.rng, own, 1)[0]
				var vals []any
				for _, fk := range foreign {
					vals = append(vals, r.or.row(name, fk)[t.pk[0]])
				}
				vals = append(vals, r.or.row(name, mine)[t.pk[0]])
				x := r.ref(name, "x")
				q := p.q(builder.Select(keyCols(x, t)...).From(x).Where(x.Col(t.pk[0]).In(vals...)).Build())
				got, _, err := r.keySet(ctx, q, 1)
				if err != nil {
					p.Errorf("%s as %s: IN list: %v", name, tn, err)
				} else if d := diff(got, map[string]bool{mine: true}); d != "" {
					p.Errorf("%s as %s: IN list of %d foreign keys and own key %s: %s", name, tn, len(foreign), mine, d)
				}
			}
			// A foreign referenced row's key as the value of the foreign key.
			for _, f := range r.g.tenantFKs(t) {
				pf := pick(p.rng, r.or.foreign(f.to, tn.Grants), 2)
				for _, k := range pf {
					prow := r.or.row(f.to, k)
					x := r.ref(name, "x")
					q := p.q(builder.Select(keyCols(x, t)...).From(x).Where(eqRow(x, f.cols, prow, f.ref)).Build())
					got, _, err := r.keySet(ctx, q, len(t.pk))
					tried++
					// Usually nothing; but a row with level columns of its
					// own (a hotel of a hotel grant) stays visible even when
					// the row it references (its chain) is not.
					want := map[string]bool{}
					for ck := range r.or.visible(name, tn.Grants) {
						if Key(r.or.row(name, ck), f.cols) == Key(prow, f.ref) {
							want[ck] = true
						}
					}
					if err != nil {
						p.Errorf("%s as %s, %v = foreign %s: %v", name, tn, f.cols, head([]string{k}), err)
					} else if d := diff(got, want); d != "" {
						p.Errorf("%s as %s: WHERE %v = foreign %s %s: %s", name, tn, f.cols, f.to, head([]string{k}), d)
					}
				}
			}
			// A foreign level id in a level column.
			for _, lc := range t.levelCols {
				for _, id := range pick(p.rng, r.foreignLevelIDs(tn, lc.level), 2) {
					x := r.ref(name, "x")
					q := p.q(builder.Select(keyCols(x, t)...).From(x).Where(x.Col(lc.col).Eq(r.levelValue(lc.level, id))).Build())
					got, _, err := r.keySet(ctx, q, len(t.pk))
					tried++
					if err != nil {
						p.Errorf("%s as %s, %s = %s: %v", name, tn, lc.col, id, err)
						continue
					}
					want := map[string]bool{}
					for k := range r.or.visible(name, tn.Grants) {
						if canon(r.or.row(name, k)[lc.col]) == id {
							want[k] = true
						}
					}
					if d := diff(got, want); d != "" {
						p.Errorf("%s as %s: WHERE %s = %s: %s", name, tn, lc.col, id, d)
					}
				}
			}
		}
	}
	if tried == 0 {
		p.Errorf("no tenant has a foreign row to aim at; the seed does not separate tenants")
	}
}

// foreignLevelIDs are ids at level that appear in the data but are neither
// granted to tn nor held by a row tn sees (see reachedIDs).
func (r *runner) foreignLevelIDs(tn Tenant, level string) []string {
	gs := r.g.grantSet(tn.Grants)
	reached := r.or.reachedIDs(tn.Grants, level)
	var out []string
	for _, id := range r.or.levelIDs()[level] {
		if !gs[level][id] && !reached[id] {
			out = append(out, id)
		}
	}
	return out
}

// levelValue converts a level id to the Go type of the level's key.
func (r *runner) levelValue(level, id string) any {
	if i := r.g.levelIndex(level); i >= 0 && r.g.levels[i].Key == builder.IntKey {
		n, _ := strconv.ParseInt(id, 10, 64)
		return n
	}
	return id
}

// P3: joins of tenant-bound tables along every foreign key (inner and
// left), along whole scope paths, and on shared natural values return
// exactly the pairs of rows the tenant may see; a LEFT JOIN turns a
// foreign parent into NULLs, never into its key.
func propJoins(p *pt, r *runner) {
	checked := 0
	for _, tn := range r.tenants {
		ctx := r.scoped(p.ctx, tn)
		for _, cname := range r.g.bound {
			ct := r.g.tables[cname]
			vc := r.or.visible(cname, tn.Grants)
			for _, f := range r.g.tenantFKs(ct) {
				if f.to == cname {
					continue
				}
				pt := r.g.tables[f.to]
				vp := r.or.visible(f.to, tn.Grants)
				inner, left := map[string]bool{}, map[string]bool{}
				for ck := range vc {
					crow := r.or.row(cname, ck)
					pk := nullKey(len(pt.pk))
					if pi, ok := r.or.parentRow(f, crow); ok {
						if k := Key(r.or.d.Tables[f.to][pi], pt.pk); vp[k] {
							pk = k
							inner[tuple(ck, k)] = true
						}
					}
					left[tuple(ck, pk)] = true
				}
				for _, kind := range []string{"inner", "left"} {
					c, pa := r.ref(cname, "c"), r.ref(f.to, "p")
					on := builder.And(joinOn(c, f.cols, pa, f.ref)...)
					sel := builder.Select(append(keyCols(c, ct), keyCols(pa, pt)...)...).From(c)
					want := inner
					if kind == "left" {
						sel, want = sel.LeftJoin(pa, on), left
					} else {
						sel = sel.Join(pa, on)
					}
					got, _, err := r.keySet(ctx, p.q(sel.Build()), len(ct.pk)+len(pt.pk))
					checked++
					if err != nil {
						p.Errorf("%s %s JOIN %s as %s: %v", cname, kind, f.to, tn, err)
					} else if d := diff(got, want); d != "" {
						p.Errorf("%s %s JOIN %s as %s: %s", cname, kind, f.to, tn, d)
					}
				}
			}
			if r.g.depth(ct) >= 2 {
				checked++
				r.checkPathJoin(p, ctx, tn, ct)
			}
			if col := r.naturalColumn(cname); col != "" {
				checked++
				r.checkNaturalJoin(p, ctx, tn, ct, col)
			}
		}
	}
	if checked == 0 {
		p.Skipf("the graph has no foreign key between tenant-bound tables")
	}
}

func joinOn(a builder.TableRef, acols []string, b builder.TableRef, bcols []string) []builder.Pred {
	ps := make([]builder.Pred, len(acols))
	for i := range acols {
		ps[i] = a.Col(acols[i]).EqCol(b.Col(bcols[i]))
	}
	return ps
}

// checkPathJoin joins t with every table on its scope path up to the table
// with level columns, selecting the keys of both ends.
func (r *runner) checkPathJoin(p *pt, ctx context.Context, tn Tenant, t *tinfo) {
	var hops []*fkey
	for f := t.parent; f != nil; f = r.g.tables[f.to].parent {
		hops = append(hops, f)
	}
	top := r.g.tables[hops[len(hops)-1].to]
	refs := []builder.TableRef{r.ref(t.name, "j0")}
	for i, f := range hops {
		refs = append(refs, r.ref(f.to, "j"+strconv.Itoa(i+1)))
	}
	last := refs[len(refs)-1]
	sb := builder.Select(append(keyCols(refs[0], t), keyCols(last, top)...)...).From(refs[0])
	for i, f := range hops {
		sb = sb.Join(refs[i+1], builder.And(joinOn(refs[i], f.cols, refs[i+1], f.ref)...))
	}
	want := map[string]bool{}
	for k := range r.or.visible(t.name, tn.Grants) {
		row, ok := r.or.row(t.name, k), true
		for _, f := range hops {
			pi, found := r.or.parentRow(f, row)
			if !found {
				ok = false
				break
			}
			row = r.or.d.Tables[f.to][pi]
			if !r.or.visible(f.to, tn.Grants)[Key(row, r.g.tables[f.to].pk)] {
				ok = false
				break
			}
		}
		if ok {
			want[tuple(k, Key(row, top.pk))] = true
		}
	}
	got, _, err := r.keySet(ctx, p.q(sb.Build()), len(t.pk)+len(top.pk))
	if err != nil {
		p.Errorf("%s joined along its scope path (%d hops) as %s: %v", t.name, len(hops), tn, err)
	} else if d := diff(got, want); d != "" {
		p.Errorf("%s joined along its scope path (%d hops) to %s as %s: %s", t.name, len(hops), top.name, tn, d)
	}
}

// naturalColumn picks a column of table holding text values that rows of
// different root tenants share (names, room numbers), or "".
func (r *runner) naturalColumn(table string) string {
	t := r.g.tables[table]
	skip := map[string]bool{}
	for _, c := range t.pk {
		skip[c] = true
	}
	for _, f := range t.fks {
		for _, c := range f.cols {
			skip[c] = true
		}
	}
	for _, lc := range t.levelCols {
		skip[lc.col] = true
	}
	root := r.g.levels[0].Name
	rows := r.data.Tables[table]
	for _, c := range t.cols {
		if skip[c] || !r.hasEquality(table, c) {
			continue
		}
		owners := map[string]map[string]bool{}
		pairs := 0
		ok := true
		for i, row := range rows {
			s, isStr := row[c].(string)
			if !isStr {
				ok = false
				break
			}
			if owners[s] == nil {
				owners[s] = map[string]bool{}
			}
			owners[s][r.or.lv[table][i][root]] = true
		}
		if !ok {
			continue
		}
		shared := false
		counts := map[string]int{}
		for _, row := range rows {
			counts[row[c].(string)]++
		}
		for v, o := range owners {
			if len(o) > 1 {
				shared = true
			}
			pairs += counts[v] * counts[v]
		}
		if shared && pairs <= 50000 {
			return c
		}
	}
	return ""
}

// hasEquality reports whether values of table.col can be compared with
// "=": PostgreSQL has no equality operator for json (jsonb has one), xml
// or the geometric types, and refuses a join on them (42883) whatever the
// guard does.
func (r *runner) hasEquality(table, col string) bool {
	if r.engine != Postgres || r.cat == nil {
		return true
	}
	lt := r.cat.tables[strings.ToLower(table)]
	if lt == nil {
		return true
	}
	switch strings.TrimSuffix(lt.types[strings.ToLower(col)], "[]") {
	case "json", "xml", "point", "line", "lseg", "box", "path", "polygon", "circle":
		return false
	}
	return true
}

// checkNaturalJoin self-joins table on a column whose values recur across
// tenants: every pair must be of two rows the tenant sees.
func (r *runner) checkNaturalJoin(p *pt, ctx context.Context, tn Tenant, t *tinfo, col string) {
	vis := sortedKeys(r.or.visible(t.name, tn.Grants))
	same := func(a, b string) bool {
		if r.engine == MySQL { // case-insensitive collations, PAD SPACE
			return strings.EqualFold(strings.TrimRight(a, " "), strings.TrimRight(b, " "))
		}
		return a == b
	}
	want := map[string]bool{}
	for _, ka := range vis {
		va := canon(r.or.row(t.name, ka)[col])
		for _, kb := range vis {
			if same(va, canon(r.or.row(t.name, kb)[col])) {
				want[tuple(ka, kb)] = true
			}
		}
	}
	a, b := r.ref(t.name, "a"), r.ref(t.name, "b")
	q := p.q(builder.Select(append(keyCols(a, t), keyCols(b, t)...)...).From(a).Join(b, a.Col(col).EqCol(b.Col(col))).Build())
	got, _, err := r.keySet(ctx, q, 2*len(t.pk))
	if err != nil {
		p.Errorf("%s self-join on %s as %s: %v", t.name, col, tn, err)
	} else if d := diff(got, want); d != "" {
		p.Errorf("%s self-join on shared values of %s as %s: %s", t.name, col, tn, d)
	}
}

// P4: subqueries (IN, correlated EXISTS, NOT IN, and an IN subquery aimed
// at another tenant's parents) see only the tenant's rows.
func propSubqueries(p *pt, r *runner) {
	checked := 0
	for _, tn := range r.tenants {
		ctx := r.scoped(p.ctx, tn)
		for _, cname := range r.g.bound {
			ct := r.g.tables[cname]
			vc := r.or.visible(cname, tn.Grants)
			for _, f := range r.g.tenantFKs(ct) {
				if f.to == cname || !singleFK(f) {
					continue
				}
				pt := r.g.tables[f.to]
				vp := r.or.visible(f.to, tn.Grants)
				// Children whose parent the tenant sees; parents with a visible child.
				inWant, existsWant := map[string]bool{}, map[string]bool{}
				for ck := range vc {
					if pi, ok := r.or.parentRow(f, r.or.row(cname, ck)); ok {
						if pk := Key(r.or.d.Tables[f.to][pi], pt.pk); vp[pk] {
							inWant[ck] = true
							existsWant[pk] = true
						}
					}
				}
				notInWant := map[string]bool{}
				for pk := range vp {
					if !existsWant[pk] && !r.childRefNull(f) {
						notInWant[pk] = true
					}
				}
				c, s := r.ref(cname, "c"), r.ref(f.to, "s")
				sub := p.q(builder.Select(s.Col(f.ref[0])).From(s).Build())
				q := p.q(builder.Select(keyCols(c, ct)...).From(c).Where(c.Col(f.cols[0]).InQuery(sub)).Build())
				r.expectKeys(p, ctx, q, len(ct.pk), inWant, "%s WHERE %s IN (SELECT %s.%s) as %s", cname, f.cols[0], f.to, f.ref[0], tn)

				pa, c2 := r.ref(f.to, "pa"), r.ref(cname, "c2")
				corr := p.q(builder.Select(keyCols(c2, ct)...).From(c2).Where(c2.Col(f.cols[0]).EqCol(pa.Col(f.ref[0]))).Build())
				q = p.q(builder.Select(keyCols(pa, pt)...).From(pa).Where(builder.Exists(corr)).Build())
				r.expectKeys(p, ctx, q, len(pt.pk), existsWant, "%s WHERE EXISTS (child %s) as %s", f.to, cname, tn)

				if !r.childRefNull(f) {
					pb, c3 := r.ref(f.to, "pb"), r.ref(cname, "c3")
					sub = p.q(builder.Select(c3.Col(f.cols[0])).From(c3).Build())
					q = p.q(builder.Select(keyCols(pb, pt)...).From(pb).Where(pb.Col(f.ref[0]).NotInQuery(sub)).Build())
					r.expectKeys(p, ctx, q, len(pt.pk), notInWant, "%s WHERE %s NOT IN (SELECT %s.%s) as %s", f.to, f.ref[0], cname, f.cols[0], tn)
				}

				if foreign := pick(p.rng, r.or.foreign(f.to, tn.Grants), 3); len(foreign) > 0 {
					c4, s4 := r.ref(cname, "c4"), r.ref(f.to, "s4")
					var ors []builder.Pred
					for _, k := range foreign {
						ors = append(ors, pkIs(s4, pt, r.or.row(f.to, k)))
					}
					sub = p.q(builder.Select(s4.Col(f.ref[0])).From(s4).Where(builder.Or(ors...)).Build())
					q = p.q(builder.Select(keyCols(c4, ct)...).From(c4).Where(c4.Col(f.cols[0]).InQuery(sub)).Build())
					r.expectKeys(p, ctx, q, len(ct.pk), map[string]bool{}, "%s WHERE %s IN (SELECT foreign %s %s) as %s", cname, f.cols[0], f.to, head(foreign), tn)
				}
				checked++
			}
		}
	}
	if checked == 0 {
		p.Skipf("the graph has no single-column foreign key between tenant-bound tables")
	}
}

// childRefNull reports whether some child row has a NULL in f (NOT IN
// over a NULL is never true, so the NOT IN check is skipped then).
func (r *runner) childRefNull(f *fkey) bool {
	for _, row := range r.data.Tables[f.from] {
		for _, c := range f.cols {
			if row[c] == nil {
				return true
			}
		}
	}
	return false
}

func (r *runner) expectKeys(p *pt, ctx context.Context, q builder.Query, n int, want map[string]bool, what string, args ...any) {
	got, _, err := r.keySet(ctx, q, n)
	if err != nil {
		p.Errorf(what+": %v", append(args, err)...)
	} else if d := diff(got, want); d != "" {
		p.Errorf(what+": %s", append(args, d)...)
	}
}

// P5: aggregates over the tenant's rows: COUNT(*), COUNT(DISTINCT parent),
// per-parent GROUP BY counts with HAVING, MIN/MAX of integer keys and SUM
// of an integer column equal the values computed from the tenant's rows.
func propAggregates(p *pt, r *runner) {
	for _, tn := range r.tenants {
		ctx := r.scoped(p.ctx, tn)
		for _, name := range r.g.bound {
			t := r.g.tables[name]
			vis := r.or.visible(name, tn.Grants)
			x := r.ref(name, "x")
			r.expectScalar(p, ctx, p.q(builder.Select(builder.CountAll()).From(x).Build()), strconv.Itoa(len(vis)), "COUNT(*) of %s as %s", name, tn)
			if t.parent != nil && singleFK(t.parent) {
				fc := t.parent.cols[0]
				groups := map[string]int{}
				for k := range vis {
					if v := r.or.row(name, k)[fc]; v != nil {
						groups[canon(v)]++
					}
				}
				r.expectScalar(p, ctx, p.q(builder.Select(builder.CountDistinct(x.Col(fc))).From(x).Build()), strconv.Itoa(len(groups)), "COUNT(DISTINCT %s) of %s as %s", fc, name, tn)
				g := r.ref(name, "g")
				q := p.q(builder.Select(g.Col(fc), builder.CountAll()).From(g).Where(g.Col(fc).IsNotNull()).GroupBy(g.Col(fc)).Having(builder.CountAll().Ge(1)).Build())
				rows, err := r.rows(ctx, q)
				if err != nil {
					p.Errorf("GROUP BY %s of %s as %s: %v", fc, name, tn, err)
				} else {
					got := map[string]int{}
					for _, row := range rows {
						n, _ := strconv.Atoi(number(row[1]))
						got[row[0]] = n
					}
					if !mapsEqual(got, groups) {
						p.Errorf("GROUP BY %s of %s as %s: %d groups, want %d (%s)", fc, name, tn, len(got), len(groups), groupDiff(got, groups))
					}
				}
			}
			if len(t.pk) == 1 && isInt(r.data.Tables[name], t.pk[0]) {
				lo, hi := canon(nil), canon(nil)
				var ks []int64
				for k := range vis {
					n, _ := strconv.ParseInt(k, 10, 64)
					ks = append(ks, n)
				}
				if len(ks) > 0 {
					lo, hi = strconv.FormatInt(slices.Min(ks), 10), strconv.FormatInt(slices.Max(ks), 10)
				}
				r.expectScalar(p, ctx, p.q(builder.Select(builder.Min(x.Col(t.pk[0]))).From(x).Build()), lo, "MIN(%s) of %s as %s", t.pk[0], name, tn)
				r.expectScalar(p, ctx, p.q(builder.Select(builder.Max(x.Col(t.pk[0]))).From(x).Build()), hi, "MAX(%s) of %s as %s", t.pk[0], name, tn)
			}
			if col := r.sumColumn(t); col != "" && len(vis) > 0 {
				var sum int64
				for k := range vis {
					sum += asInt(r.or.row(name, k)[col])
				}
				r.expectScalar(p, ctx, p.q(builder.Select(builder.Sum(x.Col(col))).From(x).Build()), strconv.FormatInt(sum, 10), "SUM(%s) of %s as %s", col, name, tn)
			}
		}
	}
}

// sumColumn picks a non-key integer column of t, or "".
func (r *runner) sumColumn(t *tinfo) string {
	keyish := map[string]bool{}
	for _, c := range t.pk {
		keyish[c] = true
	}
	for _, f := range t.fks {
		for _, c := range f.cols {
			keyish[c] = true
		}
	}
	for _, c := range t.cols {
		if !keyish[c] && isInt(r.data.Tables[t.name], c) {
			return c
		}
	}
	return ""
}

func (r *runner) expectScalar(p *pt, ctx context.Context, q builder.Query, want string, what string, args ...any) {
	rows, err := r.rows(ctx, q)
	switch {
	case err != nil:
		p.Errorf(what+": %v", append(args, err)...)
	case len(rows) != 1 || len(rows[0]) != 1:
		p.Errorf(what+": %d rows, want one value", append(args, len(rows))...)
	case number(rows[0][0]) != want:
		p.Errorf(what+": %s, want %s", append(args, strings.ReplaceAll(number(rows[0][0]), "\x00", ""), strings.ReplaceAll(want, "\x00", ""))...)
	}
}

func mapsEqual(a, b map[string]int) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

func groupDiff(got, want map[string]int) string {
	var out []string
	for k, v := range got {
		if want[k] != v {
			out = append(out, k+": got "+strconv.Itoa(v)+" want "+strconv.Itoa(want[k]))
		}
	}
	for k, v := range want {
		if _, ok := got[k]; !ok {
			out = append(out, k+": missing, want "+strconv.Itoa(v))
		}
	}
	slices.Sort(out)
	return head(out)
}

// P6: paging through a table with ORDER BY key LIMIT/OFFSET returns each
// of the tenant's rows exactly once, in key order for integer keys, and
// nothing else; ORDER BY key DESC LIMIT 1 is the tenant's largest key.
func propPagination(p *pt, r *runner) {
	for _, tn := range r.tenants {
		ctx := r.scoped(p.ctx, tn)
		for _, name := range r.g.bound {
			t := r.g.tables[name]
			vis := r.or.visible(name, tn.Grants)
			size := 3 + p.rng.IntN(5)
			x := r.ref(name, "x")
			var orders []builder.Order
			for _, c := range t.pk {
				orders = append(orders, x.Col(c).Asc())
			}
			got := map[string]bool{}
			var seq []string
			for page := 0; ; page++ {
				q := p.q(builder.Select(keyCols(x, t)...).From(x).OrderBy(orders...).Limit(size).Offset(page * size).Build())
				_, order, err := r.keySet(ctx, q, len(t.pk))
				if err != nil {
					p.Errorf("%s page %d as %s: %v", name, page, tn, err)
					break
				}
				for _, k := range order {
					if got[k] {
						p.Errorf("%s as %s: key %s on two pages", name, tn, k)
					}
					got[k] = true
				}
				seq = append(seq, order...)
				if len(order) < size || page > len(r.data.Tables[name]) {
					break
				}
			}
			if d := diff(got, vis); d != "" {
				p.Errorf("%s paged by %d as %s: %s", name, size, tn, d)
			}
			if len(t.pk) == 1 && isInt(r.data.Tables[name], t.pk[0]) {
				nums := make([]int64, len(seq))
				for i, k := range seq {
					nums[i], _ = strconv.ParseInt(k, 10, 64)
				}
				if !slices.IsSorted(nums) {
					p.Errorf("%s as %s: pages not in key order", name, tn)
				}
				if len(vis) > 0 {
					var want int64
					for i, k := range sortedKeys(vis) {
						n, _ := strconv.ParseInt(k, 10, 64)
						if i == 0 || n > want {
							want = n
						}
					}
					q := p.q(builder.Select(keyCols(x, t)...).From(x).OrderBy(x.Col(t.pk[0]).Desc()).Limit(1).Build())
					_, top, err := r.keySet(ctx, q, 1)
					if err != nil || len(top) != 1 || top[0] != strconv.FormatInt(want, 10) {
						p.Errorf("%s as %s: ORDER BY %s DESC LIMIT 1 = %v %v, want %d", name, tn, t.pk[0], top, err, want)
					}
				}
			}
		}
	}
}
