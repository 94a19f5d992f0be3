package guardedsql_test

import (
	"context"
	"database/sql"
	"errors"
	"maps"
	"slices"
	"sort"
	"testing"

	"github.com/tenantmcp/tenantmcp/builder"
	"github.com/tenantmcp/tenantmcp/guardedsql"
	"github.com/tenantmcp/tenantmcp/scope"
)

// scopes used across the isolation tests. Hotel 7 belongs to chain acme
// while chain "7" owns hotels 3, 6, 9.
var isolationScopes = []struct {
	name   string
	grants []scope.Grant
}{
	{"chain acme", []scope.Grant{chainG("acme")}},
	{"chain globex", []scope.Grant{chainG("globex")}},
	{"chain 7", []scope.Grant{chainG("7")}},
	{"hotel 7", []scope.Grant{hotelG(7)}},
	{"hotel 2 and 9", []scope.Grant{hotelG(2), hotelG(9)}},
	{"chain globex + hotel 1", []scope.Grant{chainG("globex"), hotelG(1)}},
	{"all chains", []scope.Grant{chainG("acme"), chainG("globex"), chainG("7")}},
	// None of these may match anything: not canonical integers, wrong
	// case, a level the schema lacks.
	{"non-canonical hotel ids", []scope.Grant{{Level: "hotel", ID: "07"}, {Level: "hotel", ID: "7.0"}, {Level: "hotel", ID: " 7"}, {Level: "hotel", ID: "+7"}, {Level: "hotel", ID: "7abc"}, {Level: "hotel", ID: "0x7"}}},
	{"wrong case chain", []scope.Grant{chainG("ACME"), chainG("acme ")}},
	{"unknown level", []scope.Grant{{Level: "region", ID: "acme"}, {Level: "region", ID: "1"}}},
	{"nonexistent ids", []scope.Grant{chainG("nope"), hotelG(999)}},
	// Grants confined to ancestors (issue 13 §1): every level the group
	// path names must agree with the data. Hotel 7 belongs to acme, hotel
	// 2 to globex, hotel 1 to acme.
	{"hotel 7 within acme", []scope.Grant{hotelIn("acme", 7)}},
	{"hotel 7 within globex: ancestors disagree", []scope.Grant{hotelIn("globex", 7)}},
	{"hotel 7 within chain 7: ancestors disagree", []scope.Grant{hotelIn("7", 7)}},
	{"crossed pairs (acme,2) (globex,1)", []scope.Grant{hotelIn("acme", 2), hotelIn("globex", 1)}},
	{"hotel 2 within globex + hotel 1 within globex", []scope.Grant{hotelIn("globex", 2), hotelIn("globex", 1)}},
	{"chain 7 + hotel 1 within 7", []scope.Grant{chainG("7"), hotelIn("7", 1)}},
	{"hotel 1 within an unknown level", []scope.Grant{{Level: "hotel", ID: "1", Within: []scope.Grant{{Level: "region", ID: "acme"}}}}},
}

func ids[T any](t *testing.T, ctx context.Context, db guardedsql.Querier, q builder.Query) []T {
	t.Helper()
	out, err := guardedsql.All(ctx, db, q, guardedsql.Scalar[T])
	if err != nil {
		t.Fatalf("query: %v", err)
	}
	return out
}

func sortedKeys[K int64 | string](m map[any]bool) []K {
	var out []K
	for k := range m {
		out = append(out, k.(K))
	}
	slices.Sort(out)
	return out
}

func sorted[K int64 | string](s []K) []K {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}

