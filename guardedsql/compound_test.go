package guardedsql_test

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"slices"
	"testing"

	"github.com/tenantmcp/tenantmcp/builder"
	"github.com/tenantmcp/tenantmcp/guardedsql"
	"github.com/tenantmcp/tenantmcp/scope"
)

// Isolation of the read structure of issue 15 (derived tables, CTEs, set
// operations, keyset pages) on every engine, for every isolation scope,
// against the Go model of the seeded hotel data (ids interleave across
// chains). Each case reads a tenant-bound table only inside the part under
// test, so a leak through that part alone shows as a foreign value.

// setOracle computes op over the branch results a and b like SQL does
// (distinct except for UNION ALL), sorted.
func setOracle[K cmp.Ordered](op string, a, b []K) []K {
	in := func(s []K, x K) bool { return slices.Contains(s, x) }
	var out []K
	switch op {
	case "UNION ALL":
		out = append(slices.Clone(a), b...)
		slices.Sort(out)
		return out
	case "UNION":
		out = append(slices.Clone(a), b...)
	case "INTERSECT":
		for _, x := range a {
			if in(b, x) {
				out = append(out, x)
			}
		}
	case "EXCEPT":
		for _, x := range a {
			if !in(b, x) {
				out = append(out, x)
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

func setOp(op string, a, b builder.Query) builder.SetBuilder {
	switch op {
	case "UNION ALL":
		return builder.UnionAll(a, b)
	case "UNION":
		return builder.Union(a, b)
	case "INTERSECT":
		return builder.Intersect(a, b)
	}
	return builder.Except(a, b)
}

var setOps = []string{"UNION", "UNION ALL", "INTERSECT", "EXCEPT"}

func TestSetOperationsConfined(t *testing.T) {
	forEachEngine(t, func(t *testing.T, e engine) {
		h := e.sharedHotel(t)
		h.forEachDB(t, func(t *testing.T, db *guardedsql.DB) {
			for _, sc := range isolationScopes {
				t.Run(sc.name, func(t *testing.T) {
					ctx := grantCtx(sc.grants...)
					v := h.m.visible(sc.grants)
					// Text branches whose values repeat across tenants
					// (hotel names "Grand k"), so that a foreign row in the
					// right branch of EXCEPT or INTERSECT would change the
					// result too: A = names of the hotels in scope, B =
					// names of those in France.
					var names, frNames []string
					for _, ho := range h.m.hotels {
						if v.hotels[ho.ID] {
							names = append(names, ho.Name)
							if ho.Country == "FR" {
								frNames = append(frNames, ho.Name)
							}
						}
					}
					// Integer branches: rooms in scope at rate >= 120, and
					// rooms of the cancelled bookings in scope.
					var rated, cancelled []int64
					for _, r := range h.m.rooms {
						if v.rooms[r.ID] && r.Rate >= 120 {
							rated = append(rated, r.ID)
						}
					}
					for _, b := range h.m.bookings {
						if v.bookings[b.ID] && b.Status == "cancelled" {
							cancelled = append(cancelled, b.Room)
						}
					}
					h1, h2 := h.sch.Table("hotels").As("h1"), h.sch.Table("hotels").As("h2")
					qa := builder.Must(builder.Select(h1.Col("name")).From(h1).Build())
					qb := builder.Must(builder.Select(h2.Col("name")).From(h2).Where(h2.Col("country").Eq("FR")).Build())
					r, b := h.sch.Table("rooms").As("r"), h.sch.Table("bookings").As("b")
					qc := builder.Must(builder.Select(r.Col("id")).From(r).Where(r.Col("rate").Ge(120)).Build())
					qd := builder.Must(builder.Select(b.Col("room_id").As("id")).From(b).Where(b.Col("status").Eq("cancelled")).Build())
					for _, op := range setOps {
						for _, pair := range []struct {
							name   string
							q1, q2 builder.Query
							w1, w2 []string
						}{{"names,fr", qa, qb, names, frNames}, {"fr,names", qb, qa, frNames, names}} {
							q := builder.Must(setOp(op, pair.q1, pair.q2).Build())
							if got, want := sorted(ids[string](t, ctx, db, q)), setOracle(op, pair.w1, pair.w2); !slices.Equal(got, want) {
								t.Errorf("%s %s: got %v, want %v", pair.name, op, got, want)
							}
						}
						for _, pair := range []struct {
							name   string
							q1, q2 builder.Query
							w1, w2 []int64
						}{{"rated,cancelled", qc, qd, rated, cancelled}, {"cancelled,rated", qd, qc, cancelled, rated}} {
							q := builder.Must(setOp(op, pair.q1, pair.q2).Build())
							if got, want := sorted(ids[int64](t, ctx, db, q)), setOracle(op, pair.w1, pair.w2); !slices.Equal(got, want) {
								t.Errorf("%s %s: got %v, want %v", pair.name, op, got, want)
							}
						}
					}
					// ORDER BY and LIMIT over the whole union.
					q := builder.Must(builder.Union(qc, qd).Desc("id").Limit(3).Build())
					want := setOracle("UNION", rated, cancelled)
					slices.Reverse(want)
					want = want[:min(3, len(want))]
					if got := ids[int64](t, ctx, db, q); !slices.Equal(got, want) {
						t.Errorf("union ordered, limited: got %v, want %v", got, want)
					}
					// ... and an OFFSET over it.
					q = builder.Must(builder.Union(qc, qd).Desc("id").Limit(3).Offset(1).Build())
					want = setOracle("UNION", rated, cancelled)
					slices.Reverse(want)
					want = want[min(1, len(want)):min(4, len(want))]
					if got := ids[int64](t, ctx, db, q); !slices.Equal(got, want) {
						t.Errorf("union ordered, limited, offset: got %v, want %v", got, want)
					}
					// A third branch chained on (SetBuilder.Union), and a
					// set whose first branch reads a CTE of the whole set
					// (SetBuilder.With): the CTE's body is then the only
					// guarded read of that branch.
					var cheap []int64
					for _, r := range h.m.rooms {
						if v.rooms[r.ID] && r.Rate < 110 {
							cheap = append(cheap, r.ID)
						}
					}
					r3 := h.sch.Table("rooms").As("r3")
					qe := builder.Must(builder.Select(r3.Col("id")).From(r3).Where(r3.Col("rate").Lt(110)).Build())
					q = builder.Must(builder.UnionAll(qc, qd).Union(qe).Build())
					if got, want := sorted(ids[int64](t, ctx, db, q)), setOracle("UNION", setOracle("UNION ALL", rated, cancelled), cheap); !slices.Equal(got, want) {
						t.Errorf("union all, then union: got %v, want %v", got, want)
					}
					r4 := h.sch.Table("rooms").As("r4")
					c := builder.With("rated", builder.Must(builder.Select(r4.Col("id")).From(r4).Where(r4.Col("rate").Ge(120)).Build()))
					x := c.Ref()
					qx := builder.Must(builder.Select(x.Col("id")).From(x).Build())
					q = builder.Must(builder.Union(qx, qe).With(c).Build())
					if got, want := sorted(ids[int64](t, ctx, db, q)), setOracle("UNION", rated, cheap); !slices.Equal(got, want) {
						t.Errorf("union over a CTE of the set: got %v, want %v", got, want)
					}
				})
			}
		})
	})
}

func TestCTEBodiesConfined(t *testing.T) {
	forEachEngine(t, func(t *testing.T, e engine) {
		h := e.sharedHotel(t)
		h.forEachDB(t, func(t *testing.T, db *guardedsql.DB) {
			for _, sc := range isolationScopes {
				t.Run(sc.name, func(t *testing.T) {
					ctx := grantCtx(sc.grants...)
					v := h.m.visible(sc.grants)
					var rated []int64
					perHotel := map[int64]int64{}
					for _, r := range h.m.rooms {
						if v.rooms[r.ID] && r.Rate >= 120 {
							rated = append(rated, r.ID)
							perHotel[r.Hotel]++
						}
					}
					r := h.sch.Table("rooms").As("r")
					c := builder.With("rated", builder.Must(builder.Select(r.Col("id"), r.Col("hotel_id")).From(r).Where(r.Col("rate").Ge(120)).Build()))
					// The CTE alone: its body is the only guarded reference.
					x := c.Ref()
					q := builder.Must(builder.Select(x.Col("id")).From(x).With(c).Build())
					if got := sorted(ids[int64](t, ctx, db, q)); !slices.Equal(got, sorted(rated)) {
						t.Errorf("rated: got %v, want %v", got, sorted(rated))
					}
					// A second CTE reading the first, grouped.
					x2 := c.As("x2")
					c2 := builder.With("per_hotel", builder.Must(builder.Select(x2.Col("hotel_id"), builder.CountAll().As("n")).From(x2).GroupBy(x2.Col("hotel_id")).Build()))
					y := c2.Ref()
					q2 := builder.Must(builder.Select(y.Col("hotel_id"), y.Col("n")).From(y).With(c, c2).Build())
					got, err := guardedsql.All(ctx, db, q2, pair)
					if err != nil {
						t.Fatal(err)
					}
					if want := pairs(perHotel); !slices.Equal(sorted(got), want) {
						t.Errorf("per hotel: got %v, want %v", sorted(got), want)
					}
					// A CTE joined with a schema table (both guarded) and read
					// twice under two aliases.
					x3, x4 := c.As("x3"), c.As("x4")
					ho := h.sch.Table("hotels").As("ho")
					q3 := builder.Must(builder.Select(x3.Col("id")).From(x3).
						Join(x4, x4.Col("id").EqCol(x3.Col("id"))).
						LeftJoin(ho, ho.Col("id").EqCol(x3.Col("hotel_id"))).With(c).Build())
					if got := sorted(ids[int64](t, ctx, db, q3)); !slices.Equal(got, sorted(rated)) {
						t.Errorf("rated self-joined: got %v, want %v", got, sorted(rated))
					}
				})
			}
		})
	})
}

func TestDerivedTablesConfined(t *testing.T) {
	forEachEngine(t, func(t *testing.T, e engine) {
		h := e.sharedHotel(t)
		h.forEachDB(t, func(t *testing.T, db *guardedsql.DB) {
			for _, sc := range isolationScopes {
				t.Run(sc.name, func(t *testing.T) {
					ctx := grantCtx(sc.grants...)
					v := h.m.visible(sc.grants)
					nights := map[int64]int64{}
					for _, b := range h.m.bookings {
						if v.bookings[b.ID] {
							nights[b.Room] += b.Nights
						}
					}
					b := h.sch.Table("bookings").As("b")
					sub := builder.Must(builder.Select(b.Col("room_id"), builder.Sum(b.Col("nights")).As("total")).From(b).GroupBy(b.Col("room_id")).Build())
					d := builder.Derived(sub, "d")
					q := builder.Must(builder.Select(d.Col("room_id"), d.Col("total")).From(d).Build())
					got, err := guardedsql.All(ctx, db, q, pair)
					if err != nil {
						t.Fatal(err)
					}
					if want := pairs(nights); !slices.Equal(sorted(got), want) {
						t.Errorf("nights per room: got %v, want %v", sorted(got), want)
					}
					// A derived union joined to a schema table, with a bound
					// value inside the derived body.
					r1, b2 := h.sch.Table("rooms").As("r1"), h.sch.Table("bookings").As("b2")
					u := builder.Must(builder.Union(
						builder.Must(builder.Select(r1.Col("id")).From(r1).Where(r1.Col("rate").Ge(120)).Build()),
						builder.Must(builder.Select(b2.Col("room_id").As("id")).From(b2).Where(b2.Col("status").Eq("cancelled")).Build()),
					).Build())
					du := builder.Derived(u, "du")
					rr := h.sch.Table("rooms").As("rr")
					q2 := builder.Must(builder.Select(rr.Col("hotel_id")).Distinct().From(du).Join(rr, rr.Col("id").EqCol(du.Col("id"))).Build())
					want := map[int64]bool{}
					for _, r := range h.m.rooms {
						if !v.rooms[r.ID] {
							continue
						}
						hit := r.Rate >= 120
						for _, bk := range h.m.bookings {
							hit = hit || bk.Room == r.ID && v.bookings[bk.ID] && bk.Status == "cancelled"
						}
						if hit {
							want[r.Hotel] = true
						}
					}
					if got := sorted(ids[int64](t, ctx, db, q2)); !slices.Equal(got, slices.Sorted(maps.Keys(want))) {
						t.Errorf("hotels of the union: got %v, want %v", got, slices.Sorted(maps.Keys(want)))
					}
				})
			}
		})
	})
}

// TestKeysetPages: keyset pages (nights descending, id ascending) return
// exactly the scope's bookings in order; a cursor forged from another
// tenant's booking only positions the page within the caller's rows.
func TestKeysetPages(t *testing.T) {
	forEachEngine(t, func(t *testing.T, e engine) {
		h := e.sharedHotel(t)
		h.forEachDB(t, func(t *testing.T, db *guardedsql.DB) {
			for _, sc := range isolationScopes[:7] {
				t.Run(sc.name, func(t *testing.T) {
					ctx := grantCtx(sc.grants...)
					v := h.m.visible(sc.grants)
					var mine, all []mBooking
					for _, b := range h.m.bookings {
						all = append(all, b)
						if v.bookings[b.ID] {
							mine = append(mine, b)
						}
					}
					order := func(a, b mBooking) int { return cmp.Or(cmp.Compare(b.Nights, a.Nights), cmp.Compare(a.ID, b.ID)) }
					slices.SortFunc(mine, order)
					b := h.sch.Table("bookings").As("b")
					ks := builder.Keyset{Keys: []builder.Order{b.Col("nights").Desc(), b.Col("id").Asc()}}
					base := builder.Select(b.Col("id"), b.Col("nights")).From(b)
					page := func(c builder.Cursor) []mBooking {
						q := builder.Must(ks.Page(base, c, 4).Build())
						out, err := guardedsql.All(ctx, db, q, func(r *guardedsql.Rows) (mBooking, error) {
							var x mBooking
							return x, r.Scan(&x.ID, &x.Nights)
						})
						if err != nil {
							t.Fatal(err)
						}
						return out
					}
					var got []int64
					var c builder.Cursor
					for n := 0; n <= len(mine); n++ {
						p := page(c)
						for _, x := range p {
							got = append(got, x.ID)
						}
						if len(p) < 4 {
							break
						}
						var err error
						if c, err = ks.Cursor(p[len(p)-1].Nights, p[len(p)-1].ID); err != nil {
							t.Fatal(err)
						}
					}
					var want []int64
					for _, x := range mine {
						want = append(want, x.ID)
					}
					if !slices.Equal(got, want) {
						t.Fatalf("pages: got %v, want %v", got, want)
					}
					// Forged cursors at foreign bookings: the page is the
					// caller's own rows after that position, nothing else.
					for _, f := range all {
						if v.bookings[f.ID] || f.ID%3 != 0 {
							continue
						}
						c, err := ks.Cursor(f.Nights, f.ID)
						if err != nil {
							t.Fatal(err)
						}
						var want []int64
						for _, x := range mine {
							if order(x, f) > 0 && len(want) < 4 {
								want = append(want, x.ID)
							}
						}
						var got []int64
						for _, x := range page(c) {
							got = append(got, x.ID)
						}
						if !slices.Equal(got, want) {
							t.Errorf("cursor at foreign booking %d: got %v, want %v", f.ID, got, want)
						}
					}
				})
			}
		})
	})
}

// TestLockOutsideTxRefused: a locking read outside DB.Tx is refused before
// anything is sent; inside Tx it runs and returns the scope's rows.
func TestLockOutsideTxRefused(t *testing.T) {
	forEachEngine(t, func(t *testing.T, e engine) {
		h := e.sharedHotel(t)
		ctx := grantCtx(hotelG(7))
		r := h.sch.Table("rooms").As("r")
		for _, lock := range []func(builder.SelectBuilder) builder.SelectBuilder{builder.SelectBuilder.ForUpdate, builder.SelectBuilder.ForShare} {
			q := builder.Must(lock(builder.Select(r.Col("id")).From(r).OrderBy(r.Col("id").Asc())).Build())
			if _, err := h.db.Query(ctx, q); !errors.Is(err, guardedsql.ErrLockOutsideTx) {
				t.Errorf("outside Tx: err = %v, want ErrLockOutsideTx", err)
			}
			var got []int64
			err := h.db.Tx(ctx, func(tx *guardedsql.Tx) error {
				var err error
				got, err = guardedsql.All(ctx, tx, q, guardedsql.Scalar[int64])
				return err
			})
			if err != nil {
				t.Fatal(err)
			}
			if want := sortedKeys[int64](h.m.visible([]scope.Grant{hotelG(7)}).rooms); !slices.Equal(got, want) {
				t.Errorf("locked read: got %v, want %v", got, want)
			}
		}
	})
}

func pair(r *guardedsql.Rows) (string, error) {
	var a, b int64
	err := r.Scan(&a, &b)
	return fmt.Sprintf("%d:%d", a, b), err
}

func pairs(m map[int64]int64) []string {
	var out []string
	for k, v := range m {
		out = append(out, fmt.Sprintf("%d:%d", k, v))
	}
	slices.Sort(out)
	return out
}

// TestCTEShadowingTableRefused: a CTE named like a schema table (in any
// case: SQLite folds identifiers) is refused before anything is sent,
// even when the statement itself does not read that table.
func TestCTEShadowingTableRefused(t *testing.T) {
	h := engineSQLite.newHotel(t)
	r := h.sch.Table("rooms").As("r")
	for _, name := range []string{"bookings", "Bookings", "PAYMENTS"} {
		c := builder.With(name, builder.Must(builder.Select(r.Col("id")).From(r).Build()))
		x := c.As("x")
		q, err := builder.Select(x.Col("id")).From(x).With(c).Build()
		if err != nil {
			t.Fatalf("%s: Build: %v", name, err)
		}
		h.rec.reset()
		if _, err := h.db.Query(grantCtx(chainG("acme")), q); !errors.Is(err, guardedsql.ErrInvalid) {
			t.Errorf("%s: err = %v, want ErrInvalid", name, err)
		}
		if n := len(h.rec.statements()); n != 0 {
			t.Errorf("%s: %d statements sent", name, n)
		}
	}
}
