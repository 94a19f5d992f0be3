package guardedsql_test

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/tenantmcp/tenantmcp/builder"
	"github.com/tenantmcp/tenantmcp/guardedsql"
	"github.com/tenantmcp/tenantmcp/scope"
)

// On MySQL and MariaDB a scope level holding one id is tested as a
// comparison with a typed bound value (MariaDB plans it as a constant
// lookup), several ids as a JSON_TABLE semi-join (which MariaDB runs as a
// duplicate weedout through a temporary table). These tests hold both
// forms to the same rows, keep non-canonical ids out of both, and pin the
// one-id plan's shape.

// weedoutScopes are scopes of the seeded hotel database (chains acme,
// globex and "7"; hotels 1-9 interleaved across them) in the one-id and
// the many-id forms.
var weedoutScopes = []struct {
	name   string
	grants []scope.Grant
	// many reports whether some level holds more than one id (the
	// JSON_TABLE form).
	many bool
}{
	{"one chain", []scope.Grant{chainG("acme")}, false},
	{"one chain named like a number", []scope.Grant{chainG("7")}, false},
	{"one hotel", []scope.Grant{hotelG(2)}, false},
	{"one chain and one hotel of another", []scope.Grant{chainG("acme"), hotelG(2)}, false},
	{"one hotel within its chain", []scope.Grant{hotelIn("globex", 5)}, false},
	{"two chains", []scope.Grant{chainG("acme"), chainG("7")}, true},
	{"two hotels", []scope.Grant{hotelG(2), hotelG(6)}, true},
	{"one chain and two hotels", []scope.Grant{chainG("globex"), hotelG(1), hotelG(6)}, true},
	{"two hotels within their chains", []scope.Grant{hotelIn("globex", 5), hotelIn("acme", 4)}, true},
}

// weedoutHotel provisions a fresh MySQL/MariaDB hotel database (its own
// uniquely named database and role), or skips without a DSN.
func weedoutHotel(t *testing.T) *hotelDB {
	t.Helper()
	engineMySQL.dsn(t)
	return engineMySQL.newHotelSized(t, 3, 3, 4, 2)
}

func bookingIDs(t *testing.T, ctx context.Context, h *hotelDB) []int64 {
	t.Helper()
	b := h.sch.Table("bookings").As("b")
	ids, err := guardedsql.All(ctx, h.db, builder.Must(builder.Select(b.Col("id")).From(b).OrderBy(b.Col("id").Asc()).Build()), guardedsql.Scalar[int64])
	if err != nil {
		t.Fatal(err)
	}
	return ids
}

