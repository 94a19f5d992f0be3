package hotel

import (
	"context"
	"fmt"
	"strconv"

	"github.com/tenantmcp/tenantmcp/builder"
	"github.com/tenantmcp/tenantmcp/flow"
	"github.com/tenantmcp/tenantmcp/guardedsql"
	"github.com/tenantmcp/tenantmcp/redact"
	"github.com/tenantmcp/tenantmcp/server"
)

// The hotel's resources, prompt and completions. Each runs like a tool:
// the caller's scope from the token, the guarded DB, redaction, flow
// labels, one audit record.
const (
	// URIHotels lists the caller's hotels.
	URIHotels = "hotel://hotels"
	// URIBooking is one booking; another chain's booking id reads exactly
	// like an id that does not exist.
	URIBooking = "hotel://bookings/{id}"
	// URIRooms lists the caller's rooms of one kind.
	URIRooms = "hotel://rooms/{kind}"
	// PromptGuestBriefing prepares a front-desk briefing about a guest.
	PromptGuestBriefing = "guest_briefing"
)

// BookingURI is the URI of booking id.
func BookingURI(id int64) string { return "hotel://bookings/" + strconv.FormatInt(id, 10) }

// Manager is what the managers' tools require.
var Manager = server.Require{Roles: []string{"manager"}}

// HotelInfo is a hotel as the hotels resource lists it.
type HotelInfo struct {
	ID   string `json:"id"`
	Name string `json:"name"`
	City string `json:"city"`
}

// HotelsOut lists hotels.
type HotelsOut struct {
	Hotels []HotelInfo `json:"hotels"`
}

// BriefingData is what the guest briefing prompt carries.
type BriefingData struct {
	Guests   []Guest   `json:"guests"`
	Bookings []Booking `json:"bookings"`
}

