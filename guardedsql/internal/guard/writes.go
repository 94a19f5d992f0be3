package guard

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	sq "github.com/Masterminds/squirrel"

	"github.com/tenantmcp/tenantmcp/guardedsql/internal/engine"
	"github.com/tenantmcp/tenantmcp/internal/guardfault"
	"github.com/tenantmcp/tenantmcp/internal/sqlast"
)

// This file renders the writes of issue 15: RETURNING on INSERT, UPDATE
// and DELETE, and upserts (INSERT ... ON CONFLICT). Such a plan carries a
// Run function that guardedsql calls inside one transaction.
//
// Where the engine takes RETURNING (engine.ReturningWriter) the guarded
// statement itself returns the rows: they are the rows it wrote, and only
// rows in scope are ever written. Elsewhere (MySQL; MariaDB's UPDATE) a
// fallback in the same transaction reads the rows by key: for UPDATE and
// DELETE the keys of the rows in scope are locked first (SELECT ... FOR
// UPDATE) and the write is confined to exactly those keys; for INSERT the
// row is read back by its key.
//
// Where the engine takes ON CONFLICT ... DO UPDATE ... WHERE
// (engine.Upserter) the WHERE tests the conflicting row against the scope;
// elsewhere the conflicting row is locked and tested first, and the plan
// branches. In both forms an upsert whose conflict lands on a row outside
// the scope changes nothing and fails with ErrNotFound, the error of an
// upsert whose parent row is not in scope.

// Env is what a plan's Run needs from guardedsql: the transaction to run
// in, and the error for an ExpectOne write that matched several rows.
type Env struct {
	Q       engine.Querier
	TooMany error
	// Timeout reports whether an error is a lock wait or statement
	// timeout (keyed.go); nil: none is.
	Timeout func(error) bool
}

// Output is what a plan's Run produced.
type Output struct {
	RowsAffected int64
	LastInsertID int64
	// Rows are the returned rows, one value per Plan.Returns column, as
	// the driver scanned them into an any.
	Rows [][]any
}

func (r *renderer) returningOn(stmt string) bool {
	rw, ok := r.d.(engine.ReturningWriter)
	return ok && rw.ReturningOn(stmt)
}

func (r *renderer) upsertStyle() engine.UpsertStyle {
	if u, ok := r.d.(engine.Upserter); ok {
		return u.UpsertStyle()
	}
	return engine.UpsertLocked
}

// finish converts a '?' statement to the dialect's placeholders.
func (r *renderer) finishSQL(f engine.Frag) (engine.Frag, error) {
	text, err := r.d.Placeholders().ReplacePlaceholders(f.SQL)
	if err != nil {
		return engine.Frag{}, fmt.Errorf("%w: %v", ErrInternal, err)
	}
	return engine.Frag{SQL: text, Args: f.Args}, nil
}

// keyEq renders "alias.c1 = ? AND alias.c2 = ?" for cols and vals.
func (r *renderer) keyEq(t *sqlast.Table, alias string, cols []string, vals []any) engine.Frag {
	var f fb
	for i, c := range cols {
		if i > 0 {
			f.s(" AND ")
		}
		v := vals[i]
		if k := t.ColumnKind(c); k != 0 {
			if nv, ok := sqlast.ConvertValue(k, v); ok {
				v = nv
			}
		}
		f.s(r.col(alias, c), " = ")
		f.arg(v)
	}
	return f.done()
}

// keysIn renders "(c1, c2) IN ((?, ?), ...)" for the key tuples keys.
func (r *renderer) keysIn(alias string, cols []string, keys [][]any) engine.Frag {
	var f fb
	if len(keys) == 0 {
		return fragFalse
	}
	lhs := r.cols(alias, cols)
	if len(cols) > 1 {
		lhs = "(" + lhs + ")"
	}
	f.s(lhs, " IN (")
	for i, k := range keys {
		if i > 0 {
			f.s(", ")
		}
		if len(cols) > 1 {
			f.s("(")
		}
		for j, v := range k {
			if j > 0 {
				f.s(", ")
			}
			f.arg(v)
		}
		if len(cols) > 1 {
			f.s(")")
		}
	}
	f.s(")")
	return f.done()
}

