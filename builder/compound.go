package builder

import (
	"slices"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/tenantmcp/tenantmcp/internal/sqlast"
)

// This file builds the read structure of a query beyond one SELECT:
// derived tables ([Derived]), common table expressions ([With]), set
// operations ([Union], [UnionAll], [Intersect], [Except]) and locking reads
// ([SelectBuilder.ForUpdate], [SelectBuilder.ForShare]).
//
// Invariant: every table reference inside a derived table's body, a CTE's
// body or a set operation's branch is registered in the Refs of the
// statement that holds it (scopeCheck.body), so the guard, which refuses a
// statement unless it guarded each of its Refs, confines all of them.

// Derived returns a reference to the result of q as a table under alias,
// for From or Join: a derived table (a subquery in FROM). Its columns are
// q's result names (the As name, or the column's own name), checked by
// Col. The reference itself is not a schema table and carries no tenant
// predicate; the schema tables inside q are guarded as in any subquery. q
// must not be correlated, hold a WITH or lock rows; each Derived value is
// one reference (build q again for a second one).
func Derived(q Query, alias string) TableRef {
	if q.s == nil {
		return TableRef{err: invalid("zero Query used in Derived")}
	}
	if !validAlias(alias) {
		return TableRef{err: invalid("alias %q for a derived table is not a valid identifier (letters, digits, '_', not starting with '_')", alias)}
	}
	b, err := bodyOf([]*sqlast.Select{q.s}, nil)
	if err != nil {
		return TableRef{err: err}
	}
	return TableRef{ref: &sqlast.Ref{Table: virtualTable(alias, b), Alias: alias, Derived: b}}
}

// CTE is a named, non-recursive common table expression made by [With].
// Add it to the outermost query with [SelectBuilder.With] (or
// [SetBuilder.With]) and read it through [CTE.Ref] or [CTE.As]. RECURSIVE
// is not offered: a CTE's body can only read CTEs declared before it.
type CTE struct {
	c   *sqlast.CTE
	err error
}

// With names the result of q as a common table expression. The name
// follows the alias rules and must not be the name of a schema table
// (guardedsql refuses a CTE that would shadow one). q must not be
// correlated, hold a WITH of its own or lock rows.
func With(name string, q Query) CTE {
	if q.s == nil {
		return CTE{err: invalid("zero Query used in With")}
	}
	if !validAlias(name) {
		return CTE{err: invalid("CTE name %q is not a valid identifier (letters, digits, '_', not starting with '_')", name)}
	}
	b, err := bodyOf([]*sqlast.Select{q.s}, nil)
	if err != nil {
		return CTE{err: err}
	}
	return CTE{c: &sqlast.CTE{Name: name, Body: b}}
}

// Name is the CTE's name ("" for an invalid one).
func (c CTE) Name() string {
	if c.c == nil {
		return ""
	}
	return c.c.Name
}

// Ref returns a reference to the CTE aliased by its own name.
func (c CTE) Ref() TableRef {
	if c.err != nil {
		return TableRef{err: c.err}
	}
	if c.c == nil {
		return TableRef{err: invalid("zero CTE")}
	}
	return TableRef{ref: &sqlast.Ref{Table: virtualTable(c.c.Name, c.c.Body), Alias: c.c.Name, CTE: c.c}}
}

// As returns a reference to the CTE under alias (for a second reference
// to it in one statement).
func (c CTE) As(alias string) TableRef {
	t := c.Ref()
	if t.err != nil {
		return t
	}
	if !validAlias(alias) {
		return TableRef{err: invalid("alias %q for CTE %s is not a valid identifier", alias, c.c.Name)}
	}
	t.ref.Alias = alias
	return t
}

// With adds common table expressions to the query, in order: a CTE's body
// may read the CTEs before it. Only the outermost query may hold a WITH.
func (b SelectBuilder) With(ctes ...CTE) SelectBuilder {
	for _, c := range ctes {
		if c.err != nil {
			b.err = c.err
		} else if c.c == nil {
			b.err = invalid("zero CTE in With")
		}
	}
	b.with = append(slices.Clip(b.with), ctes...)
	return b
}

