package conformance

import (
	"slices"
	"strconv"

	"github.com/tenantmcp/tenantmcp/builder"
)

// P44: window functions and scalar subqueries see only the tenant's rows.
// For every tenant and every tenant-bound table with a single integer
// primary key: ROW_NUMBER and a running SUM over the whole table ordered by
// key, COUNT(*) OVER () and, per scope-parent value, RANK and COUNT(*)
// partitioned by it, and a scalar subquery counting the table, each equal
// to the oracle computed over the visible rows only. One foreign row would
// shift a row number, a running sum, a rank or a count.
func propWindows(p *pt, r *runner) {
	for _, tn := range r.tenants {
		ctx := r.scoped(p.ctx, tn)
		for _, name := range r.g.bound {
			t := r.g.tables[name]
			if len(t.pk) != 1 || !isInt(r.data.Tables[name], t.pk[0]) {
				continue
			}
			pk := t.pk[0]
			var keys []int64
			for k := range r.or.visible(name, tn.Grants) {
				n, _ := strconv.ParseInt(k, 10, 64)
				keys = append(keys, n)
			}
			slices.Sort(keys)
			row := func(k int64) Row { return r.or.row(name, strconv.FormatInt(k, 10)) }
			sumCol := r.sumColumn(t)
			var part string
			if t.parent != nil && singleFK(t.parent) {
				part = t.parent.cols[0]
			}
			x, y := r.ref(name, "x"), r.ref(name, "y")
			byKey := builder.Window().OrderBy(x.Col(pk).Asc())
			items := []builder.Selectable{x.Col(pk),
				builder.RowNumber().Over(byKey).As("rn"),
				builder.CountAll().Over(builder.Window()).As("n"),
				builder.ScalarQuery(p.q(builder.Select(builder.CountAll()).From(y).Build())).As("sub")}
			if sumCol != "" {
				items = append(items, builder.Sum(x.Col(sumCol)).Over(byKey).As("running"))
			}
			if part != "" {
				w := builder.Window().PartitionBy(x.Col(part)).OrderBy(x.Col(pk).Asc())
				items = append(items, builder.Rank().Over(w).As("rk"), builder.CountAll().Over(builder.Window().PartitionBy(x.Col(part))).As("pn"))
			}
			q := p.q(builder.Select(items...).From(x).OrderBy(x.Col(pk).Asc()).Build())
			got, err := r.rows(ctx, q)
			if err != nil {
				p.Errorf("windows over %s as %s: %v", name, tn, err)
				continue
			}
			if len(got) != len(keys) {
				p.Errorf("windows over %s as %s: %d rows, want %d", name, tn, len(got), len(keys))
				continue
			}
			var running int64
			for i, k := range keys {
				want := []string{number(k), number(int64(i + 1)), number(int64(len(keys))), number(int64(len(keys)))}
				if sumCol != "" {
					running += asInt(row(k)[sumCol])
					want = append(want, number(running))
				}
				if part != "" {
					pv := canon(row(k)[part])
					rk, pn := int64(1), int64(0)
					for _, o := range keys {
						if canon(row(o)[part]) == pv {
							pn++
							if o < k {
								rk++
							}
						}
					}
					want = append(want, number(rk), number(pn))
				}
				cells := make([]string, len(got[i]))
				for j, c := range got[i] {
					cells[j] = number(c)
				}
				if !slices.Equal(cells, want) {
					p.Errorf("windows over %s as %s, row %d: got %v, want %v (key, row number, count, subquery count, running sum, rank, partition count)", name, tn, i, cells, want)
					break
				}
			}
		}
	}
}
