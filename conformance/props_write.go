package conformance

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/tenantmcp/tenantmcp/builder"
	"github.com/tenantmcp/tenantmcp/guardedsql"
	"github.com/tenantmcp/tenantmcp/scope"
)

// errRollback ends a control transaction: the properties try a write the
// tenant may make inside db.Tx, look at its effect, and roll it back.
var errRollback = errors.New("conformance: control write rolled back")

// refused reports whether err is the guard refusing a write.
func refused(err error) bool {
	return errors.Is(err, guardedsql.ErrNotFound) || errors.Is(err, guardedsql.ErrOutOfScope) || errors.Is(err, guardedsql.ErrRefused)
}

// control runs fn in a transaction that is always rolled back and reports
// fn's own error.
func (r *runner) control(ctx context.Context, fn func(tx *guardedsql.Tx) error) error {
	var inner error
	err := r.db.Tx(ctx, func(tx *guardedsql.Tx) error {
		inner = fn(tx)
		return errRollback
	})
	if inner != nil {
		return inner
	}
	if err != nil && !errors.Is(err, errRollback) {
		return err
	}
	if errs, ok := err.(interface{ Unwrap() []error }); ok {
		for _, e := range errs.Unwrap() {
			if e != nil && !errors.Is(e, errRollback) {
				return fmt.Errorf("rolling back the control write: %w", e)
			}
		}
	}
	return nil
}

// chooseMutable picks, per tenant-bound table, the column the write
// properties assign: Target.Mutable's choice, else the first plain column
// with at least two distinct values (text preferred).
func (r *runner) chooseMutable() map[string]string {
	out := map[string]string{}
	for _, name := range r.g.bound {
		if c, ok := r.target.Mutable[name]; ok {
			out[name] = c
			continue
		}
		t := r.g.tables[name]
		keyish := map[string]bool{}
		for _, c := range t.pk {
			keyish[c] = true
		}
		for _, f := range t.fks {
			for _, c := range f.cols {
				keyish[c] = true
			}
		}
		for _, lc := range t.levelCols {
			keyish[lc.col] = true
		}
		// A column of a unique key is no candidate either: the mixed-list
		// update of P7 writes another row's value into an own row, which
		// a per-tenant UNIQUE(company_id, name) would refuse.
		for _, u := range t.unique {
			for _, c := range u {
				keyish[c] = true
			}
		}
		best := ""
		for _, c := range t.cols {
			if keyish[c] {
				continue
			}
			distinct := map[string]bool{}
			text := true
			for _, row := range r.data.Tables[name] {
				distinct[canon(row[c])] = true
				if _, ok := row[c].(string); !ok {
					text = false
				}
			}
			if len(distinct) < 2 {
				continue
			}
			if text {
				best = c
				break
			}
			if best == "" {
				best = c
			}
		}
		out[name] = best
	}
	return out
}

// otherValue returns a value of col, as stored in the database, that
// differs from col in every row of avoid: a value of the right type the
// engine will accept, which really changes the rows if written.
func (r *runner) otherValue(table, col string, avoid ...Row) (any, bool) {
	bad := map[string]bool{}
	for _, a := range avoid {
		bad[canon(a[col])] = true
	}
	for _, row := range r.raw.rows[table] {
		if v := row[col]; v != nil && !bad[canon(v)] {
			return v, true
		}
	}
	return nil, false
}

var freshSeq atomic.Int64

// varied lists the columns fresh renews: those of the primary key and of
// every declared unique key that are not foreign-key columns (nor, in a
// unique key, level columns).
func varied(t *tinfo) []string {
	fixed := map[string]bool{}
	for _, f := range t.fks {
		for _, c := range f.cols {
			fixed[c] = true
		}
	}
	var out []string
	for _, c := range t.pk {
		if !fixed[c] {
			out = append(out, c)
		}
	}
	for _, u := range t.unique {
		for _, c := range u {
			if levelOf(t, c) == "" && !fixed[c] && !slices.Contains(out, c) {
				out = append(out, c)
			}
		}
	}
	return out
}

// fresh returns a copy of template (a row as stored) with new values in
// the columns varied lists, each of its column's type by the live
// catalog (typedValue): integers above every value in the table (within
// the range of a narrow integer type: see intRoom), decimals likewise,
// timestamps, dates and UUIDs that no seed holds, text "tmconf-<n>". The
// copy stays under the template's parents and level ids, so a per-tenant
// UNIQUE(company_id, email) is kept by the new email alone; a key made of
// foreign-key columns only is freeRefs' to renew.
func (r *runner) fresh(t *tinfo, template Row) Row {
	row := maps.Clone(template)
	for _, c := range varied(t) {
		n := freshSeq.Add(1)
		kind := r.columnKind(t.name, c, template[c])
		var hi int64
		if kind == kindInt || kind == kindDecimal || isInt(r.data.Tables[t.name], c) {
			hi = r.maxOf(t.name, c)
			if isInt(r.data.Tables[t.name], c) {
				kind = kindInt
			}
		}
		if kind == kindInt {
			// Far above the seeds, unless the column's type ends
			// sooner (a TINYINT UNSIGNED store_id): then the unused
			// values between the largest seed and the type's top, in turn.
			if room, top, narrow := r.intRoom(t.name, c); narrow && hi+1_000_000+n > top {
				if room > 0 {
					row[c] = hi + 1 + (n-1)%room
				} else {
					row[c] = hi + n // out of range: the callers' noRoom skips first
				}
				continue
			}
			hi += 1_000_000
		}
		if offTypedSeeds.Load() && kind != kindInt {
			kind = kindText
		}
		row[c] = typedValue(kind, freshPrefix, hi, n)
	}
	return row
}