// ForUpdate makes the query lock the rows it reads until the transaction
// ends (SELECT ... FOR UPDATE), so that a read-modify-write in DB.Tx loses
// no concurrent update. guardedsql refuses it outside a transaction. On
// PostgreSQL only the rows of the query's own FROM and inner-joined tables
// are locked (FOR UPDATE OF), not the parent rows the guard reads to test
// the scope; MariaDB/MySQL lock every row read; SQLite has no row locks and
// needs none: its transactions take the database's write lock at BEGIN.
// DISTINCT, GROUP BY, HAVING and aggregates are refused with it (PostgreSQL
// cannot lock grouped rows).
func (b SelectBuilder) ForUpdate() SelectBuilder { b.lock = sqlast.LockUpdate; return b }

// ForShare is [SelectBuilder.ForUpdate] with a shared lock (FOR SHARE;
// LOCK IN SHARE MODE on MariaDB/MySQL): other transactions may read but
// not change the rows until this one ends.
func (b SelectBuilder) ForShare() SelectBuilder { b.lock = sqlast.LockShare; return b }

// SetBuilder assembles a set operation over queries: branches joined left
// to right by UNION, UNION ALL, INTERSECT or EXCEPT, with ORDER BY, LIMIT
// and OFFSET over the whole result. Like [SelectBuilder] it is an
// immutable value. Build returns a [Query] usable everywhere a Query is:
// run on its own, as a subquery, in [Derived] or [With].
type SetBuilder struct {
	branches []Query
	ops      []sqlast.SetOp
	with     []CTE
	order    []setOrder
	limit    int64
	offset   int64
	err      error
}

type setOrder struct {
	col  string
	desc bool
}

func newSet(op sqlast.SetOp, qs []Query) SetBuilder {
	b := SetBuilder{limit: -1, offset: -1}
	if len(qs) < 2 {
		b.err = invalid("%s needs at least two queries, got %d", op, len(qs))
	}
	for i, q := range qs {
		b.branches = append(b.branches, q)
		if i > 0 {
			b.ops = append(b.ops, op)
		}
	}
	return b
}

// Union is q1 UNION q2 UNION ...: the distinct rows of all queries.
func Union(qs ...Query) SetBuilder { return newSet(sqlast.Union, qs) }

// UnionAll is q1 UNION ALL q2 ...: all rows of all queries.
func UnionAll(qs ...Query) SetBuilder { return newSet(sqlast.UnionAll, qs) }

// Intersect is q1 INTERSECT q2 ...: the distinct rows every query returns.
func Intersect(qs ...Query) SetBuilder { return newSet(sqlast.Intersect, qs) }

// Except is q1 EXCEPT q2: the distinct rows of q1 that q2 does not return.
func Except(q1, q2 Query) SetBuilder { return newSet(sqlast.Except, []Query{q1, q2}) }

func (b SetBuilder) then(op sqlast.SetOp, q Query) SetBuilder {
	b.branches = append(slices.Clip(b.branches), q)
	b.ops = append(slices.Clip(b.ops), op)
	return b
}

// Union appends UNION q.
func (b SetBuilder) Union(q Query) SetBuilder { return b.then(sqlast.Union, q) }

// UnionAll appends UNION ALL q.
func (b SetBuilder) UnionAll(q Query) SetBuilder { return b.then(sqlast.UnionAll, q) }

// Intersect appends INTERSECT q. INTERSECT cannot be mixed with the other
// operators in one SetBuilder (engines disagree on its precedence); put
// one side in a [Derived] table instead.
func (b SetBuilder) Intersect(q Query) SetBuilder { return b.then(sqlast.Intersect, q) }

// Except appends EXCEPT q.
func (b SetBuilder) Except(q Query) SetBuilder { return b.then(sqlast.Except, q) }

// With adds common table expressions the branches may read.
func (b SetBuilder) With(ctes ...CTE) SetBuilder {
	b.with = append(slices.Clip(b.with), ctes...)
	return b
}

// Asc orders the whole result by its column col, ascending.
func (b SetBuilder) Asc(col string) SetBuilder {
	b.order = append(slices.Clip(b.order), setOrder{col: col})
	return b
}

// Desc orders the whole result by its column col, descending.
func (b SetBuilder) Desc(col string) SetBuilder {
	b.order = append(slices.Clip(b.order), setOrder{col: col, desc: true})
	return b
}