// conflictGuard is true for a conflicting row of t (read under the table's
// own name, as ON CONFLICT's WHERE and MySQL's locking read see it) that
// lies in scope. It is rendered even where the engine enforces reads
// itself: PostgreSQL's row-level security raises an error, not a miss,
// for a conflicting row its policy hides.
//
// Invariant: the conflicting row is updated only where this is true.
func (r *renderer) conflictGuard(t *sqlast.Table) engine.Frag {
	if guardfault.Off(guardfault.UpsertConflict) {
		return fragTrue
	}
	return r.readGuardWrite(t, t.Name) // byref.go
}

// selectStmt renders "SELECT what FROM t AS t WHERE conds [FOR UPDATE]" with
// the prelude when the conditions test the scope.
func (r *renderer) selectStmt(what engine.Frag, t *sqlast.Table, conds []engine.Frag, lock bool) (engine.Frag, error) {
	var f fb
	r.preludeInto(&f)
	f.s("SELECT ")
	f.frag(what)
	f.s(" FROM ", r.q(t.Name), " AS ", r.q(t.Name), " WHERE ")
	f.frag(and(conds))
	if lock {
		f.s(" FOR UPDATE")
	}
	return r.finishSQL(f.done())
}

// checkStmt renders "SELECT 1 [FROM DUAL] WHERE checks": one row exactly
// when the value checks of a write hold.
func (r *renderer) checkStmt(checks []engine.Frag) (engine.Frag, error) {
	var f fb
	r.preludeInto(&f)
	f.s("SELECT 1")
	if dual := r.d.DualTable(); dual != "" {
		f.s(" FROM ", dual)
	}
	f.s(" WHERE ")
	if len(checks) == 0 {
		f.frag(fragTrue)
	} else {
		f.frag(and(checks))
	}
	return r.finishSQL(f.done())
}

// insertRow is one row of an INSERT with RETURNING or an upsert, rendered.
type insertRow struct {
	ins    engine.Frag // the guarded INSERT (with conflict clause / RETURNING where native)
	check  engine.Frag // SELECT 1 WHERE value checks
	fail   error
	native bool                                    // ins returns the Returns columns itself
	lock   engine.Frag                             // MySQL upsert: SELECT conflictGuard FROM t WHERE target = ... FOR UPDATE
	peek   engine.Frag                             // the same without FOR UPDATE, run first (keyed.go)
	update engine.Frag                             // MySQL upsert: UPDATE of the in-scope conflicting row
	back   func(lastID int64) (engine.Frag, error) // reads the written row back (fallback RETURNING)
	// dupMark: MySQL upsert: a nonce the no-op ON DUPLICATE KEY UPDATE
	// assigns to the session variable dupVar, so that a conflict can be told
	// from an insert when both report one affected row (a connection with
	// CLIENT_FOUND_ROWS counts the unchanged conflicting row).
	dupMark int64
}

// dupVar is the session variable of insertRow.dupMark.
const dupVar = "@tenantmcp_upsert_dup"

