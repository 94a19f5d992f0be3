package builder

import (
	"slices"

	"github.com/tenantmcp/tenantmcp/internal/sqlast"
)

// SelectBuilder assembles a SELECT. It is an immutable value: every method
// returns a new builder and leaves the receiver unchanged, so a base query
// can be extended in several directions. Errors are carried along and
// reported by Build.
type SelectBuilder struct {
	distinct bool
	items    []Selectable
	from     *TableRef
	joins    []joinSpec
	where    []Pred
	groupBy  []Expr
	having   []Pred
	orderBy  []Order
	limit    int64
	offset   int64
	with     []CTE       // compound.go
	lock     sqlast.Lock // compound.go
	err      error
}

type joinSpec struct {
	kind sqlast.JoinKind
	t    TableRef
	on   Pred
}

// Select starts a SELECT of items.
func Select(items ...Selectable) SelectBuilder {
	return SelectBuilder{items: slices.Clone(items), limit: -1, offset: -1}
}

// Distinct makes it SELECT DISTINCT.
func (b SelectBuilder) Distinct() SelectBuilder { b.distinct = true; return b }

// From sets the first table.
func (b SelectBuilder) From(t TableRef) SelectBuilder { b.from = &t; return b }

// Join adds an inner join of t on the condition on.
func (b SelectBuilder) Join(t TableRef, on Pred) SelectBuilder {
	b.joins = append(slices.Clip(b.joins), joinSpec{kind: sqlast.InnerJoin, t: t, on: on})
	return b
}

// LeftJoin adds a left outer join of t on the condition on. Rows of t
// outside the scope come back as NULLs, exactly as if they did not exist.
func (b SelectBuilder) LeftJoin(t TableRef, on Pred) SelectBuilder {
	b.joins = append(slices.Clip(b.joins), joinSpec{kind: sqlast.LeftJoin, t: t, on: on})
	return b
}

// Where adds conditions; all conditions of all Where calls must hold.
func (b SelectBuilder) Where(ps ...Pred) SelectBuilder {
	b.where = append(slices.Clip(b.where), ps...)
	return b
}

// GroupBy adds grouping expressions.
func (b SelectBuilder) GroupBy(es ...Expr) SelectBuilder {
	b.groupBy = append(slices.Clip(b.groupBy), es...)
	return b
}

// Having adds conditions on groups (typically on aggregates).
func (b SelectBuilder) Having(ps ...Pred) SelectBuilder {
	b.having = append(slices.Clip(b.having), ps...)
	return b
}

// OrderBy adds ordering terms.
func (b SelectBuilder) OrderBy(os ...Order) SelectBuilder {
	b.orderBy = append(slices.Clip(b.orderBy), os...)
	return b
}

// Limit caps the number of rows returned.
func (b SelectBuilder) Limit(n int) SelectBuilder {
	if n < 0 {
		b.err = invalid("negative limit %d", n)
	}
	b.limit = int64(n)
	return b
}

// Offset skips n rows; it requires Limit.
func (b SelectBuilder) Offset(n int) SelectBuilder {
	if n < 0 {
		b.err = invalid("negative offset %d", n)
	}
	b.offset = int64(n)
	return b
}

// Query is a sealed SELECT: only SelectBuilder.Build makes one, its fields
// are unexported, and the zero Query is invalid (guardedsql refuses it).
// It knows every table reference it contains, subqueries and joins
// included. Queries are immutable and safe to reuse and share.
type Query struct {
	s *sqlast.Select
}

// Tables returns every table reference of the query in declaration order:
// FROM, joins, then the references of subqueries.
func (q Query) Tables() []TableRef { return refsOut(q.sel().Refs) }

// IsZero reports whether q is the zero (invalid) Query.
func (q Query) IsZero() bool { return q.s == nil }

// Correlated reports whether q refers to tables of an enclosing query, in
// which case it can only be used as a subquery.
func (q Query) Correlated() bool { return len(q.sel().Outer) > 0 }

func (q Query) sel() *sqlast.Select {
	if q.s == nil {
		return &sqlast.Select{}
	}
	return q.s
}

func refsOut(rs []*sqlast.Ref) []TableRef {
	out := make([]TableRef, len(rs))
	for i, r := range rs {
		out[i] = TableRef{ref: r}
	}
	return out
}