// Limit caps the number of rows of the whole result.
func (b SetBuilder) Limit(n int) SetBuilder {
	if n < 0 {
		b.err = invalid("negative limit %d", n)
	}
	b.limit = int64(n)
	return b
}

// Offset skips n rows of the whole result; it requires Limit.
func (b SetBuilder) Offset(n int) SetBuilder {
	if n < 0 {
		b.err = invalid("negative offset %d", n)
	}
	b.offset = int64(n)
	return b
}

// setSeq numbers the aliases of set operations' wrappers: aliases must be
// unique across a statement tree, and user aliases cannot start with '_'.
var setSeq atomic.Uint64

// Build checks the branches (each built, uncorrelated, without WITH or a
// lock, all with as many result columns as the first, whose names name the
// result) and seals the set operation as SELECT <cols> FROM (<branches>)
// AS _tmsetN, with the ordering and limits on the outer query.
func (b SetBuilder) Build() (Query, error) {
	if b.err != nil {
		return Query{}, b.err
	}
	sels := make([]*sqlast.Select, len(b.branches))
	for i, q := range b.branches {
		if q.s == nil {
			return Query{}, invalid("zero Query as branch %d of a set operation", i+1)
		}
		sels[i] = q.s
	}
	body, err := bodyOf(sels, b.ops)
	if err != nil {
		return Query{}, err
	}
	alias := "_tmset" + strconv.FormatUint(setSeq.Add(1), 10)
	w := TableRef{ref: &sqlast.Ref{Table: virtualTable(alias, body), Alias: alias, Derived: body}}
	items := colList{}
	for _, c := range body.Cols {
		items = append(items, w.Col(c))
	}
	sb := Select(items).From(w).With(b.with...)
	sb.limit, sb.offset = b.limit, b.offset
	for _, o := range b.order {
		if !slices.Contains(body.Cols, o.col) {
			return Query{}, invalid("ORDER BY %q: the set operation has no such result column (it has %v)", o.col, body.Cols)
		}
		e := w.Col(o.col)
		if o.desc {
			sb = sb.OrderBy(e.Desc())
		} else {
			sb = sb.OrderBy(e.Asc())
		}
	}
	return sb.Build()
}

// bodyOf checks the branches of a derived table, CTE or set operation and
// names its result columns.
func bodyOf(sels []*sqlast.Select, ops []sqlast.SetOp) (*sqlast.Body, error) {
	if slices.Contains(ops, sqlast.Intersect) && slices.ContainsFunc(ops, func(o sqlast.SetOp) bool { return o != sqlast.Intersect }) {
		return nil, invalid("INTERSECT mixed with %v in one set operation: engines disagree on precedence; make one side a Derived table", ops)
	}
	var cols []string
	for i, s := range sels {
		switch {
		case len(s.Outer) > 0:
			return nil, invalid("a derived table, CTE or set-operation branch cannot be correlated (uses %s of an enclosing query)", s.Outer[0].Alias)
		case len(s.With) > 0:
			return nil, invalid("WITH is allowed only on the outermost query")
		case s.Lock != sqlast.NoLock:
			return nil, invalid("a derived table, CTE or set-operation branch cannot lock rows; lock in the outermost query")
		case len(sels) > 1 && (len(s.OrderBy) > 0 || s.Limit >= 0 || s.Offset >= 0):
			return nil, invalid("set operation branch %d has ORDER BY or LIMIT, which engines place differently; make it a Derived table or order the whole", i+1)
		case slices.Index(sels, s) != i:
			return nil, invalid("the same query is branch %d and %d of a set operation; build it twice", slices.Index(sels, s)+1, i+1)
		}
		if i == 0 {
			seen := map[string]bool{}
			for k, it := range s.Items {
				n := it.As
				if c, ok := it.X.(*sqlast.Col); ok && n == "" {
					n = c.Name
				}
				if n == "" {
					return nil, invalid("result column %d needs a name (As) to be read from a derived table, CTE or set operation", k+1)
				}
				if seen[n] {
					return nil, invalid("result column name %q appears twice; rename one with As", n)
				}
				seen[n] = true
				cols = append(cols, n)
			}
		} else if len(s.Items) != len(cols) {
			return nil, invalid("set operation branch %d has %d result columns, the first has %d", i+1, len(s.Items), len(cols))
		}
	}
	return &sqlast.Body{Branches: sels, Ops: ops, Cols: cols}, nil
}

