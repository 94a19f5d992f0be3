package guardedsql_test

// The hotel-shaped test database: chains -> hotels -> rooms -> bookings ->
// payments, guests belonging to a chain, and a global countries table.
// Natural data overlaps between chains on purpose (same room numbers, same
// guest names and emails, interleaved ids), and one chain's id is "7" while
// hotel 7 belongs to another chain, so a guard that confused levels or
// types would show. The expected results in the tests are computed from
// the Go model below, independently of the guard.

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"modernc.org/sqlite"

	"github.com/tenantmcp/tenantmcp/builder"
	"github.com/tenantmcp/tenantmcp/guardedsql"
	gsqlite "github.com/tenantmcp/tenantmcp/guardedsql/sqlite"
	"github.com/tenantmcp/tenantmcp/scope"
	"github.com/tenantmcp/tenantmcp/scope/scopetest"
)

const hotelDDL = `
CREATE TABLE countries (code TEXT PRIMARY KEY, name TEXT NOT NULL);
CREATE TABLE chains (id TEXT PRIMARY KEY, name TEXT NOT NULL);
CREATE TABLE hotels (
  id INTEGER PRIMARY KEY,
  chain_id TEXT NOT NULL REFERENCES chains(id),
  name TEXT NOT NULL,
  country TEXT REFERENCES countries(code));
CREATE TABLE rooms (
  id INTEGER PRIMARY KEY,
  hotel_id INTEGER NOT NULL REFERENCES hotels(id),
  number TEXT NOT NULL,
  rate INTEGER NOT NULL);
CREATE TABLE guests (
  id INTEGER PRIMARY KEY,
  chain_id TEXT NOT NULL REFERENCES chains(id),
  name TEXT NOT NULL,
  email TEXT NOT NULL);
CREATE TABLE bookings (
  id INTEGER PRIMARY KEY,
  room_id INTEGER NOT NULL REFERENCES rooms(id),
  guest_id INTEGER REFERENCES guests(id),
  check_in TEXT NOT NULL,
  nights INTEGER NOT NULL,
  status TEXT NOT NULL);
CREATE TABLE payments (
  id INTEGER PRIMARY KEY,
  booking_id INTEGER NOT NULL REFERENCES bookings(id),
  amount INTEGER NOT NULL,
  method TEXT NOT NULL);
CREATE INDEX hotels_chain ON hotels(chain_id);
CREATE INDEX rooms_hotel ON rooms(hotel_id);
CREATE INDEX guests_chain ON guests(chain_id);
CREATE INDEX bookings_room ON bookings(room_id, check_in);
CREATE INDEX bookings_guest ON bookings(guest_id);
CREATE INDEX payments_booking ON payments(booking_id);
`

// hotelTenancy is what introspection cannot know.
var hotelTenancy = builder.Tenancy{
	Levels: []builder.Level{{Name: "chain", Key: builder.TextKey}, {Name: "hotel", Key: builder.IntKey}},
	LevelColumns: map[string]string{
		"chains.id":       "chain",
		"hotels.id":       "hotel",
		"hotels.chain_id": "chain",
		"guests.chain_id": "chain",
	},
	Global:  []string{"countries"},
	Parents: map[string]string{"bookings": "room_id"},
}

// hotelDef is the same schema declared by hand.
var hotelDef = builder.SchemaDef{
	Levels: []builder.Level{{Name: "chain", Key: builder.TextKey}, {Name: "hotel", Key: builder.IntKey}},
	Tables: []builder.TableDef{
		{Name: "countries", Columns: []string{"code", "name"}, PrimaryKey: []string{"code"}, Global: true},
		{Name: "chains", Columns: []string{"id", "name"}, PrimaryKey: []string{"id"}, Levels: map[string]string{"id": "chain"}},
		{Name: "hotels", Columns: []string{"id", "chain_id", "name", "country"}, PrimaryKey: []string{"id"},
			ForeignKeys: []builder.ForeignKey{
				{Columns: []string{"chain_id"}, RefTable: "chains", RefColumns: []string{"id"}},
				{Columns: []string{"country"}, RefTable: "countries"},
			},
			Levels: map[string]string{"id": "hotel", "chain_id": "chain"}},
		{Name: "rooms", Columns: []string{"id", "hotel_id", "number", "rate"}, PrimaryKey: []string{"id"},
			ForeignKeys: []builder.ForeignKey{{Columns: []string{"hotel_id"}, RefTable: "hotels"}}},
		{Name: "guests", Columns: []string{"id", "chain_id", "name", "email"}, PrimaryKey: []string{"id"},
			ForeignKeys: []builder.ForeignKey{{Columns: []string{"chain_id"}, RefTable: "chains"}},
			Levels:      map[string]string{"chain_id": "chain"}},
		{Name: "bookings", Columns: []string{"id", "room_id", "guest_id", "check_in", "nights", "status"}, PrimaryKey: []string{"id"},
			ForeignKeys: []builder.ForeignKey{
				{Columns: []string{"room_id"}, RefTable: "rooms"},
				{Columns: []string{"guest_id"}, RefTable: "guests"},
			},
			Parent: "room_id"},
		{Name: "payments", Columns: []string{"id", "booking_id", "amount", "method"}, PrimaryKey: []string{"id"},
			ForeignKeys: []builder.ForeignKey{{Columns: []string{"booking_id"}, RefTable: "bookings"}}},
	},
}

