package hotel_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tenantmcp/tenantmcp/examples/hotel/hotel"
)

// The booking tools start from one booking read built at package
// initialisation and shared by every call (tools.go, bookingQuery). That is
// only sound while the builder never mutates what it shares: this runs
// list_bookings and get_booking for two chains at once, many calls each,
// and checks that every answer holds exactly its caller's chain and window
// (run it with -race: a builder writing into the shared read, or two
// calls' conditions leaking into each other, fails here).
func TestBookingToolsShareTheirReadConcurrently(t *testing.T) {
	h := start(t, false)
	d := h.app.Data
	type who struct{ subject, chain string }
	people := []who{{"alice", "acme"}, {"bob", "globex"}}
	const perWorker = 25
	var wg sync.WaitGroup
	for _, p := range people {
		tok := h.tokenFor(t, p.subject)
		for w := range 3 {
			cs := h.connect(t, tok)
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range perWorker {
					m := 1 + (w*perWorker+i)%10
					from, to := fmt.Sprintf("2026-%02d-01", m), fmt.Sprintf("2026-%02d-01", m+2)
					var page hotel.BookingsOut
					if err := callInto(cs, "list_bookings", map[string]any{"from": from, "to": to, "limit": 20}, &page); err != nil {
						t.Errorf("%s list_bookings %s..%s: %v", p.subject, from, to, err)
						return
					}
					for k, b := range page.Bookings {
						if c := d.ChainOfHotel(b.HotelID); c != p.chain {
							t.Errorf("%s: booking %d of hotel %s (chain %s) in a %s page", p.subject, b.ID, b.HotelID, c, p.chain)
						}
						if b.CheckIn < from || b.CheckIn >= to {
							t.Errorf("%s: booking %d checks in %s, outside %s..%s", p.subject, b.ID, b.CheckIn, from, to)
						}
						if k > 0 && b.CheckIn > page.Bookings[k-1].CheckIn {
							t.Errorf("%s: page not in check-in order at %d", p.subject, k)
						}
					}
					if len(page.Bookings) > 0 {
						id := page.Bookings[0].ID
						var one hotel.BookingDetail
						if err := callInto(cs, "get_booking", map[string]any{"id": id}, &one); err != nil {
							t.Errorf("%s get_booking %d: %v", p.subject, id, err)
							return
						}
						if one.Booking.ID != id {
							t.Errorf("%s get_booking %d: got booking %d", p.subject, id, one.Booking.ID)
						}
					}
				}
			}()
		}
	}
	wg.Wait()
}

// callInto calls tool and decodes its structured result into out; a tool
// error is an error. Unlike call it may run off the test's goroutine.
func callInto(cs *mcp.ClientSession, tool string, args, out any) error {
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		return err
	}
	if res.IsError {
		return fmt.Errorf("tool error: %s", text(res))
	}
	raw, err := json.Marshal(res.StructuredContent)
	if err != nil {
		return err
	}
	return json.Unmarshal(raw, out)
}