func TestSelectEveryTable(t *testing.T) {
	forEachEngine(t, func(t *testing.T, e engine) {
		h := e.sharedHotel(t)
		h.forEachDB(t, func(t *testing.T, db *guardedsql.DB) {
			for _, sc := range isolationScopes {
				t.Run(sc.name, func(t *testing.T) {
					ctx := grantCtx(sc.grants...)
					want := h.m.visible(sc.grants)
					for _, tc := range []struct {
						table string
						pk    string
						want  map[any]bool
					}{
						{"hotels", "id", want.hotels},
						{"rooms", "id", want.rooms},
						{"bookings", "id", want.bookings},
						{"payments", "id", want.payments},
						{"guests", "id", want.guests},
					} {
						tr := h.sch.Table(tc.table)
						q := builder.Must(builder.Select(tr.Col(tc.pk)).From(tr).Build())
						got := sorted(ids[int64](t, ctx, db, q))
						if exp := sortedKeys[int64](tc.want); !slices.Equal(got, exp) {
							t.Errorf("%s: got %v, want %v", tc.table, got, exp)
						}
					}
					c := h.sch.Table("chains")
					got := sorted(ids[string](t, ctx, db, builder.Must(builder.Select(c.Col("id")).From(c).Build())))
					if exp := sortedKeys[string](want.chains); !slices.Equal(got, exp) {
						t.Errorf("chains: got %v, want %v", got, exp)
					}
					// The global table is visible whole to every scope.
					co := h.sch.Table("countries")
					if got := ids[string](t, ctx, db, builder.Must(builder.Select(co.Col("code")).From(co).Build())); len(got) != len(h.m.countries) {
						t.Errorf("countries: got %v", got)
					}
				})
			}
		})
	})
}

func TestSelectNonEmptyBaseline(t *testing.T) {
	// Guard against a vacuous suite: the scopes that should see data do.
	h := newHotel(t)
	v := h.m.visible([]scope.Grant{chainG("acme")})
	if len(v.bookings) == 0 || len(v.payments) == 0 || len(v.guests) == 0 || len(v.bookings) == len(h.m.bookings) {
		t.Fatalf("seed does not separate tenants: %d of %d bookings visible", len(v.bookings), len(h.m.bookings))
	}
}

type bookingRow struct {
	ID      int64
	Hotel   int64  `db:"hotel"`
	Number  string `db:"number"`
	Guest   sql.NullString
	CheckIn string
}

func TestJoins(t *testing.T) {
	forEachEngine(t, func(t *testing.T, e engine) {
		h := e.sharedHotel(t)
		h.forEachDB(t, func(t *testing.T, db *guardedsql.DB) {
			for _, sc := range isolationScopes {
				t.Run(sc.name, func(t *testing.T) {
					ctx := grantCtx(sc.grants...)
					vis := h.m.visible(sc.grants)
					b := h.sch.Table("bookings").As("b")
					r := h.sch.Table("rooms").As("r")
					g := h.sch.Table("guests").As("g")
					q := builder.Must(builder.Select(
						b.Col("id"), r.Col("hotel_id").As("hotel"), r.Col("number"), g.Col("name").As("guest"), b.Col("check_in")).
						From(b).
						Join(r, r.Col("id").EqCol(b.Col("room_id"))).
						LeftJoin(g, g.Col("id").EqCol(b.Col("guest_id"))).
						OrderBy(b.Col("id").Asc()).
						Build())
					got, err := guardedsql.All(ctx, db, q, guardedsql.RowToStruct[bookingRow])
					if err != nil {
						t.Fatal(err)
					}
					var want []bookingRow
					for _, bk := range h.m.bookings {
						if !vis.bookings[bk.ID] {
							continue
						}
						hot := h.m.hotelOf(bk.Room)
						row := bookingRow{ID: bk.ID, Hotel: hot.ID, CheckIn: bk.CheckIn}
						for _, rm := range h.m.rooms {
							if rm.ID == bk.Room {
								row.Number = rm.Number
							}
						}
						// The left-joined guest shows only if the guest is in scope.
						if bk.Guest != 0 && vis.guests[bk.Guest] {
							for _, gu := range h.m.guests {
								if gu.ID == bk.Guest {
									row.Guest = sql.NullString{String: gu.Name, Valid: true}
								}
							}
						}
						want = append(want, row)
					}
					if !slices.Equal(got, want) {
						t.Errorf("got %d rows, want %d\n got %v\nwant %v", len(got), len(want), got, want)
					}
				})
			}
		})
	})
}