func (r *renderer) insertWrites(s *sqlast.Insert) (Plan, error) {
	if s.Source != nil {
		return r.insertSelect(s)
	}
	t := s.Ref.Table
	up := s.Upsert
	style := r.upsertStyle()
	if up != nil && up.Nothing && style != engine.UpsertLocked {
		style = engine.UpsertWhere // DO NOTHING is one statement wherever ON CONFLICT exists
	}
	upNative := up == nil || style == engine.UpsertWhere
	retNative := r.returningOn("insert") && (up == nil || style != engine.UpsertLocked)
	cols := quoteAll(r, s.Cols)
	if len(s.Returning) > 0 && !retNative && up == nil && !t.IsKey(s.Cols) && len(t.PK) != 1 {
		return Plan{}, fmt.Errorf("%w: INSERT into %s ... RETURNING on %s needs the table's key among the inserted columns (the engine has no RETURNING)", ErrRefused, t.Name, r.d.Name())
	}
	if _, rc := r.d.(engine.RefCounter); rc && t.ByRef && len(s.Returning) > 0 {
		// (h4-ref) The new row is visible to no one until referenced; the
		// engine's row-level security will not return it.
		return Plan{}, fmt.Errorf("%w: INSERT into %s ... RETURNING: the table is owned by reference and a new row is visible to no one on %s; insert the key", ErrRefused, t.Name, r.d.Name())
	}
	p := Plan{Kind: Insert, Atomic: true, Returns: s.Returning}
	var rows []insertRow
	for _, row := range s.Rows {
		vals, checks, viaFK, err := r.insertRowChecks(t, s.Cols, row)
		if err != nil {
			return Plan{}, err
		}
		ir := insertRow{fail: ErrOutOfScope}
		if viaFK || t.Parent != nil || up != nil {
			ir.fail = ErrNotFound
		}
		ib := r.checkedInsert(t, cols, row, checks)
		var upd []engine.Frag // SET col = ? of DoUpdate
		var updChecks []engine.Frag
		if up != nil && !up.Nothing {
			uv := map[string]sqlast.Value{}
			for _, c := range up.Update {
				uv[c] = vals[c]
				var f fb
				f.s(r.q(c), " = ")
				f.arg(vals[c].V)
				upd = append(upd, f.done())
			}
			// DoUpdate never assigns a scope column (builder refuses it);
			// checked again here like UPDATE's values, failing closed.
			if updChecks, _, err = r.writeChecks(t, uv, false); err != nil {
				return Plan{}, err
			}
			// (h4-ref) The conflicting row is updated only if every
			// consistency path it keeps leads into the scope (and, owned
			// by reference, if every row referencing it is in scope).
			updChecks = append(updChecks, r.conflictWriteGuard(t, uv)...)
		}
		if up != nil && upNative {
			var f fb
			f.s("ON CONFLICT (", strings.Join(quoteAll(r, up.Target), ", "), ") DO ")
			if up.Nothing {
				f.s("NOTHING")
			} else {
				f.s("UPDATE SET ")
				for i, u := range upd {
					if i > 0 {
						f.s(", ")
					}
					f.frag(u)
				}
				f.s(" WHERE ")
				f.frag(and(append([]engine.Frag{r.conflictGuard(t)}, updChecks...)))
			}
			ib = ib.SuffixExpr(f.done())
		}
		if up != nil && style == engine.UpsertThenUpdate {
			ib = ib.Suffix("ON CONFLICT (" + strings.Join(quoteAll(r, up.Target), ", ") + ") DO NOTHING")
		}
		if up != nil && style == engine.UpsertLocked {
			// A no-op on a conflict: it locks the conflicting row (an
			// exclusive record lock, no gap lock) without changing it.
			c := r.col(t.Name, up.Target[0])
			ir.dupMark = newDupMark()
			// (The assignment is the IF's condition itself: MariaDB folds
			// away a condition such as (@v := ?) IS NULL unevaluated.)
			ib = ib.Suffix("ON DUPLICATE KEY UPDATE "+c+" = IF("+dupVar+" := ?, "+c+", "+c+")", ir.dupMark)
		}
		if retNative && len(s.Returning) > 0 {
			ib = ib.Suffix("RETURNING " + strings.Join(quoteAll(r, s.Returning), ", "))
			ir.native = true
		}
		text, iargs, err := finishBuilder(r, ib)
		if err != nil {
			return Plan{}, err
		}
		ir.ins = engine.Frag{SQL: text, Args: iargs}
		if ir.check, err = r.checkStmt(checks); err != nil {
			return Plan{}, err
		}
		if up != nil && !upNative {
			tv := make([]any, len(up.Target))
			for i, c := range up.Target {
				tv[i] = vals[c].V
			}
			if style == engine.UpsertLocked {
				g := r.conflictGuard(t)
				if !up.Nothing {
					g = and(append([]engine.Frag{g}, r.conflictWriteGuard(t, nil)...)) // (h4-ref)
				}
				if ir.lock, err = r.selectStmt(g, t, []engine.Frag{r.keyEq(t, t.Name, up.Target, tv)}, true); err != nil {
					return Plan{}, err
				}
				if r.byKey() {
					if ir.peek, err = r.selectStmt(g, t, []engine.Frag{r.keyEq(t, t.Name, up.Target, tv)}, false); err != nil {
						return Plan{}, err
					}
				}
			}
			if !up.Nothing {
				var f fb
				f.s("UPDATE ", r.q(t.Name), " SET ")
				for i, u := range upd {
					if i > 0 {
						f.s(", ")
					}
					f.frag(u)
				}
				f.s(" WHERE ")
				f.frag(and(append([]engine.Frag{r.keyEq(t, t.Name, up.Target, tv), r.conflictGuard(t)}, updChecks...)))
				if ir.native {
					f.s(" RETURNING ", strings.Join(quoteAll(r, s.Returning), ", "))
				}
				if ir.update, err = r.finishSQL(f.done()); err != nil {
					return Plan{}, err
				}
			}
		}
		if len(s.Returning) > 0 && !ir.native {
			ir.back = r.readBack(t, s, vals, up)
		}
		rows = append(rows, ir)
		p.Steps = append(p.Steps, Step{SQL: ir.ins.SQL, Args: ir.ins.Args, Expect: ExpectOne, Fail: ir.fail, Returning: ir.native})
	}
	nothing := up != nil && up.Nothing
	p.Run = func(ctx context.Context, env Env) (Output, error) {
		var out Output
		for _, ir := range rows {
			if up != nil && style == engine.UpsertLocked {
				if err := runUpsertFallback(ctx, env, ir, nothing, &out); err != nil {
					return Output{}, err
				}
				continue
			}
			if up != nil && style == engine.UpsertThenUpdate {
				if err := runUpsertThenUpdate(ctx, env, ir, &out); err != nil {
					return Output{}, err
				}
				continue
			}
			if nothing {
				// DO NOTHING affects no row on a conflict, in scope or
				// not: the value checks are run on their own first so that
				// a row refused by them fails rather than passing for a
				// conflict.
				ok, err := queryAny(ctx, env.Q, ir.check)
				if err != nil {
					return Output{}, err
				}
				if !ok {
					return Output{}, fmt.Errorf("%w (insert)", ir.fail)
				}
			}
			n, err := runInsert(ctx, env, ir, &out)
			if err != nil {
				return Output{}, err
			}
			if n == 0 && !nothing {
				return Output{}, fmt.Errorf("%w (insert)", ir.fail)
			}
			if n > 1 {
				return Output{}, fmt.Errorf("%w: %d rows (insert)", env.TooMany, n)
			}
		}
		return out, nil
	}
	return p, nil
}

