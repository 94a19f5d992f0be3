package guardedsql_test

// Isolation of the scalar expressions (builder/scalar.go, builder/window.go)
// on every engine: each query's rows are compared, cell by cell, with an
// oracle computed in Go from the model's rows visible to the scope only, so
// a foreign row that shifted a rank, a running sum, a count in a scalar
// subquery or a group would show.

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/tenantmcp/tenantmcp/builder"
	"github.com/tenantmcp/tenantmcp/guardedsql"
	"github.com/tenantmcp/tenantmcp/scope"
)

// exprScopes interleave: hotels 1..9 alternate between chains acme,
// globex and 7; hotel 7 is acme's.
var exprScopes = []struct {
	name   string
	grants []scope.Grant
}{
	{"chain acme", []scope.Grant{chainG("acme")}},
	{"chain globex", []scope.Grant{chainG("globex")}},
	{"chain 7", []scope.Grant{chainG("7")}},
	{"hotel 7", []scope.Grant{hotelG(7)}},
	{"hotel 2 and 9", []scope.Grant{hotelG(2), hotelG(9)}},
	{"hotel 7 within acme", []scope.Grant{hotelIn("acme", 7)}},
	{"nonexistent", []scope.Grant{chainG("nope")}},
}

// cells runs q and renders every cell as text: NULL, integers in decimal,
// reals in the shortest form ("1", "1.5"), text as is.
func cells(t *testing.T, ctx context.Context, db guardedsql.Querier, q builder.Query) [][]string {
	t.Helper()
	rows, err := db.Query(ctx, q)
	if err != nil {
		t.Fatalf("query: %v", err)
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		t.Fatal(err)
	}
	var out [][]string
	for rows.Next() {
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			t.Fatal(err)
		}
		row := make([]string, len(cols))
		for i, v := range vals {
			row[i] = cellText(v)
		}
		out = append(out, row)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func cellText(v any) string {
	switch x := v.(type) {
	case nil:
		return "NULL"
	case []byte:
		return normNum(string(x))
	case string:
		return normNum(x)
	case int64:
		return strconv.FormatInt(x, 10)
	case int32:
		return strconv.FormatInt(int64(x), 10)
	case float64:
		return strconv.FormatFloat(x, 'g', -1, 64)
	case float32:
		return strconv.FormatFloat(float64(x), 'g', -1, 32)
	case driver.Valuer: // pgx's numeric
		dv, err := x.Value()
		if err != nil {
			return "error: " + err.Error()
		}
		return cellText(dv)
	}
	return fmt.Sprint(v)
}

// normNum renders a decimal sum sent as text (PostgreSQL numeric, MySQL
// DECIMAL) like the integers and reals of the other engines.
func normNum(s string) string {
	if f, err := strconv.ParseFloat(s, 64); err == nil && strings.ContainsAny(s, ".") && !strings.ContainsAny(s, "eE") {
		return strconv.FormatFloat(f, 'g', -1, 64)
	}
	return s
}

func num(v int64) string { return strconv.FormatInt(v, 10) }

func diffCells(t *testing.T, got, want [][]string) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%d rows, want %d\n got %v\nwant %v", len(got), len(want), got, want)
	}
	for i := range got {
		if !slices.Equal(got[i], want[i]) {
			t.Fatalf("row %d = %v, want %v", i, got[i], want[i])
		}
	}
}

// visibleRooms returns the model's rooms the grants see, by id.
func visibleRooms(h *hotelDB, grants []scope.Grant) []mRoom {
	v := h.m.visible(grants)
	var out []mRoom
	for _, r := range h.m.rooms {
		if v.rooms[r.ID] {
			out = append(out, r)
		}
	}
	slices.SortFunc(out, func(a, b mRoom) int { return int(a.ID - b.ID) })
	return out
}