func TestJoinHotelGrantHidesChainGuests(t *testing.T) {
	forEachEngine(t, func(t *testing.T, e engine) {
		// A hotel grant sees the hotel's bookings but not the chain's guests:
		// guests belong to the chain, and the hierarchy only reaches down.
		h := e.sharedHotel(t)
		ctx := grantCtx(hotelG(1))
		b := h.sch.Table("bookings").As("b")
		g := h.sch.Table("guests").As("g")
		q := builder.Must(builder.Select(b.Col("id")).From(b).Join(g, g.Col("id").EqCol(b.Col("guest_id"))).Build())
		if got := ids[int64](t, ctx, h.db, q); len(got) != 0 {
			t.Fatalf("inner join to guests under a hotel grant returned %v", got)
		}
		q = builder.Must(builder.Select(b.Col("id")).From(b).Build())
		if got := ids[int64](t, ctx, h.db, q); len(got) == 0 {
			t.Fatal("hotel grant sees no bookings")
		}
	})
}

func TestSubqueries(t *testing.T) {
	forEachEngine(t, func(t *testing.T, e engine) {
		h := e.sharedHotel(t)
		h.forEachDB(t, func(t *testing.T, db *guardedsql.DB) {
			for _, sc := range isolationScopes {
				t.Run(sc.name, func(t *testing.T) {
					ctx := grantCtx(sc.grants...)
					vis := h.m.visible(sc.grants)

					// IN subquery: bookings with a payment of at least 300.
					b := h.sch.Table("bookings").As("b")
					p := h.sch.Table("payments").As("p")
					sub := builder.Must(builder.Select(p.Col("booking_id")).From(p).Where(p.Col("amount").Ge(300)).Build())
					q := builder.Must(builder.Select(b.Col("id")).From(b).Where(b.Col("id").InQuery(sub)).Build())
					want := map[any]bool{}
					for _, pm := range h.m.payments {
						if vis.payments[pm.ID] && pm.Amount >= 300 && vis.bookings[pm.Booking] {
							want[pm.Booking] = true
						}
					}
					if got, exp := sorted(ids[int64](t, ctx, db, q)), sortedKeys[int64](want); !slices.Equal(got, exp) {
						t.Errorf("IN subquery: got %v, want %v", got, exp)
					}

					// Correlated EXISTS: hotels having a room with rate >= 120.
					ho := h.sch.Table("hotels").As("h")
					r := h.sch.Table("rooms").As("r")
					ex := builder.Must(builder.Select(r.Col("id")).From(r).
						Where(r.Col("hotel_id").EqCol(ho.Col("id")), r.Col("rate").Ge(120)).Build())
					q = builder.Must(builder.Select(ho.Col("id")).From(ho).Where(builder.Exists(ex)).Build())
					want = map[any]bool{}
					for _, rm := range h.m.rooms {
						if rm.Rate >= 120 && vis.hotels[rm.Hotel] {
							want[rm.Hotel] = true
						}
					}
					if got, exp := sorted(ids[int64](t, ctx, db, q)), sortedKeys[int64](want); !slices.Equal(got, exp) {
						t.Errorf("EXISTS: got %v, want %v", got, exp)
					}

					// NOT EXISTS over payments: visible bookings with no visible payment.
					b2 := h.sch.Table("bookings").As("b2")
					p2 := h.sch.Table("payments").As("p2")
					nx := builder.Must(builder.Select(p2.Col("id")).From(p2).Where(p2.Col("booking_id").EqCol(b2.Col("id"))).Build())
					q = builder.Must(builder.Select(b2.Col("id")).From(b2).Where(builder.NotExists(nx)).Build())
					want = map[any]bool{}
					paid := map[int64]bool{}
					for _, pm := range h.m.payments {
						paid[pm.Booking] = true
					}
					for id := range vis.bookings {
						if !paid[id.(int64)] {
							want[id] = true
						}
					}
					if got, exp := sorted(ids[int64](t, ctx, db, q)), sortedKeys[int64](want); !slices.Equal(got, exp) {
						t.Errorf("NOT EXISTS: got %v, want %v", got, exp)
					}
				})
			}
		})
	})
}

