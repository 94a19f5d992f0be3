package guardedsql_test

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/tenantmcp/tenantmcp/builder"
	"github.com/tenantmcp/tenantmcp/guardedsql"
	"github.com/tenantmcp/tenantmcp/internal/guardfault"
)

// FuzzGuardExpr is FuzzGuardRead (same fixture, same oracles: the guarded
// result equals the unguarded result on a copy holding only the scope's
// rows, and every reference carries its predicate in the SQL) over
// statements built from the scalar expressions: arithmetic, CASE with
// subquery predicates, COALESCE, NULLIF, casts, functions, window
// functions partitioned and ordered by any column, scalar subqueries
// (correlated or not) in the select list, expressions in WHERE, GROUP BY
// and ORDER BY.

var (
	fuzzNumCols  = map[string][]string{"rooms": {"rate", "id"}, "bookings": {"nights", "id"}, "payments": {"amount", "id"}, "hotels": {"id"}, "guests": {"id"}}
	fuzzTextCols = map[string][]string{"rooms": {"number"}, "bookings": {"status", "check_in"}, "payments": {"method"}, "hotels": {"name", "chain_id"},
		"guests": {"name", "email"}, "chains": {"name", "id"}, "countries": {"name", "code"}}
)

func (q *qgen) numCol(r fref) (builder.Expr, bool) {
	cs := fuzzNumCols[r.table]
	if len(cs) == 0 {
		return builder.Expr{}, false
	}
	return r.t.Col(cs[q.g.n(len(cs))]), true
}

func (q *qgen) textCol(r fref) builder.Expr {
	cs := fuzzTextCols[r.table]
	return r.t.Col(cs[q.g.n(len(cs))])
}

// keyOrder orders by every reference's key: a total order of the rows of
// a query whose joins follow foreign keys, so ROW_NUMBER is deterministic.
func keyOrder(refs []fref) []builder.Order {
	var out []builder.Order
	for _, r := range refs {
		out = append(out, r.t.Col(fuzzCols[r.table][0]).Asc())
	}
	return out
}

// scalar generates one expression over refs (the query's references).
func (q *qgen) scalar(refs []fref, depth int, windows bool) builder.Expr {
	r := refs[q.g.n(len(refs))]
	n := 9
	if windows {
		n = 13
	}
	switch q.g.n(n) {
	case 0:
		x, ok := q.numCol(r)
		if !ok {
			return builder.Length(q.textCol(r))
		}
		ops := []func(any) builder.Expr{x.Add, x.Sub, x.Mul, x.Div}
		op := ops[q.g.n(len(ops))]
		if o, ok := q.numCol(refs[q.g.n(len(refs))]); ok && q.g.flip() {
			return op(o)
		}
		return op(int64(q.g.n(7)))
	case 1:
		then := any(q.textCol(r))
		if q.g.flip() {
			then = "hit"
		}
		return builder.Case().When(q.pred(refs, depth+1), then).Else("miss")
	case 2:
		return builder.Coalesce(q.col(r), fmt.Sprint(q.value()))
	case 3:
		x, ok := q.numCol(r)
		if !ok {
			return builder.NullIf(q.textCol(r), "Grand 0")
		}
		return builder.NullIf(x, int64(q.g.n(150)))
	case 4:
		return builder.Cast(q.col(r), []builder.CastType{builder.AsText, builder.AsInteger, builder.AsReal}[q.g.n(3)])
	case 5:
		return []func(builder.Expr) builder.Expr{builder.Lower, builder.Upper, builder.Length}[q.g.n(3)](q.textCol(r))
	case 6:
		if x, ok := q.numCol(r); ok {
			return builder.Abs(x.Sub(int64(q.g.n(200))))
		}
		return builder.Length(q.textCol(r))
	case 7, 8:
		if depth >= 1 {
			return q.col(r)
		}
		sub := q.ref(fuzzTables[q.g.n(len(fuzzTables))])
		c := q.col(sub)
		item := []builder.Expr{builder.CountAll(), builder.Max(c), builder.Count(c)}[q.g.n(3)]
		sb := builder.Select(item).From(sub.t)
		if q.g.flip() {
			sb = sb.Where(q.pred([]fref{sub}, 1))
		}
		if q.g.flip() { // correlated on any column
			sb = sb.Where(q.col(sub).EqCol(q.col(refs[q.g.n(len(refs))])))
		}
		sq, err := sb.Build()
		if err != nil {
			return builder.Expr{}
		}
		return builder.ScalarQuery(sq)
	}
	// Window functions.
	w := builder.Window()
	if q.g.flip() {
		w = w.PartitionBy(q.col(refs[q.g.n(len(refs))]))
	}
	switch q.g.n(4) {
	case 0:
		return builder.RowNumber().Over(w.OrderBy(append([]builder.Order{q.col(r).Desc()}, keyOrder(refs)...)...))
	case 1:
		return []builder.RankFunc{builder.Rank(), builder.DenseRank()}[q.g.n(2)].Over(w.OrderBy(q.col(r).Asc()))
	case 2:
		x, ok := q.numCol(r)
		if !ok {
			return builder.CountAll().Over(w)
		}
		if q.g.flip() {
			w = w.OrderBy(q.col(r).Asc()) // running: peers share the value
		}
		return []func(builder.Expr) builder.Expr{builder.Sum, builder.Min, builder.Max, builder.Count}[q.g.n(4)](x).Over(w)
	}
	return builder.CountAll().Over(w)
}