func weedoutIDs(t *testing.T, h *hotelDB, q string, args ...any) []int64 {
	t.Helper()
	rows, err := h.raw.Query(q, args...)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		out = append(out, id)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestWeedoutScopesSeeTheirRows: through the guard, every scope reads,
// updates and deletes exactly its own rows in both forms, and the form is
// chosen by the scope's shape alone.
func TestWeedoutScopesSeeTheirRows(t *testing.T) {
	h := weedoutHotel(t)
	b := h.sch.Table("bookings").As("b")
	p := h.sch.Table("payments").As("p")
	all := builder.Must(builder.Select(b.Col("id")).From(b).Build())
	remaining := map[int64]bool{}
	for _, pay := range h.m.payments {
		remaining[pay.ID] = true
	}
	for i, sc := range weedoutScopes {
		t.Run(sc.name, func(t *testing.T) {
			ctx := grantCtx(sc.grants...)
			vis := h.m.visible(sc.grants)
			want := sortedKeys[int64](vis.bookings)
			if len(want) == 0 || len(want) == len(h.m.bookings) {
				t.Fatalf("scope sees %d of %d bookings: not a test of isolation", len(want), len(h.m.bookings))
			}
			text, args, err := h.db.Render(ctx, all)
			if err != nil {
				t.Fatal(err)
			}
			if got := strings.Contains(text, "JSON_TABLE"); got != sc.many {
				t.Errorf("JSON_TABLE in the SQL = %v, want %v:\n%s", got, sc.many, text)
			}
			for _, g := range sc.grants {
				if g.Level == "chain" && strings.Contains(text, g.ID) {
					t.Errorf("id %q in the SQL text:\n%s", g.ID, text)
				}
			}
			if strings.Count(text, "?") != len(args) {
				t.Fatalf("%d placeholders, %d args:\n%s", strings.Count(text, "?"), len(args), text)
			}
			if got := bookingIDs(t, ctx, h); !slices.Equal(got, want) {
				t.Fatalf("read bookings %v, want %v", got, want)
			}

			// An update of every booking in scope changes those and no other.
			mark := fmt.Sprintf("w%d", i)
			bk := h.sch.Table("bookings")
			res, err := h.db.Exec(ctx, builder.Must(builder.UpdateTable(bk).Set("status", mark).Where(bk.Col("id").Gt(0)).Build()))
			if err != nil {
				t.Fatal(err)
			}
			if got := weedoutIDs(t, h, `SELECT id FROM bookings WHERE status = ? ORDER BY id`, mark); res.RowsAffected != int64(len(want)) || !slices.Equal(got, want) {
				t.Fatalf("update: %d affected, rows %v; want %v", res.RowsAffected, got, want)
			}

			// A delete of every payment in scope removes those and no other.
			var gone []int64
			for id := range vis.payments {
				if remaining[id.(int64)] {
					gone = append(gone, id.(int64))
					delete(remaining, id.(int64))
				}
			}
			pt := h.sch.Table("payments")
			res, err = h.db.Exec(ctx, builder.Must(builder.DeleteFrom(pt).Where(pt.Col("id").Gt(0)).Build()))
			if err != nil {
				t.Fatal(err)
			}
			left := slices.Sorted(maps.Keys(remaining))
			if got := weedoutIDs(t, h, `SELECT id FROM payments ORDER BY id`); res.RowsAffected != int64(len(gone)) || !slices.Equal(got, left) {
				t.Fatalf("delete: %d affected (want %d), %d payments left, want %d", res.RowsAffected, len(gone), len(got), len(left))
			}
			pays, err := guardedsql.All(ctx, h.db, builder.Must(builder.Select(p.Col("id")).From(p).Build()), guardedsql.Scalar[int64])
			if err != nil || len(pays) != 0 {
				t.Fatalf("payments still visible after the delete: %v, %v", pays, err)
			}
		})
	}
	// The text depends on the shape, never on the ids: two one-chain
	// scopes render the same SQL, with different arguments.
	ta, aa, err := h.db.Render(grantCtx(chainG("acme")), all)
	if err != nil {
		t.Fatal(err)
	}
	tb, ab, err := h.db.Render(grantCtx(chainG("globex")), all)
	if err != nil {
		t.Fatal(err)
	}
	if ta != tb || slices.Equal(aa, ab) {
		t.Fatalf("one-chain scopes: texts equal %v, args %v / %v", ta == tb, aa, ab)
	}
}

// TestWeedoutInsertOneID: a write's new values are checked against a
// one-id scope with the same comparison: a room in the scope's hotel is
// inserted, one in another tenant's hotel is refused and not written.
func TestWeedoutInsertOneID(t *testing.T) {
	h := weedoutHotel(t)
	rooms := h.sch.Table("rooms")
	ctx := grantCtx(hotelG(2))
	if _, err := h.db.Exec(ctx, builder.Must(builder.InsertInto(rooms).Columns("hotel_id", "number", "rate").Values(2, "w-own", 1).Build())); err != nil {
		t.Fatal(err)
	}
	_, err := h.db.Exec(ctx, builder.Must(builder.InsertInto(rooms).Columns("hotel_id", "number", "rate").Values(3, "w-other", 1).Build()))
	if err == nil {
		t.Fatal("insert into another tenant's hotel succeeded")
	}
	got := weedoutIDs(t, h, `SELECT hotel_id FROM rooms WHERE number LIKE 'w-%' ORDER BY hotel_id`)
	if !slices.Equal(got, []int64{2}) {
		t.Fatalf("rooms written in hotels %v, want [2] (err %v)", got, err)
	}
}

// TestWeedoutNonCanonicalIDs: an id that is not a canonical value of its
// level's key kind matches nothing, alone or beside a valid id (which then
// alone is tested, in the one-id form): never coerced to a number, never
// matched under a case- or pad-insensitive collation.
func TestWeedoutNonCanonicalIDs(t *testing.T) {
	h := weedoutHotel(t)
	b := h.sch.Table("bookings").As("b")
	all := builder.Must(builder.Select(b.Col("id")).From(b).Build())
	five := sortedKeys[int64](h.m.visible([]scope.Grant{hotelG(5)}).bookings)
	acme := sortedKeys[int64](h.m.visible([]scope.Grant{chainG("acme")}).bookings)
	if len(five) == 0 || len(acme) == 0 {
		t.Fatal("seed has no bookings for hotel 5 or chain acme")
	}
	for _, id := range []string{"2abc", " 2", "2 ", "+2", "02", "2.0", "1e0", "0x2", "[2]", "99999999999999999999", "-0"} {
		bad := scope.Grant{Level: "hotel", ID: id}
		if got := bookingIDs(t, grantCtx(bad), h); len(got) != 0 {
			t.Errorf("hotel %q alone sees bookings %v", id, got)
		}
		ctx := grantCtx(bad, hotelG(5))
		if got := bookingIDs(t, ctx, h); !slices.Equal(got, five) {
			t.Errorf("hotel %q beside hotel 5 sees %v, want %v", id, got, five)
		}
		if text, _, err := h.db.Render(ctx, all); err != nil || strings.Contains(text, "JSON_TABLE") {
			t.Errorf("hotel %q beside hotel 5: not the one-id form (%v):\n%s", id, err, text)
		}
	}
	for _, id := range []string{"ACME", "Acme", "acme ", " acme", "acmé", "acme\u00a0"} {
		bad := chainG(id)
		if got := bookingIDs(t, grantCtx(bad), h); len(got) != 0 {
			t.Errorf("chain %q sees bookings %v", id, got)
		}
		if got := bookingIDs(t, grantCtx(bad, chainG("acme")), h); !slices.Equal(got, acme) {
			t.Errorf("chain %q beside acme sees %v, want %v", id, got, acme)
		}
	}
}

// TestWeedoutExplainOneID pins the plan shape of the one-id form on the
// server: no duplicate weedout, no temporary table, no JSON_TABLE, for a
// read, an update and a delete. (A plan shape, not a timing.)
func TestWeedoutExplainOneID(t *testing.T) {
	h := weedoutHotel(t)
	b := h.sch.Table("bookings").As("b")
	bk := h.sch.Table("bookings")
	for _, sc := range weedoutScopes {
		if sc.many {
			continue
		}
		ctx := grantCtx(sc.grants...)
		for name, st := range map[string]builder.Statement{
			"select": builder.Must(builder.Select(b.Col("id"), b.Col("status")).From(b).Where(b.Col("nights").Gt(1)).Build()),
			"update": builder.Must(builder.UpdateTable(bk).Set("status", "x").Where(bk.Col("nights").Gt(1)).Build()),
			"delete": builder.Must(builder.DeleteFrom(bk).Where(bk.Col("nights").Gt(99)).Build()),
		} {
			text, args, err := h.db.Render(ctx, st)
			if err != nil {
				t.Fatal(err)
			}
			var plan string
			if err := h.raw.QueryRow("EXPLAIN FORMAT=JSON "+text, args...).Scan(&plan); err != nil {
				t.Fatalf("%s, %s: %v\n%s", sc.name, name, err, text)
			}
			var tree any
			if err := json.Unmarshal([]byte(plan), &tree); err != nil {
				t.Fatalf("%s, %s: EXPLAIN is not JSON: %v", sc.name, name, err)
			}
			keys, tables := weedoutPlanKeys(tree)
			if !slices.Contains(tables, "b") && !slices.Contains(tables, "bookings") {
				t.Fatalf("%s, %s: plan reads no bookings table (tables %v):\n%s", sc.name, name, tables, plan)
			}
			for _, k := range []string{"duplicates_removal", "temporary_table", "materialized"} {
				if keys[k] {
					t.Errorf("%s, %s: plan has %s:\n%s\n%s", sc.name, name, k, text, plan)
				}
			}
			if strings.Contains(plan, "json_table") {
				t.Errorf("%s, %s: plan reads a JSON_TABLE:\n%s", sc.name, name, plan)
			}
		}
	}
}

// weedoutPlanKeys collects every object key of an EXPLAIN FORMAT=JSON tree, and
// the names of the tables it reads.
func weedoutPlanKeys(v any) (map[string]bool, []string) {
	keys := map[string]bool{}
	var tables []string
	var walk func(any)
	walk = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			for k, c := range x {
				keys[k] = true
				if s, ok := c.(string); ok && k == "table_name" {
					tables = append(tables, s)
				}
				walk(c)
			}
		case []any:
			for _, c := range x {
				walk(c)
			}
		}
	}
	walk(v)
	return keys, tables
}