// maxOf is the largest value of table.col in the seed, as an integer (0
// for none).
func (r *runner) maxOf(table, col string) int64 {
	var hi int64
	for _, x := range r.data.Tables[table] {
		f, _ := strconv.ParseFloat(number(x[col]), 64)
		hi = max(hi, int64(f))
	}
	return hi
}

// intRoom reports, for an integer column whose declared type ends before
// int64 does (TINYINT, SMALLINT, MEDIUMINT, INT, signed or unsigned, by
// the live catalog), the type's largest value and how many values lie
// between the seed's largest and it. SQLite enforces no range.
func (r *runner) intRoom(table, col string) (room, top int64, narrow bool) {
	if r.engine == SQLite || r.cat == nil {
		return 0, 0, false
	}
	lt := r.cat.tables[strings.ToLower(table)]
	if lt == nil {
		return 0, 0, false
	}
	top, narrow = intTypeMax(lt.types[strings.ToLower(col)])
	if !narrow {
		return 0, 0, false
	}
	return max(0, top-r.maxOf(table, col)), top, true
}

// intTypeMax is the largest value of a declared integer type ("tinyint(3)
// unsigned", "smallint", "integer", "int(11)"); false for BIGINT and for
// anything else.
func intTypeMax(typ string) (int64, bool) {
	t := strings.ToLower(strings.TrimSpace(typ))
	unsigned := strings.Contains(t, "unsigned")
	pick := func(signed, uns int64) (int64, bool) {
		if unsigned {
			return uns, true
		}
		return signed, true
	}
	switch {
	case strings.HasPrefix(t, "tinyint"):
		return pick(127, 255)
	case strings.HasPrefix(t, "smallint"), t == "int2", t == "smallserial":
		return pick(32767, 65535)
	case strings.HasPrefix(t, "mediumint"):
		return pick(8388607, 16777215)
	case t == "integer", t == "int", t == "int4", t == "serial", strings.HasPrefix(t, "int("), strings.HasPrefix(t, "int "), strings.HasPrefix(t, "integer "):
		return pick(2147483647, 4294967295)
	}
	return 0, false
}

// noRoom names a column fresh renews whose integer type holds no value
// above the seed's largest, or "": a copy of a row cannot get a new key.
func (r *runner) noRoom(t *tinfo) string {
	for _, c := range varied(t) {
		if room, _, narrow := r.intRoom(t.name, c); narrow && room == 0 {
			return c
		}
	}
	return ""
}

// freeRefs renews, in a copy of row, the foreign keys of a unique key (or
// the primary key) made of foreign-key and level columns only: fresh
// cannot vary it, so a copy of the row would collide (a join table's
// UNIQUE(account_id, user_id), Sakila's UNIQUE manager_staff_id). It
// points one such foreign key at another row tn can read (any row of a
// global table) whose combination no row of the table holds yet, other
// references first, the scope parent and level columns last; with
// keepVisible the copy must stay readable by tn. It returns why not when
// no such row exists.
func (r *runner) freeRefs(t *tinfo, row Row, tn Tenant, keepVisible bool) (Row, string) {
	vary := varied(t)
	var stuck [][]string
	for _, u := range append([][]string{t.pk}, t.unique...) {
		fixed := len(u) > 0
		for _, c := range u {
			if slices.Contains(vary, c) || row[c] == nil {
				fixed = false // renewed by fresh, or NULL: distinct from every row
			}
		}
		if fixed {
			stuck = append(stuck, u)
		}
	}
	if len(stuck) == 0 {
		return row, ""
	}
	used := func(cand Row) bool {
		for _, u := range stuck {
			for _, x := range r.raw.rows[t.name] {
				same := true
				for _, c := range u {
					same = same && canon(x[c]) == canon(cand[c])
				}
				if same {
					return true
				}
			}
		}
		return false
	}
	if !used(row) {
		return row, ""
	}
	var fks []*fkey
	for _, f := range t.fks {
		in := false
		for _, u := range stuck {
			for _, c := range f.cols {
				in = in || slices.Contains(u, c)
			}
		}
		if in {
			fks = append(fks, f)
		}
	}
	moves := func(f *fkey) bool {
		if f == t.parent {
			return true
		}
		for _, c := range f.cols {
			if levelOf(t, c) != "" {
				return true
			}
		}
		return false
	}
	slices.SortStableFunc(fks, func(a, b *fkey) int {
		switch {
		case moves(a) == moves(b):
			return 0
		case moves(a):
			return 1
		}
		return -1
	})
	grants := r.grantOf(t, row, tn)
	for _, f := range fks {
		var targets []Row
		if to := r.g.tables[f.to]; to != nil && !to.global {
			for _, k := range sortedKeys(r.or.visible(f.to, grants)) {
				targets = append(targets, r.or.row(f.to, k))
			}
		} else {
			targets = r.raw.rows[f.to]
		}
		for _, target := range targets {
			cand := maps.Clone(row)
			for i, c := range f.cols {
				cand[c] = target[f.ref[i]]
			}
			if used(cand) || keepVisible && !r.or.rowVisible(t.name, cand, tn.Grants) {
				continue
			}
			return cand, ""
		}
	}
	return nil, fmt.Sprintf("a unique key of %s is made of foreign-key columns only (%v), and every combination of rows %s can reference is taken", t.name, stuck, tn)
}

