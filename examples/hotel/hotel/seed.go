package hotel

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"

	"github.com/tenantmcp/tenantmcp/internal/devserver"
)

// Demo data. Generate builds it deterministically from a seed, so tests
// compute their expected rows from the same Data in Go, independently of
// the guard.
type (
	CountryRow struct{ Code, Name string }
	ChainRow   struct{ ID, Name string }
	HotelRow   struct{ ID, ChainID, Name, City, CountryCode string }
	RoomRow    struct {
		ID                  int64
		HotelID             string
		Number, Kind        string
		Capacity, RateCents int64
	}
	GuestRow struct {
		ID                                       int64
		HotelID, FullName, Email, Phone, Country string
	}
	BookingRow struct {
		ID, RoomID, GuestID int64
		CheckIn, CheckOut   string // YYYY-MM-DD
		Status              string
		TotalCents          int64
		CreatedAt           string // RFC 3339, UTC
	}
	PaymentRow struct {
		ID, BookingID, AmountCents int64
		Method, CardNumber, PaidAt string
	}
)

// Data is a whole demo data set.
type Data struct {
	Countries []CountryRow
	Chains    []ChainRow
	Hotels    []HotelRow
	Rooms     []RoomRow
	Guests    []GuestRow
	Bookings  []BookingRow
	Payments  []PaymentRow
}

// Size scales Generate.
type Size struct {
	Chains, HotelsPerChain, RoomsPerHotel, GuestsPerHotel, BookingsPerRoom int
}

// DemoSize is what the example server starts with: some thousands of rows.
var DemoSize = Size{Chains: 3, HotelsPerChain: 4, RoomsPerHotel: 20, GuestsPerHotel: 30, BookingsPerRoom: 10}

var (
	chainNames = []string{"acme", "globex", "initech", "umbrella", "hooli", "stark", "wayne", "tyrell", "cyberdyne", "soylent", "wonka", "oceanic"}
	cities     = []struct{ city, country string }{
		{"Paris", "FR"}, {"Lisbon", "PT"}, {"Berlin", "DE"}, {"Madrid", "ES"}, {"Rome", "IT"}, {"Vienna", "AT"},
	}
	firstNames = []string{"Maria", "Jon", "Aiko", "Lars", "Fatima", "Pedro", "Chen", "Olga", "Amara", "Tom"}
	lastNames  = []string{"Garcia", "Smith", "Tanaka", "Berg", "Haddad", "Silva", "Wei", "Ivanova", "Okafor", "Jones"}
	kinds      = []string{"single", "double", "suite"}
)

// Countries is the global reference data.
var Countries = []CountryRow{{"AT", "Austria"}, {"DE", "Germany"}, {"ES", "Spain"}, {"FR", "France"}, {"IT", "Italy"}, {"PT", "Portugal"}}

