package builder_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/tenantmcp/tenantmcp/builder"
)

// TestCompoundRefusals: every malformed derived table, CTE, set operation,
// lock or keyset is refused at Build with ErrInvalid, naming the problem.
func TestCompoundRefusals(t *testing.T) {
	sch := builder.MustSchema(hotelDef())
	rooms := func(alias string) builder.TableRef { return sch.Table("rooms").As(alias) }
	ids := func(alias string) builder.Query {
		r := rooms(alias)
		return builder.Must(builder.Select(r.Col("id")).From(r).Build())
	}
	for name, tc := range map[string]struct {
		build func() (builder.Query, error)
		want  string
	}{
		"union column count": {func() (builder.Query, error) {
			r := rooms("r2")
			two := builder.Must(builder.Select(r.Col("id"), r.Col("number")).From(r).Build())
			return builder.Union(ids("r1"), two).Build()
		}, "branch 2 has 2 result columns"},
		"union of one": {func() (builder.Query, error) { return builder.Union(ids("r1")).Build() }, "at least two"},
		"intersect mixed": {func() (builder.Query, error) {
			return builder.Union(ids("r1"), ids("r2")).Intersect(ids("r3")).Build()
		}, "INTERSECT mixed"},
		"same branch twice":          {func() (builder.Query, error) { q := ids("r1"); return builder.UnionAll(q, q).Build() }, "build it twice"},
		"same alias in two branches": {func() (builder.Query, error) { return builder.Union(ids("r"), ids("r")).Build() }, "alias \"r\" used twice"},
		"order by unknown":           {func() (builder.Query, error) { return builder.Union(ids("r1"), ids("r2")).Asc("nope").Build() }, "no such result column"},
		"branch with limit": {func() (builder.Query, error) {
			r := rooms("r2")
			return builder.Union(ids("r1"), builder.Must(builder.Select(r.Col("id")).From(r).Limit(1).Build())).Build()
		}, "ORDER BY or LIMIT"},
		"unknown derived column": {func() (builder.Query, error) {
			d := builder.Derived(ids("r1"), "d")
			return builder.Select(d.Col("number")).From(d).Build()
		}, "no column \"number\""},
		"unnamed aggregate in derived": {func() (builder.Query, error) {
			r := rooms("r1")
			d := builder.Derived(builder.Must(builder.Select(builder.CountAll()).From(r).Build()), "d")
			return builder.Select(d.All()).From(d).Build()
		}, "needs a name"},
		"correlated derived": {func() (builder.Query, error) {
			h := sch.Table("hotels").As("h")
			r := rooms("r1")
			sub := builder.Must(builder.Select(r.Col("id")).From(r).Where(r.Col("hotel_id").EqCol(h.Col("id"))).Build())
			d := builder.Derived(sub, "d")
			return builder.Select(d.Col("id")).From(d).Build()
		}, "cannot be correlated"},
		"derived renamed": {func() (builder.Query, error) {
			d := builder.Derived(ids("r1"), "d").As("e")
			return builder.Select(d.Col("id")).From(d).Build()
		}, "cannot be renamed"},
		"derived as insert target": {func() (builder.Query, error) {
			_, err := builder.InsertInto(builder.Derived(ids("r1"), "d")).Columns("id").Values(1).Build()
			return builder.Query{}, err
		}, "not a schema table"},
		"cte read but not declared": {func() (builder.Query, error) {
			c := builder.With("c", ids("r1"))
			x := c.Ref()
			return builder.Select(x.Col("id")).From(x).With(builder.With("d", ids("r2"))).Build()
		}, "not declared in this query's With"},
		"cte forward reference (recursion)": {func() (builder.Query, error) {
			c := builder.With("c", ids("r1"))
			x := c.Ref()
			d := builder.With("d", builder.Must(builder.Select(x.Col("id")).From(x).Build()))
			y := d.Ref()
			return builder.Select(y.Col("id")).From(y).With(d, c).Build()
		}, "RECURSIVE is not supported"},
		"cte self-named body": {func() (builder.Query, error) {
			c1 := builder.With("c", ids("r1"))
			x := c1.Ref()
			c2 := builder.With("c", builder.Must(builder.Select(x.Col("id")).From(x).Build()))
			y := c2.As("y")
			return builder.Select(y.Col("id")).From(y).With(c2).Build()
		}, "RECURSIVE is not supported"},
		"cte duplicate name": {func() (builder.Query, error) {
			c, d := builder.With("c", ids("r1")), builder.With("c", ids("r2"))
			x := c.Ref()
			return builder.Select(x.Col("id")).From(x).With(c, d).Build()
		}, "two CTEs named"},
		"cte shadows table": {func() (builder.Query, error) {
			c := builder.With("rooms", ids("r1"))
			h := sch.Table("hotels")
			r := sch.Table("rooms")
			return builder.Select(h.Col("id")).From(h).Join(r, r.Col("hotel_id").EqCol(h.Col("id"))).With(c).Build()
		}, "would shadow"},
		"cte reserved name": {func() (builder.Query, error) {
			c := builder.With("_tm_scope", ids("r1"))
			x := c.Ref()
			return builder.Select(x.Col("id")).From(x).With(c).Build()
		}, "not a valid identifier"},
		"with in a subquery": {func() (builder.Query, error) {
			c := builder.With("c", ids("r1"))
			x := c.Ref()
			inner := builder.Must(builder.Select(x.Col("id")).From(x).With(c).Build())
			h := sch.Table("hotels")
			return builder.Select(h.Col("id")).From(h).Where(h.Col("id").InQuery(inner)).Build()
		}, "cannot hold a WITH"},
		"lock with group by": {func() (builder.Query, error) {
			r := rooms("r")
			return builder.Select(r.Col("hotel_id")).From(r).GroupBy(r.Col("hotel_id")).ForUpdate().Build()
		}, "GROUP BY"},
		"lock with distinct": {func() (builder.Query, error) {
			r := rooms("r")
			return builder.Select(r.Col("hotel_id")).From(r).Distinct().ForShare().Build()
		}, "DISTINCT"},
		"lock with aggregate": {func() (builder.Query, error) {
			r := rooms("r")
			return builder.Select(builder.CountAll()).From(r).ForUpdate().Build()
		}, "aggregate"},
		"lock in a branch": {func() (builder.Query, error) {
			r := rooms("r2")
			return builder.Union(ids("r1"), builder.Must(builder.Select(r.Col("id")).From(r).ForUpdate().Build())).Build()
		}, "cannot lock rows"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := tc.build()
			if !errors.Is(err, builder.ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want ErrInvalid containing %q", err, tc.want)
			}
		})
	}
}