// insertOf builds an INSERT of rows into t (every column).
func (r *runner) insertOf(p *pt, t *tinfo, rows ...Row) builder.Insert {
	ib := builder.InsertInto(r.sch.Table(t.name)).Columns(t.cols...)
	for _, row := range rows {
		vals := make([]any, len(t.cols))
		for i, c := range t.cols {
			vals[i] = row[c]
		}
		ib = ib.Values(vals...)
	}
	return p.i(ib.Build())
}

// absent checks, as the owner, that no row with row's key exists.
func (r *runner) absent(p *pt, t *tinfo, row Row, what string, args ...any) {
	ok, err := rowExists(p.ctx, r.sc.owner, r.engine, t, row)
	switch {
	case err != nil:
		p.Errorf(what+": checking as owner: %v", append(args, err)...)
	case ok:
		p.Errorf(what+": the row %s was created", append(args, Key(row, t.pk))...)
	}
}

// P7: UPDATE aimed at another tenant's rows changes nothing: 0 rows
// affected, ErrNotFound with ExpectOne, only the own row of a mixed key
// list is updated, and an own row cannot be moved under a foreign parent
// or to a foreign level id. The database is compared with the seed after.
func propUpdateForeign(p *pt, r *runner) {
	tried := 0
	for _, tn := range r.tenants {
		ctx := r.scoped(p.ctx, tn)
		for _, name := range r.g.bound {
			t := r.g.tables[name]
			col := r.mutable[name]
			foreign := pick(p.rng, r.or.foreign(name, tn.Grants), 3)
			own := pick(p.rng, r.or.writable(name, tn.Grants, false), 1)
			if col == "" {
				p.Logf("%s: no assignable plain column; UPDATE checked through key moves only", name)
			}
			tb := r.sch.Table(name)
			if col != "" {
				for _, fk := range foreign {
					// A value the row does not hold, so that a write that
					// got through would change it.
					v, ok := r.otherValue(name, col, r.raw.byKey[name][fk])
					if !ok {
						p.Logf("%s: no value of %s differs from row %s's", name, col, fk)
						continue
					}
					row := r.or.row(name, fk)
					u := p.u(builder.UpdateTable(tb).Set(col, v).Where(pkIs(tb, t, row)).Build())
					res, err := r.exec(ctx, r.db, u)
					tried++
					if err != nil || res.RowsAffected != 0 {
						p.Errorf("UPDATE %s SET %s of foreign %s as %s: %d rows, %v; want 0 rows", name, col, head([]string{fk}), tn, res.RowsAffected, err)
					}
					u1 := p.u(builder.UpdateTable(tb).Set(col, v).Where(pkIs(tb, t, row)).ExpectOne().Build())
					if _, err := r.exec(ctx, r.db, u1); !errors.Is(err, guardedsql.ErrNotFound) {
						p.Errorf("UPDATE … ExpectOne of foreign %s %s as %s = %v, want ErrNotFound", name, head([]string{fk}), tn, err)
					}
				}
				v, ok := r.otherValue(name, col, r.raw.byKey[name][firstOr(own)])
				if len(own) == 1 && len(foreign) > 0 && ok {
					var ors []builder.Pred
					for _, k := range append(slices.Clone(foreign), own[0]) {
						ors = append(ors, pkIs(tb, t, r.or.row(name, k)))
					}
					u := p.u(builder.UpdateTable(tb).Set(col, v).Where(builder.Or(ors...)).Build())
					err := r.control(ctx, func(tx *guardedsql.Tx) error {
						res, err := r.exec(ctx, tx, u)
						if err != nil {
							return err
						}
						if res.RowsAffected != 1 {
							return fmt.Errorf("%d rows affected, want 1 (the own row)", res.RowsAffected)
						}
						return nil
					})
					if err != nil {
						p.Errorf("UPDATE %s of %d foreign rows and own %s as %s: %v", name, len(foreign), own[0], tn, err)
					}
				}
			}
			if len(own) == 0 {
				continue
			}
			// Moving an own row: to a foreign parent, or to a foreign level id.
			orow := r.or.row(name, own[0])
			for _, f := range r.g.tenantFKs(t) {
				for _, k := range pick(p.rng, r.or.foreignTarget(f.to, tn.Grants), 1) {
					prow := r.or.row(f.to, k)
					ub := builder.UpdateTable(tb)
					moved := maps.Clone(orow)
					for i, c := range f.cols {
						ub = ub.Set(c, prow[f.ref[i]])
						moved[c] = prow[f.ref[i]]
					}
					if r.or.rowVisible(name, moved, tn.Grants) && f == t.parent {
						continue
					}
					u := p.u(ub.Where(pkIs(tb, t, orow)).Build())
					res, err := r.exec(ctx, r.db, u)
					tried++
					if !(refused(err) || err == nil && res.RowsAffected == 0) {
						p.Errorf("UPDATE %s SET %v = foreign %s %s on own row %s as %s: %d rows, %v; want refused", name, f.cols, f.to, head([]string{k}), own[0], tn, res.RowsAffected, err)
					}
				}
			}
			for _, lc := range t.levelCols {
				if slices.Contains(t.pk, lc.col) || isFKCol(t, lc.col) {
					continue // moved through the foreign key above, or a key
				}
				for _, id := range pick(p.rng, r.foreignLevelIDs(tn, lc.level), 1) {
					u := p.u(builder.UpdateTable(tb).Set(lc.col, r.levelValue(lc.level, id)).Where(pkIs(tb, t, orow)).Build())
					res, err := r.exec(ctx, r.db, u)
					tried++
					if !(refused(err) || err == nil && res.RowsAffected == 0) {
						p.Errorf("UPDATE %s SET %s = foreign %s on own row %s as %s: %d rows, %v; want refused", name, lc.col, id, own[0], tn, res.RowsAffected, err)
					}
				}
			}
		}
	}
	if tried == 0 {
		p.Errorf("no foreign UPDATE could be aimed: the seed does not separate tenants")
	}
}

