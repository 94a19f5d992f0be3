package guard

import (
	"context"
	"fmt"
	"strings"

	"github.com/tenantmcp/tenantmcp/guardedsql/internal/engine"
	"github.com/tenantmcp/tenantmcp/internal/sqlast"
)

// Issue 26 §1: a lock is never an oracle or a lever across tenants.
//
// InnoDB (MySQL, MariaDB) locks a row when a write or a locking read reads
// it, before the server tests the statement's WHERE: a guarded UPDATE
// naming another tenant's row waits for that tenant's lock (and answers
// "timed out" where a missing id answers "not found" at once), and under
// REPEATABLE READ keeps locks on the other tenants' rows it scanned. On a
// engine.KeyedWriter the guard therefore splits such a statement in two,
// in one READ COMMITTED transaction (package mysql's GuardedIsolation):
//
//  1. a non-locking read of the primary keys of the rows in scope that the
//     statement names (the caller's condition and the guard: a consistent
//     read, which never waits for a lock);
//  2. the write, or the locking read, confined to exactly those keys, the
//     caller's condition and the guard still in the statement.
//
// Invariant: a guarded write or locking read on a keyed dialect reads
// rows by primary key only among keys that the non-locking, guarded read
// found in scope, so it never waits for nor takes a lock on a row outside
// the scope (a row that left the scope in between is re-tested by the
// guard in the statement itself).
//
// A lock wait timeout in step 2 (on an own row another transaction of the
// same scope holds) is answered as a miss only when the non-locking
// re-read then finds none of the keys in scope: the row left the scope
// or was deleted meanwhile.

// byKey reports whether writes and locking reads go by key (KeyedWriter).
func (r *renderer) byKey() bool {
	kw, ok := r.d.(engine.KeyedWriter)
	return ok && kw.WritesByKey() && !r.noKeyed
}