// TestWeedoutOneIDKeepsConditionOrder: in the one-id form a caller's
// condition that fails on some values (an overflow) is still evaluated
// only on rows in scope: on another tenant's row read by primary key it
// answers like an id that does not exist, for a text, an integer and a
// tuple scope. The control (an own row) shows the condition is evaluated.
// An equality with the bound id would let MariaDB merge the guard's test
// into the CASE WHEN that orders the condition after it.
func TestWeedoutOneIDKeepsConditionOrder(t *testing.T) {
	h := weedoutHotel(t)
	rooms := h.sch.Table("rooms")
	overflow := rooms.Col("rate").Mul(int64(1) << 62).Gt(0)
	roomOf := func(hotel int64) int64 {
		for _, r := range h.m.rooms {
			if r.Hotel == hotel {
				return r.ID
			}
		}
		t.Fatalf("no room in hotel %d", hotel)
		return 0
	}
	for _, sc := range []struct {
		name       string
		grant      scope.Grant
		own, other int64 // hotels
	}{
		{"chain", chainG("globex"), 2, 1},
		{"hotel", hotelG(2), 2, 1},
		{"hotel within its chain", hotelIn("globex", 2), 2, 5},
	} {
		ctx := grantCtx(sc.grant)
		if text, _, err := h.db.Render(ctx, builder.Must(builder.Select(rooms.Col("id")).From(rooms).Build())); err != nil || strings.Contains(text, "JSON_TABLE") {
			t.Fatalf("%s: not the one-id form (%v):\n%s", sc.name, err, text)
		}
		probes := map[string]func(id int64) string{
			"select": func(id int64) string {
				got, err := guardedsql.All(ctx, h.db, builder.Must(builder.Select(rooms.Col("id")).From(rooms).Where(builder.And(rooms.Col("id").Eq(id), overflow)).Build()), guardedsql.Scalar[int64])
				return answer(int64(len(got)), err)
			},
			"update": func(id int64) string {
				r, err := h.db.Exec(ctx, builder.Must(builder.UpdateTable(rooms).Set("number", "p").Where(builder.And(rooms.Col("id").Eq(id), overflow)).ExpectOne().Build()))
				return answer(r.RowsAffected, err)
			},
		}
		for name, probe := range probes {
			own, foreign, missing := probe(roomOf(sc.own)), probe(roomOf(sc.other)), probe(1_000_000)
			if !strings.HasPrefix(own, "err:") {
				t.Errorf("%s/%s: the overflow on an own room answers %q, not an error: the probe proves nothing", sc.name, name, own)
			}
			if foreign != missing {
				t.Errorf("%s/%s: another tenant's room answers %q, a missing id %q: the error depends on its values", sc.name, name, foreign, missing)
			}
		}
	}
}