func isFKCol(t *tinfo, col string) bool {
	for _, f := range t.fks {
		if slices.Contains(f.cols, col) {
			return true
		}
	}
	return false
}

// P8: DELETE aimed at another tenant's rows deletes nothing: 0 rows
// affected (no constraint error, which would mean the engine tried),
// ErrNotFound with ExpectOne, and only the own row of a mixed key list.
func propDeleteForeign(p *pt, r *runner) {
	tried := 0
	for _, tn := range r.tenants {
		ctx := r.scoped(p.ctx, tn)
		for _, name := range r.g.bound {
			t := r.g.tables[name]
			tb := r.sch.Table(name)
			var leaves, others []string
			for _, k := range r.or.foreign(name, tn.Grants) {
				if r.or.isLeaf(name, k) {
					leaves = append(leaves, k)
				} else {
					others = append(others, k)
				}
			}
			foreign := pick(p.rng, leaves, 2)
			foreign = append(foreign, pick(p.rng, others, 1)...)
			for _, fk := range foreign {
				row := r.or.row(name, fk)
				d := p.d(builder.DeleteFrom(tb).Where(pkIs(tb, t, row)).Build())
				res, err := r.exec(ctx, r.db, d)
				tried++
				if err != nil || res.RowsAffected != 0 {
					p.Errorf("DELETE foreign %s %s as %s: %d rows, %v; want 0 rows and no error", name, head([]string{fk}), tn, res.RowsAffected, err)
				}
				d1 := p.d(builder.DeleteFrom(tb).Where(pkIs(tb, t, row)).ExpectOne().Build())
				if _, err := r.exec(ctx, r.db, d1); !errors.Is(err, guardedsql.ErrNotFound) {
					p.Errorf("DELETE … ExpectOne of foreign %s %s as %s = %v, want ErrNotFound", name, head([]string{fk}), tn, err)
				}
			}
			ownLeaves := r.or.writable(name, tn.Grants, true)
			fl := pick(p.rng, leaves, 3)
			if mine := pick(p.rng, ownLeaves, 1); len(mine) == 1 && len(fl) > 0 {
				var ors []builder.Pred
				for _, k := range append(fl, mine[0]) {
					ors = append(ors, pkIs(tb, t, r.or.row(name, k)))
				}
				d := p.d(builder.DeleteFrom(tb).Where(builder.Or(ors...)).Build())
				err := r.control(ctx, func(tx *guardedsql.Tx) error {
					res, err := r.exec(ctx, tx, d)
					if err != nil {
						return err
					}
					if res.RowsAffected != 1 {
						return fmt.Errorf("%d rows affected, want 1 (the own row)", res.RowsAffected)
					}
					return nil
				})
				if err != nil {
					p.Errorf("DELETE %s of %d foreign rows and own %s as %s: %v", name, len(fl), mine[0], tn, err)
				}
			}
			// Delete by a foreign parent's key: only rows that are leaves.
			if t.parent != nil {
				for _, k := range pick(p.rng, r.or.foreign(t.parent.to, tn.Grants), 1) {
					allLeaves := true
					for _, ck := range r.or.keys[name] {
						if pi, ok := r.or.parentRow(t.parent, r.or.row(name, ck)); ok && Key(r.data.Tables[t.parent.to][pi], r.g.tables[t.parent.to].pk) == k && !r.or.isLeaf(name, ck) {
							allLeaves = false
						}
					}
					if !allLeaves {
						continue
					}
					d := p.d(builder.DeleteFrom(tb).Where(eqRow(tb, t.parent.cols, r.or.row(t.parent.to, k), t.parent.ref)).Build())
					res, err := r.exec(ctx, r.db, d)
					tried++
					if err != nil || res.RowsAffected != 0 {
						p.Errorf("DELETE %s WHERE %v = foreign parent %s as %s: %d rows, %v; want 0 rows", name, t.parent.cols, head([]string{k}), tn, res.RowsAffected, err)
					}
				}
			}
		}
	}
	if tried == 0 {
		p.Errorf("no foreign DELETE could be aimed: the seed does not separate tenants")
	}
}