func genExprQuery(data []byte, sch *builder.Schema) (builder.Query, error) {
	q := &qgen{g: &fgen{data: data}, sch: sch}
	g := q.g
	from := q.ref(fuzzTables[g.n(len(fuzzTables))])
	refs := []fref{from}
	var joins []struct {
		r  fref
		on builder.Pred
	}
	if g.flip() {
		for _, e := range fuzzEdges {
			if e.child == from.table && g.flip() {
				nr := q.ref(e.parent)
				joins = append(joins, struct {
					r  fref
					on builder.Pred
				}{nr, nr.t.Col(e.pcol).EqCol(from.t.Col(e.ccol))})
				refs = append(refs, nr)
				break
			}
		}
	}
	var sb builder.SelectBuilder
	if g.n(4) == 0 {
		// Grouped by an expression that is a select item.
		key := q.scalar(refs, 1, false)
		agg := []builder.Expr{builder.CountAll(), builder.Max(q.col(from)), builder.Min(q.col(refs[g.n(len(refs))]))}[g.n(3)]
		items := []builder.Selectable{key.As("g"), agg.As("a")}
		if g.flip() {
			items = append(items, builder.Rank().Over(builder.Window().OrderBy(builder.CountAll().Desc())).As("r"))
		}
		sb = builder.Select(items...).From(from.t).GroupBy(key)
	} else {
		var items []builder.Selectable
		for i, r := range refs {
			items = append(items, r.t.Col(fuzzCols[r.table][0]).As(fmt.Sprintf("k%d", i)))
		}
		for i := g.n(3) + 1; i > 0; i-- {
			items = append(items, q.scalar(refs, 0, true).As(fmt.Sprintf("e%d", i)))
		}
		sb = builder.Select(items...).From(from.t)
		if g.flip() {
			// ORDER BY an expression (a window function included) and
			// LIMIT: the order must be total for the page to be the same.
			sb = sb.OrderBy(append([]builder.Order{q.scalar(refs, 1, true).Desc()}, keyOrder(refs)...)...).Limit(1 + g.n(5))
		}
	}
	for _, j := range joins {
		sb = sb.Join(j.r.t, j.on)
	}
	for k := g.n(3); k > 0; k-- {
		if g.flip() {
			sb = sb.Where(q.pred(refs, 0))
		} else {
			x := q.scalar(refs, 1, false)
			sb = sb.Where([]func(any) builder.Pred{x.Gt, x.Le, x.Ne}[g.n(3)](q.value()))
		}
	}
	return sb.Build()
}

func (fx *readFixture) checkExpr(data []byte) (bool, error) {
	if len(data) == 0 {
		return false, nil
	}
	si := int(data[0]) % len(fuzzScopes)
	grants := fuzzScopes[si]
	ctx := grantCtx(grants...)
	q, err := genExprQuery(data[1:], fx.h.sch)
	if err != nil {
		if !errors.Is(err, builder.ErrInvalid) {
			return false, fmt.Errorf("Build: %w", err)
		}
		return false, nil
	}
	fq, err := genExprQuery(data[1:], fx.fsch[si])
	if err != nil {
		return false, fmt.Errorf("the generator is not deterministic: %w", err)
	}
	if err := checkGuardText(fx.h, ctx, q, grants); err != nil {
		return false, err
	}
	got, gerr := resultSet(ctx, fx.h.db, q)
	want, werr := resultSet(ctx, fx.filtered[si], fq)
	text, _, _ := fx.h.db.Render(ctx, q)
	if (gerr != nil) != (werr != nil) {
		return false, fmt.Errorf("guarded err %v, filtered err %v\n%s", gerr, werr, text)
	}
	if !slices.Equal(got, want) {
		return false, fmt.Errorf("scope %v: guarded result differs from the filtered database\n got %v\nwant %v\n%s", grants, got, want, text)
	}
	return gerr == nil, nil
}

func FuzzGuardExpr(f *testing.F) {
	for _, s := range fuzzSeeds() {
		f.Add(s)
	}
	fx := newReadFixture(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		if _, err := fx.checkExpr(data); err != nil {
			t.Fatal(err)
		}
	})
}