// keyedWrite renders an UPDATE (set non-zero) or DELETE of ref's table
// with condition w and guard g (and the UPDATE's value checks) as the two
// steps above, with RETURNING of returning (nil for none), and with
// expectOne the probe (sharedProbe) for a row the write guard wg held back.
func (r *renderer) keyedWrite(kind Kind, ref *sqlast.Ref, set engine.Frag, w, g engine.Frag, wg, checks []engine.Frag, returning []string, expectOne bool) (Plan, error) {
	t := ref.Table
	probe, err := r.expectProbe(expectOne, ref, w, wg)
	if err != nil {
		return Plan{}, err
	}
	pre, err := r.selectStmt(engine.Frag{SQL: r.cols(t.Name, t.PK)}, t, []engine.Frag{paren(w), g}, false)
	if err != nil {
		return Plan{}, err
	}
	what := strings.Join(quoteAll(r, returning), ", ")
	nativeRet := returning != nil && r.returningOn(kind.String())
	p := Plan{Kind: kind, Atomic: true, Returns: returning, Steps: []Step{{SQL: pre.SQL, Args: pre.Args}}}
	if kind == Update && returning != nil && !nativeRet {
		// The rows are read back by key after the UPDATE: the key must
		// not change.
		for _, c := range t.PK {
			if strings.Contains(set.SQL, r.q(c)+" = ") {
				return Plan{}, fmt.Errorf("%w: UPDATE of %s ... RETURNING on %s cannot change the primary key (the engine has no UPDATE ... RETURNING)", ErrRefused, t.Name, r.d.Name())
			}
		}
	}
	g2 := r.conflictGuard(t)
	if r.opt.EngineEnforcesReads {
		g2 = g
	}
	// stmt renders step 2 for keys.
	stmt := func(keys [][]any) (engine.Frag, error) {
		var f fb
		r.preludeInto(&f)
		if kind == Update {
			f.s("UPDATE ", r.q(t.Name), " SET ")
			f.frag(set)
		} else {
			f.s("DELETE FROM ", r.q(t.Name))
		}
		f.s(" WHERE ")
		f.frag(and(append([]engine.Frag{r.keysIn(t.Name, t.PK, keys), paren(w), g}, checks...)))
		if nativeRet {
			f.s(" RETURNING ", what)
		}
		return r.finishSQL(f.done())
	}
	miss := func(ctx context.Context, env Env) (Output, error) {
		if expectOne && probe.SQL != "" {
			// A row in scope held back by its write guard (byref.go)
			// answers ErrSharedRow, as in the one-statement plan.
			found, err := queryRows(ctx, env.Q, probe)
			if err != nil {
				return Output{}, err
			}
			if len(found) > 0 {
				return Output{}, fmt.Errorf("%w (%s)", ErrSharedRow, kind)
			}
		}
		if expectOne {
			return Output{}, fmt.Errorf("%w (%s)", ErrNotFound, kind)
		}
		return Output{}, nil
	}
	p.Run = func(ctx context.Context, env Env) (Output, error) {
		keys, err := queryRows(ctx, env.Q, pre)
		if err != nil {
			return Output{}, err
		}
		if expectOne && len(keys) > 1 {
			// The error of the one-statement plan (guardedsql's
			// ambiguousWrite): no count.
			return Output{}, fmt.Errorf("%w (%s)", env.TooMany, kind)
		}
		if expectOne && len(keys) == 0 {
			return miss(ctx, env)
		}
		if len(keys) == 0 {
			return Output{}, nil
		}
		if kind == Delete && returning != nil && !nativeRet {
			// MySQL 8: the rows to return, locked by key first.
			lock, err := r.selectStmt(engine.Frag{SQL: what}, t, []engine.Frag{r.keysIn(t.Name, t.PK, keys), paren(w), g}, true)
			if err != nil {
				return Output{}, err
			}
			got, err := queryRows(ctx, env.Q, lock)
			if err != nil {
				return Output{}, err
			}
			out, err := r.keyedExec(ctx, env, stmt, keys, pre, miss)
			if err != nil || out.RowsAffected == 0 {
				return out, err
			}
			out.Rows = got
			return out, nil
		}
		if nativeRet {
			q, err := stmt(keys)
			if err != nil {
				return Output{}, err
			}
			got, err := queryRows(ctx, env.Q, q)
			if err != nil {
				return r.keyedTimeout(ctx, env, err, pre, miss)
			}
			if expectOne && len(got) == 0 {
				return miss(ctx, env)
			}
			return Output{RowsAffected: int64(len(got)), Rows: got}, nil
		}
		out, err := r.keyedExec(ctx, env, stmt, keys, pre, miss)
		if err != nil || returning == nil || out.RowsAffected == 0 {
			return out, err
		}
		back, err := r.selectStmt(engine.Frag{SQL: what}, t, []engine.Frag{r.keysIn(t.Name, t.PK, keys), g2}, false)
		if err != nil {
			return Output{}, err
		}
		if out.Rows, err = queryRows(ctx, env.Q, back); err != nil {
			return Output{}, err
		}
		return out, nil
	}
	return p, nil
}

// setClause renders the SET list of s ("a = ?, b = <expr>").
func (r *renderer) setClause(s *sqlast.Update) (engine.Frag, error) {
	var set fb
	for i, a := range s.Set {
		if i > 0 {
			set.s(", ")
		}
		set.s(r.q(a.Col), " = ")
		if a.X != nil {
			// SetExpr: checked by setExpr when updatePlan rendered the
			// statement (not a scope column, reads the target's row only).
			if err := r.exprInto(&set, a.X); err != nil {
				return engine.Frag{}, err
			}
			continue
		}
		set.arg(a.V.V)
	}
	return set.done(), nil
}

// keyedExec runs step 2 for keys and applies ExpectOne to what it wrote.
func (r *renderer) keyedExec(ctx context.Context, env Env, stmt func([][]any) (engine.Frag, error), keys [][]any, pre engine.Frag, miss func(context.Context, Env) (Output, error)) (Output, error) {
	q, err := stmt(keys)
	if err != nil {
		return Output{}, err
	}
	res, err := env.Q.Exec(ctx, q.SQL, q.Args...)
	if err != nil {
		return r.keyedTimeout(ctx, env, err, pre, miss)
	}
	if res.RowsAffected == 0 {
		// The row left the scope (or was deleted) after step 1.
		return miss(ctx, env)
	}
	return Output{RowsAffected: res.RowsAffected}, nil
}