func TestSubqueryCannotReachOtherTenant(t *testing.T) {
	forEachEngine(t, func(t *testing.T, e engine) {
		// Under chain acme, a subquery that names globex's rooms by id finds
		// nothing, so the outer query finds nothing either.
		h := e.sharedHotel(t)
		ctx := grantCtx(chainG("acme"))
		var foreign []int64
		for _, r := range h.m.rooms {
			if h.m.hotelOf(r.ID).Chain == "globex" {
				foreign = append(foreign, r.ID)
			}
		}
		ho := h.sch.Table("hotels").As("h")
		r := h.sch.Table("rooms").As("r")
		sub := builder.Must(builder.Select(r.Col("hotel_id")).From(r).Where(r.Col("id").In(foreign)).Build())
		q := builder.Must(builder.Select(ho.Col("id")).From(ho).Where(ho.Col("id").InQuery(sub)).Build())
		if got := ids[int64](t, ctx, h.db, q); len(got) != 0 {
			t.Fatalf("got %v", got)
		}
		// And a NOT IN over the same subquery does not turn the other
		// tenant's absence into presence: it returns acme's own hotels only.
		q = builder.Must(builder.Select(ho.Col("id")).From(ho).Where(ho.Col("id").NotInQuery(
			builder.Must(builder.Select(r.Col("hotel_id")).From(r).Where(r.Col("id").In(foreign)).Build()))).Build())
		want := sortedKeys[int64](h.m.visible([]scope.Grant{chainG("acme")}).hotels)
		if got := sorted(ids[int64](t, ctx, h.db, q)); !slices.Equal(got, want) {
			t.Fatalf("NOT IN: got %v, want %v", got, want)
		}
	})
}

type revenue struct {
	Hotel    int64
	Bookings int64
	Revenue  int64
}

func TestGroupByAggregates(t *testing.T) {
	forEachEngine(t, func(t *testing.T, e engine) {
		h := e.sharedHotel(t)
		h.forEachDB(t, func(t *testing.T, db *guardedsql.DB) {
			for _, sc := range isolationScopes {
				t.Run(sc.name, func(t *testing.T) {
					ctx := grantCtx(sc.grants...)
					vis := h.m.visible(sc.grants)
					p := h.sch.Table("payments").As("p")
					b := h.sch.Table("bookings").As("b")
					r := h.sch.Table("rooms").As("r")
					q := builder.Must(builder.Select(
						r.Col("hotel_id").As("hotel"),
						builder.CountDistinct(b.Col("id")).As("bookings"),
						builder.Sum(p.Col("amount")).As("revenue")).
						From(p).
						Join(b, b.Col("id").EqCol(p.Col("booking_id"))).
						Join(r, r.Col("id").EqCol(b.Col("room_id"))).
						GroupBy(r.Col("hotel_id")).
						Having(builder.Sum(p.Col("amount")).Gt(0)).
						OrderBy(r.Col("hotel_id").Asc()).
						Build())
					got, err := guardedsql.All(ctx, db, q, guardedsql.RowToStruct[revenue])
					if err != nil {
						t.Fatal(err)
					}
					agg := map[int64]*revenue{}
					seen := map[int64]bool{}
					for _, pm := range h.m.payments {
						if !vis.payments[pm.ID] {
							continue
						}
						bk := h.m.booking(pm.Booking)
						hid := h.m.hotelOf(bk.Room).ID
						if agg[hid] == nil {
							agg[hid] = &revenue{Hotel: hid}
						}
						agg[hid].Revenue += pm.Amount
						if !seen[bk.ID] {
							seen[bk.ID] = true
							agg[hid].Bookings++
						}
					}
					var want []revenue
					for _, k := range slices.Sorted(maps.Keys(agg)) {
						want = append(want, *agg[k])
					}
					if !slices.Equal(got, want) {
						t.Errorf("got %v, want %v", got, want)
					}

					// COUNT(*) over the whole table.
					all := h.sch.Table("bookings")
					n, err := guardedsql.One(ctx, db, builder.Must(builder.Select(builder.CountAll()).From(all).Build()), guardedsql.Scalar[int64])
					if err != nil {
						t.Fatal(err)
					}
					if n != int64(len(vis.bookings)) {
						t.Errorf("count(*) = %d, want %d", n, len(vis.bookings))
					}
				})
			}
		})
	})
}