// rowGrants returns tn's grants, and, for root t (no scope parent), the
// level ids that rows carry outside the columns skip: a company's copy
// with a fresh id is a new company, which the scope then grants, so that a
// refusal is a foreign key's alone.
func rowGrants(t *tinfo, tn Tenant, skip []string, rows ...Row) []scope.Grant {
	if t.parent != nil {
		return tn.Grants
	}
	grants := slices.Clone(tn.Grants)
	for _, row := range rows {
		for _, lc := range t.levelCols {
			if v := row[lc.col]; v != nil && !slices.Contains(skip, lc.col) {
				grants = append(grants, scope.Grant{Level: lc.level, ID: canon(v)})
			}
		}
	}
	return grants
}

// withRowLevels returns ctx, or for root t a context whose scope holds
// rowGrants(t, tn, skip, rows...).
func withRowLevels(ctx context.Context, t *tinfo, tn Tenant, skip []string, rows ...Row) context.Context {
	if t.parent != nil {
		return ctx
	}
	return grantsCtx(ctx, rowGrants(t, tn, skip, rows...))
}

// P9: INSERT of a row whose scope parent (or any other referenced
// tenant-bound row, a root's included) belongs to another tenant is
// refused by the guard, in the same words as the same INSERT naming a key
// no row has, and creates no row; a multi-row insert with one such row
// creates none; the same row under an own parent is accepted (in a
// rolled-back control).
func propInsertForeignParent(p *pt, r *runner) {
	tried := 0
	for _, tn := range r.tenants {
		ctx := r.scoped(p.ctx, tn)
		for _, name := range r.g.bound {
			t := r.g.tables[name]
			if t.parent == nil && len(r.g.tenantFKs(t)) == 0 {
				continue // a root's level ids: property 10
			}
			own := pick(p.rng, sortedKeys(r.or.visible(name, tn.Grants)), 1)
			if len(own) == 0 {
				continue
			}
			template, ok := r.readableRefs(p, t, r.raw.byKey[name][own[0]], tn)
			if !ok {
				p.Logf("%s as %s: some foreign key reaches no row the tenant can read; the tenant cannot insert here at all", name, tn)
				continue
			}
			if c := r.noRoom(t); c != "" {
				p.Logf("%s: the type of %s holds no value above the seed's largest; no copy of a row can be inserted, so not checked", name, c)
				continue
			}
			within := func(skip []string, rows ...Row) context.Context {
				return withRowLevels(ctx, t, tn, skip, rows...)
			}
			readable := template
			template, why := r.freeRefs(t, template, tn, true)
			if why != "" {
				// The Unchecked keys are still tried: their foreign
				// combinations are free though every own one is taken
				// (Cal.com's Membership, all its (teamId, userId) used).
				p.Logf("%s; no copy of an own row can be inserted, so the checked keys are not tried", why)
				r.uncheckedKeys(p, t, tn, readable, within)
				continue
			}
			good := r.fresh(t, template)
			if err := r.control(within(nil, good), func(tx *guardedsql.Tx) error {
				res, err := r.exec(within(nil, good), tx, r.insertOf(p, t, good))
				if err == nil && res.RowsAffected != 1 {
					err = fmt.Errorf("%d rows affected", res.RowsAffected)
				}
				return err
			}); err != nil {
				p.Errorf("control: INSERT into %s under own parents (copy of %s) as %s failed: %v; the foreign cases below prove nothing for this table", name, own[0], tn, err)
				continue
			}
			for _, f := range r.g.tenantFKs(t) {
				// Foreign to the scope the insert runs under, which a
				// root's level ids widen (an account's tenant).
				for _, k := range pick(p.rng, r.or.foreignTarget(f.to, rowGrants(t, tn, f.cols, template)), 2) {
					prow := r.or.row(f.to, k)
					bad := r.fresh(t, template)
					for i, c := range f.cols {
						bad[c] = prow[f.ref[i]]
					}
					// A key of foreign-key columns only (a join table's
					// (inbox_id, user_id)) may name a row the other tenant
					// has: then no row could be said to be created.
					free, why := r.freeRefs(t, bad, tn, false)
					if why == "" {
						for i, c := range f.cols {
							if canon(free[c]) != canon(prow[f.ref[i]]) {
								why = "no free key under it"
							}
						}
					}
					if why != "" {
						p.Logf("%s under foreign %s %s as %s: %s; not used", name, f.to, head([]string{k}), tn, why)
						continue
					}
					bad = free
					if len(f.cols) == 1 && r.agrees(t, f.cols[0], bad, tn) {
						p.Logf("%s with %s = %v as %s: the level's id of another row it references that the tenant sees, so its own; not used", name, f.cols[0], bad[f.cols[0]], tn)
						continue
					}
					_, err := r.exec(within(f.cols, bad), r.db, r.insertOf(p, t, bad))
					tried++
					if !refused(err) {
						p.Errorf("INSERT into %s with %v = foreign %s %s as %s: %v; want the guard's refusal (ErrNotFound)", name, f.cols, f.to, head([]string{k}), tn, err)
					}
					r.absent(p, t, bad, "INSERT into %s under foreign %s %s as %s", name, f.to, head([]string{k}), tn)
					// The refusal must not tell another tenant's row from
					// no row: the same INSERT with a key no row has fails
					// with the same words.
					if miss, ok := r.missingRef(f, bad, prow); ok && err != nil {
						_, errMiss := r.exec(within(f.cols, miss), r.db, r.insertOf(p, t, miss))
						if errMiss == nil || errMiss.Error() != err.Error() {
							p.Errorf("INSERT into %s with %v = foreign %s %s as %s answers %q, with a key no row has %v: the answers tell another tenant's row from none", name, f.cols, f.to, head([]string{k}), tn, err, errMiss)
						}
						r.absent(p, t, miss, "INSERT into %s under a missing %s as %s", name, f.to, tn)
					}
					// All or none: an own row together with the foreign one.
					ok2 := r.fresh(t, template)
					_, err = r.exec(within(f.cols, ok2, bad), r.db, r.insertOf(p, t, ok2, bad))
					if !refused(err) {
						p.Errorf("two-row INSERT into %s (own parent, foreign %s %s) as %s: %v; want refused", name, f.to, head([]string{k}), tn, err)
					}
					r.absent(p, t, ok2, "two-row INSERT into %s with one foreign parent as %s (own row)", name, tn)
					r.absent(p, t, bad, "two-row INSERT into %s with one foreign parent as %s (foreign row)", name, tn)
				}
			}
			r.uncheckedKeys(p, t, tn, template, within)
			r.undeclaredLevelColumns(p, t, tn, template, within)
		}
	}
	if tried == 0 {
		p.Skipf("no child table has an own row to copy and a foreign parent to aim at")
	}
}