// The Go model of the seed data.
type (
	mChain struct{ ID, Name string }
	mHotel struct {
		ID      int64
		Chain   string
		Name    string
		Country string
	}
	mRoom struct {
		ID, Hotel int64
		Number    string
		Rate      int64
	}
	mGuest struct {
		ID          int64
		Chain       string
		Name, Email string
	}
	mBooking struct {
		ID, Room int64
		Guest    int64 // 0 for NULL
		CheckIn  string
		Nights   int64
		Status   string
	}
	mPayment struct {
		ID, Booking, Amount int64
		Method              string
	}
)

type model struct {
	countries [][2]string
	chains    []mChain
	hotels    []mHotel
	rooms     []mRoom
	guests    []mGuest
	bookings  []mBooking
	payments  []mPayment
}

// seedModel builds nChains chains of hotelsPer hotels each. Hotel, room,
// guest, booking and payment ids interleave across chains.
func seedModel(nChains, hotelsPer, roomsPer, bookingsPer int) *model {
	m := &model{countries: [][2]string{{"FR", "France"}, {"JP", "Japan"}, {"NZ", "New Zealand"}}}
	chainIDs := []string{"acme", "globex", "7", "initech", "umbrella", "hooli"}
	for c := 0; c < nChains; c++ {
		id := chainIDs[c%len(chainIDs)]
		if c >= len(chainIDs) {
			id = fmt.Sprintf("c%03d", c)
		}
		m.chains = append(m.chains, mChain{id, "Chain " + id})
	}
	hid := int64(0)
	for h := 0; h < hotelsPer; h++ {
		for c := range m.chains {
			hid++
			m.hotels = append(m.hotels, mHotel{hid, m.chains[c].ID, fmt.Sprintf("Grand %d", h), m.countries[int(hid)%3][0]})
		}
	}
	gid := int64(0)
	for g := 0; g < 3; g++ {
		for c := range m.chains {
			gid++
			name := []string{"Ann Lee", "Bo Chen", "Cy Diaz"}[g]
			m.guests = append(m.guests, mGuest{gid, m.chains[c].ID, name, fmt.Sprintf("guest%d@example.com", g)})
		}
	}
	rid := int64(0)
	for r := 0; r < roomsPer; r++ {
		for _, h := range m.hotels {
			rid++
			m.rooms = append(m.rooms, mRoom{rid, h.ID, fmt.Sprintf("%d0%d", 1+r/3, 1+r%3), 100 + int64(r)*10})
		}
	}
	bid, pid := int64(0), int64(0)
	statuses := []string{"confirmed", "cancelled", "confirmed", "checked_in"}
	for k := 0; k < bookingsPer; k++ {
		for _, r := range m.rooms {
			bid++
			var chain string
			for _, h := range m.hotels {
				if h.ID == r.Hotel {
					chain = h.Chain
				}
			}
			var guest int64
			if k%5 != 4 {
				var gs []int64
				for _, g := range m.guests {
					if g.Chain == chain {
						gs = append(gs, g.ID)
					}
				}
				guest = gs[int(bid)%len(gs)]
			}
			day := 1 + int(bid*7)%28
			m.bookings = append(m.bookings, mBooking{bid, r.ID, guest, fmt.Sprintf("2025-%02d-%02d", 1+k%12, day), 1 + bid%4, statuses[bid%4]})
			if bid%3 != 0 {
				pid++
				m.payments = append(m.payments, mPayment{pid, bid, r.Rate * (1 + bid%4), []string{"card", "cash"}[pid%2]})
			}
		}
	}
	return m
}