func TestExprWindowIsolation(t *testing.T) {
	forEachEngine(t, func(t *testing.T, e engine) {
		h := e.sharedHotel(t)
		r := h.sch.Table("rooms")
		id, rate, number := r.Col("id"), r.Col("rate"), r.Col("number")
		byID := builder.Window().OrderBy(id.Asc())
		q := builder.Must(builder.Select(id,
			builder.RowNumber().Over(byID).As("rn"),
			builder.Rank().Over(builder.Window().PartitionBy(number).OrderBy(id.Asc())).As("rk"),
			builder.DenseRank().Over(builder.Window().OrderBy(rate.Asc())).As("dr"),
			builder.Sum(rate).Over(byID).As("running"),
			builder.CountAll().Over(builder.Window().PartitionBy(number)).As("same_number"),
			builder.Max(rate).Over(builder.Window()).As("top"),
			// With the empty OVER () above, MariaDB 10.11 numbered rn in
			// this window's order until the guard spelled the empty one
			// PARTITION BY NULL.
			builder.Rank().Over(builder.Window().PartitionBy(r.Col("hotel_id")).OrderBy(id.Asc())).As("hrk"),
		).From(r).OrderBy(builder.Sum(rate).Over(builder.Window().OrderBy(id.Asc())).Asc(), id.Asc()).Build())
		h.forEachDB(t, func(t *testing.T, db *guardedsql.DB) {
			for _, sc := range exprScopes {
				t.Run(sc.name, func(t *testing.T) {
					rooms := visibleRooms(h, sc.grants)
					var rates []int64
					var top int64
					for _, x := range rooms {
						if !slices.Contains(rates, x.Rate) {
							rates = append(rates, x.Rate)
						}
						top = max(top, x.Rate)
					}
					slices.Sort(rates)
					var want [][]string
					var run int64
					for i, x := range rooms {
						run += x.Rate
						rk, same, hrk := int64(1), int64(0), int64(1)
						for _, y := range rooms {
							if y.Number == x.Number {
								same++
								if y.ID < x.ID {
									rk++
								}
							}
							if y.Hotel == x.Hotel && y.ID < x.ID {
								hrk++
							}
						}
						want = append(want, []string{num(x.ID), num(int64(i + 1)), num(rk),
							num(int64(slices.Index(rates, x.Rate) + 1)), num(run), num(same), num(top), num(hrk)})
					}
					diffCells(t, cells(t, grantCtx(sc.grants...), db, q), want)
				})
			}
		})
	})
}

func TestExprScalarsIsolation(t *testing.T) {
	forEachEngine(t, func(t *testing.T, e engine) {
		h := e.sharedHotel(t)
		b, r := h.sch.Table("bookings"), h.sch.Table("rooms")
		rate, nights := r.Col("rate"), b.Col("nights")
		q := builder.Must(builder.Select(b.Col("id"),
			rate.Mul(nights).Add(1).As("cost"),
			builder.Case().When(rate.Ge(120), "high").When(rate.Eq(110), "mid").Else("low").As("band"),
			builder.Coalesce(b.Col("guest_id"), 0).As("guest"),
			builder.NullIf(nights, 1).As("nights_but_one"),
			builder.Cast(nights, builder.AsText).As("nights_text"),
			builder.Upper(b.Col("status")).As("st"),
			builder.Length(b.Col("status")).As("len"),
			builder.Extract(builder.PartMonth, builder.Cast(b.Col("check_in"), builder.AsDate)).As("month"),
			nights.Div(2).As("half"),
			builder.Lower(builder.Val("MiXeD")).As("lit"),
			builder.Cast(builder.DateTrunc(builder.PartMonth, builder.Cast(b.Col("check_in"), builder.AsDate)), builder.AsText).As("month_start"),
			builder.Round(nights.Add(0.5)).As("half_up"), // halves round away from zero everywhere
			builder.Case().When(rate.Ge(120), "high").End().As("high_only"),
		).From(b).Join(r, r.Col("id").EqCol(b.Col("room_id"))).
			Where(rate.Mul(nights).Gt(300), builder.Abs(nights.Sub(3)).Le(1)).
			OrderBy(b.Col("id").Asc()).Build())
		h.forEachDB(t, func(t *testing.T, db *guardedsql.DB) {
			for _, sc := range exprScopes {
				t.Run(sc.name, func(t *testing.T) {
					v := h.m.visible(sc.grants)
					var want [][]string
					for _, bk := range h.m.bookings {
						if !v.bookings[bk.ID] {
							continue
						}
						var rt int64
						for _, x := range h.m.rooms {
							if x.ID == bk.Room {
								rt = x.Rate
							}
						}
						d := bk.Nights - 3
						if rt*bk.Nights <= 300 || d < -1 || d > 1 {
							continue
						}
						band := "low"
						if rt >= 120 {
							band = "high"
						} else if rt == 110 {
							band = "mid"
						}
						nb := num(bk.Nights)
						if bk.Nights == 1 {
							nb = "NULL"
						}
						highOnly := "NULL"
						if rt >= 120 {
							highOnly = "high"
						}
						want = append(want, []string{num(bk.ID), num(rt*bk.Nights + 1), band, num(bk.Guest), nb, num(bk.Nights),
							strings.ToUpper(bk.Status), num(int64(len(bk.Status))), strings.TrimLeft(bk.CheckIn[5:7], "0"),
							strconv.FormatFloat(float64(bk.Nights)/2, 'g', -1, 64), "mixed", bk.CheckIn[:8] + "01",
							num(bk.Nights + 1), highOnly})
					}
					slices.SortFunc(want, func(a, b []string) int { x, _ := strconv.Atoi(a[0]); y, _ := strconv.Atoi(b[0]); return x - y })
					diffCells(t, cells(t, grantCtx(sc.grants...), db, q), want)
				})
			}
		})
	})
}