// agrees reports whether row's value in col, a level column of t that a
// single-column foreign key covers, is that level's id of another row
// that row references and tn sees: the guard's agreement rule (a
// project's issue carries its workspace), under which the value is tn's
// own though the row it names is out of tn's sight.
func (r *runner) agrees(t *tinfo, col string, row Row, tn Tenant) bool {
	level := ""
	for _, lc := range t.levelCols {
		if lc.col == col {
			level = lc.level
		}
	}
	if level == "" || row[col] == nil {
		return false
	}
	for _, f := range r.g.tenantFKs(t) {
		to := r.g.tables[f.to]
		if len(f.cols) != 1 || f.cols[0] == col || to.byRef || row[f.cols[0]] == nil {
			continue
		}
		for _, lc := range to.levelCols {
			if lc.level != level || lc.col == f.ref[0] {
				continue
			}
			for k := range r.or.visible(f.to, tn.Grants) {
				o := r.or.row(f.to, k)
				if canon(o[f.ref[0]]) == canon(row[f.cols[0]]) && canon(o[lc.col]) == canon(row[col]) {
					return true
				}
			}
		}
	}
	return false
}

// undeclaredLevelColumns writes, in a transaction it rolls back, a copy of
// the own row template with another tenant's id in each column of t that
// the live catalog takes for a level column (Target.LevelColumns, or named
// like a declared one: a stored company_id beside the Parent order_id) but
// the graph does not declare, and fails on each such write the guard
// accepts: nothing checks that column, so a tenant writes rows that claim
// another tenant (and that anything reading the column, property 58's
// oracle included, gives to it).
func (r *runner) undeclaredLevelColumns(p *pt, t *tinfo, tn Tenant, template Row, within func(skip []string, rows ...Row) context.Context) {
	if r.cat == nil {
		return
	}
	prefix := strings.ToLower(t.name) + "."
	for _, tc := range slices.Sorted(maps.Keys(r.cat.levels)) {
		col, ok := strings.CutPrefix(tc, prefix)
		if !ok {
			continue
		}
		level := r.cat.levels[tc]
		if slices.ContainsFunc(t.levelCols, func(lc levelCol) bool { return strings.EqualFold(lc.col, col) }) {
			continue
		}
		name := col
		for c := range template {
			if strings.EqualFold(c, col) {
				name = c
			}
		}
		ids := r.foreignLevelIDs(tn, level)
		if len(ids) == 0 {
			continue
		}
		id := pick(p.rng, ids, 1)[0]
		bad := r.fresh(t, template)
		bad[name] = r.levelValue(level, id)
		if err := r.tryInsert(p, within(nil, bad), t, bad); err == nil {
			p.Errorf("INSERT into %s with %s = %s %s, another tenant's, as %s was accepted: %s is named like a column of level %s but the graph does not declare it, so nothing checks what a tenant writes there; declare it in Levels (the guard then checks written values), or name the level columns in Target.LevelColumns if it is not one", t.name, name, level, id, tn, name, level)
		}
	}
}

// uncheckedKeys writes, in a transaction it rolls back, a copy of the own
// row template that references another tenant's row through each foreign
// key of t declared Unchecked into a tenant-bound table, and fails on each
// such write the guard accepts unless the run acknowledges the key
// (Target.Unchecked): the declaration's reason is not the run's.
func (r *runner) uncheckedKeys(p *pt, t *tinfo, tn Tenant, template Row, within func(skip []string, rows ...Row) context.Context) {
	for _, f := range t.fks {
		if !f.unchecked || r.g.tables[f.to].global {
			continue
		}
		ack, acked := "", false
		for _, c := range f.cols {
			if why, ok := r.target.Unchecked[t.name+"."+c]; ok {
				ack, acked = why, true
			}
		}
		for _, k := range pick(p.rng, r.or.foreignTarget(f.to, tn.Grants), 1) {
			prow := r.or.row(f.to, k)
			bad := r.fresh(t, template)
			for i, c := range f.cols {
				bad[c] = prow[f.ref[i]]
			}
			if r.keyTaken(t, bad, tn) {
				continue
			}
			err := r.tryInsert(p, within(f.cols, bad), t, bad)
			switch {
			case err != nil:
				p.Logf("INSERT into %s with Unchecked %v = foreign %s %s as %s: refused (%v)", t.name, f.cols, f.to, head([]string{k}), tn, err)
			case acked:
				p.Logf("INSERT into %s with Unchecked %v = foreign %s %s as %s: accepted, as the run acknowledges (%s)", t.name, f.cols, f.to, head([]string{k}), tn, ack)
			default:
				p.Errorf("INSERT into %s with %v = foreign %s %s as %s was accepted: the key is declared Unchecked, so a tenant's row may reference another tenant's row there (and another tenant's key is accepted where a missing one fails, which reveals the keys other tenants hold); check the key, or acknowledge it in Target.Unchecked[%q] with the reason", t.name, f.cols, f.to, head([]string{k}), tn, t.name+"."+f.cols[0])
			}
		}
	}
}

