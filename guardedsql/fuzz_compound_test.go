package guardedsql_test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/tenantmcp/tenantmcp/builder"
	"github.com/tenantmcp/tenantmcp/guardedsql"
	"github.com/tenantmcp/tenantmcp/internal/guardfault"
)

// FuzzGuardCompound extends FuzzGuardRead's differential oracle to the read
// structure of issue 15: set operations (UNION, UNION ALL, INTERSECT,
// EXCEPT, ordered and limited over the whole), CTEs (one reading another,
// joined to schema tables) and derived tables. The guarded result on the
// full database must equal the unguarded result on a copy holding only the
// scope's rows, and the rendered SQL must carry a predicate for every
// schema table reference, inside every branch and body.

// branch builds one SELECT of two result columns named k and x from a
// random table, with an optional predicate (possibly a subquery) and join.
func (q *qgen) branch() builder.Query {
	r := q.ref(fuzzTables[q.g.n(len(fuzzTables))])
	refs := []fref{r}
	sb := builder.Select(r.t.Col(fuzzCols[r.table][0]).As("k"), q.col(r).As("x")).From(r.t)
	if q.g.n(3) == 0 {
		for _, e := range fuzzEdges {
			if e.child == r.table {
				p := q.ref(e.parent)
				on := p.t.Col(e.pcol).EqCol(r.t.Col(e.ccol))
				if q.g.flip() {
					sb = sb.LeftJoin(p.t, on)
				} else {
					sb = sb.Join(p.t, on)
				}
				refs = append(refs, p)
				break
			}
		}
	}
	if q.g.flip() {
		sb = sb.Where(q.pred(refs, 1))
	}
	b, err := sb.Build()
	if err != nil {
		return builder.Query{}
	}
	return b
}

func (q *qgen) setOp() builder.SetBuilder {
	a, b := q.branch(), q.branch()
	var s builder.SetBuilder
	switch q.g.n(4) {
	case 0:
		s = builder.Union(a, b)
	case 1:
		s = builder.UnionAll(a, b)
	case 2:
		s = builder.Intersect(a, b)
	default:
		s = builder.Except(a, b)
	}
	if q.g.flip() {
		if q.g.flip() {
			s = s.UnionAll(q.branch())
		} else {
			s = s.Except(q.branch())
		}
	}
	return s
}

// body is a derived table's or CTE's query: one branch or a set operation.
func (q *qgen) body() builder.Query {
	if q.g.flip() {
		return q.branch()
	}
	b, err := q.setOp().Build()
	if err != nil {
		return builder.Query{}
	}
	return b
}

// virtualRead selects k and x from v, optionally joined to a schema table
// on k, with the outer query's own predicate.
func (q *qgen) virtualRead(sb func(...builder.Selectable) builder.SelectBuilder, v builder.TableRef) builder.SelectBuilder {
	s := sb(v.Col("k"), v.Col("x")).From(v)
	if q.g.flip() {
		t := q.ref([]string{"hotels", "rooms", "bookings", "guests"}[q.g.n(4)])
		on := t.t.Col("id").EqCol(v.Col("k"))
		if q.g.flip() {
			s = s.LeftJoin(t.t, on)
		} else {
			s = s.Join(t.t, on)
		}
		if q.g.flip() {
			s = s.Where(q.pred([]fref{t}, 1))
		}
	}
	if q.g.flip() {
		s = s.Where(v.Col("k").Ne(q.valueFor("id")))
	}
	return s
}

func genCompound(data []byte, sch *builder.Schema) (builder.Query, error) {
	q := &qgen{g: &fgen{data: data}, sch: sch}
	switch q.g.n(3) {
	case 0:
		s := q.setOp()
		if q.g.flip() {
			s = s.Asc("k").Asc("x").Limit(q.g.n(6))
		}
		return s.Build()
	case 1:
		c := builder.With("c", q.body())
		v := c.Ref()
		if q.g.flip() {
			w := c.As("w")
			dq, err := builder.Select(w.Col("k"), w.Col("x")).From(w).Build()
			if err != nil {
				return builder.Query{}, err
			}
			d := builder.With("d", dq)
			return q.virtualRead(builder.Select, d.Ref()).With(c, d).Build()
		}
		return q.virtualRead(builder.Select, v).With(c).Build()
	}
	d := builder.Derived(q.body(), "d")
	return q.virtualRead(builder.Select, d).Build()
}