// RegisterSurface adds the resources and the prompt to s.
func RegisterSurface(s *server.Server) error {
	kinds := &server.Completion{Func: completeKinds}
	errs := []error{
		server.AddResource(s, server.Resource{URI: URIHotels, Name: "hotels", Title: "Your hotels",
			Description: "The hotels your token reaches, with their cities.", Flow: flow.Decl{Level: flow.Public}}, ListHotels),
		server.AddResourceTemplate(s, server.ResourceTemplate{URITemplate: URIBooking, Name: "booking", Title: "A booking",
			Description: "One booking with its guest and payments."},
			func(ctx context.Context, db *guardedsql.DB, vars map[string]string) (BookingDetail, error) {
				id, err := strconv.ParseInt(vars["id"], 10, 64)
				if err != nil {
					return BookingDetail{}, guardedsql.ErrNotFound // not a booking id: like a missing one
				}
				return GetBooking(ctx, db, GetBookingIn{ID: id})
			}),
		server.AddResourceTemplate(s, server.ResourceTemplate{URITemplate: URIRooms, Name: "rooms", Title: "Rooms of a kind",
			Description: "Your rooms of one kind (single, double, suite).", Flow: flow.Decl{Level: flow.Public},
			Complete: map[string]server.Completion{"kind": *kinds}},
			func(ctx context.Context, db *guardedsql.DB, vars map[string]string) (RoomsOut, error) {
				return roomsOfKind(ctx, db, vars["kind"])
			}),
		server.AddPrompt(s, server.Prompt{Name: PromptGuestBriefing, Title: "Guest briefing",
			Description: "Brief the front desk on a guest's stays.",
			Args: []server.PromptArg{{Name: "guest", Description: "the guest's full name", Required: true,
				Complete: &server.Completion{Func: completeGuests, PII: redact.Name}}}},
			GuestBriefing),
	}
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// ListHotels lists the caller's hotels.
func ListHotels(ctx context.Context, db *guardedsql.DB, _ map[string]string) (HotelsOut, error) {
	h := hotelsT.As("h")
	q, err := builder.Select(h.ID(), h.Name(), h.City()).From(h.Ref()).OrderBy(h.ID().Asc()).Build()
	if err != nil {
		return HotelsOut{}, err
	}
	rows, err := db.Query(ctx, q)
	if err != nil {
		return HotelsOut{}, err
	}
	hs, err := guardedsql.CollectRows(rows, func(rs *guardedsql.Rows) (HotelInfo, error) {
		var x HotelInfo
		err := rs.Scan(&x.ID, &x.Name, &x.City)
		return x, err
	})
	return HotelsOut{Hotels: nonNil(hs)}, err
}

func roomsOfKind(ctx context.Context, db *guardedsql.DB, kind string) (RoomsOut, error) {
	r, h := roomsT.As("r"), hotelsT.As("h")
	rooms, err := queryRooms(ctx, db, r, h, []builder.Pred{r.Kind().Eq(kind)}, 200)
	if err == nil && len(rooms) == 0 {
		return RoomsOut{}, guardedsql.ErrNotFound // no such kind (for you)
	}
	return RoomsOut{Rooms: rooms}, err
}

// completeKinds suggests the room kinds of the caller's hotels.
func completeKinds(ctx context.Context, db *guardedsql.DB, prefix string, _ map[string]string) ([]string, error) {
	r := roomsT.As("r")
	q, err := builder.Select(r.Kind()).From(r.Ref()).Where(r.Kind().HasPrefix(prefix)).
		GroupBy(r.Kind()).OrderBy(r.Kind().Asc()).Limit(server.MaxCompletions).Build()
	if err != nil {
		return nil, err
	}
	return collectStrings(ctx, db, q)
}

// completeGuests suggests the names of the caller's guests. They are
// personal data: the server offers them only to roles that may see names.
func completeGuests(ctx context.Context, db *guardedsql.DB, prefix string, _ map[string]string) ([]string, error) {
	if len(prefix) < 1 {
		return nil, nil
	}
	g := guestsT.As("g")
	q, err := builder.Select(g.FullName()).From(g.Ref()).Where(g.FullName().HasPrefix(prefix)).
		GroupBy(g.FullName()).OrderBy(g.FullName().Asc()).Limit(server.MaxCompletions + 1).Build()
	if err != nil {
		return nil, err
	}
	return collectStrings(ctx, db, q)
}

func collectStrings(ctx context.Context, db *guardedsql.DB, q builder.Query) ([]string, error) {
	rows, err := db.Query(ctx, q)
	if err != nil {
		return nil, err
	}
	return guardedsql.CollectRows(rows, func(rs *guardedsql.Rows) (string, error) {
		var s string
		err := rs.Scan(&s)
		return s, err
	})
}

// GuestBriefing renders the guest_briefing prompt: the guests of that
// name the caller's scope reaches, and their bookings.
func GuestBriefing(ctx context.Context, db *guardedsql.DB, args map[string]string) (string, BriefingData, error) {
	name := args["guest"]
	g := guestsT.As("g")
	guests, err := queryGuests(ctx, db, g, g.FullName().Eq(name), 10)
	if err != nil {
		return "", BriefingData{}, err
	}
	if len(guests) == 0 {
		return "", BriefingData{}, guardedsql.ErrNotFound // another chain's guest: like nobody
	}
	d := BriefingData{Guests: guests, Bookings: []Booking{}}
	ids := make([]any, len(guests))
	for i, x := range guests {
		ids[i] = x.ID
	}
	sel, b := bookingQuery()
	bq, err := sel.Where(b.GuestID().In(ids...)).OrderBy(b.CheckIn().Desc(), b.ID().Asc()).Limit(20).Build()
	if err != nil {
		return "", BriefingData{}, err
	}
	brows, err := db.Query(ctx, bq)
	if err != nil {
		return "", BriefingData{}, err
	}
	if d.Bookings, err = guardedsql.CollectRows(brows, scanBooking); err != nil {
		return "", BriefingData{}, err
	}
	d.Bookings = nonNil(d.Bookings)
	text := fmt.Sprintf("You are assisting the front desk. Summarise this guest's stays in a few lines: upcoming arrivals first, "+
		"then past stays, then anything to prepare. %d guest record(s) and %d booking(s) follow.", len(d.Guests), len(d.Bookings))
	return text, d, nil
}