// keyedTimeout answers a failed step 2: a lock wait timeout is a miss
// when the non-locking re-read finds none of the rows in scope any more;
// every other error, and a timeout on a row still in scope, is returned.
func (r *renderer) keyedTimeout(ctx context.Context, env Env, err error, pre engine.Frag, miss func(context.Context, Env) (Output, error)) (Output, error) {
	if env.Timeout == nil || !env.Timeout(err) {
		return Output{}, err
	}
	again, rerr := queryRows(ctx, env.Q, pre)
	if rerr != nil || len(again) > 0 {
		return Output{}, err
	}
	return miss(ctx, env)
}

// keyedLock returns, for a locking SELECT s on a keyed dialect, the
// function that runs step 1 (the keys of the rows in scope of its FROM
// table and inner-joined tables, read without locking) and renders step 2
// (s confined to those keys); nil when s has no such table (nothing
// locks) or groups its rows (no key per row).
func (r *renderer) keyedLock(s *sqlast.Select) (func(ctx context.Context, q engine.Querier) (Step, error), error) {
	if !r.byKey() || s.Lock == sqlast.NoLock || len(s.GroupBy) > 0 || s.Having != nil || len(s.With) > 0 {
		return nil, nil
	}
	var refs []*sqlast.Ref
	keyed := func(ref *sqlast.Ref) bool {
		return !ref.Virtual() && !ref.Table.Global && len(ref.Table.PK) > 0
	}
	if keyed(s.From) {
		refs = append(refs, s.From)
	}
	for _, j := range s.Joins {
		if j.Kind == sqlast.InnerJoin && keyed(j.Ref) {
			refs = append(refs, j.Ref)
		}
	}
	if len(refs) == 0 {
		return nil, nil
	}
	pre := *s
	pre.Lock, pre.Distinct, pre.Items = sqlast.NoLock, false, nil
	for _, ref := range refs {
		for _, c := range ref.Table.PK {
			pre.Items = append(pre.Items, sqlast.Item{X: &sqlast.Col{Ref: ref, Name: c}})
		}
	}
	fresh := func() *renderer {
		return &renderer{d: r.d, sc: r.sc, seen: map[*sqlast.Ref]bool{}, opt: r.opt, noKeyed: true}
	}
	pp, err := fresh().selectPlan(&pre)
	if err != nil {
		return nil, err
	}
	preStep := pp.Steps[0]
	return func(ctx context.Context, q engine.Querier) (Step, error) {
		got, err := queryRows(ctx, q, engine.Frag{SQL: preStep.SQL, Args: preStep.Args})
		if err != nil {
			return Step{}, err
		}
		conf := []sqlast.Pred{}
		if s.Where != nil {
			conf = append(conf, s.Where)
		}
		i := 0
		for _, ref := range refs {
			n := len(ref.Table.PK)
			var alts []sqlast.Pred
			for _, row := range got {
				var eqs []sqlast.Pred
				for k, c := range ref.Table.PK {
					v, ok := producedValue(ref.Table, c, row[i+k])
					if !ok {
						return Step{}, fmt.Errorf("%w: key of %s read as a %T", ErrInternal, ref.Table.Name, row[i+k])
					}
					eqs = append(eqs, &sqlast.CmpVal{Op: sqlast.Eq, X: &sqlast.Col{Ref: ref, Name: c}, V: sqlast.Value{V: v}})
				}
				alts = append(alts, &sqlast.And{Ps: eqs})
			}
			conf = append(conf, &sqlast.Or{Ps: alts}) // empty: false, nothing read or locked
			i += n
		}
		locked := *s
		locked.Where = &sqlast.And{Ps: conf}
		// By the primary key: reading only columns a secondary index
		// covers, InnoDB share-locks that index's records and not the
		// row's, and a FOR SHARE then held back no FOR UPDATE of the same
		// row (Invoice Ninja probe: ids read while another transaction
		// held one of them for update).
		lr := fresh()
		lr.byPK = map[*sqlast.Ref]bool{}
		for _, ref := range refs {
			lr.byPK[ref] = true
		}
		lp, err := lr.selectPlan(&locked)
		if err != nil {
			return Step{}, err
		}
		return lp.Steps[0], nil
	}, nil
}