// insertSelect renders INSERT ... SELECT as a checked two-step plan: the
// guarded SELECT runs first in the transaction, then its rows are inserted
// exactly as rows given to Values would be, each with its own checks.
//
// Invariant: a produced row reaches the table only through the same
// per-row checks as a literal row; one row failing them fails the whole
// statement and the transaction is rolled back.
func (r *renderer) insertSelect(s *sqlast.Insert) (Plan, error) {
	sp, err := r.selectPlan(s.Source)
	if err != nil {
		return Plan{}, err
	}
	q := engine.Frag{SQL: sp.Steps[0].SQL, Args: sp.Steps[0].Args}
	t := s.Ref.Table
	p := Plan{Kind: Insert, Atomic: true, Returns: s.Returning, Steps: sp.Steps}
	p.Run = func(ctx context.Context, env Env) (Output, error) {
		got, err := queryRows(ctx, env.Q, q)
		if err != nil {
			return Output{}, err
		}
		if len(got) == 0 {
			return Output{}, nil
		}
		ins := &sqlast.Insert{Ref: s.Ref, Cols: s.Cols, Returning: s.Returning, Upsert: s.Upsert, Refs: []*sqlast.Ref{s.Ref}}
		if ins.Returning == nil {
			ins.Returning = []string{} // keep the writes path without RETURNING
		}
		for _, row := range got {
			vals := make([]sqlast.Value, len(row))
			for i, v := range row {
				nv, ok := producedValue(t, s.Cols[i], v)
				if !ok {
					return Output{}, fmt.Errorf("%w: INSERT into %s ... SELECT produced a %T for column %s, not a value of its kind", ErrRefused, t.Name, v, s.Cols[i])
				}
				vals[i] = sqlast.Value{V: nv}
			}
			ins.Rows = append(ins.Rows, vals)
		}
		r2 := &renderer{d: r.d, sc: r.sc, seen: map[*sqlast.Ref]bool{s.Ref: true}, opt: r.opt}
		p2, err := r2.insertWrites(ins)
		if err != nil {
			return Output{}, err
		}
		return p2.Run(ctx, env)
	}
	return p, nil
}

// producedValue normalises a value a SELECT produced to a bind value of
// the column's kind.
func producedValue(t *sqlast.Table, col string, v any) (any, bool) {
	switch x := v.(type) {
	case nil, bool, int64, float64, string, time.Time:
	case []byte:
		v = append([]byte(nil), x...)
	case int32:
		v = int64(x)
	case int16:
		v = int64(x)
	case int8:
		v = int64(x)
	case int:
		v = int64(x)
	case float32:
		v = float64(x)
	default:
		return nil, false
	}
	if v == nil {
		return nil, true
	}
	if k := t.ColumnKind(col); k != 0 {
		return sqlast.ConvertValue(k, v)
	}
	return v, true
}