// Build validates the query and seals it. Columns must belong to a table
// reference of this query or, for a subquery, of an enclosing one; aliases
// must be unique across the whole statement; aggregates may not appear in
// WHERE or ON.
func (b SelectBuilder) Build() (Query, error) {
	if b.err != nil {
		return Query{}, b.err
	}
	s := &sqlast.Select{Distinct: b.distinct, Limit: b.limit, Offset: b.offset}
	if s.Offset >= 0 && s.Limit < 0 {
		return Query{}, invalid("Offset requires Limit")
	}
	if len(b.items) == 0 {
		return Query{}, invalid("SELECT without result columns")
	}
	s.Items = make([]sqlast.Item, 0, len(b.items))
	for _, it := range b.items {
		if it == nil {
			return Query{}, invalid("nil Selectable")
		}
		if e, ok := it.(Expr); ok { // the common case, without a slice per column
			if err := e.check(); err != nil {
				return Query{}, err
			}
			s.Items = append(s.Items, sqlast.Item{X: e.x})
			continue
		}
		its, err := it.items()
		if err != nil {
			return Query{}, err
		}
		s.Items = append(s.Items, its...)
	}
	if b.from == nil {
		return Query{}, invalid("SELECT without From")
	}
	if b.from.err != nil {
		return Query{}, b.from.err
	}
	if b.from.ref == nil {
		return Query{}, invalid("zero TableRef in From")
	}
	s.From = b.from.ref
	v := newScopeCheck()
	if err := v.declare(s.From); err != nil {
		return Query{}, err
	}
	for _, j := range b.joins {
		if j.t.err != nil {
			return Query{}, j.t.err
		}
		if j.t.ref == nil {
			return Query{}, invalid("zero TableRef in Join")
		}
		if err := j.on.check(); err != nil {
			return Query{}, err
		}
		if err := v.declare(j.t.ref); err != nil {
			return Query{}, err
		}
		// ON may use this and earlier tables (and enclosing ones).
		if err := v.pred(j.on.p, false); err != nil {
			return Query{}, err
		}
		s.Joins = append(s.Joins, sqlast.Join{Kind: j.kind, Ref: j.t.ref, On: j.on.p})
	}
	var err error
	if s.Where, err = conj(b.where); err != nil {
		return Query{}, err
	}
	if s.Having, err = conj(b.having); err != nil {
		return Query{}, err
	}
	v.win = true
	for _, it := range s.Items {
		if err := v.expr(it.X, true); err != nil {
			return Query{}, err
		}
	}
	v.win = false
	if s.Where != nil {
		if err := v.pred(s.Where, false); err != nil {
			return Query{}, err
		}
	}
	for _, g := range b.groupBy {
		if err := g.check(); err != nil {
			return Query{}, err
		}
		if err := v.expr(g.x, false); err != nil {
			return Query{}, err
		}
		if err := groupable(s, g.x); err != nil {
			return Query{}, err
		}
		s.GroupBy = append(s.GroupBy, g.x)
	}
	if s.Having != nil {
		if err := v.pred(s.Having, true); err != nil {
			return Query{}, err
		}
	}
	v.win = true
	for _, o := range b.orderBy {
		if o.err != nil {
			return Query{}, o.err
		}
		if !isItem(s, o.o.X) { // an item was checked as one; the guard names it by position
			if err := v.expr(o.o.X, true); err != nil {
				return Query{}, err
			}
		}
		s.OrderBy = append(s.OrderBy, o.o)
	}
	v.win = false
	if err := b.buildExtras(s, v); err != nil {
		return Query{}, err
	}
	if err := v.finish(); err != nil {
		return Query{}, err
	}
	s.Refs = v.refs
	s.Outer = v.outer
	return Query{s: s}, nil
}

func conj(ps []Pred) (sqlast.Pred, error) {
	switch len(ps) {
	case 0:
		return nil, nil
	case 1:
		if err := ps[0].check(); err != nil {
			return nil, err
		}
		return ps[0].p, nil
	}
	l, err := collect(ps)
	if err != nil {
		return nil, err
	}
	return &sqlast.And{Ps: l}, nil
}

// scopeCheck validates the table references of one statement level.
//
// Statements hold a handful of references, so the sets below are slices
// searched in order, backed by arrays inside the check (no allocation for
// up to eight references); aliases gets a map only past manyRefs, so a
// statement with hundreds of references is not checked in quadratic time.
type scopeCheck struct {
	own     []*sqlast.Ref          // this level's declared references
	ownSet  map[*sqlast.Ref]bool   // own, once len(own) > manyRefs
	aliases map[string]*sqlast.Ref // whole tree, once len(refs) > manyRefs
	refs    []*sqlast.Ref          // whole tree, declaration order; aliases unique
	outer   []*sqlast.Ref
	subs    []*sqlast.Select
	win     bool // window functions allowed here (select list, ORDER BY)

	ownBuf, refsBuf [8]*sqlast.Ref
}

const manyRefs = 16

func newScopeCheck() *scopeCheck {
	v := &scopeCheck{}
	v.own, v.refs = v.ownBuf[:0], v.refsBuf[:0]
	return v
}

func (v *scopeCheck) isOwn(r *sqlast.Ref) bool {
	if v.ownSet != nil {
		return v.ownSet[r]
	}
	return slices.Contains(v.own, r)
}

// byAlias returns the reference of the tree declared under alias, or nil.
func (v *scopeCheck) byAlias(alias string) *sqlast.Ref {
	if v.aliases != nil {
		return v.aliases[alias]
	}
	for _, r := range v.refs {
		if r.Alias == alias {
			return r
		}
	}
	return nil
}