func TestPagination(t *testing.T) {
	forEachEngine(t, func(t *testing.T, e engine) {
		h := e.sharedHotel(t)
		h.forEachDB(t, func(t *testing.T, db *guardedsql.DB) {
			for _, sc := range isolationScopes[:6] {
				t.Run(sc.name, func(t *testing.T) {
					ctx := grantCtx(sc.grants...)
					want := sortedKeys[int64](h.m.visible(sc.grants).bookings)
					b := h.sch.Table("bookings").As("b")
					base := builder.Select(b.Col("id")).From(b).OrderBy(b.Col("id").Asc())
					var got []int64
					for page := 0; ; page++ {
						q := builder.Must(base.Limit(5).Offset(page * 5).Build())
						part := ids[int64](t, ctx, db, q)
						got = append(got, part...)
						if len(part) < 5 {
							break
						}
					}
					if !slices.Equal(got, want) {
						t.Errorf("pages: got %v, want %v", got, want)
					}
				})
			}
		})
	})
}

func TestCrossTenantIDInWhereIsNotFound(t *testing.T) {
	forEachEngine(t, func(t *testing.T, e engine) {
		h := e.sharedHotel(t)
		ctx := grantCtx(chainG("acme"))
		vis := h.m.visible([]scope.Grant{chainG("acme")})
		for _, bk := range h.m.bookings {
			b := h.sch.Table("bookings").As("b")
			q := builder.Must(builder.Select(b.Col("status")).From(b).Where(b.Col("id").Eq(bk.ID)).Build())
			var status string
			err := h.db.QueryRow(ctx, q).Scan(&status)
			switch {
			case vis.bookings[bk.ID] && err != nil:
				t.Fatalf("own booking %d: %v", bk.ID, err)
			case vis.bookings[bk.ID] && status != bk.Status:
				t.Fatalf("own booking %d: status %q, want %q", bk.ID, status, bk.Status)
			case !vis.bookings[bk.ID] && (!errors.Is(err, guardedsql.ErrNotFound) || !errors.Is(err, sql.ErrNoRows)):
				t.Fatalf("foreign booking %d: err = %v, want not found", bk.ID, err)
			}
		}
		// A booking id that exists nowhere gives the very same error.
		b := h.sch.Table("bookings").As("b")
		q := builder.Must(builder.Select(b.Col("status")).From(b).Where(b.Col("id").Eq(1_000_000)).Build())
		var s string
		errMissing := h.db.QueryRow(ctx, q).Scan(&s)
		foreign := h.m.bookings[1].ID // globex
		q = builder.Must(builder.Select(b.Col("status")).From(b).Where(b.Col("id").Eq(foreign)).Build())
		errForeign := h.db.QueryRow(ctx, q).Scan(&s)
		if errMissing == nil || errForeign == nil || errMissing.Error() != errForeign.Error() {
			t.Fatalf("missing %v vs foreign %v: must be indistinguishable", errMissing, errForeign)
		}
	})
}

