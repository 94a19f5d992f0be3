package guardedsql_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/tenantmcp/tenantmcp/builder"
	"github.com/tenantmcp/tenantmcp/guardedsql"
	"github.com/tenantmcp/tenantmcp/scope"
)

// dump reads a whole table through the unguarded handle, for before/after
// comparisons that do not depend on the guard.
func dump(t *testing.T, raw *sql.DB, table string) string {
	t.Helper()
	rows, err := raw.Query(`SELECT * FROM ` + table + ` ORDER BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	cols, _ := rows.Columns()
	var b strings.Builder
	for rows.Next() {
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			t.Fatal(err)
		}
		fmt.Fprintln(&b, vals...)
	}
	return b.String()
}

// foreignRows dumps, through the unguarded handle, every row that belongs
// neither to chain nor to "newco" (a chain the tests create and move
// rows to).
func foreignRows(t testing.TB, h *hotelDB, chain string) string {
	t.Helper()
	q := func(query string) string {
		rows, err := h.raw.Query(query, chain)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		var b strings.Builder
		cols, _ := rows.Columns()
		for rows.Next() {
			vals := make([]any, len(cols))
			ptrs := make([]any, len(cols))
			for i := range vals {
				ptrs[i] = &vals[i]
			}
			if err := rows.Scan(ptrs...); err != nil {
				t.Fatal(err)
			}
			fmt.Fprintln(&b, vals...)
		}
		return b.String()
	}
	return q(`SELECT * FROM chains WHERE id NOT IN (?, 'newco') ORDER BY id`) +
		q(`SELECT * FROM hotels WHERE chain_id NOT IN (?, 'newco') ORDER BY id`) +
		q(`SELECT r.* FROM rooms r JOIN hotels h ON h.id = r.hotel_id WHERE h.chain_id NOT IN (?, 'newco') ORDER BY r.id`) +
		q(`SELECT g.* FROM guests g WHERE g.chain_id NOT IN (?, 'newco') ORDER BY g.id`) +
		q(`SELECT b.* FROM bookings b JOIN rooms r ON r.id = b.room_id JOIN hotels h ON h.id = r.hotel_id WHERE h.chain_id NOT IN (?, 'newco') ORDER BY b.id`) +
		q(`SELECT p.* FROM payments p JOIN bookings b ON b.id = p.booking_id JOIN rooms r ON r.id = b.room_id JOIN hotels h ON h.id = r.hotel_id WHERE h.chain_id NOT IN (?, 'newco') ORDER BY p.id`)
}

func count(t *testing.T, raw *sql.DB, table string) int {
	var n int
	if err := raw.QueryRow(`SELECT COUNT(*) FROM ` + table).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func roomOf(h *hotelDB, chain string) int64 {
	for _, r := range h.m.rooms {
		if h.m.hotelOf(r.ID).Chain == chain {
			return r.ID
		}
	}
	panic(chain)
}

func guestOf(h *hotelDB, chain string) int64 {
	for _, g := range h.m.guests {
		if g.Chain == chain {
			return g.ID
		}
	}
	panic(chain)
}

func bookingOf(h *hotelDB, chain string) int64 {
	for _, b := range h.m.bookings {
		if h.m.hotelOf(b.Room).Chain == chain {
			return b.ID
		}
	}
	panic(chain)
}

func hotelOfChain(h *hotelDB, chain string) int64 {
	for _, ho := range h.m.hotels {
		if ho.Chain == chain {
			return ho.ID
		}
	}
	panic(chain)
}

func TestInsert(t *testing.T) {
	forEachEngine(t, func(t *testing.T, e engine) {
		h := e.newHotel(t)
		acme := grantCtx(chainG("acme"))
		before := foreignRows(t, h, "acme")
		rooms := h.sch.Table("rooms")
		bookings := h.sch.Table("bookings")

		t.Run("own parent", func(t *testing.T) {
			ins := builder.Must(builder.InsertInto(rooms).Columns("hotel_id", "number", "rate").
				Values(hotelOfChain(h, "acme"), "999", 80).Build())
			res, err := h.db.Exec(acme, ins)
			if err != nil {
				t.Fatal(err)
			}
			if res.RowsAffected != 1 || res.LastInsertID == 0 {
				t.Fatalf("result %+v", res)
			}
			r := h.sch.Table("rooms").As("r")
			var number string
			if err := h.db.QueryRow(acme, builder.Must(builder.Select(r.Col("number")).From(r).Where(r.Col("id").Eq(res.LastInsertID)).Build())).Scan(&number); err != nil || number != "999" {
				t.Fatalf("new room: %q %v", number, err)
			}
		})

		t.Run("foreign parent", func(t *testing.T) {
			n := count(t, h.raw, "rooms")
			for _, hid := range []any{hotelOfChain(h, "globex"), hotelOfChain(h, "7"), int64(424242), "2abc", fmt.Sprint(hotelOfChain(h, "globex"))} {
				ins, err := builder.InsertInto(rooms).Columns("hotel_id", "number", "rate").Values(hid, "666", 1).Build()
				if hid == "2abc" {
					// Not an integer: refused at Build, naming the column,
					// before any engine could coerce it.
					if !errors.Is(err, builder.ErrType) {
						t.Errorf("hotel %v: Build err = %v, want builder.ErrType", hid, err)
					}
					continue
				}
				if err != nil {
					t.Fatal(err)
				}
				_, err = h.db.Exec(acme, ins)
				if !errors.Is(err, guardedsql.ErrNotFound) {
					t.Errorf("hotel %v: err = %v, want ErrNotFound", hid, err)
				}
			}
			if count(t, h.raw, "rooms") != n {
				t.Fatal("a row was inserted")
			}
		})

		t.Run("foreign secondary reference", func(t *testing.T) {
			// Own room, other chain's guest: refused like a foreign parent.
			ins := builder.Must(builder.InsertInto(bookings).Columns("room_id", "guest_id", "check_in", "nights", "status").
				Values(roomOf(h, "acme"), guestOf(h, "globex"), "2025-06-01", 2, "confirmed").Build())
			if _, err := h.db.Exec(acme, ins); !errors.Is(err, guardedsql.ErrNotFound) {
				t.Fatalf("err = %v", err)
			}
			// A NULL guest is fine.
			ins = builder.Must(builder.InsertInto(bookings).Columns("room_id", "guest_id", "check_in", "nights", "status").
				Values(roomOf(h, "acme"), nil, "2025-06-01", 2, "confirmed").Build())
			if _, err := h.db.Exec(acme, ins); err != nil {
				t.Fatal(err)
			}
		})

		t.Run("scope parent missing or NULL", func(t *testing.T) {
			ins := builder.Must(builder.InsertInto(rooms).Columns("number", "rate").Values("1", 1).Build())
			if _, err := h.db.Exec(acme, ins); !errors.Is(err, guardedsql.ErrRefused) {
				t.Fatalf("missing parent: %v", err)
			}
			ins = builder.Must(builder.InsertInto(rooms).Columns("hotel_id", "number", "rate").Values(nil, "1", 1).Build())
			if _, err := h.db.Exec(acme, ins); !errors.Is(err, guardedsql.ErrNotFound) {
				t.Fatalf("NULL parent: %v", err)
			}
		})

		t.Run("root rows", func(t *testing.T) {
			chains := h.sch.Table("chains")
			ins := builder.Must(builder.InsertInto(chains).Columns("id", "name").Values("acme2", "Acme Two").Build())
			if _, err := h.db.Exec(acme, ins); !errors.Is(err, guardedsql.ErrOutOfScope) {
				t.Fatalf("chain outside scope: %v", err)
			}
			newco := grantCtx(chainG("newco"))
			ins = builder.Must(builder.InsertInto(chains).Columns("id", "name").Values("newco", "New Co").Build())
			if _, err := h.db.Exec(newco, ins); err != nil {
				t.Fatalf("chain inside scope: %v", err)
			}
			// A hotel needs its chain in scope: a hotel grant cannot create a
			// hotel, even one with its own granted id.
			hotels := h.sch.Table("hotels")
			ins = builder.Must(builder.InsertInto(hotels).Columns("id", "chain_id", "name").Values(500, "acme", "H").Build())
			if _, err := h.db.Exec(grantCtx(hotelG(500)), ins); !errors.Is(err, guardedsql.ErrNotFound) {
				t.Fatalf("hotel by hotel grant: %v", err)
			}
			ins = builder.Must(builder.InsertInto(hotels).Columns("id", "chain_id", "name").Values(501, "globex", "H").Build())
			if _, err := h.db.Exec(acme, ins); !errors.Is(err, guardedsql.ErrNotFound) {
				t.Fatalf("hotel in foreign chain: %v", err)
			}
			ins = builder.Must(builder.InsertInto(hotels).Columns("id", "chain_id", "name").Values(502, "acme", "H").Build())
			if _, err := h.db.Exec(acme, ins); err != nil {
				t.Fatalf("hotel in own chain: %v", err)
			}
			// Guests carry the chain level directly; no FK check applies to a
			// column not declared as one, the value itself must be granted.
			guests := h.sch.Table("guests")
			ins = builder.Must(builder.InsertInto(guests).Columns("chain_id", "name", "email").Values("globex", "Eve", "e@x").Build())
			if _, err := h.db.Exec(acme, ins); !errors.Is(err, guardedsql.ErrNotFound) {
				t.Fatalf("guest in foreign chain: %v", err)
			}
		})

		t.Run("all or nothing", func(t *testing.T) {
			n := count(t, h.raw, "rooms")
			ins := builder.Must(builder.InsertInto(rooms).Columns("hotel_id", "number", "rate").
				Values(hotelOfChain(h, "acme"), "A1", 1).
				Values(hotelOfChain(h, "acme"), "A2", 1).
				Values(hotelOfChain(h, "globex"), "G1", 1).Build())
			if _, err := h.db.Exec(acme, ins); !errors.Is(err, guardedsql.ErrNotFound) {
				t.Fatalf("err = %v", err)
			}
			if count(t, h.raw, "rooms") != n {
				t.Fatal("partial insert")
			}
			ins = builder.Must(builder.InsertInto(rooms).Columns("hotel_id", "number", "rate").
				Values(hotelOfChain(h, "acme"), "A1", 1).Values(hotelOfChain(h, "acme"), "A2", 1).Build())
			res, err := h.db.Exec(acme, ins)
			if err != nil || res.RowsAffected != 2 || count(t, h.raw, "rooms") != n+2 {
				t.Fatalf("two rows: %+v %v", res, err)
			}
		})

		t.Run("global table is read-only", func(t *testing.T) {
			ins := builder.Must(builder.InsertInto(h.sch.Table("countries")).Columns("code", "name").Values("XX", "X").Build())
			if _, err := h.db.Exec(acme, ins); !errors.Is(err, guardedsql.ErrReadOnly) {
				t.Fatalf("err = %v", err)
			}
		})

		if after := foreignRows(t, h, "acme"); after != before {
			t.Fatal("rows of other tenants changed")
		}
	})
}

func TestUpdateDelete(t *testing.T) {
	forEachEngine(t, func(t *testing.T, e engine) {
		h := e.newHotel(t)
		acme := grantCtx(chainG("acme"))
		before := foreignRows(t, h, "acme")
		bk := h.sch.Table("bookings")

		t.Run("own row", func(t *testing.T) {
			id := bookingOf(h, "acme")
			up := builder.Must(builder.UpdateTable(bk).Set("status", "no_show").Where(bk.Col("id").Eq(id)).ExpectOne().Build())
			if res, err := h.db.Exec(acme, up); err != nil || res.RowsAffected != 1 {
				t.Fatalf("%+v %v", res, err)
			}
			var s string
			h.raw.QueryRow(`SELECT status FROM bookings WHERE id = ?`, id).Scan(&s)
			if s != "no_show" {
				t.Fatalf("status %q", s)
			}
		})

		t.Run("cross-tenant target", func(t *testing.T) {
			for _, chain := range []string{"globex", "7"} {
				id := bookingOf(h, chain)
				up := builder.Must(builder.UpdateTable(bk).Set("status", "hacked").Where(bk.Col("id").Eq(id)).ExpectOne().Build())
				if _, err := h.db.Exec(acme, up); !errors.Is(err, guardedsql.ErrNotFound) {
					t.Errorf("update %s booking: %v", chain, err)
				}
				up = builder.Must(builder.UpdateTable(bk).Set("status", "hacked").Where(bk.Col("id").Eq(id)).Build())
				if res, err := h.db.Exec(acme, up); err != nil || res.RowsAffected != 0 {
					t.Errorf("update %s booking without ExpectOne: %+v %v", chain, res, err)
				}
				// A condition on a different reference to the same table is refused.
				if _, err := builder.DeleteFrom(h.sch.Table("payments")).Where(h.sch.Table("payments").Col("booking_id").Eq(id)).Build(); !errors.Is(err, builder.ErrInvalid) {
					t.Errorf("foreign TableRef in DELETE: %v", err)
				}
				p := h.sch.Table("payments")
				del := builder.Must(builder.DeleteFrom(p).Where(p.Col("booking_id").Eq(id)).ExpectOne().Build())
				if _, err := h.db.Exec(acme, del); !errors.Is(err, guardedsql.ErrNotFound) {
					t.Errorf("delete %s payment: %v", chain, err)
				}
			}
		})

		t.Run("broad update touches own rows only", func(t *testing.T) {
			up := builder.Must(builder.UpdateTable(bk).Set("nights", 9).Where(bk.Col("status").Eq("confirmed")).Build())
			res, err := h.db.Exec(acme, up)
			if err != nil {
				t.Fatal(err)
			}
			want := 0
			vis := h.m.visible([]scope.Grant{chainG("acme")})
			for _, b := range h.m.bookings {
				if vis.bookings[b.ID] && b.Status == "confirmed" {
					want++
				}
			}
			if res.RowsAffected != int64(want) || want == 0 {
				t.Fatalf("affected %d, want %d", res.RowsAffected, want)
			}
		})

		t.Run("moving a row to another tenant", func(t *testing.T) {
			rm := h.sch.Table("rooms")
			own := roomOf(h, "acme")
			up := builder.Must(builder.UpdateTable(rm).Set("hotel_id", hotelOfChain(h, "globex")).Where(rm.Col("id").Eq(own)).ExpectOne().Build())
			if _, err := h.db.Exec(acme, up); !errors.Is(err, guardedsql.ErrNotFound) {
				t.Fatalf("move room: %v", err)
			}
			up = builder.Must(builder.UpdateTable(rm).Set("hotel_id", nil).Where(rm.Col("id").Eq(own)).ExpectOne().Build())
			if _, err := h.db.Exec(acme, up); !errors.Is(err, guardedsql.ErrNotFound) {
				t.Fatalf("orphan room: %v", err)
			}
			ho := h.sch.Table("hotels")
			up = builder.Must(builder.UpdateTable(ho).Set("chain_id", "globex").Where(ho.Col("id").Eq(hotelOfChain(h, "acme"))).ExpectOne().Build())
			if _, err := h.db.Exec(acme, up); !errors.Is(err, guardedsql.ErrNotFound) {
				t.Fatalf("move hotel: %v", err)
			}
			// Within one's own scope the move works.
			both := grantCtx(chainG("acme"), chainG("newco"))
			h.raw.Exec(`INSERT INTO chains VALUES ('newco', 'New')`)
			if _, err := h.db.Exec(both, up); !errors.Is(err, guardedsql.ErrNotFound) {
				t.Fatalf("move hotel to globex with acme+newco: %v", err)
			}
			up = builder.Must(builder.UpdateTable(ho).Set("chain_id", "newco").Where(ho.Col("id").Eq(hotelOfChain(h, "acme"))).ExpectOne().Build())
			if _, err := h.db.Exec(both, up); err != nil {
				t.Fatalf("move hotel within scope: %v", err)
			}
			// A hotel grant may not move its hotel to another chain.
			up = builder.Must(builder.UpdateTable(ho).Set("chain_id", "acme").Where(ho.Col("id").Eq(hotelOfChain(h, "acme"))).ExpectOne().Build())
			if _, err := h.db.Exec(grantCtx(hotelG(hotelOfChain(h, "acme"))), up); !errors.Is(err, guardedsql.ErrNotFound) {
				t.Fatalf("hotel grant moving its hotel: %v", err)
			}
		})

		t.Run("ExpectOne with several rows changes nothing", func(t *testing.T) {
			snap := dump(t, h.raw, "bookings")
			up := builder.Must(builder.UpdateTable(bk).Set("status", "x").Where(bk.Col("nights").Ge(1)).ExpectOne().Build())
			if _, err := h.db.Exec(acme, up); !errors.Is(err, guardedsql.ErrTooManyRows) {
				t.Fatalf("err = %v", err)
			}
			if dump(t, h.raw, "bookings") != snap {
				t.Fatal("bookings changed")
			}
		})

		t.Run("delete own", func(t *testing.T) {
			p := h.sch.Table("payments")
			var own int64
			vis := h.m.visible([]scope.Grant{chainG("acme")})
			moved := hotelOfChain(h, "acme") // now in chain newco (see above)
			for _, pm := range h.m.payments {
				if vis.payments[pm.ID] && h.m.hotelOf(h.m.booking(pm.Booking).Room).ID != moved {
					own = pm.ID
					break
				}
			}
			del := builder.Must(builder.DeleteFrom(p).Where(p.Col("id").Eq(own)).ExpectOne().Build())
			if _, err := h.db.Exec(acme, del); err != nil {
				t.Fatal(err)
			}
			if _, err := h.db.Exec(acme, del); !errors.Is(err, guardedsql.ErrNotFound) {
				t.Fatalf("second delete: %v", err)
			}
		})

		t.Run("delete with subquery", func(t *testing.T) {
			// Delete payments of cancelled bookings: the subquery is guarded too,
			// so naming another tenant's bookings in it deletes nothing.
			p := h.sch.Table("payments")
			b := h.sch.Table("bookings").As("b")
			var foreign []int64
			for _, x := range h.m.bookings {
				if h.m.hotelOf(x.Room).Chain != "acme" {
					foreign = append(foreign, x.ID)
				}
			}
			sub := builder.Must(builder.Select(b.Col("id")).From(b).Where(b.Col("id").In(foreign)).Build())
			del := builder.Must(builder.DeleteFrom(p).Where(p.Col("booking_id").InQuery(sub)).Build())
			if res, err := h.db.Exec(acme, del); err != nil || res.RowsAffected != 0 {
				t.Fatalf("%+v %v", res, err)
			}
		})

		t.Run("global table is read-only", func(t *testing.T) {
			co := h.sch.Table("countries")
			up := builder.Must(builder.UpdateTable(co).Set("name", "X").Where(co.Col("code").Eq("FR")).Build())
			if _, err := h.db.Exec(acme, up); !errors.Is(err, guardedsql.ErrReadOnly) {
				t.Fatalf("update: %v", err)
			}
			del := builder.Must(builder.DeleteFrom(co).Where(co.Col("code").Eq("FR")).Build())
			if _, err := h.db.Exec(acme, del); !errors.Is(err, guardedsql.ErrReadOnly) {
				t.Fatalf("delete: %v", err)
			}
		})

		if after := foreignRows(t, h, "acme"); after != before {
			t.Fatalf("rows of other tenants changed:\nbefore\n%s\nafter\n%s", before, after)
		}
	})
}

func TestTx(t *testing.T) {
	forEachEngine(t, func(t *testing.T, e engine) {
		h := e.newHotel(t)
		acme := grantCtx(chainG("acme"))
		rooms := h.sch.Table("rooms")
		bk := h.sch.Table("bookings")
		p := h.sch.Table("payments")

		// Commit: a booking and its payment.
		err := h.db.Tx(acme, func(tx *guardedsql.Tx) error {
			res, err := tx.Exec(acme, builder.Must(builder.InsertInto(bk).Columns("room_id", "check_in", "nights", "status").
				Values(roomOf(h, "acme"), "2025-09-09", 1, "confirmed").Build()))
			if err != nil {
				return err
			}
			_, err = tx.Exec(acme, builder.Must(builder.InsertInto(p).Columns("booking_id", "amount", "method").
				Values(res.LastInsertID, 120, "card").Build()))
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		var n int
		h.raw.QueryRow(`SELECT COUNT(*) FROM bookings WHERE check_in = '2025-09-09'`).Scan(&n)
		if n != 1 {
			t.Fatalf("committed bookings: %d", n)
		}

		// Rollback when fn fails.
		before := count(t, h.raw, "rooms")
		boom := errors.New("boom")
		err = h.db.Tx(acme, func(tx *guardedsql.Tx) error {
			if _, err := tx.Exec(acme, builder.Must(builder.InsertInto(rooms).Columns("hotel_id", "number", "rate").Values(hotelOfChain(h, "acme"), "T1", 1).Build())); err != nil {
				return err
			}
			return boom
		})
		if !errors.Is(err, boom) || count(t, h.raw, "rooms") != before {
			t.Fatalf("rollback: %v, rooms %d -> %d", err, before, count(t, h.raw, "rooms"))
		}

		// A failed ExpectOne inside the transaction is undone (savepoint) and
		// the transaction carries on: update-else-insert.
		err = h.db.Tx(acme, func(tx *guardedsql.Tx) error {
			up := builder.Must(builder.UpdateTable(bk).Set("status", "x").Where(bk.Col("nights").Ge(1)).ExpectOne().Build())
			if _, err := tx.Exec(acme, up); !errors.Is(err, guardedsql.ErrTooManyRows) {
				return fmt.Errorf("want ErrTooManyRows, got %v", err)
			}
			r := h.sch.Table("rooms").As("r")
			var cnt int64
			if err := tx.QueryRow(acme, builder.Must(builder.Select(builder.CountAll()).From(r).Build())).Scan(&cnt); err != nil {
				return err
			}
			_, err := tx.Exec(acme, builder.Must(builder.InsertInto(rooms).Columns("hotel_id", "number", "rate").Values(hotelOfChain(h, "acme"), "T2", 1).Build()))
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		h.raw.QueryRow(`SELECT COUNT(*) FROM bookings WHERE status = 'x'`).Scan(&n)
		if n != 0 || count(t, h.raw, "rooms") != before+1 {
			t.Fatalf("savepoint: %d bookings marked, rooms %d", n, count(t, h.raw, "rooms"))
		}

		// Another scope inside the transaction is refused.
		err = h.db.Tx(acme, func(tx *guardedsql.Tx) error {
			r := h.sch.Table("rooms").As("r")
			_, err := tx.Query(grantCtx(chainG("globex")), builder.Must(builder.Select(r.Col("id")).From(r).Build()))
			return err
		})
		if !errors.Is(err, guardedsql.ErrScopeMismatch) {
			t.Fatalf("scope mismatch: %v", err)
		}
		err = h.db.Tx(acme, func(tx *guardedsql.Tx) error {
			r := h.sch.Table("rooms").As("r")
			_, err := tx.Query(context.Background(), builder.Must(builder.Select(r.Col("id")).From(r).Build()))
			return err
		})
		if !errors.Is(err, guardedsql.ErrNoScope) {
			t.Fatalf("no scope in tx: %v", err)
		}
	})
}