// keyTaken reports whether row's unique key made of foreign-key and level
// columns only (which fresh cannot renew) is one a seeded row already
// holds, so that no row could be said to be created by inserting it.
func (r *runner) keyTaken(t *tinfo, row Row, tn Tenant) bool {
	free, why := r.freeRefs(t, row, tn, false)
	return why != "" || !maps.EqualFunc(free, row, func(a, b any) bool { return canon(a) == canon(b) })
}

// tryInsert inserts row into t as ctx's caller in a transaction it rolls
// back, and returns the insert's error.
func (r *runner) tryInsert(p *pt, ctx context.Context, t *tinfo, row Row) error {
	return r.control(ctx, func(tx *guardedsql.Tx) error {
		_, err := r.exec(ctx, tx, r.insertOf(p, t, row))
		return err
	})
}

// missingRef returns row with the columns of f set to a key that no row of
// f.to has: prow's, with the referenced columns the suite varies given
// fresh values. False when f references none of those.
func (r *runner) missingRef(f *fkey, row, prow Row) (Row, bool) {
	fresh := r.fresh(r.g.tables[f.to], prow)
	out := maps.Clone(row)
	changed := false
	for i, c := range f.cols {
		out[c] = fresh[f.ref[i]]
		changed = changed || canon(fresh[f.ref[i]]) != canon(prow[f.ref[i]])
	}
	return out, changed
}

// ownedRefs returns a copy of row whose foreign keys to tenant-bound
// tables point at rows some tenant has, replacing a reference to a row of
// no tenant (a NULL level column) by one to a row that has one; why not
// when the referenced table has none.
func (r *runner) ownedRefs(p *pt, t *tinfo, row Row) (Row, string) {
	out := maps.Clone(row)
	for _, f := range r.g.tenantFKs(t) {
		if r.g.tables[f.to].byRef {
			continue // its rows' tenants are their referrers'
		}
		pi, ok := r.or.parentRow(f, out)
		if !ok || len(r.or.levelsOf(f.to, r.data.Tables[f.to][pi], 0)) > 0 {
			continue
		}
		var owned []string
		for _, k := range r.or.keys[f.to] {
			if len(r.or.levelsOf(f.to, r.or.row(f.to, k), 0)) > 0 {
				owned = append(owned, k)
			}
		}
		if len(owned) == 0 {
			return nil, fmt.Sprintf("%s: every row of %s belongs to no tenant", t.name, f.to)
		}
		target := r.or.row(f.to, pick(p.rng, owned, 1)[0])
		for i, c := range f.cols {
			out[c] = target[f.ref[i]]
		}
	}
	return out, ""
}

// grantOf returns the grants under which a copy of row, visible to tn,
// may reference other rows: tn's, or, when tn has several, the first that
// sees the row, since the guard wants an inserted row's checks to hold
// under one grant.
func (r *runner) grantOf(t *tinfo, row Row, tn Tenant) []scope.Grant {
	if len(tn.Grants) > 1 {
		key := Key(row, t.pk)
		for _, g := range tn.Grants {
			if one := []scope.Grant{g}; r.or.visible(t.name, one)[key] {
				return one
			}
		}
	}
	return tn.Grants
}

// readableRefs returns a copy of row whose foreign keys to tenant-bound
// tables all point at rows tn can read (the guard admits an insert only
// then), replacing any that do not; false if some key has no such row.
func (r *runner) readableRefs(p *pt, t *tinfo, row Row, tn Tenant) (Row, bool) {
	grants := r.grantOf(t, row, tn)
	out := maps.Clone(row)
	for _, f := range r.g.tenantFKs(t) {
		if pi, ok := r.or.parentRow(f, out); ok {
			if r.or.visible(f.to, grants)[Key(r.data.Tables[f.to][pi], r.g.tables[f.to].pk)] {
				continue
			}
		}
		vis := sortedKeys(r.or.visible(f.to, grants))
		if len(vis) == 0 {
			return nil, false
		}
		target := r.or.row(f.to, pick(p.rng, vis, 1)[0])
		for i, c := range f.cols {
			out[c] = target[f.ref[i]]
		}
	}
	return out, true
}