// TestFuzzExprSeeds runs the seeds (most must produce a statement that
// runs) and shows the oracle notices the guard dropped from windowed
// statements (guardfault.Windows) and from each table.
func TestFuzzExprSeeds(t *testing.T) {
	fx := newReadFixture(t)
	ran := 0
	for _, s := range fuzzSeeds() {
		ok, err := fx.checkExpr(s)
		if err != nil {
			t.Fatal(err)
		}
		if ok {
			ran++
		}
	}
	if ran < 32 {
		t.Fatalf("only %d of %d seeds produced a runnable statement", ran, len(fuzzSeeds()))
	}
	caughtBy := func() bool {
		for _, s := range fuzzSeeds() {
			for k := 0; k < 8; k++ {
				d := slices.Clone(s)
				d[0] = byte(k)
				if _, err := fx.checkExpr(d); err != nil {
					return true
				}
			}
		}
		return false
	}
	if !guardfault.Enabled {
		t.Skip("mutation control: " + guardfault.NotBuilt)
	}
	restore := guardfault.Disable(guardfault.Windows)
	caught := caughtBy()
	restore()
	if !caught {
		t.Error("with the guard of windowed statements dropped the fuzz oracle saw nothing")
	}
	for _, table := range []string{"rooms", "bookings"} {
		restore := guardfault.DropPredicate(table)
		caught := caughtBy()
		restore()
		if !caught {
			t.Errorf("with the %s predicate dropped the fuzz oracle saw nothing", table)
		}
	}
}

// fuzzScopeCols are the columns SetExpr refuses (level and scope-path
// foreign-key columns); the generator mostly avoids them.
var fuzzScopeCols = map[string]bool{"chain_id": true, "hotel_id": true, "room_id": true, "booking_id": true}

// genSetExpr generates an UPDATE assigning expressions over the target's
// own columns (arithmetic, CASE, COALESCE, casts, functions), sometimes to
// a scope column (which Build must refuse).
func genSetExpr(data []byte, sch *builder.Schema) (builder.Mutation, error) {
	q := &qgen{g: &fgen{data: data}, sch: sch}
	g := q.g
	tables := fuzzTables[:6]
	table := tables[g.n(len(tables))]
	target := fref{sch.Table(table), table}
	cols := fuzzCols[table]
	ub := builder.UpdateTable(target.t)
	set := map[string]bool{}
	for k := 1 + g.n(2); k > 0; k-- {
		c := cols[1+g.n(len(cols)-1)]
		if fuzzScopeCols[c] && g.n(4) != 0 || set[c] {
			continue
		}
		set[c] = true
		ub = ub.SetExpr(c, q.scalar([]fref{target}, 1, false))
	}
	ub = ub.Where(target.t.Col("id").In(q.valueFor("id"), q.valueFor("id"), q.valueFor("id")))
	if g.flip() {
		ub = ub.Where(q.pred([]fref{target}, 1))
	}
	if g.flip() {
		ub = ub.ExpectOne()
	}
	return ub.Build()
}

func (fx *writeFixture) checkSetExpr(t testing.TB, data []byte) error {
	return fx.checkWith(t, data, genSetExpr, guardedsql.ErrInternal, guardedsql.ErrInvalid, guardedsql.ErrRefused)
}

// FuzzGuardSetExpr is FuzzGuardWrite for UPDATE ... SET col = <expr>: under
// scopes of chain acme's family no row of another tenant ever changes.
func FuzzGuardSetExpr(f *testing.F) {
	for _, s := range fuzzSeeds() {
		f.Add(s)
	}
	fx := newWriteFixture(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		if err := fx.checkSetExpr(t, data); err != nil {
			t.Fatal(err)
		}
	})
}

// TestSetExprFuzzSeeds runs the seeds (some must change rows) and shows the
// canary notices the rooms predicate dropped.
func TestSetExprFuzzSeeds(t *testing.T) {
	fx := newWriteFixture(t)
	for _, s := range fuzzSeeds() {
		if err := fx.checkSetExpr(t, s); err != nil {
			t.Fatal(err)
		}
	}
	if fx.ok < 3 {
		t.Fatalf("only %d seed updates changed anything; the fuzz is vacuous", fx.ok)
	}
	if !guardfault.Enabled {
		t.Skip("mutation control: " + guardfault.NotBuilt)
	}
	fx = newWriteFixture(t)
	restore := guardfault.DropPredicate("rooms")
	defer restore()
	for _, s := range fuzzSeeds() {
		for k := range writeScopes {
			d := slices.Clone(s)
			d[0] = byte(k)
			if fx.checkSetExpr(t, d) != nil {
				return
			}
		}
	}
	t.Error("with the rooms predicate dropped the SetExpr fuzz saw nothing")
}