// checkCompoundGuardText is checkGuardText for statements with virtual
// references: every schema table reference, wherever it sits, carries its
// predicate (virtual references carry none of their own).
func checkCompoundGuardText(h *hotelDB, st builder.Query, text string, active map[string]bool) error {
	for _, r := range st.Tables() {
		if fuzzCols[r.Name()] == nil || h.sch.IsGlobal(r.Name()) {
			continue
		}
		if !slices.ContainsFunc(reach[r.Name()], func(l string) bool { return active[l] }) {
			if !strings.Contains(text, "(1=0)") {
				return fmt.Errorf("%s (%s) reaches no granted level but the SQL has no false guard:\n%s", r.Alias(), r.Name(), text)
			}
			continue
		}
		if !guardPresent(text, r.Alias(), scopeCols[r.Name()]) {
			return fmt.Errorf("no guard predicate for %s (%s) in\n%s", r.Alias(), r.Name(), text)
		}
	}
	return nil
}

func (fx *readFixture) checkCompound(data []byte) (bool, error) {
	if len(data) == 0 {
		return false, nil
	}
	si := int(data[0]) % len(fuzzScopes)
	grants := fuzzScopes[si]
	ctx := grantCtx(grants...)
	q, err := genCompound(data[1:], fx.h.sch)
	if err != nil {
		if !errors.Is(err, builder.ErrInvalid) {
			return false, fmt.Errorf("Build: %w", err)
		}
		return false, nil
	}
	fq, err := genCompound(data[1:], fx.fsch[si])
	if err != nil {
		return false, fmt.Errorf("the generator is not deterministic: %w", err)
	}
	plain, err := guardedsql.NewSQLitePredicatesOnlyForTest(ctx, fx.h.raw, fx.h.sch, guardedsql.Options{})
	if err != nil {
		return false, err
	}
	if text, _, err := plain.Render(ctx, q); err == nil {
		if err := checkCompoundGuardText(fx.h, q, text, activeLevels(grants)); err != nil {
			return false, err
		}
	}
	got, gerr := resultSet(ctx, fx.h.db, q)
	if errors.Is(gerr, guardedsql.ErrConversion) {
		return false, nil // refused by design (issue 26 §2): not runnable
	}
	want, werr := resultSet(ctx, fx.filtered[si], fq)
	if errors.Is(gerr, guardedsql.ErrInternal) {
		return false, fmt.Errorf("guard: %w", gerr)
	}
	if (gerr != nil) != (werr != nil) {
		text, _, _ := fx.h.db.Render(ctx, q)
		return false, fmt.Errorf("guarded err %v, filtered err %v\n%s", gerr, werr, text)
	}
	if !slices.Equal(got, want) {
		text, _, _ := fx.h.db.Render(ctx, q)
		return false, fmt.Errorf("scope %v: guarded result differs from the filtered database\n got %v\nwant %v\n%s", grants, got, want, text)
	}
	return gerr == nil, nil
}

func FuzzGuardCompound(f *testing.F) {
	for _, s := range fuzzSeeds() {
		f.Add(s)
	}
	fx := newReadFixture(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		if _, err := fx.checkCompound(data); err != nil {
			t.Fatal(err)
		}
	})
}

// TestFuzzCompoundCatchesDroppedGuards: the seeds mostly produce runnable
// statements, and with a set branch's or CTE body's guard removed
// (guardfault) the compound fuzz oracle notices.
func TestFuzzCompoundCatchesDroppedGuards(t *testing.T) {
	fx := newReadFixture(t)
	ran := 0
	for _, s := range fuzzSeeds() {
		ok, err := fx.checkCompound(s)
		if err != nil {
			t.Fatal(err)
		}
		if ok {
			ran++
		}
	}
	if ran < 20 {
		t.Fatalf("only %d of %d seeds produced a runnable statement", ran, len(fuzzSeeds()))
	}
	t.Logf("%d of %d seeds ran", ran, len(fuzzSeeds()))
	if !guardfault.Enabled {
		t.Skip("mutation control: " + guardfault.NotBuilt)
	}
	for _, fix := range []guardfault.Fix{guardfault.SetBranch, guardfault.CTEBody} {
		restore := guardfault.Disable(fix)
		caught := false
		for _, s := range fuzzSeeds() {
			for k := 0; k < 8 && !caught; k++ {
				d := slices.Clone(s)
				d[0] = byte(k)
				_, err := fx.checkCompound(d)
				caught = err != nil
			}
			if caught {
				break
			}
		}
		restore()
		if !caught {
			t.Errorf("with %s the compound fuzz oracle saw nothing", fix)
		}
	}
}