// P10: INSERT of a root row (a table carrying level columns itself) whose
// level ids are not granted, or that references another tenant's row, is
// refused and creates nothing; the same row is accepted by a scope that
// grants its ids (in a rolled-back control).
func propInsertForeignRoot(p *pt, r *runner) {
	tried := 0
	for _, tn := range r.tenants {
		ctx := r.scoped(p.ctx, tn)
		for _, name := range r.g.bound {
			t := r.g.tables[name]
			if t.parent != nil || len(t.levelCols) == 0 {
				continue
			}
			keys := sortedKeys(r.or.visible(name, tn.Grants))
			if len(keys) == 0 {
				keys = r.or.keys[name]
			}
			// A row with no level value (Cal.com's personal credential,
			// teamId NULL) is no tenant's: its copy would fail the control
			// under any scope.
			if len(t.levelCols) > 0 {
				keys = slices.DeleteFunc(slices.Clone(keys), func(k string) bool {
					row := r.or.row(name, k)
					return !slices.ContainsFunc(t.levelCols, func(lc levelCol) bool { return row[lc.col] != nil })
				})
			}
			tk := pick(p.rng, keys, 1)
			if len(tk) == 0 {
				p.Logf("%s: no row with a level value to copy, so not checked", name)
				continue
			}
			if c := r.noRoom(t); c != "" {
				p.Logf("%s: the type of %s holds no value above the seed's largest; no copy of a row can be inserted, so not checked", name, c)
				continue
			}
			template, why := r.freeRefs(t, r.raw.byKey[name][tk[0]], tn, false)
			if why != "" {
				p.Logf("%s; no copy of a row can be inserted, so not checked", why)
				continue
			}
			// A reference to a row no tenant has (a NULL level: Odoo's
			// shared partner) would fail the control under any scope:
			// point it at a row that has a tenant.
			template, why = r.ownedRefs(p, t, template)
			if why != "" {
				p.Logf("%s; no copy of a row can be inserted, so not checked", why)
				continue
			}
			// Control: the copy with fresh keys, under a scope that also
			// grants every level id the copy carries.
			good := r.fresh(t, template)
			grants := slices.Clone(tn.Grants)
			for _, lc := range t.levelCols {
				if good[lc.col] != nil {
					grants = append(grants, scope.Grant{Level: lc.level, ID: canon(good[lc.col])})
				}
			}
			for _, f := range r.g.tenantFKs(t) {
				if prow, ok := r.or.parentRow(f, good); ok {
					for l, id := range r.or.levelsOf(f.to, r.data.Tables[f.to][prow], 0) {
						grants = append(grants, scope.Grant{Level: l, ID: id})
					}
				}
			}
			if err := r.control(grantsCtx(p.ctx, grants), func(tx *guardedsql.Tx) error {
				res, err := r.exec(grantsCtx(p.ctx, grants), tx, r.insertOf(p, t, good))
				if err == nil && res.RowsAffected != 1 {
					err = fmt.Errorf("%d rows affected", res.RowsAffected)
				}
				return err
			}); err != nil {
				p.Errorf("control: INSERT into %s of a copy of %s under a scope granting its ids %s: %v", name, tk[0], grantsString(grants), err)
				continue
			}
			// Foreign: every level column set to an id the tenant lacks
			// (a foreign one where a foreign key demands an existing row).
			bad := r.fresh(t, template)
			for _, lc := range t.levelCols {
				if slices.Contains(t.pk, lc.col) && !isFKCol(t, lc.col) {
					continue // a fresh key: a new, ungranted id already
				}
				ids := r.foreignLevelIDs(tn, lc.level)
				if isFKCol(t, lc.col) {
					// must name an existing row: take it from a foreign row
					for _, f := range r.g.tenantFKs(t) {
						if i := slices.Index(f.cols, lc.col); i >= 0 {
							if fk := pick(p.rng, r.or.foreign(f.to, tn.Grants), 1); len(fk) == 1 {
								prow := r.or.row(f.to, fk[0])
								for j, c := range f.cols {
									bad[c] = prow[f.ref[j]]
								}
							}
						}
					}
					continue
				}
				if len(ids) > 0 {
					bad[lc.col] = r.levelValue(lc.level, pick(p.rng, ids, 1)[0])
				}
			}
			if r.or.rowVisible(name, bad, tn.Grants) {
				p.Logf("%s as %s: could not build a root row outside the scope", name, tn)
				continue
			}
			// A key made of level and foreign-key columns only (an
			// allowed-companies table's (cid, user_id)) may name a row
			// another tenant already has: no row could be said to be
			// created then.
			if r.keyTaken(t, bad, tn) {
				p.Logf("%s as %s: the row outside the scope has a key a seeded row holds; not used", name, tn)
				continue
			}
			_, err := r.exec(ctx, r.db, r.insertOf(p, t, bad))
			tried++
			if !refused(err) {
				p.Errorf("INSERT into root %s of a row outside the scope (%s) as %s: %v; want the guard's refusal", name, levelsString(r.or.levelsOf(name, bad, 0)), tn, err)
			}
			r.absent(p, t, bad, "INSERT into root %s outside the scope as %s", name, tn)
		}
	}
	if tried == 0 {
		p.Skipf("the graph has no root table (a tenant-bound table with level columns)")
	}
}

func levelsString(m map[string]string) string {
	var parts []string
	for _, l := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, l+":"+m[l])
	}
	return fmt.Sprint(parts)
}

func firstOr(s []string) string {
	if len(s) == 0 {
		return ""
	}
	return s[0]
}
