package conformance

import (
	"errors"
	"fmt"

	"github.com/tenantmcp/tenantmcp/builder"
	"github.com/tenantmcp/tenantmcp/guardedsql"
)

// P47 is registered here rather than in the property table's literal to
// keep the issue-15 properties in files of their own.
func init() {
	register(&property{id: 47, name: "upsert_foreign_conflict",
		title:     "An upsert whose conflict lands on another tenant's row changes nothing",
		criterion: "ErrNotFound, same error as a foreign-parent miss; db = seed; DO NOTHING = own conflict; own-conflict control updates",
		fn:        propUpsertForeignConflict})
}

// upsertOf builds an upsert of row into t on its one-column primary key,
// updating col (DoUpdate) or doing nothing (col "").
func (r *runner) upsertOf(p *pt, t *tinfo, row Row, col string, returning ...string) builder.Insert {
	ib := builder.InsertInto(r.sch.Table(t.name)).Columns(t.cols...)
	vals := make([]any, len(t.cols))
	for i, c := range t.cols {
		vals[i] = row[c]
	}
	cb := ib.Values(vals...).OnConflict(t.pk...)
	if col == "" {
		ib = cb.DoNothing()
	} else {
		ib = cb.DoUpdate(col)
	}
	if len(returning) > 0 {
		ib = ib.Returning(returning...)
	}
	return p.i(ib.Build())
}

// P47: upsert on a foreign conflict. For a child table whose one-column
// primary key does not include the tenant path (so one key space is
// shared by all tenants), a tenant upserts a row under its own parent
// whose key is another tenant's row's key, assigning the mutable column:
// it fails with ErrNotFound, with exactly the error of an upsert under a
// foreign parent (a plain miss), and the database stays equal to the seed
// (the runner compares after the property). DO NOTHING on that key
// succeeds with 0 rows, as on an own key. Control, rolled back: the same
// upsert on an own row's key updates that row and returns the new value.
func propUpsertForeignConflict(p *pt, r *runner) {
	tried := 0
	for _, tn := range r.tenants[:min(2, len(r.tenants))] {
		ctx := r.scoped(p.ctx, tn)
		for _, name := range r.g.bound {
			t := r.g.tables[name]
			col := r.mutable[name]
			if t.parent == nil || len(t.pk) != 1 || t.pk[0] == t.parent.cols[0] || col == "" {
				continue
			}
			own := sortedKeys(r.or.visible(name, tn.Grants))
			foreign := r.or.foreign(name, tn.Grants)
			if len(own) == 0 || len(foreign) == 0 {
				continue
			}
			template, ok := r.readableRefs(p, t, r.raw.byKey[name][own[0]], tn)
			if !ok {
				continue
			}
			frow := r.or.row(name, foreign[0])
			v, ok := r.otherValue(name, col, frow, r.or.row(name, own[0]))
			if !ok {
				continue
			}
			tried++
			bad := r.fresh(t, template)
			bad[t.pk[0]] = frow[t.pk[0]]
			bad[col] = v
			_, errConflict := r.exec(ctx, r.db, r.upsertOf(p, t, bad, col))
			if !errors.Is(errConflict, guardedsql.ErrNotFound) {
				p.Errorf("%s as %s: upsert on %s's key %v: err = %v; want ErrNotFound", name, tn, "another tenant", frow[t.pk[0]], errConflict)
				continue
			}
			// The miss: a fresh key under another tenant's parent.
			miss := r.fresh(t, r.raw.byKey[name][foreign[0]])
			miss[col] = v
			_, errMiss := r.exec(ctx, r.db, r.upsertOf(p, t, miss, col))
			if errMiss == nil || errConflict.Error() != errMiss.Error() {
				p.Errorf("%s as %s: foreign-conflict error %q differs from the foreign-parent miss %q", name, tn, errConflict, errMiss)
			}
			res, err := r.exec(ctx, r.db, r.upsertOf(p, t, bad, ""))
			if err != nil || res.RowsAffected != 0 {
				p.Errorf("%s as %s: DO NOTHING on a foreign key: %+v, %v; want 0 rows, no error", name, tn, res, err)
			}
			// Control: the own row's key is updated.
			good := r.fresh(t, template)
			good[t.pk[0]] = r.or.row(name, own[0])[t.pk[0]]
			good[col] = v
			err = r.control(ctx, func(tx *guardedsql.Tx) error {
				rows, err := tx.ExecReturning(ctx, r.upsertOf(p, t, good, col, col))
				if err != nil {
					return err
				}
				got, err := guardedsql.CollectRows(rows, func(rs *guardedsql.Rows) (any, error) {
					var x any
					return x, rs.Scan(&x)
				})
				if err != nil {
					return err
				}
				if len(got) != 1 || canon(got[0]) != canon(v) {
					return fmt.Errorf("returned %v, want [%v]", got, v)
				}
				return nil
			})
			if err != nil {
				p.Errorf("%s as %s: control upsert on an own key: %v", name, tn, err)
			}
			break
		}
	}
	if tried == 0 {
		p.Skipf("no tenant-bound child table with a single-column primary key and a mutable column")
	}
}