// runInsert runs one row's INSERT, reading it back where the engine has no
// RETURNING, and reports the rows it inserted.
func runInsert(ctx context.Context, env Env, ir insertRow, out *Output) (int64, error) {
	if ir.native {
		got, err := queryRows(ctx, env.Q, ir.ins)
		if err != nil {
			return 0, err
		}
		out.Rows = append(out.Rows, got...)
		out.RowsAffected += int64(len(got))
		return int64(len(got)), nil
	}
	res, err := env.Q.Exec(ctx, ir.ins.SQL, ir.ins.Args...)
	if err != nil {
		return 0, err
	}
	out.RowsAffected += res.RowsAffected
	out.LastInsertID = res.LastInsertID
	if res.RowsAffected == 1 && ir.back != nil {
		if err := readBackInto(ctx, env, ir, res.LastInsertID, out); err != nil {
			return 0, err
		}
	}
	return res.RowsAffected, nil
}

func readBackInto(ctx context.Context, env Env, ir insertRow, lastID int64, out *Output) error {
	q, err := ir.back(lastID)
	if err != nil {
		return err
	}
	got, err := queryRows(ctx, env.Q, q)
	if err != nil {
		return err
	}
	if len(got) != 1 {
		return fmt.Errorf("%w: read back %d rows of a written row", ErrInternal, len(got))
	}
	out.Rows = append(out.Rows, got...)
	return nil
}

// runUpsertFallback runs one row of an upsert where the engine's conflict
// clause cannot test the conflicting row (MySQL): check the values, then
// INSERT ... ON DUPLICATE KEY UPDATE with a no-op assignment, which either
// inserts the row or locks the conflicting one (exclusively, so that two
// callers upserting the same key queue instead of deadlocking), then read
// under that lock whether the row with the target key is in scope, and
// update it or fail. For a row just inserted the update rewrites the
// values it was inserted with.
func runUpsertFallback(ctx context.Context, env Env, ir insertRow, nothing bool, out *Output) error {
	ok, err := queryAny(ctx, env.Q, ir.check)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("%w (insert)", ir.fail)
	}
	if !ir.peek.IsZero() {
		// Keyed dialect (keyed.go): a committed conflicting row outside
		// the scope is answered now, without the INSERT, which would lock
		// it (and wait while its tenant holds it).
		got, err := queryRows(ctx, env.Q, ir.peek)
		if err != nil {
			return err
		}
		if len(got) == 1 && !truthy(got[0][0]) {
			if nothing {
				return nil
			}
			return fmt.Errorf("%w (insert)", ir.fail)
		}
	}
	res, err := env.Q.Exec(ctx, ir.ins.SQL, ir.ins.Args...)
	if err != nil {
		return err
	}
	inserted := res.RowsAffected == 1
	if inserted && ir.dupMark != 0 {
		// One affected row is an insert, or, with CLIENT_FOUND_ROWS, the
		// conflicting row found and left unchanged: the latter set the mark.
		mark, err := queryRows(ctx, env.Q, engine.Frag{SQL: "SELECT " + dupVar})
		if err != nil {
			return err
		}
		if len(mark) == 1 && len(mark[0]) == 1 && markIs(mark[0][0], ir.dupMark) {
			inserted = false
		}
	}
	got, err := queryRows(ctx, env.Q, ir.lock)
	if err != nil {
		return err
	}
	switch {
	case len(got) == 0:
		// ON DUPLICATE KEY fired on another unique key than the target.
		return fmt.Errorf("%w: the row conflicts on another unique key than the upsert's target", ErrRefused)
	case len(got) > 1:
		return fmt.Errorf("%w: conflict target matched %d rows", ErrInternal, len(got))
	case nothing:
		if inserted {
			out.RowsAffected++
			out.LastInsertID = res.LastInsertID
			if ir.back != nil {
				return readBackInto(ctx, env, ir, res.LastInsertID, out)
			}
		}
		return nil // a conflict, in scope or not: nothing happens
	case !truthy(got[0][0]):
		// Invariant: a conflicting row outside the scope is left
		// untouched (the no-op assignment changes nothing) and reported
		// like a missing row.
		return fmt.Errorf("%w (insert)", ir.fail)
	}
	if _, err := env.Q.Exec(ctx, ir.update.SQL, ir.update.Args...); err != nil {
		return err
	}
	out.RowsAffected++
	out.LastInsertID = res.LastInsertID
	if ir.back != nil {
		return readBackInto(ctx, env, ir, 0, out)
	}
	return nil
}

