package conformance

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"strconv"

	"github.com/tenantmcp/tenantmcp/examples/hotel/hotel"
	"github.com/tenantmcp/tenantmcp/redact"
	"github.com/tenantmcp/tenantmcp/scope"
)

// hotelSize keeps the default run fast: 3 chains × 3 hotels, 36 rooms, 36
// guests, 108 bookings and their payments; ids interleaved across chains,
// names, e-mails, phones and room numbers shared between chains.
var hotelSize = hotel.Size{Chains: 3, HotelsPerChain: 3, RoomsPerHotel: 4, GuestsPerHotel: 4, BookingsPerRoom: 3}

// hotelTarget is the example's schema, seed and tools as a Target.
func hotelTarget(dsn string, seed uint64) Target {
	return Target{
		Name:   "hotel",
		DSN:    dsn,
		Graph:  hotel.SchemaDef(),
		Schema: hotel.Schema,
		Seed: func(ctx context.Context, db *sql.DB, engine Engine) (*Dataset, error) {
			data := hotel.Generate(seed, hotelSize)
			plantCanaries(data, seed)
			if err := hotel.Create(ctx, db, hotel.Engine(engine), data); err != nil {
				return nil, err
			}
			return hotelDataset(data), nil
		},
		Tenants: []Tenant{
			{Name: "chain acme", Grants: []scope.Grant{{Level: hotel.LevelChain, ID: "acme"}}},
			{Name: "chain globex", Grants: []scope.Grant{{Level: hotel.LevelChain, ID: "globex"}}},
			{Name: "chain initech", Grants: []scope.Grant{{Level: hotel.LevelChain, ID: "initech"}}},
			{Name: "hotel acme-paris", Grants: []scope.Grant{{Level: hotel.LevelHotel, ID: "acme-paris"}}},
			{Name: "hotel acme-lisbon", Grants: []scope.Grant{{Level: hotel.LevelHotel, ID: "acme-lisbon"}}},
			{Name: "union", Grants: []scope.Grant{{Level: hotel.LevelChain, ID: "globex"}, {Level: hotel.LevelHotel, ID: "acme-paris"}}},
		},
		Shared:  map[string]string{"countries": "ISO country codes: one reference list that every chain's hotels and guests point at"},
		Mutable: map[string]string{"chains": "name", "hotels": "name", "rooms": "number", "guests": "full_name", "bookings": "status", "payments": "card_number"},
		Tools: &Tools{
			Register:  hotel.Register,
			Levels:    []string{hotel.LevelChain, hotel.LevelHotel},
			Redaction: hotel.Redaction,
			Callers:   [][]string{{"manager"}, {"front_desk"}},
			Calls:     hotelCalls,
			Canaries:  hotelCanaries,
		},
	}
}

// plantCanaries gives the first guest of every hotel a name, e-mail and
// phone number found nowhere else, random per run.
func plantCanaries(d *hotel.Data, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 0xca7a))
	seen := map[string]bool{}
	for i := range d.Guests {
		g := &d.Guests[i]
		if seen[g.HotelID] {
			continue
		}
		seen[g.HotelID] = true
		tag := strconv.FormatUint(rng.Uint64()%1_000_000_000, 36)
		g.FullName = "Canary " + tag + " " + g.HotelID
		g.Email = "canary." + tag + "." + g.HotelID + "@example.com"
		g.Phone = fmt.Sprintf("+1555%07d", rng.IntN(10_000_000))
	}
}

