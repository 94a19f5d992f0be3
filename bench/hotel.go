package main

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/tenantmcp/tenantmcp/examples/hotel/hotel"
)

// The hotel workload shared by P1, P3 and P5: list_bookings for chain
// "acme" (the demo user alice, a manager), a two-month check-in window
// that moves with the iteration, 50 rows per call.

const (
	benchChain   = "acme"
	benchSubject = "alice"
	benchRole    = "manager"
	benchGroup   = "/tenants/acme"
	pageRows     = 50
)

// window returns the check-in range of iteration i: two months starting
// in January to October 2026, each holding more than pageRows bookings of
// the chain in the demo data.
func window(i int) (from, to string) {
	m := 1 + i%10
	return fmt.Sprintf("2026-%02d-01", m), fmt.Sprintf("2026-%02d-01", m+2)
}

// handListBookings is list_bookings written by hand: the tenant filter is
// the expert's own predicate on hotels.chain_id. Placeholders are '?';
// dollarize turns them into $n for PostgreSQL.
const handListBookings = `SELECT b.id, h.id, h.name, r.number, b.check_in, b.check_out, b.status, b.total_cents, g.id, g.full_name, g.email
FROM bookings b
JOIN rooms r ON r.id = b.room_id
JOIN hotels h ON h.id = r.hotel_id
JOIN guests g ON g.id = b.guest_id
WHERE h.chain_id = ? AND b.check_in >= ? AND b.check_in < ?
ORDER BY b.check_in DESC, b.id
LIMIT 50`

func dollarize(q string) string {
	var b strings.Builder
	n := 0
	for _, c := range q {
		if c == '?' {
			n++
			fmt.Fprintf(&b, "$%d", n)
			continue
		}
		b.WriteRune(c)
	}
	return b.String()
}

// dateText scans a DATE column as its YYYY-MM-DD text, whether the driver
// hands over a string (SQLite), bytes (MySQL) or a time.Time (pgx).
type dateText struct{ s *string }

func (d dateText) Scan(v any) error {
	switch x := v.(type) {
	case string:
		*d.s = x
	case []byte:
		*d.s = string(x)
	case time.Time:
		*d.s = x.Format(time.DateOnly)
		return nil
	default:
		return fmt.Errorf("date column: unexpected %T", v)
	}
	if len(*d.s) > 10 {
		*d.s = (*d.s)[:10]
	}
	return nil
}

// queryBookings runs the hand-written query on db.
func queryBookings(ctx context.Context, db *sql.DB, query, chain, from, to string) ([]hotel.Booking, error) {
	rows, err := db.QueryContext(ctx, query, chain, from, to)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := make([]hotel.Booking, 0, pageRows)
	for rows.Next() {
		var x hotel.Booking
		if err := rows.Scan(&x.ID, &x.HotelID, &x.HotelName, &x.RoomNumber, dateText{&x.CheckIn}, dateText{&x.CheckOut},
			&x.Status, &x.TotalCents, &x.GuestID, &x.GuestName, &x.GuestEmail); err != nil {
			return nil, err
		}
		out = append(out, x)
	}
	return out, rows.Err()
}

// hotelSQLite is the demo hotel database as an SQLite file, created once
// per run and shared by the in-process figures and the server children.
type hotelSQLite struct {
	dir, path string
	data      *hotel.Data
}

func newHotelSQLite(ctx context.Context) (*hotelSQLite, error) {
	dir, err := os.MkdirTemp("", "tenantmcp-bench-")
	if err != nil {
		return nil, err
	}
	h := &hotelSQLite{dir: dir, path: filepath.Join(dir, "hotel.db"), data: hotel.Generate(1, hotel.DemoSize)}
	raw, err := sql.Open("sqlite", h.rawDSN())
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	defer raw.Close()
	if err := hotel.Create(ctx, raw, hotel.SQLite, h.data); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	return h, nil
}

// rawDSN opens the file with database/sql the way guardedsql.Open does
// (foreign keys, 5 s busy timeout), so the baseline gets the same
// connection settings.
func (h *hotelSQLite) rawDSN() string {
	return "file:" + h.path + "?_pragma=foreign_keys(1)&_pragma=busy_timeout(5000)"
}

func (h *hotelSQLite) guardedDSN() string { return "sqlite:" + h.path }

func (h *hotelSQLite) close() { os.RemoveAll(h.dir) }

// sameIDs reports whether two result pages list the same bookings in the
// same order.
func sameIDs(a, b []hotel.Booking) bool {
	ids := func(bs []hotel.Booking) []int64 {
		out := make([]int64, len(bs))
		for i, x := range bs {
			out[i] = x.ID
		}
		return out
	}
	return slices.Equal(ids(a), ids(b))
}