// runUpsertThenUpdate runs one row of an upsert as INSERT ... ON CONFLICT
// DO NOTHING, then, on a conflict, the guarded UPDATE of the conflicting
// row: a row outside the scope is not updated, and the upsert fails with
// the row's error (ErrNotFound).
func runUpsertThenUpdate(ctx context.Context, env Env, ir insertRow, out *Output) error {
	ok, err := queryAny(ctx, env.Q, ir.check)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("%w (insert)", ir.fail)
	}
	n, err := runInsert(ctx, env, ir, out)
	if err != nil || n == 1 {
		return err
	}
	if ir.native {
		got, err := queryRows(ctx, env.Q, ir.update)
		if err != nil {
			return err
		}
		n = int64(len(got))
		if n == 1 {
			out.Rows = append(out.Rows, got...)
		}
	} else {
		res, err := env.Q.Exec(ctx, ir.update.SQL, ir.update.Args...)
		if err != nil {
			return err
		}
		n = res.RowsAffected
	}
	if n != 1 {
		// Invariant: a conflicting row outside the scope is left
		// untouched and reported like a missing row.
		return fmt.Errorf("%w (insert)", ir.fail)
	}
	out.RowsAffected++
	return nil
}

// readBack returns the function rendering the read-back of one inserted or
// upserted row by its key: the conflict target, the primary key among the
// inserted columns, or else the insert id of a one-column key.
func (r *renderer) readBack(t *sqlast.Table, s *sqlast.Insert, vals map[string]sqlast.Value, up *sqlast.Upsert) func(int64) (engine.Frag, error) {
	var key []string
	switch {
	case up != nil:
		key = up.Target
	case isSubset(t.PK, s.Cols):
		key = t.PK
	default:
		for _, u := range t.Unique {
			if isSubset(u, s.Cols) {
				key = u
				break
			}
		}
	}
	kv := make([]any, len(key))
	for i, c := range key {
		kv[i] = vals[c].V
	}
	g := r.conflictGuard(t)
	if t.ByRef {
		g = r.readBackGuard(t) // (h4-ref) byref.go
	}
	what := engine.Frag{SQL: strings.Join(quoteAll(r, s.Returning), ", ")}
	return func(lastID int64) (engine.Frag, error) {
		cols, v := key, kv
		if cols == nil {
			if len(t.PK) != 1 || lastID == 0 {
				return engine.Frag{}, fmt.Errorf("%w: INSERT into %s ... RETURNING on %s: the engine reported no insert id to read the row back by; insert the key", ErrRefused, t.Name, r.d.Name())
			}
			cols, v = t.PK, []any{lastID}
		}
		return r.selectStmt(what, t, []engine.Frag{r.keyEq(t, t.Name, cols, v), g}, false)
	}
}

// sqBuilder is what finishBuilder and nativeReturning need of squirrel's
// INSERT, UPDATE and DELETE builders.
type sqBuilder[B any] interface {
	Suffix(sql string, args ...any) B
	PrefixExpr(e sq.Sqlizer) B
	PlaceholderFormat(f sq.PlaceholderFormat) B
	ToSql() (string, []any, error)
}

// finishBuilder renders b with the scope prelude when the statement tests
// the scope, in the dialect's placeholder format.
func finishBuilder[B sqBuilder[B]](r *renderer, b B) (string, []any, error) {
	if pre, ok := r.prelude(); ok {
		b = b.PrefixExpr(pre)
	}
	text, args, err := b.PlaceholderFormat(r.d.Placeholders()).ToSql()
	if err != nil {
		return "", nil, fmt.Errorf("%w: %v", ErrInternal, err)
	}
	return text, args, nil
}

// nativeReturning finishes p as one guarded UPDATE or DELETE ... RETURNING
// what, run as a query whose rows are the written rows (all in scope: the
// statement carries the guard), with p.Kind's ExpectOne rule.
func nativeReturning[B sqBuilder[B]](r *renderer, b B, what string, p Plan, expectOne bool) (Plan, error) {
	text, args, err := finishBuilder(r, b.Suffix("RETURNING "+what))
	if err != nil {
		return Plan{}, err
	}
	q := engine.Frag{SQL: text, Args: args}
	p.Steps = []Step{{SQL: text, Args: args, Fail: ErrNotFound, Returning: true}}
	p.Run = func(ctx context.Context, env Env) (Output, error) {
		got, err := queryRows(ctx, env.Q, q)
		if err != nil {
			return Output{}, err
		}
		return expectRows(env, expectOne, p.Kind.String(), Output{RowsAffected: int64(len(got)), Rows: got})
	}
	return p, nil
}