// TestCompoundRefs: the table references inside derived tables, CTE bodies
// and set branches all belong to the statement (the guard confines exactly
// these).
func TestCompoundRefs(t *testing.T) {
	sch := builder.MustSchema(hotelDef())
	r1, r2, b := sch.Table("rooms").As("r1"), sch.Table("rooms").As("r2"), sch.Table("bookings").As("b")
	u := builder.Must(builder.Union(
		builder.Must(builder.Select(r1.Col("id")).From(r1).Build()),
		builder.Must(builder.Select(b.Col("room_id")).From(b).Build()),
	).Build())
	c := builder.With("c", builder.Must(builder.Select(r2.Col("id").As("rid")).From(r2).Build()))
	d := builder.Derived(u, "d")
	x := c.Ref()
	q := builder.Must(builder.Select(d.Col("id")).From(d).Join(x, x.Col("rid").EqCol(d.Col("id"))).With(c).Build())
	var got []string
	for _, tr := range q.Tables() {
		got = append(got, tr.Alias())
	}
	for _, want := range []string{"r1", "b", "r2", "d", "c"} {
		if !slices.Contains(got, want) {
			t.Errorf("Tables() = %v, missing %s", got, want)
		}
	}
}

// TestKeysetCursor: a cursor round-trips its values, and damaged or
// mismatched cursors are refused with ErrCursor without echoing them.
func TestKeysetCursor(t *testing.T) {
	sch := builder.MustSchema(hotelDef())
	b := sch.Table("bookings")
	ks := builder.Keyset{Keys: []builder.Order{b.Col("check_in").Desc(), b.Col("id").Asc()}}
	c, err := ks.Cursor("2024-05-01", int64(42))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ks.Page(builder.Select(b.Col("id")).From(b), c, 10).Build(); err != nil {
		t.Fatalf("page: %v", err)
	}
	if _, err := ks.Cursor("x"); !errors.Is(err, builder.ErrInvalid) {
		t.Errorf("one value for two keys: %v", err)
	}
	if _, err := ks.Cursor(nil, int64(1)); !errors.Is(err, builder.ErrInvalid) {
		t.Errorf("NULL key: %v", err)
	}
	one := builder.Keyset{Keys: []builder.Order{b.Col("id").Asc()}}
	c1, _ := one.Cursor(int64(1))
	for _, bad := range []builder.Cursor{"!!!", "bm90IGpzb24", c1, builder.Cursor(strings.Repeat("A", 40))} {
		_, err := ks.Page(builder.Select(b.Col("id")).From(b), bad, 10).Build()
		if !errors.Is(err, builder.ErrCursor) {
			t.Errorf("cursor %q: err = %v, want ErrCursor", bad, err)
		} else if strings.Contains(err.Error(), string(bad)) {
			t.Errorf("error echoes the cursor: %v", err)
		}
	}
	// A text value in an integer key's place fails the column's type check
	// (hotels.id carries the integer hotel level).
	h := sch.Table("hotels")
	hk := builder.Keyset{Keys: []builder.Order{h.Col("id").Asc()}}
	forged, _ := builder.Keyset{Keys: []builder.Order{h.Col("name").Asc()}}.Cursor("1 OR 1=1")
	if _, err := hk.Page(builder.Select(h.Col("id")).From(h), forged, 10).Build(); !errors.Is(err, builder.ErrType) {
		t.Errorf("text for integer key: err = %v, want ErrType", err)
	}
}