func TestLikeAndOperators(t *testing.T) {
	forEachEngine(t, func(t *testing.T, e engine) {
		h := e.sharedHotel(t)
		ctx := grantCtx(chainG("globex"))
		vis := h.m.visible([]scope.Grant{chainG("globex")})
		g := h.sch.Table("guests").As("g")
		// Every chain has a guest called "Ann Lee"; globex sees only its own.
		q := builder.Must(builder.Select(g.Col("id")).From(g).Where(g.Col("name").HasPrefix("Ann")).Build())
		var want []int64
		for _, gu := range h.m.guests {
			if vis.guests[gu.ID] && gu.Name == "Ann Lee" {
				want = append(want, gu.ID)
			}
		}
		if got := sorted(ids[int64](t, ctx, h.db, q)); !slices.Equal(got, want) {
			t.Fatalf("HasPrefix: got %v, want %v", got, want)
		}
		// Contains escapes wildcards: "%" matches a literal percent sign only.
		q = builder.Must(builder.Select(g.Col("id")).From(g).Where(g.Col("email").Contains("%")).Build())
		if got := ids[int64](t, ctx, h.db, q); len(got) != 0 {
			t.Fatalf("Contains(%%) matched %v", got)
		}
		// Or, Not, Between, In, IsNull.
		b := h.sch.Table("bookings").As("b")
		q = builder.Must(builder.Select(b.Col("id")).From(b).Where(
			builder.Or(b.Col("status").Eq("cancelled"), builder.Not(b.Col("nights").Between(1, 3))),
			b.Col("guest_id").IsNotNull(),
			b.Col("status").NotIn("no_show"),
		).Build())
		var wantB []int64
		for _, bk := range h.m.bookings {
			if vis.bookings[bk.ID] && (bk.Status == "cancelled" || bk.Nights > 3) && bk.Guest != 0 {
				wantB = append(wantB, bk.ID)
			}
		}
		if got := sorted(ids[int64](t, ctx, h.db, q)); !slices.Equal(got, wantB) {
			t.Fatalf("operators: got %v, want %v", got, wantB)
		}
		// An OR in user code cannot widen the scope: "id = <foreign> OR 1 = 1"
		// style conditions stay inside the guard's AND.
		q = builder.Must(builder.Select(b.Col("id")).From(b).Where(
			builder.Or(b.Col("id").Eq(h.m.bookings[0].ID), b.Col("id").IsNotNull())).Build())
		if got, exp := sorted(ids[int64](t, ctx, h.db, q)), sortedKeys[int64](vis.bookings); !slices.Equal(got, exp) {
			t.Fatalf("OR: got %v, want %v", got, exp)
		}
	})
}

func TestDistinctAndSelfJoin(t *testing.T) {
	forEachEngine(t, func(t *testing.T, e engine) {
		h := e.sharedHotel(t)
		ctx := grantCtx(chainG("7"), hotelG(1))
		vis := h.m.visible([]scope.Grant{chainG("7"), hotelG(1)})
		// Pairs of hotels in the same chain (self join), distinct chain ids.
		a := h.sch.Table("hotels").As("a")
		c := h.sch.Table("hotels").As("c")
		q := builder.Must(builder.Select(a.Col("chain_id")).Distinct().From(a).
			Join(c, builder.And(c.Col("chain_id").EqCol(a.Col("chain_id")), c.Col("id").NeCol(a.Col("id")))).Build())
		got := sorted(ids[string](t, ctx, h.db, q))
		perChain := map[string]int{}
		for _, ho := range h.m.hotels {
			if vis.hotels[ho.ID] {
				perChain[ho.Chain]++
			}
		}
		var want []string
		for ch, n := range perChain {
			if n > 1 {
				want = append(want, ch)
			}
		}
		sort.Strings(want)
		if !slices.Equal(got, want) {
			t.Fatalf("got %v, want %v", got, want)
		}
	})
}

func TestGlobalJoin(t *testing.T) {
	forEachEngine(t, func(t *testing.T, e engine) {
		h := e.sharedHotel(t)
		ctx := grantCtx(hotelG(5))
		ho := h.sch.Table("hotels").As("h")
		co := h.sch.Table("countries").As("co")
		type row struct {
			ID      int64
			Country string
		}
		q := builder.Must(builder.Select(ho.Col("id"), co.Col("name").As("country")).From(ho).
			Join(co, co.Col("code").EqCol(ho.Col("country"))).Build())
		got, err := guardedsql.All(ctx, h.db, q, guardedsql.RowToStruct[row])
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 1 || got[0].ID != 5 || got[0].Country == "" {
			t.Fatalf("got %v", got)
		}
	})
}