// Generate builds a data set of the given size from seed. Chains share
// guest names, e-mail addresses, phone numbers and room numbers, and the
// integer ids of rooms, guests, bookings and payments are interleaved
// across chains, so a leak cannot hide behind distinct-looking data.
func Generate(seed uint64, size Size) *Data {
	if size.Chains > len(chainNames) {
		size.Chains = len(chainNames)
	}
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	d := &Data{Countries: Countries}
	for c := 0; c < size.Chains; c++ {
		ch := ChainRow{ID: chainNames[c], Name: strings.ToUpper(chainNames[c][:1]) + chainNames[c][1:] + " Hotels"}
		d.Chains = append(d.Chains, ch)
		for h := 0; h < size.HotelsPerChain; h++ {
			loc := cities[h%len(cities)]
			d.Hotels = append(d.Hotels, HotelRow{
				ID: fmt.Sprintf("%s-%s", ch.ID, strings.ToLower(loc.city)), ChainID: ch.ID,
				Name: ch.Name + " " + loc.city, City: loc.city, CountryCode: loc.country,
			})
		}
	}
	// Interleave: hotels take turns, so consecutive ids belong to different chains.
	for r := 0; r < size.RoomsPerHotel; r++ {
		for _, h := range d.Hotels {
			kind := kinds[r%len(kinds)]
			d.Rooms = append(d.Rooms, RoomRow{
				ID: int64(len(d.Rooms) + 1), HotelID: h.ID, Number: strconv.Itoa(100*(1+r/10) + r%10 + 1),
				Kind: kind, Capacity: int64(1 + r%3), RateCents: int64(8000 + 4000*(r%3) + 100*rng.IntN(20)),
			})
		}
	}
	for g := 0; g < size.GuestsPerHotel; g++ {
		for _, h := range d.Hotels {
			fn, ln := firstNames[g%len(firstNames)], lastNames[(g/len(firstNames)+g)%len(lastNames)]
			d.Guests = append(d.Guests, GuestRow{
				ID: int64(len(d.Guests) + 1), HotelID: h.ID, FullName: fn + " " + ln,
				Email:   strings.ToLower(fn+"."+ln) + "@example.com",
				Phone:   fmt.Sprintf("+3519%08d", 10000000+g*7919%90000000),
				Country: Countries[(g+len(h.ID))%len(Countries)].Code,
			})
		}
	}
	guestsOf := map[string][]int64{}
	for _, g := range d.Guests {
		guestsOf[g.HotelID] = append(guestsOf[g.HotelID], g.ID)
	}
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for b := 0; b < size.BookingsPerRoom; b++ {
		for _, r := range d.Rooms {
			in := base.AddDate(0, 0, b*36+rng.IntN(30))
			nights := 1 + rng.IntN(6)
			status := []string{"confirmed", "confirmed", "completed", "cancelled"}[rng.IntN(4)]
			gs := guestsOf[r.HotelID]
			bk := BookingRow{
				ID: int64(len(d.Bookings) + 1), RoomID: r.ID, GuestID: gs[rng.IntN(len(gs))],
				CheckIn: in.Format(time.DateOnly), CheckOut: in.AddDate(0, 0, nights).Format(time.DateOnly),
				Status: status, TotalCents: r.RateCents * int64(nights),
				CreatedAt: in.AddDate(0, 0, -rng.IntN(60)-1).Format(time.RFC3339),
			}
			d.Bookings = append(d.Bookings, bk)
			if status != "cancelled" {
				d.Payments = append(d.Payments, PaymentRow{
					ID: int64(len(d.Payments) + 1), BookingID: bk.ID, AmountCents: bk.TotalCents,
					Method: "card", CardNumber: testCard(rng), PaidAt: bk.CreatedAt,
				})
			}
		}
	}
	return d
}

// testCard returns a Luhn-valid 16-digit number in a test range.
func testCard(rng *rand.Rand) string {
	digits := []int{4, 0, 0, 0}
	for len(digits) < 15 {
		digits = append(digits, rng.IntN(10))
	}
	sum := 0
	for i := len(digits) - 1; i >= 0; i-- {
		d := digits[i]
		if (len(digits)-1-i)%2 == 0 {
			d *= 2
			if d > 9 {
				d -= 9
			}
		}
		sum += d
	}
	digits = append(digits, (10-sum%10)%10)
	var b strings.Builder
	for _, d := range digits {
		b.WriteByte(byte('0' + d))
	}
	return b.String()
}

// HotelsOf returns the ids of the hotels of chain.
func (d *Data) HotelsOf(chain string) []string {
	var out []string
	for _, h := range d.Hotels {
		if h.ChainID == chain {
			out = append(out, h.ID)
		}
	}
	return out
}

// ChainOfHotel returns the chain of hotel id.
func (d *Data) ChainOfHotel(id string) string {
	for _, h := range d.Hotels {
		if h.ID == id {
			return h.ChainID
		}
	}
	return ""
}