func hotelCanaries(ds *Dataset) []Canary {
	var out []Canary
	canaryGuest := map[int64]bool{}
	for _, r := range ds.Tables["guests"] {
		name := r["full_name"].(string)
		if len(name) < 7 || name[:7] != "Canary " {
			continue
		}
		k := canon(r["id"])
		canaryGuest[r["id"].(int64)] = true
		out = append(out,
			Canary{Value: name, Category: redact.Name, Table: "guests", Key: k},
			Canary{Value: r["email"].(string), Category: redact.Email, Table: "guests", Key: k},
			Canary{Value: r["phone"].(string), Category: redact.Phone, Table: "guests", Key: k})
	}
	canaryBooking := map[int64]bool{}
	for _, r := range ds.Tables["bookings"] {
		if canaryGuest[r["guest_id"].(int64)] {
			canaryBooking[r["id"].(int64)] = true
		}
	}
	for _, r := range ds.Tables["payments"] {
		if canaryBooking[r["booking_id"].(int64)] && r["card_number"] != nil {
			out = append(out, Canary{Value: r["card_number"].(string), Category: redact.Card, Table: "payments", Key: canon(r["id"])})
		}
	}
	return out
}

// hotelCalls reads what the tools show: the whole booking list, the
// canary guests by name prefix, and, for the canary guests of four hotels
// (one per chain, and a sibling of acme-paris), a lookup by e-mail and one
// of their bookings: own and foreign ids alike, whoever calls.
func hotelCalls(ds *Dataset, _ Tenant) []ToolCall {
	calls := []ToolCall{
		{Tool: "list_bookings", Args: map[string]any{"from": "2025-01-01", "to": "2028-01-01", "limit": 200}},
		{Tool: "find_guest", Args: map[string]any{"query": "Canary"}},
		{Tool: "revenue_report", Args: map[string]any{"from": "2025-01-01", "to": "2028-01-01"}},
		{Tool: "search_availability", Args: map[string]any{"check_in": "2026-02-01", "check_out": "2026-02-03"}},
	}
	probe := map[string]bool{"acme-paris": true, "acme-lisbon": true, "globex-paris": true, "initech-paris": true}
	canaryGuest := map[int64]bool{}
	for _, r := range ds.Tables["guests"] {
		if name := r["full_name"].(string); probe[r["hotel_id"].(string)] && len(name) > 7 && name[:7] == "Canary " {
			canaryGuest[r["id"].(int64)] = true
			calls = append(calls, ToolCall{Tool: "find_guest", Args: map[string]any{"query": r["email"]}})
		}
	}
	done := map[int64]bool{}
	for _, r := range ds.Tables["bookings"] {
		g := r["guest_id"].(int64)
		if canaryGuest[g] && !done[g] {
			done[g] = true
			calls = append(calls, ToolCall{Tool: "get_booking", Args: map[string]any{"id": r["id"]}})
		}
	}
	return calls
}

// hotelDataset turns the example's data into the suite's Dataset.
func hotelDataset(d *hotel.Data) *Dataset {
	ds := &Dataset{}
	for _, c := range d.Countries {
		ds.Add("countries", Row{"code": c.Code, "name": c.Name})
	}
	for _, c := range d.Chains {
		ds.Add("chains", Row{"id": c.ID, "name": c.Name})
	}
	for _, h := range d.Hotels {
		ds.Add("hotels", Row{"id": h.ID, "chain_id": h.ChainID, "name": h.Name, "city": h.City, "country_code": h.CountryCode})
	}
	for _, r := range d.Rooms {
		ds.Add("rooms", Row{"id": r.ID, "hotel_id": r.HotelID, "number": r.Number, "kind": r.Kind, "capacity": r.Capacity, "rate_cents": r.RateCents})
	}
	for _, g := range d.Guests {
		ds.Add("guests", Row{"id": g.ID, "hotel_id": g.HotelID, "full_name": g.FullName, "email": g.Email, "phone": g.Phone, "country_code": g.Country})
	}
	for _, b := range d.Bookings {
		ds.Add("bookings", Row{"id": b.ID, "room_id": b.RoomID, "guest_id": b.GuestID, "check_in": b.CheckIn, "check_out": b.CheckOut,
			"status": b.Status, "total_cents": b.TotalCents, "created_at": b.CreatedAt})
	}
	for _, p := range d.Payments {
		ds.Add("payments", Row{"id": p.ID, "booking_id": p.BookingID, "amount_cents": p.AmountCents, "method": p.Method, "card_number": p.CardNumber, "paid_at": p.PaidAt})
	}
	return ds
}
