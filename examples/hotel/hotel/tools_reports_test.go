package hotel_test

import (
	"cmp"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/tenantmcp/tenantmcp/examples/hotel/hotel"
)

// TestRankRoomsPerTenant: each manager's ranking equals the one computed
// from the seed over their own chain's rooms only: no room of another
// chain appears, and none shifts a rank.
func TestRankRoomsPerTenant(t *testing.T) {
	h := start(t, false)
	d := h.app.Data
	const from, to = "2026-01-01", "2027-01-01"
	for _, u := range []struct{ subject, chain string }{{"alice", "acme"}, {"bob", "globex"}} {
		cs := h.connect(t, h.tokenFor(t, u.subject))
		got, res := call[hotel.RankRoomsOut](t, cs, "rank_rooms", map[string]any{"from": from, "to": to})
		if res.IsError {
			h.failf(t, "%s rank_rooms: %s", u.subject, text(res))
		}
		type acc struct{ n, rev int64 }
		per := map[int64]*acc{}
		for _, b := range d.Bookings {
			r := d.Rooms[b.RoomID-1]
			if d.ChainOfHotel(r.HotelID) != u.chain || b.Status == "cancelled" || b.CheckIn < from || b.CheckIn >= to {
				continue
			}
			if per[r.ID] == nil {
				per[r.ID] = &acc{}
			}
			per[r.ID].n++
			per[r.ID].rev += b.TotalCents
		}
		var want []hotel.RankedRoom
		for id, a := range per {
			r := d.Rooms[id-1]
			want = append(want, hotel.RankedRoom{HotelID: r.HotelID, RoomNumber: r.Number, Bookings: a.n, RevenueCents: a.rev})
		}
		for i := range want {
			want[i].Rank = 1
			for _, o := range want {
				if o.HotelID == want[i].HotelID && o.RevenueCents > want[i].RevenueCents {
					want[i].Rank++
				}
			}
		}
		slices.SortFunc(want, func(a, b hotel.RankedRoom) int {
			return cmp.Or(strings.Compare(a.HotelID, b.HotelID), cmp.Compare(a.Rank, b.Rank), strings.Compare(a.RoomNumber, b.RoomNumber))
		})
		if len(want) == 0 {
			t.Fatalf("%s: the seed has no bookings in range", u.subject)
		}
		if !slices.Equal(got.Rooms, want) {
			t.Errorf("%s: %d ranked rooms, want %d\n got %v\nwant %v", u.subject, len(got.Rooms), len(want), got.Rooms, want)
		}
		top, res := call[hotel.RankRoomsOut](t, cs, "rank_rooms", map[string]any{"from": from, "to": to, "top": 1})
		if res.IsError {
			h.failf(t, "%s rank_rooms top 1: %s", u.subject, text(res))
		}
		for _, x := range top.Rooms {
			if x.Rank != 1 || d.ChainOfHotel(x.HotelID) != u.chain {
				t.Errorf("%s top 1: %+v", u.subject, x)
			}
		}
	}
}

// TestAddChargeLosesNothing: two callers add 1 cent to the same booking
// 20 times each through the tool, concurrently: the total grows by exactly
// 40 (issue 15's read-modify-write lost 18 of 40). Charging another
// chain's booking is not found and changes nothing.
func TestAddChargeLosesNothing(t *testing.T) {
	h := start(t, false)
	d := h.app.Data
	var id, foreign int64
	for _, b := range d.Bookings {
		switch chain := d.ChainOfHotel(d.HotelOfBooking(b.ID)); {
		case chain == "acme" && b.Status != "cancelled" && id == 0:
			id = b.ID
		case chain == "globex" && b.Status != "cancelled" && foreign == 0:
			foreign = b.ID
		}
	}
	alice := h.connect(t, h.tokenFor(t, "alice"))
	bob := h.connect(t, h.tokenFor(t, "bob"))
	before, res := call[hotel.BookingDetail](t, alice, "get_booking", map[string]any{"id": id})
	if res.IsError {
		h.failf(t, "get_booking: %s", text(res))
	}
	var wg sync.WaitGroup
	for range 2 {
		cs := h.connect(t, h.tokenFor(t, "alice"))
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 20 {
				if _, res := call[hotel.AddChargeOut](t, cs, "add_charge", map[string]any{"booking_id": id, "amount_cents": 1}); res.IsError {
					t.Errorf("add_charge: %s", text(res))
				}
			}
		}()
	}
	wg.Wait()
	after, _ := call[hotel.BookingDetail](t, alice, "get_booking", map[string]any{"id": id})
	if got, want := after.Booking.TotalCents, before.Booking.TotalCents+40; got != want {
		t.Fatalf("total %d, want %d: %d charges lost", got, want, want-got)
	}
	fb, _ := call[hotel.BookingDetail](t, bob, "get_booking", map[string]any{"id": foreign})
	if _, res := call[hotel.AddChargeOut](t, alice, "add_charge", map[string]any{"booking_id": foreign, "amount_cents": 500}); !res.IsError || !strings.Contains(text(res), "not found") {
		t.Fatalf("add_charge on globex's booking = %q (isError %v), want not found", text(res), res.IsError)
	}
	if fa, _ := call[hotel.BookingDetail](t, bob, "get_booking", map[string]any{"id": foreign}); fa.Booking.TotalCents != fb.Booking.TotalCents {
		t.Fatalf("globex's booking total changed from %d to %d", fb.Booking.TotalCents, fa.Booking.TotalCents)
	}
}