func (v *scopeCheck) declare(r *sqlast.Ref) error {
	if err := v.alias(r); err != nil {
		return err
	}
	// alias refused a second declaration of r: own holds each once.
	v.own = append(v.own, r)
	switch {
	case v.ownSet != nil:
		v.ownSet[r] = true
	case len(v.own) > manyRefs:
		v.ownSet = make(map[*sqlast.Ref]bool, 2*len(v.own))
		for _, x := range v.own {
			v.ownSet[x] = true
		}
	}
	if r.Derived != nil {
		return v.body(r.Derived) // compound.go
	}
	return nil
}

func (v *scopeCheck) alias(r *sqlast.Ref) error {
	if prev := v.byAlias(r.Alias); prev != nil {
		if prev == r {
			return invalid("table reference %s used twice in one statement; make a second one with Schema.Table(...).As(...)", r.Alias)
		}
		return invalid("alias %q used twice in one statement (tables %s and %s); give one of them another alias with As", r.Alias, prev.Table.Name, r.Table.Name)
	}
	v.refs = append(v.refs, r)
	switch {
	case v.aliases != nil:
		v.aliases[r.Alias] = r
	case len(v.refs) > manyRefs:
		v.aliases = make(map[string]*sqlast.Ref, 2*len(v.refs))
		for _, x := range v.refs {
			v.aliases[x.Alias] = x
		}
	}
	return nil
}

// finish rejects columns of references that the statement declares but
// that were out of reach where they were used: a table joined later than
// the ON clause using it, or a table declared only inside a subquery.
func (v *scopeCheck) finish() error {
	for _, r := range v.outer {
		if v.isOwn(r) {
			return invalid("column of %s used before %s is joined", r.Alias, r.Alias)
		}
		switch prev := v.byAlias(r.Alias); {
		case prev == r:
			return invalid("column of %s used outside the subquery that declares it", r.Alias)
		case prev != nil:
			return invalid("column of another reference to %s (alias %s) than the one the statement uses; take columns from the TableRef passed to From/Join", r.Table.Name, r.Alias)
		}
	}
	return nil
}

func (v *scopeCheck) use(r *sqlast.Ref) {
	if v.isOwn(r) || slices.Contains(v.outer, r) {
		return
	}
	v.outer = append(v.outer, r)
}

func (v *scopeCheck) expr(e sqlast.Expr, aggOK bool) error {
	switch x := e.(type) {
	case *sqlast.Col:
		v.use(x.Ref)
	case *sqlast.Agg:
		if !aggOK {
			return invalid("aggregate %s not allowed in WHERE or ON (use Having)", x.Fn)
		}
		if x.Arg != nil {
			win := v.win
			v.win = false // no window function inside an aggregate
			defer func() { v.win = win }()
			return v.expr(x.Arg, false)
		}
	default:
		return v.scalar(e, aggOK)
	}
	return nil
}

func (v *scopeCheck) sub(s *sqlast.Select) error {
	if slices.Contains(v.subs, s) {
		return invalid("the same subquery is used twice in one statement; build it twice")
	}
	v.subs = append(v.subs, s)
	if len(s.With) > 0 || s.Lock != sqlast.NoLock {
		return invalid("a subquery cannot hold a WITH or lock rows; put them on the outermost query")
	}
	for _, r := range s.Refs {
		if err := v.alias(r); err != nil {
			return err
		}
	}
	for _, r := range s.Outer {
		v.use(r)
	}
	return nil
}

func (v *scopeCheck) pred(p sqlast.Pred, aggOK bool) error {
	switch x := p.(type) {
	case *sqlast.CmpVal:
		return v.expr(x.X, aggOK)
	case *sqlast.CmpExpr:
		if err := v.expr(x.X, aggOK); err != nil {
			return err
		}
		return v.expr(x.Y, aggOK)
	case *sqlast.Between:
		return v.expr(x.X, aggOK)
	case *sqlast.InList:
		return v.expr(x.X, aggOK)
	case *sqlast.InSelect:
		if err := v.expr(x.X, aggOK); err != nil {
			return err
		}
		return v.sub(x.Sub)
	case *sqlast.Exists:
		return v.sub(x.Sub)
	case *sqlast.Like:
		return v.expr(x.X, aggOK)
	case *sqlast.IsNull:
		return v.expr(x.X, aggOK)
	case *sqlast.And:
		for _, q := range x.Ps {
			if err := v.pred(q, aggOK); err != nil {
				return err
			}
		}
	case *sqlast.Or:
		for _, q := range x.Ps {
			if err := v.pred(q, aggOK); err != nil {
				return err
			}
		}
	case *sqlast.Not:
		return v.pred(x.P, aggOK)
	default:
		return invalid("unknown predicate %T", p)
	}
	return nil
}