func (m *model) load(ctx context.Context, db *sql.DB) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, hotelDDL); err != nil {
		return err
	}
	ins := func(q string, args ...any) {
		if err == nil {
			_, err = tx.ExecContext(ctx, q, args...)
		}
	}
	for _, c := range m.countries {
		ins(`INSERT INTO countries VALUES (?, ?)`, c[0], c[1])
	}
	for _, c := range m.chains {
		ins(`INSERT INTO chains VALUES (?, ?)`, c.ID, c.Name)
	}
	for _, h := range m.hotels {
		ins(`INSERT INTO hotels VALUES (?, ?, ?, ?)`, h.ID, h.Chain, h.Name, h.Country)
	}
	for _, r := range m.rooms {
		ins(`INSERT INTO rooms VALUES (?, ?, ?, ?)`, r.ID, r.Hotel, r.Number, r.Rate)
	}
	for _, g := range m.guests {
		ins(`INSERT INTO guests VALUES (?, ?, ?, ?)`, g.ID, g.Chain, g.Name, g.Email)
	}
	for _, b := range m.bookings {
		var guest any
		if b.Guest != 0 {
			guest = b.Guest
		}
		ins(`INSERT INTO bookings VALUES (?, ?, ?, ?, ?, ?)`, b.ID, b.Room, guest, b.CheckIn, b.Nights, b.Status)
	}
	for _, p := range m.payments {
		ins(`INSERT INTO payments VALUES (?, ?, ?, ?)`, p.ID, p.Booking, p.Amount, p.Method)
	}
	if err != nil {
		return err
	}
	return tx.Commit()
}

// The oracle: which rows a set of grants may see, computed from the model.
type visible struct {
	hotels, rooms, bookings, payments, guests, chains map[any]bool
}

func (m *model) visible(grants []scope.Grant) visible {
	v := visible{map[any]bool{}, map[any]bool{}, map[any]bool{}, map[any]bool{}, map[any]bool{}, map[any]bool{}}
	chain := map[string]bool{}
	hotel := map[string]bool{}
	// within holds the grants confined to ancestors: they admit a hotel (and
	// what lies under it) only when every level they name matches it.
	var within []map[string]string
	for _, g := range grants {
		if len(g.Within) > 0 {
			named := map[string]string{g.Level: g.ID}
			for _, w := range g.Within {
				named[w.Level] = w.ID
			}
			within = append(within, named)
			continue
		}
		switch g.Level {
		case "chain":
			chain[g.ID] = true
		case "hotel":
			hotel[g.ID] = true
		}
	}
	for _, c := range m.chains {
		if chain[c.ID] {
			v.chains[c.ID] = true
		}
	}
	for _, h := range m.hotels {
		if chain[h.Chain] || hotel[fmt.Sprint(h.ID)] {
			v.hotels[h.ID] = true
		}
		for _, named := range within {
			ok := true
			for lvl, id := range named {
				switch lvl {
				case "chain":
					ok = ok && h.Chain == id
				case "hotel":
					ok = ok && fmt.Sprint(h.ID) == id
				default: // a level the schema lacks: nothing can match it
					ok = false
				}
			}
			if ok && named["hotel"] != "" {
				v.hotels[h.ID] = true
			}
		}
	}
	for _, r := range m.rooms {
		if v.hotels[r.Hotel] {
			v.rooms[r.ID] = true
		}
	}
	for _, b := range m.bookings {
		if v.rooms[b.Room] {
			v.bookings[b.ID] = true
		}
	}
	for _, p := range m.payments {
		if v.bookings[p.Booking] {
			v.payments[p.ID] = true
		}
	}
	for _, g := range m.guests {
		if chain[g.Chain] {
			v.guests[g.ID] = true
		}
	}
	return v
}

func (m *model) hotelOf(room int64) mHotel {
	for _, r := range m.rooms {
		if r.ID == room {
			for _, h := range m.hotels {
				if h.ID == r.Hotel {
					return h
				}
			}
		}
	}
	panic("no room")
}

func (m *model) booking(id int64) mBooking {
	for _, b := range m.bookings {
		if b.ID == id {
			return b
		}
	}
	panic("no booking")
}

// recorder is a database/sql driver wrapper that records every statement
// and transaction the SQLite driver receives: independent evidence of what
// reached the database, below guardedsql.
type recorder struct {
	mu   sync.Mutex
	seen []string
}

func (r *recorder) add(s string) {
	r.mu.Lock()
	r.seen = append(r.seen, s)
	r.mu.Unlock()
}

func (r *recorder) reset() {
	r.mu.Lock()
	r.seen = nil
	r.mu.Unlock()
}

func (r *recorder) statements() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.seen)
}