// virtualTable is the synthetic, global stand-in for a derived table or
// CTE: its columns are the body's result names and their declared types
// the kinds of the first branch's source columns, so values compared with
// them are converted as for the source column.
func virtualTable(name string, b *sqlast.Body) *sqlast.Table {
	t := sqlast.NewTable(name, b.Cols)
	t.Types, t.Global = map[string]string{}, true
	for i, it := range b.Branches[0].Items {
		if c, ok := it.X.(*sqlast.Col); ok {
			switch c.Ref.Table.ColumnKind(c.Name) {
			case sqlast.IntKey:
				t.Types[b.Cols[i]] = "bigint"
			case sqlast.TextKey:
				t.Types[b.Cols[i]] = "text"
			}
		}
	}
	return t
}

// body registers the table references of a derived table's, CTE's or set
// branch's body in the statement (see the invariant above).
func (v *scopeCheck) body(b *sqlast.Body) error {
	for _, s := range b.Branches {
		if err := v.sub(s); err != nil {
			return err
		}
	}
	return nil
}

// buildExtras applies the parts of this file to a SELECT being built: the
// WITH list (bodies registered, names unique and not shadowing a table of
// the statement, each CTE read only by later ones and by the query) and
// the lock (refused where engines refuse it).
func (b SelectBuilder) buildExtras(s *sqlast.Select, v *scopeCheck) error {
	if b.lock != sqlast.NoLock {
		if err := lockable(s); err != nil {
			return err
		}
		s.Lock = b.lock
	}
	if len(b.with) == 0 {
		return nil
	}
	names := map[string]bool{}
	for i, c := range b.with {
		if c.c == nil {
			return invalid("zero CTE in With")
		}
		if names[strings.ToLower(c.c.Name)] {
			return invalid("two CTEs named %q in one WITH", c.c.Name)
		}
		// A body may read only CTEs declared before it: with no forward or
		// self reference the WITH needs no RECURSIVE and none is rendered.
		for _, br := range c.c.Body.Branches {
			for _, r := range br.Refs {
				if r.CTE != nil && !slices.ContainsFunc(b.with[:i], func(p CTE) bool { return p.c == r.CTE }) {
					return invalid("CTE %s reads CTE %s, which is not declared before it (RECURSIVE is not supported)", c.c.Name, r.CTE.Name)
				}
			}
		}
		names[strings.ToLower(c.c.Name)] = true
		if err := v.body(c.c.Body); err != nil {
			return err
		}
		s.With = append(s.With, c.c)
	}
	for _, r := range v.refs {
		if !r.Virtual() && names[strings.ToLower(r.Table.Name)] {
			return invalid("CTE %q has the name of table %s, which it would shadow", r.Table.Name, r.Table.Name)
		}
		if r.CTE != nil && !slices.Contains(s.With, r.CTE) {
			return invalid("CTE %s is read but not declared in this query's With", r.CTE.Name)
		}
	}
	return nil
}

func lockable(s *sqlast.Select) error {
	what := ""
	switch {
	case s.Distinct:
		what = "DISTINCT"
	case len(s.GroupBy) > 0:
		what = "GROUP BY"
	case s.Having != nil:
		what = "HAVING"
	case slices.ContainsFunc(s.Items, func(it sqlast.Item) bool { _, ok := it.X.(*sqlast.Agg); return ok }):
		what = "an aggregate"
	case s.From.Virtual():
		what = "a derived table or CTE in FROM"
	}
	if what != "" {
		return invalid("ForUpdate/ForShare with %s: the rows read are not the rows of a table (PostgreSQL refuses it); lock with a plain SELECT of the rows", what)
	}
	return nil
}

// virtualAs renames a reference to a CTE; a derived table's body can be
// rendered once only, so a second name for it is refused.
func (t TableRef) virtualAs(alias string) TableRef {
	if t.ref.CTE == nil {
		return TableRef{err: invalid("a derived table cannot be renamed with As; pass the alias to Derived")}
	}
	return CTE{c: t.ref.CTE}.As(alias)
}