func TestExprGroupAndScalarSubquery(t *testing.T) {
	forEachEngine(t, func(t *testing.T, e engine) {
		h := e.sharedHotel(t)
		r, r2, r3 := h.sch.Table("rooms"), h.sch.Table("rooms").As("r2"), h.sch.Table("rooms").As("r3")
		rate := r.Col("rate")
		band := builder.Case().When(rate.Ge(120), "high").Else("low")
		grouped := builder.Must(builder.Select(band.As("band"), builder.CountAll().As("n"), builder.Sum(rate.Add(1)).As("s")).
			From(r).GroupBy(band).OrderBy(band.Asc()).Build())
		sameNumber := builder.Must(builder.Select(builder.CountAll()).From(r2).Where(r2.Col("number").EqCol(r.Col("number"))).Build())
		top := builder.Must(builder.Select(builder.Max(r3.Col("rate"))).From(r3).Build())
		same := builder.ScalarQuery(sameNumber)
		subq := builder.Must(builder.Select(r.Col("id"), same.As("same"), builder.ScalarQuery(top).As("top")).
			From(r).OrderBy(same.Desc(), r.Col("id").Asc()).Build())
		h.forEachDB(t, func(t *testing.T, db *guardedsql.DB) {
			for _, sc := range exprScopes {
				t.Run(sc.name, func(t *testing.T) {
					ctx := grantCtx(sc.grants...)
					rooms := visibleRooms(h, sc.grants)
					n, s := map[string]int64{}, map[string]int64{}
					var top int64
					for _, x := range rooms {
						k := "low"
						if x.Rate >= 120 {
							k = "high"
						}
						n[k]++
						s[k] += x.Rate + 1
						top = max(top, x.Rate)
					}
					var want [][]string
					for _, k := range []string{"high", "low"} {
						if n[k] > 0 {
							want = append(want, []string{k, num(n[k]), num(s[k])})
						}
					}
					diffCells(t, cells(t, ctx, db, grouped), want)
					want = nil
					for _, x := range rooms {
						same := int64(0)
						for _, y := range rooms {
							if y.Number == x.Number {
								same++
							}
						}
						want = append(want, []string{num(x.ID), num(same), num(top)})
					}
					slices.SortStableFunc(want, func(a, b []string) int { x, _ := strconv.Atoi(a[1]); y, _ := strconv.Atoi(b[1]); return y - x })
					diffCells(t, cells(t, ctx, db, subq), want)
				})
			}
		})
	})
}

// countersDDL is a small tenant table with a counter and a JSON document.
var countersDDL = []string{
	`CREATE TABLE tenants (id KEY_T PRIMARY KEY)`,
	`CREATE TABLE counters (id INT_T PRIMARY KEY, tenant_id KEY_T NOT NULL REFERENCES tenants(id), hits INT_T NOT NULL, data JSON_T, ip INET_T)`,
}

var countersDef = builder.SchemaDef{
	Levels: []builder.Level{{Name: "tenant", Key: builder.TextKey}},
	Tables: []builder.TableDef{
		{Name: "tenants", Columns: []string{"id"}, PrimaryKey: []string{"id"}, Levels: map[string]string{"id": "tenant"}},
		{Name: "counters", Columns: []string{"id", "tenant_id", "hits", "data", "ip"}, PrimaryKey: []string{"id"},
			ForeignKeys: []builder.ForeignKey{{Columns: []string{"tenant_id"}, RefTable: "tenants"}},
			Levels:      map[string]string{"tenant_id": "tenant"}},
	},
	Functions: []builder.FuncDef{
		{Name: "sqrt", Args: []builder.Kind{builder.KindReal}, Result: builder.KindReal, Dialects: []string{"postgres", "mysql"}},
		{Name: "reverse", Args: []builder.Kind{builder.KindText}, Result: builder.KindText, Dialects: []string{"postgres", "mysql"}},
	},
}