type recConnector struct {
	inner driver.Connector
	rec   *recorder
}

func (c recConnector) Connect(ctx context.Context) (driver.Conn, error) {
	conn, err := c.inner.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &recConn{conn: conn, rec: c.rec}, nil
}

func (c recConnector) Driver() driver.Driver { return c.inner.Driver() }

type recConn struct {
	conn driver.Conn
	rec  *recorder
}

func (c *recConn) Prepare(q string) (driver.Stmt, error) {
	c.rec.add(q)
	return c.conn.Prepare(q)
}

func (c *recConn) PrepareContext(ctx context.Context, q string) (driver.Stmt, error) {
	c.rec.add(q)
	return c.conn.(driver.ConnPrepareContext).PrepareContext(ctx, q)
}

func (c *recConn) Close() error { return c.conn.Close() }

func (c *recConn) Begin() (driver.Tx, error) {
	c.rec.add("BEGIN")
	//lint:ignore SA1019 driver.Conn requires Begin; database/sql calls BeginTx
	return c.conn.Begin()
}

func (c *recConn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	c.rec.add("BEGIN")
	return c.conn.(driver.ConnBeginTx).BeginTx(ctx, opts)
}

func (c *recConn) QueryContext(ctx context.Context, q string, args []driver.NamedValue) (driver.Rows, error) {
	c.rec.add(q)
	return c.conn.(driver.QueryerContext).QueryContext(ctx, q, args)
}

func (c *recConn) ExecContext(ctx context.Context, q string, args []driver.NamedValue) (driver.Result, error) {
	c.rec.add(q)
	return c.conn.(driver.ExecerContext).ExecContext(ctx, q, args)
}

// hotelDB is a seeded SQLite file with a guarded DB over it.
type hotelDB struct {
	m     *model
	sch   *builder.Schema
	db    *guardedsql.DB
	plain *guardedsql.DB // the same, with every reference carrying its own predicate
	raw   *sql.DB        // unguarded handle for checks, through the recorder
	rec   *recorder
}

func newHotel(t testing.TB) *hotelDB { return newHotelSized(t, 3, 3, 4, 2) }

func newHotelSized(t testing.TB, chains, hotelsPer, roomsPer, bookingsPer int, opts ...guardedsql.Options) *hotelDB {
	t.Helper()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "hotel.db")
	conn, err := sqlite.NewConnector("file:" + path + "?_pragma=foreign_keys(1)&_pragma=busy_timeout(5000)&_pragma=synchronous(0)&_txlock=immediate")
	if err != nil {
		t.Fatal(err)
	}
	rec := &recorder{}
	raw := sql.OpenDB(recConnector{inner: conn, rec: rec})
	t.Cleanup(func() { raw.Close() })
	m := seedModel(chains, hotelsPer, roomsPer, bookingsPer)
	if err := m.load(ctx, raw); err != nil {
		t.Fatal(err)
	}
	sch, err := builder.NewSchema(hotelDef)
	if err != nil {
		t.Fatal(err)
	}
	db, err := gsqlite.New(context.Background(), raw, sch, options(opts))
	if err != nil {
		t.Fatal(err)
	}
	plain, err := guardedsql.NewSQLitePredicatesOnlyForTest(context.Background(), raw, sch, options(opts))
	if err != nil {
		t.Fatal(err)
	}
	rec.reset()
	return &hotelDB{m: m, sch: sch, db: db, plain: plain, raw: raw, rec: rec}
}

// forEachDB runs fn against the default DB (join-aware rewrites on) and the
// predicates-only one: both must give the same, correct answers.
func (h *hotelDB) forEachDB(t *testing.T, fn func(t *testing.T, db *guardedsql.DB)) {
	t.Run("rewrites", func(t *testing.T) { fn(t, h.db) })
	if h.plain != nil {
		t.Run("predicates", func(t *testing.T) { fn(t, h.plain) })
	}
}

func grantCtx(grants ...scope.Grant) context.Context {
	return scopetest.NewContext(context.Background(), scopetest.New("tester", grants))
}

func chainG(id string) scope.Grant { return scope.Grant{Level: "chain", ID: id} }

func hotelG(id int64) scope.Grant { return scope.Grant{Level: "hotel", ID: fmt.Sprint(id)} }

// hotelIn is the grant of hotel id within chain: what the group path
// /tenants/<chain>/hotels/<id> grants.
func hotelIn(chain string, id int64) scope.Grant {
	g := hotelG(id)
	g.Within = []scope.Grant{chainG(chain)}
	return g
}