// updateReturning renders an UPDATE ... RETURNING: natively, or as the
// locked fallback (keys of the rows in scope, the UPDATE confined to them,
// the rows read back by those keys).
func (r *renderer) updateReturning(s *sqlast.Update, ub sq.UpdateBuilder, w, g engine.Frag, checks []engine.Frag) (Plan, error) {
	t := s.Ref.Table
	what := strings.Join(quoteAll(r, s.Returning), ", ")
	p := Plan{Kind: Update, Atomic: true, Returns: s.Returning}
	if r.returningOn("update") {
		return nativeReturning(r, ub, what, p, s.ExpectOne)
	}
	if len(t.PK) == 0 {
		return Plan{}, fmt.Errorf("%w: UPDATE of %s ... RETURNING on %s needs a primary key (the engine has no UPDATE ... RETURNING)", ErrRefused, t.Name, r.d.Name())
	}
	for _, a := range s.Set {
		if isSubset([]string{a.Col}, t.PK) {
			return Plan{}, fmt.Errorf("%w: UPDATE of %s ... RETURNING on %s cannot change the primary key (the engine has no UPDATE ... RETURNING)", ErrRefused, t.Name, r.d.Name())
		}
	}
	lock, err := r.selectStmt(engine.Frag{SQL: r.cols(t.Name, t.PK)}, t, []engine.Frag{paren(w), g}, true)
	if err != nil {
		return Plan{}, err
	}
	check, err := r.checkStmt(checks)
	if err != nil {
		return Plan{}, err
	}
	setF, err := r.setClause(s) // keyed.go
	if err != nil {
		return Plan{}, err
	}
	g2 := r.conflictGuard(t)
	if r.opt.EngineEnforcesReads {
		g2 = g
	}
	p.Steps = []Step{{SQL: lock.SQL, Args: lock.Args}}
	p.Run = func(ctx context.Context, env Env) (Output, error) {
		keys, err := queryRows(ctx, env.Q, lock)
		if err != nil {
			return Output{}, err
		}
		if len(keys) > 0 {
			// The value checks do not depend on the row: run once, they
			// decide for all rows, as in the single UPDATE statement.
			ok, err := queryAny(ctx, env.Q, check)
			if err != nil {
				return Output{}, err
			}
			if !ok {
				keys = nil
			}
		}
		if _, err := expectRows(env, s.ExpectOne, "update", Output{RowsAffected: int64(len(keys))}); err != nil {
			return Output{}, err
		}
		if len(keys) == 0 {
			return Output{}, nil
		}
		in := r.keysIn(t.Name, t.PK, keys)
		var f fb
		f.s("UPDATE ", r.q(t.Name), " SET ")
		f.frag(setF)
		f.s(" WHERE ")
		f.frag(and([]engine.Frag{in, paren(w), g}))
		upd, err := r.finishSQL(f.done())
		if err != nil {
			return Output{}, err
		}
		if _, err := env.Q.Exec(ctx, upd.SQL, upd.Args...); err != nil {
			return Output{}, err
		}
		back, err := r.selectStmt(engine.Frag{SQL: what}, t, []engine.Frag{in, g2}, false)
		if err != nil {
			return Output{}, err
		}
		got, err := queryRows(ctx, env.Q, back)
		if err != nil {
			return Output{}, err
		}
		return Output{RowsAffected: int64(len(keys)), Rows: got}, nil
	}
	return p, nil
}

