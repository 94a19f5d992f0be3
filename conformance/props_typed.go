package conformance

import (
	"fmt"
	"slices"
	"strings"

	"github.com/tenantmcp/tenantmcp/guardedsql"
)

func init() {
	register(&property{id: 60, name: "typed_seeds", title: "Generated key values have their column's type",
		criterion: "timestamp/date/decimal/UUID unique-key columns get values of that type; own-row copy accepted", fn: propTypedSeeds})
}

// P60: the write properties' controls (9, 10, 38, 47 …) insert copies of
// own rows with fresh values in the columns of the primary and declared
// unique keys. For every such column whose type by the live catalog is a
// timestamp, date, decimal or UUID, the fresh value is of that type, and
// the copy under the row's own parents is accepted (in a rolled-back
// control) as every tenant that has a row to copy. A copy the engine
// refuses for its type would make those controls fail — or, worse, a
// property that skips a table whose control failed prove nothing for it.
func propTypedSeeds(p *pt, r *runner) {
	typed, tried := 0, 0
	for _, name := range r.g.bound {
		t := r.g.tables[name]
		var cols []string
		for _, key := range append([][]string{t.pk}, t.unique...) {
			for _, c := range key {
				if fkOf(t, c) != nil || levelOf(t, c) != "" || slices.Contains(cols, c) {
					continue
				}
				switch r.columnKind(name, c, r.sample(name, c)) {
				case kindTime, kindDate, kindDecimal, kindUUID:
					cols = append(cols, c)
				}
			}
		}
		if len(cols) == 0 {
			continue
		}
		typed++
		copied, stuck := 0, 0
		for _, tn := range r.tenants {
			own := pick(p.rng, sortedKeys(r.or.visible(name, tn.Grants)), 1)
			if len(own) == 0 {
				continue
			}
			template, ok := r.readableRefs(p, t, r.raw.byKey[name][own[0]], tn)
			if !ok {
				continue
			}
			// A unique key of foreign-key and level columns only (Lago's
			// fees_taxes(fee_id, tax_id), memberships(user_id,
			// organization_id)) is one fresh values cannot vary: point a
			// reference elsewhere, as properties 9 and 10 do.
			template, why := r.freeRefs(t, template, tn, true)
			if why != "" {
				p.Logf("%s as %s: %s; no copy of an own row can be inserted", name, tn, why)
				stuck++
				continue
			}
			row := r.fresh(t, template)
			for _, c := range cols {
				if want, got := r.columnKind(name, c, r.sample(name, c)), valueKind(row[c]); !fits(want, got) {
					p.Errorf("%s.%s is a %s column (catalog type %s); the suite generated %v, a %s value, for a copy of row %s",
						name, c, want, r.cat.tables[strings.ToLower(name)].types[strings.ToLower(c)], row[c], got, own[0])
				}
			}
			ctx := withRowLevels(r.scoped(p.ctx, tn), t, tn, nil, row)
			if err := r.control(ctx, func(tx *guardedsql.Tx) error {
				res, err := r.exec(ctx, tx, r.insertOf(p, t, row))
				if err == nil && res.RowsAffected != 1 {
					err = fmt.Errorf("%d rows affected", res.RowsAffected)
				}
				return err
			}); err != nil {
				p.Errorf("%s as %s: a copy of own row %s with fresh %s values was refused: %v", name, tn, own[0], strings.Join(cols, ", "), err)
				continue
			}
			copied++
		}
		if copied > 0 {
			tried++
		}
		switch {
		case copied == 0 && stuck > 0:
			p.Logf("%s: every combination of its unique key's references is taken; its typed key columns %v are not tried", name, cols)
		case copied == 0:
			p.Errorf("%s: no tenant had a row to copy; its typed key columns %v are untested", name, cols)
		}
	}
	if typed == 0 {
		p.Skipf("no primary or declared unique key of a tenant-bound table holds a timestamp, date, decimal or UUID column")
	}
	if tried == 0 {
		p.Skipf("no table with typed key columns had a copy of an own row that its unique keys admit")
	}
	p.Logf("%d tables with typed key columns; every tenant's copy accepted", typed)
}

// sample is a stored value of table.col (nil if none), which tells a UUID
// kept in a text column from text.
func (r *runner) sample(table, col string) any {
	for _, row := range r.raw.rows[table] {
		if v := row[col]; v != nil {
			return v
		}
	}
	return nil
}