// HotelOfBooking returns the hotel of booking id.
func (d *Data) HotelOfBooking(id int64) string {
	b := d.Bookings[id-1]
	return d.Rooms[b.RoomID-1].HotelID
}

// PaidBookingOfOwner returns a paid (by card), uncancelled booking of a
// guest of hotel whose e-mail address no other guest of that hotel has,
// and that guest: the case where the guest's own data, payment included,
// may reach exactly that guest ($owner in the flow policy). ok is false if
// the data has none.
func (d *Data) PaidBookingOfOwner(hotel string) (g GuestRow, booking int64, ok bool) {
	count := map[string]int{}
	for _, x := range d.Guests {
		if x.HotelID == hotel {
			count[x.Email]++
		}
	}
	paid := map[int64]bool{}
	for _, p := range d.Payments {
		if p.CardNumber != "" {
			paid[p.BookingID] = true
		}
	}
	for _, b := range d.Bookings {
		if b.GuestID < 1 || int(b.GuestID) > len(d.Guests) || d.Guests[b.GuestID-1].ID != b.GuestID {
			return GuestRow{}, 0, false // guest ids are not dense
		}
		g := d.Guests[b.GuestID-1]
		if g.HotelID == hotel && count[g.Email] == 1 && paid[b.ID] && b.Status != "cancelled" {
			return g, b.ID, true
		}
	}
	return GuestRow{}, 0, false
}

// Create runs DDL(engine) and inserts d, as the schema owner. This is a
// migration, the one place the example writes SQL text by hand; tools
// never do.
func Create(ctx context.Context, db *sql.DB, engine Engine, d *Data) error {
	ddl, err := DDL(engine)
	if err != nil {
		return err
	}
	ins, err := devserver.BeginSeed(ctx, db, engine == Postgres, ddl)
	if err != nil {
		return fmt.Errorf("hotel: %w", err)
	}
	// Timestamps are RFC 3339 text; MySQL's DATETIME wants its own form.
	timestamp := func(s string) any {
		if engine == MySQL {
			t, _ := time.Parse(time.RFC3339, s)
			return t.UTC().Format(time.DateTime)
		}
		return s
	}
	for _, c := range d.Countries {
		ins.Row("countries", []string{"code", "name"}, c.Code, c.Name)
	}
	for _, c := range d.Chains {
		ins.Row("chains", []string{"id", "name"}, c.ID, c.Name)
	}
	for _, h := range d.Hotels {
		ins.Row("hotels", []string{"id", "chain_id", "name", "city", "country_code"}, h.ID, h.ChainID, h.Name, h.City, h.CountryCode)
	}
	for _, r := range d.Rooms {
		ins.Row("rooms", []string{"id", "hotel_id", "number", "kind", "capacity", "rate_cents"}, r.ID, r.HotelID, r.Number, r.Kind, r.Capacity, r.RateCents)
	}
	for _, g := range d.Guests {
		ins.Row("guests", []string{"id", "hotel_id", "full_name", "email", "phone", "country_code"}, g.ID, g.HotelID, g.FullName, g.Email, g.Phone, g.Country)
	}
	for _, b := range d.Bookings {
		ins.Row("bookings", []string{"id", "room_id", "guest_id", "check_in", "check_out", "status", "total_cents", "created_at"},
			b.ID, b.RoomID, b.GuestID, b.CheckIn, b.CheckOut, b.Status, b.TotalCents, timestamp(b.CreatedAt))
	}
	for _, p := range d.Payments {
		ins.Row("payments", []string{"id", "booking_id", "amount_cents", "method", "card_number", "paid_at"},
			p.ID, p.BookingID, p.AmountCents, p.Method, p.CardNumber, timestamp(p.PaidAt))
	}
	if err := ins.Commit(map[string]string{"rooms": "id", "guests": "id", "bookings": "id", "payments": "id"}); err != nil {
		return fmt.Errorf("hotel: %w", err)
	}
	return nil
}