// deleteReturning renders a DELETE ... RETURNING: natively, or as the
// locked fallback (the rows in scope read and locked, then deleted by key).
func (r *renderer) deleteReturning(s *sqlast.Delete, db sq.DeleteBuilder, w, g engine.Frag) (Plan, error) {
	t := s.Ref.Table
	what := strings.Join(quoteAll(r, s.Returning), ", ")
	p := Plan{Kind: Delete, Atomic: true, Returns: s.Returning}
	if r.returningOn("delete") {
		return nativeReturning(r, db, what, p, s.ExpectOne)
	}
	if len(t.PK) == 0 {
		return Plan{}, fmt.Errorf("%w: DELETE from %s ... RETURNING on %s needs a primary key (the engine has no DELETE ... RETURNING)", ErrRefused, t.Name, r.d.Name())
	}
	lock, err := r.selectStmt(engine.Frag{SQL: r.cols(t.Name, t.PK) + ", " + what}, t, []engine.Frag{paren(w), g}, true)
	if err != nil {
		return Plan{}, err
	}
	nk := len(t.PK)
	p.Steps = []Step{{SQL: lock.SQL, Args: lock.Args}}
	p.Run = func(ctx context.Context, env Env) (Output, error) {
		got, err := queryRows(ctx, env.Q, lock)
		if err != nil {
			return Output{}, err
		}
		if _, err := expectRows(env, s.ExpectOne, "delete", Output{RowsAffected: int64(len(got))}); err != nil {
			return Output{}, err
		}
		if len(got) == 0 {
			return Output{}, nil
		}
		keys := make([][]any, len(got))
		out := Output{RowsAffected: int64(len(got))}
		for i, row := range got {
			keys[i] = row[:nk]
			out.Rows = append(out.Rows, row[nk:])
		}
		var f fb
		f.s("DELETE FROM ", r.q(t.Name), " WHERE ")
		f.frag(and([]engine.Frag{r.keysIn(t.Name, t.PK, keys), paren(w), g}))
		del, err := r.finishSQL(f.done())
		if err != nil {
			return Output{}, err
		}
		res, err := env.Q.Exec(ctx, del.SQL, del.Args...)
		if err != nil {
			return Output{}, err
		}
		if res.RowsAffected != int64(len(got)) {
			return Output{}, fmt.Errorf("%w: deleted %d of %d locked rows", ErrInternal, res.RowsAffected, len(got))
		}
		return out, nil
	}
	return p, nil
}

// expectRows applies ExpectOne to a write's row count.
func expectRows(env Env, one bool, kind string, out Output) (Output, error) {
	if !one {
		return out, nil
	}
	switch {
	case out.RowsAffected == 0:
		return Output{}, fmt.Errorf("%w (%s)", ErrNotFound, kind)
	case out.RowsAffected > 1:
		return Output{}, fmt.Errorf("%w: %d rows (%s)", env.TooMany, out.RowsAffected, kind)
	}
	return out, nil
}

// queryRows runs q and returns every row, each column scanned into an any.
func queryRows(ctx context.Context, q engine.Querier, f engine.Frag) ([][]any, error) {
	rows, err := q.Query(ctx, f.SQL, f.Args...)
	if err != nil {
		return nil, err
	}
	cols, err := rows.Columns()
	if err != nil {
		return nil, errors.Join(err, rows.Close())
	}
	var out [][]any
	for rows.Next() {
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			return nil, errors.Join(err, rows.Close())
		}
		out = append(out, vals)
	}
	if err := rows.Err(); err != nil {
		return nil, errors.Join(err, rows.Close())
	}
	return out, rows.Close()
}

// queryAny reports whether q returns a row.
func queryAny(ctx context.Context, q engine.Querier, f engine.Frag) (bool, error) {
	got, err := queryRows(ctx, q, f)
	return len(got) > 0, err
}

// newDupMark returns a fresh non-zero nonce for insertRow.dupMark (an
// integer: a string would be converted to a number as the IF's condition,
// with a warning): a mark left in the session by an earlier statement
// equals it with probability 2^-62.
func newDupMark() int64 {
	var b [8]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	return int64(binary.BigEndian.Uint64(b[:])>>2) | 1
}

// markIs reports whether v, the session variable as the driver returns it,
// is the nonce m.
func markIs(v any, m int64) bool {
	switch x := v.(type) {
	case int64:
		return x == m
	case []byte:
		n, err := strconv.ParseInt(string(x), 10, 64)
		return err == nil && n == m
	}
	return false
}

// truthy reads a boolean the engine returned as a column: MySQL sends 0/1
// as an integer or as its text.
func truthy(v any) bool {
	switch x := v.(type) {
	case bool:
		return x
	case int64:
		return x != 0
	case []byte:
		n, err := strconv.ParseInt(string(x), 10, 64)
		return err == nil && n != 0
	case string:
		n, err := strconv.ParseInt(x, 10, 64)
		return err == nil && n != 0
	}
	return false
}

func quoteAll(r *renderer, cols []string) []string {
	out := make([]string, len(cols))
	for i, c := range cols {
		out[i] = r.q(c)
	}
	return out
}

func isSubset(a, b []string) bool {
	if len(a) == 0 {
		return false
	}
	for _, x := range a {
		found := false
		for _, y := range b {
			if x == y {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
}