// newCounters provisions the counters tables on e with rows for tenants a
// and b, interleaved: odd ids are a's, even ids b's.
func newCounters(t *testing.T, e engine) (*scratch, *builder.Schema, *guardedsql.DB) {
	t.Helper()
	jsonT := map[string]string{"postgres": "JSONB", "mysql": "JSON"}[e.name]
	if jsonT == "" {
		jsonT = "TEXT"
	}
	inetT := map[string]string{"postgres": "INET", "mysql": "VARCHAR(45)"}[e.name]
	if inetT == "" {
		inetT = "TEXT"
	}
	ddl := make([]string, len(countersDDL))
	for i, q := range countersDDL {
		ddl[i] = strings.NewReplacer("JSON_T", jsonT, "INET_T", inetT).Replace(q)
	}
	s := newScratch(t, e, ddl)
	s.mustExec(t, `INSERT INTO tenants VALUES ('a'), ('b')`)
	for i := int64(1); i <= 8; i++ {
		ten := "a"
		if i%2 == 0 {
			ten = "b"
		}
		doc := fmt.Sprintf(`{"is_mobile": %t, "score": %d, "ua": {"os": "os%d"}}`, i%3 == 0, i*10, i%2)
		if i == 5 {
			doc = `{"score": null}`
		}
		s.mustExec(t, `INSERT INTO counters VALUES (?, ?, ?, ?, ?)`, i, ten, i*100, doc, fmt.Sprintf("10.0.%d.%d", i%2, i))
	}
	sch := builder.MustSchema(countersDef)
	db, err := s.open(sch)
	if err != nil {
		t.Fatal(err)
	}
	return s, sch, db
}

func TestExprJSONIsolation(t *testing.T) {
	forEachEngine(t, func(t *testing.T, e engine) {
		_, sch, db := newCounters(t, e)
		c := sch.Table("counters")
		data := c.Col("data")
		mobile := builder.JSONText(data, "is_mobile")
		score := builder.JSONNumber(data, "score")
		perRow := builder.Must(builder.Select(c.Col("id"), mobile.As("m"), score.As("score"), builder.JSONText(data, "ua", "os").As("os")).
			From(c).Where(builder.JSONNumber(data, "score").Ge(20)).OrderBy(builder.JSONText(data, "ua", "os").Desc(), c.Col("id").Asc()).Build())
		grouped := builder.Must(builder.Select(mobile.As("m"), builder.CountAll().As("n"), builder.Sum(c.Col("hits")).As("hits")).
			From(c).GroupBy(mobile).OrderBy(mobile.Asc()).Build())
		for _, tc := range []struct {
			ten        string
			rows, grps [][]string
		}{
			// a: 1 (false, 10, os1), 3 (true, 30, os1), 5 (absent, null), 7 (false, 70, os1)
			{"a", [][]string{{"3", "true", "30", "os1"}, {"7", "false", "70", "os1"}},
				[][]string{{"NULL", "1", "500"}, {"false", "2", "800"}, {"true", "1", "300"}}},
			// b: 2 (false, 20, os0), 4 (false, 40), 6 (true, 60), 8 (false, 80)
			{"b", [][]string{{"2", "false", "20", "os0"}, {"4", "false", "40", "os0"}, {"6", "true", "60", "os0"}, {"8", "false", "80", "os0"}},
				[][]string{{"false", "3", "1400"}, {"true", "1", "600"}}},
		} {
			t.Run(tc.ten, func(t *testing.T) {
				ctx := grantCtx(scope.Grant{Level: "tenant", ID: tc.ten})
				diffCells(t, cells(t, ctx, db, perRow), tc.rows)
				got := cells(t, ctx, db, grouped)
				// NULL sorts first on SQLite and MySQL, last on PostgreSQL.
				slices.SortFunc(got, func(a, b []string) int { return strings.Compare(a[0], b[0]) })
				diffCells(t, got, tc.grps)
			})
		}
	})
}

// TestExprCastInet: the Citus tutorial's case, an inet column (PostgreSQL;
// text elsewhere) read as text, filtered and ordered on that text: each
// tenant sees its own addresses only.
func TestExprCastInet(t *testing.T) {
	forEachEngine(t, func(t *testing.T, e engine) {
		_, sch, db := newCounters(t, e)
		c := sch.Table("counters")
		ip := builder.Cast(c.Col("ip"), builder.AsText)
		q := builder.Must(builder.Select(c.Col("id"), ip.As("ip")).From(c).Where(builder.Cast(c.Col("ip"), builder.AsText).Like("10.0.%")).
			OrderBy(ip.Desc()).Build())
		suffix := map[string]string{"postgres": "/32"}[e.name]
		for ten, ids := range map[string][]int64{"a": {7, 5, 3, 1}, "b": {8, 6, 4, 2}} {
			var want [][]string
			for _, i := range ids {
				want = append(want, []string{num(i), fmt.Sprintf("10.0.%d.%d%s", i%2, i, suffix)})
			}
			diffCells(t, cells(t, grantCtx(scope.Grant{Level: "tenant", ID: ten}), db, q), want)
		}
	})
}

// TestExprFuncAvailability: a registered function runs on the engines the
// schema names and fails at render, naming engine and function, elsewhere.
func TestExprFuncAvailability(t *testing.T) {
	forEachEngine(t, func(t *testing.T, e engine) {
		_, sch, db := newCounters(t, e)
		c := sch.Table("counters")
		q := builder.Must(builder.Select(c.Col("id"), builder.Round(sch.Func("sqrt", c.Col("hits"))).As("r")).From(c).OrderBy(c.Col("id").Asc()).Build())
		ctx := grantCtx(scope.Grant{Level: "tenant", ID: "b"})
		if e.name == "sqlite" {
			_, err := db.Query(ctx, q)
			if !errors.Is(err, guardedsql.ErrUnsupported) || !strings.Contains(err.Error(), "sqrt") || !strings.Contains(err.Error(), "sqlite") {
				t.Fatalf("err = %v, want ErrUnsupported naming sqrt and sqlite", err)
			}
			return
		}
		want := [][]string{{"2", "14"}, {"4", "20"}, {"6", "24"}, {"8", "28"}}
		diffCells(t, cells(t, ctx, db, q), want)
	})
}

// Comparisons between two columns (LtCol, LeCol, GtCol, GeCol), NOT LIKE
// and a column list (Cols) read exactly the tenant's rows on every engine:
// the bookings whose guest's id is below, at most, above or at least their
// room's id (ids interleave across chains, so each comparison passes
// bookings of every tenant), and those whose status is not "cancelled".
func TestColumnComparisonsConfined(t *testing.T) {
	forEachEngine(t, func(t *testing.T, e engine) {
		h := e.sharedHotel(t)
		b, r := h.sch.Table("bookings").As("b"), h.sch.Table("rooms").As("r")
		where := func(p builder.Pred) builder.Query {
			return builder.Must(builder.Select(b.Cols("id")).From(b).Join(r, r.Col("id").EqCol(b.Col("room_id"))).Where(p).Build())
		}
		g, rm := b.Col("guest_id"), r.Col("id") // a booking without a guest (NULL) passes none of them
		cases := []struct {
			name string
			q    builder.Query
			keep func(mBooking) bool
		}{
			{"guest < room", where(g.LtCol(rm)), func(x mBooking) bool { return x.Guest != 0 && x.Guest < x.Room }},
			{"guest <= room", where(g.LeCol(rm)), func(x mBooking) bool { return x.Guest != 0 && x.Guest <= x.Room }},
			{"guest > room", where(g.GtCol(rm)), func(x mBooking) bool { return x.Guest != 0 && x.Guest > x.Room }},
			{"guest >= room", where(g.GeCol(rm)), func(x mBooking) bool { return x.Guest != 0 && x.Guest >= x.Room }},
			{"not cancelled", builder.Must(builder.Select(b.Cols("id")).From(b).Where(b.Col("status").NotLike("cancel%")).Build()),
				func(x mBooking) bool { return !strings.HasPrefix(x.Status, "cancel") }},
		}
		h.forEachDB(t, func(t *testing.T, db *guardedsql.DB) {
			separates := map[string]bool{} // another tenant's booking passed the case's condition
			for _, sc := range isolationScopes {
				t.Run(sc.name, func(t *testing.T) {
					v := h.m.visible(sc.grants)
					for _, c := range cases {
						var want, other []int64
						for _, x := range h.m.bookings {
							if c.keep(x) {
								if v.bookings[x.ID] {
									want = append(want, x.ID)
								} else {
									other = append(other, x.ID)
								}
							}
						}
						separates[c.name] = separates[c.name] || len(other) > 0 && len(want) > 0
						if got := sorted(ids[int64](t, grantCtx(sc.grants...), db, c.q)); !slices.Equal(got, sorted(want)) {
							t.Errorf("%s: got %v, want %v", c.name, got, sorted(want))
						}
					}
				})
			}
			for _, c := range cases {
				if !separates[c.name] {
					t.Errorf("%s: no scope had its own and another tenant's bookings pass the condition: the case checks nothing", c.name)
				}
			}
		})
	})
}
