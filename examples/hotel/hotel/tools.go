package hotel

import (
	"context"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tenantmcp/tenantmcp/builder"
	"github.com/tenantmcp/tenantmcp/guardedsql"
	"github.com/tenantmcp/tenantmcp/server"
)

// Table references, resolved once against the schema, with typed columns
// (tables_gen.go, generated from the live schema by tenantmcp-gen): a
// misspelt column does not compile. Tools alias them as they need;
// nothing here names a tenant.
var (
	hotelsT   = NewHotelsTable(Schema, "")
	roomsT    = NewRoomsTable(Schema, "")
	guestsT   = NewGuestsTable(Schema, "")
	bookingsT = NewBookingsTable(Schema, "")
	paymentsT = NewPaymentsTable(Schema, "")
)

// Guest is a guest as tools return it. The pii tags tell package redact
// what to hide from callers whose roles may not see it.
type Guest struct {
	ID       int64  `json:"id"`
	HotelID  string `json:"hotel_id"`
	FullName string `json:"full_name" pii:"name"`
	Email    string `json:"email" pii:"email"`
	Phone    string `json:"phone" pii:"phone"`
	Country  string `json:"country"`
}

// Booking is a booking with its room, hotel and guest.
type Booking struct {
	ID         int64  `json:"id"`
	HotelID    string `json:"hotel_id"`
	HotelName  string `json:"hotel_name"`
	RoomNumber string `json:"room_number"`
	CheckIn    string `json:"check_in"`
	CheckOut   string `json:"check_out"`
	Status     string `json:"status"`
	TotalCents int64  `json:"total_cents"`
	GuestID    int64  `json:"guest_id"`
	GuestName  string `json:"guest_name" pii:"name"`
	GuestEmail string `json:"guest_email" pii:"email"`
}

// Payment is a payment of a booking.
type Payment struct {
	ID          int64  `json:"id"`
	AmountCents int64  `json:"amount_cents"`
	Method      string `json:"method"`
	CardNumber  string `json:"card_number,omitempty" pii:"card"`
	PaidAt      string `json:"paid_at"`
}

// Room is a bookable room.
type Room struct {
	ID        int64  `json:"id"`
	HotelID   string `json:"hotel_id"`
	HotelName string `json:"hotel_name"`
	City      string `json:"city"`
	Number    string `json:"number"`
	Kind      string `json:"kind"`
	Capacity  int64  `json:"capacity"`
	RateCents int64  `json:"rate_cents"`
}

// Register adds the hotel tools to s: cancel_booking and revenue_report
// require the manager role (Manager); the front desk neither sees nor
// calls them.
func Register(s *server.Server) error {
	ro := &mcp.ToolAnnotations{ReadOnlyHint: true}
	regs := []error{
		server.AddTool(s, server.Tool{Name: "search_availability", Description: "Rooms free for a date range, optionally filtered by city, kind and capacity.", Annotations: ro}, SearchAvailability),
		server.AddTool(s, server.Tool{Name: "list_bookings", Description: "Bookings whose check-in falls in a date range, newest first, paginated.", Annotations: ro}, ListBookings),
		server.AddTool(s, server.Tool{Name: "get_booking", Description: "One booking with its guest and payments.", Annotations: ro}, GetBooking),
		server.AddTool(s, server.Tool{Name: "create_booking", Description: "Book a room for a guest, if the room is free for the dates."}, CreateBooking),
		server.AddTool(s, server.Tool{Name: "book_free_room", Description: "Book the first room of the guest's hotel that is free for the dates, and record the payment of the stay (nights × rate)."}, BookFreeRoom),
		server.AddTool(s, server.Tool{Name: "cancel_booking", Description: "Cancel a booking (managers only).", Require: Manager},
			func(ctx context.Context, db *guardedsql.DB, in CancelBookingIn) (CancelledOut, error) {
				out, err := CancelBooking(ctx, db, in)
				if err == nil {
					// Subscribers of the booking whose scope covers it hear of the change.
					_ = s.ResourceUpdated(ctx, BookingURI(in.ID))
				}
				return out, err
			}),
		server.AddTool(s, server.Tool{Name: "find_guest", Description: "Guests whose name starts with, or whose e-mail equals, the query.", Annotations: ro}, FindGuest),
		server.AddTool(s, server.Tool{Name: "revenue_report", Description: "Revenue and booking counts per hotel for a date range (cancelled bookings excluded; managers only).", Annotations: ro, Require: Manager}, RevenueReport),
		registerReports(s), // tools_reports.go
	}
	for _, err := range regs {
		if err != nil {
			return err
		}
	}
	return nil
}

func parseRange(from, to string) error {
	f, err := time.Parse(time.DateOnly, from)
	if err != nil {
		return server.InvalidInput("from/check_in must be a date YYYY-MM-DD")
	}
	t, err := time.Parse(time.DateOnly, to)
	if err != nil {
		return server.InvalidInput("to/check_out must be a date YYYY-MM-DD")
	}
	if !t.After(f) {
		return server.InvalidInput("the end date must be after the start date")
	}
	return nil
}

// SearchAvailabilityIn is the input of search_availability.
type SearchAvailabilityIn struct {
	CheckIn     string `json:"check_in" jsonschema:"first night, YYYY-MM-DD"`
	CheckOut    string `json:"check_out" jsonschema:"departure day, YYYY-MM-DD"`
	City        string `json:"city,omitempty"`
	Kind        string `json:"kind,omitempty" jsonschema:"single, double or suite"`
	MinCapacity int64  `json:"min_capacity,omitempty"`
}

// RoomsOut lists rooms.
type RoomsOut struct {
	Rooms []Room `json:"rooms"`
}

// SearchAvailability lists rooms with no overlapping, uncancelled booking.
func SearchAvailability(ctx context.Context, db *guardedsql.DB, in SearchAvailabilityIn) (RoomsOut, error) {
	if err := parseRange(in.CheckIn, in.CheckOut); err != nil {
		return RoomsOut{}, err
	}
	r, h, b := roomsT.As("r"), hotelsT.As("h"), bookingsT.As("b")
	busy := builder.Select(b.RoomID()).From(b.Ref()).Where(
		b.Status().Ne("cancelled"),
		b.CheckIn().Lt(in.CheckOut),
		b.CheckOut().Gt(in.CheckIn),
	)
	busyQ, err := busy.Build()
	if err != nil {
		return RoomsOut{}, err
	}
	where := []builder.Pred{r.ID().NotInQuery(busyQ)}
	if in.City != "" {
		where = append(where, h.City().Eq(in.City))
	}
	if in.Kind != "" {
		where = append(where, r.Kind().Eq(in.Kind))
	}
	if in.MinCapacity > 0 {
		where = append(where, r.Capacity().Ge(in.MinCapacity))
	}
	rooms, err := queryRooms(ctx, db, r, h, where, 50)
	return RoomsOut{Rooms: nonNil(rooms)}, err
}

// queryRooms lists rooms r (joined with their hotels h) matching where,
// in hotel and number order.
func queryRooms(ctx context.Context, db *guardedsql.DB, r RoomsTable, h HotelsTable, where []builder.Pred, limit int) ([]Room, error) {
	q, err := builder.Select(r.ID(), h.ID(), h.Name(), h.City(), r.Number(), r.Kind(), r.Capacity(), r.RateCents()).
		From(r.Ref()).Join(h.Ref(), h.ID().EqCol(r.HotelID())).
		Where(where...).OrderBy(h.ID().Asc(), r.Number().Asc()).Limit(limit).Build()
	if err != nil {
		return nil, err
	}
	rows, err := db.Query(ctx, q)
	if err != nil {
		return nil, err
	}
	return guardedsql.CollectRows(rows, func(rs *guardedsql.Rows) (Room, error) {
		var x Room
		err := rs.Scan(&x.ID, &x.HotelID, &x.HotelName, &x.City, &x.Number, &x.Kind, &x.Capacity, &x.RateCents)
		return x, err
	})
}

// ListBookingsIn is the input of list_bookings.
type ListBookingsIn struct {
	From   string `json:"from" jsonschema:"earliest check-in, YYYY-MM-DD"`
	To     string `json:"to" jsonschema:"check-in before this day, YYYY-MM-DD"`
	Status string `json:"status,omitempty" jsonschema:"confirmed, completed or cancelled"`
	Limit  int    `json:"limit,omitempty" jsonschema:"page size, at most 200 (default 50)"`
	Offset int    `json:"offset,omitempty"`
}

// BookingsOut is a page of bookings.
type BookingsOut struct {
	Bookings []Booking `json:"bookings"`
}

// bookingSel and bookingAlias are the booking read every booking tool
// starts from, built once: builders and the queries they build are
// immutable and safe to share between goroutines (package builder), and
// rebuilding the four aliases, eleven columns and three joins cost every
// list_bookings call about 20 µs of CPU (issue 30's P5 profile).
var bookingSel, bookingAlias = newBookingQuery()

// bookingOrder is list_bookings' order: latest check-in first, then id.
var bookingOrder = []builder.Order{bookingAlias.CheckIn().Desc(), bookingAlias.ID().Asc()}

// bookingQuery returns the shared booking read and its bookings alias;
// callers add their conditions with Where, which copies.
func bookingQuery() (builder.SelectBuilder, BookingsTable) { return bookingSel, bookingAlias }

func newBookingQuery() (builder.SelectBuilder, BookingsTable) {
	b, r, h, g := bookingsT.As("b"), roomsT.As("r"), hotelsT.As("h"), guestsT.As("g")
	return builder.Select(b.ID(), h.ID(), h.Name(), r.Number(), b.CheckIn(), b.CheckOut(),
		b.Status(), b.TotalCents(), g.ID(), g.FullName(), g.Email()).
		From(b.Ref()).
		Join(r.Ref(), r.ID().EqCol(b.RoomID())).
		Join(h.Ref(), h.ID().EqCol(r.HotelID())).
		Join(g.Ref(), g.ID().EqCol(b.GuestID())), b
}

func scanBooking(rs *guardedsql.Rows) (Booking, error) {
	var x Booking
	err := rs.Scan(bookingDest(&x, make([]any, 0, bookingCols))...)
	return x, err
}

const bookingCols = 11

// bookingDest appends to dest the scan destinations of x's columns, in
// bookingQuery's order.
func bookingDest(x *Booking, dest []any) []any {
	return append(dest, &x.ID, &x.HotelID, &x.HotelName, &x.RoomNumber, dateInto(&x.CheckIn), dateInto(&x.CheckOut),
		&x.Status, &x.TotalCents, &x.GuestID, &x.GuestName, &x.GuestEmail)
}

// collectBookings is guardedsql.CollectRows(rows, scanBooking) for a page
// of at most n rows, each scanned in place into a slice made once: no
// booking copied per row, no regrowth, one destination list for all rows.
func collectBookings(rows *guardedsql.Rows, n int) ([]Booking, error) {
	defer rows.Close()
	out := make([]Booking, 0, n)
	dest := make([]any, 0, bookingCols)
	for rows.Next() {
		out = append(out, Booking{})
		if err := rows.Scan(bookingDest(&out[len(out)-1], dest[:0])...); err != nil {
			return nil, err
		}
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	return out, rows.Close()
}

// ListBookingsQuery is the statement ListBookings runs for an input it
// accepted (Limit set), for benchmarks and EXPLAIN.
func ListBookingsQuery(in ListBookingsIn) (builder.Query, error) {
	sel, b := bookingQuery()
	where := []builder.Pred{b.CheckIn().Ge(in.From), b.CheckIn().Lt(in.To)}
	if in.Status != "" {
		where = append(where, b.Status().Eq(in.Status))
	}
	return sel.Where(where...).OrderBy(bookingOrder...).Limit(in.Limit).Offset(in.Offset).Build()
}

// ListBookings lists the caller's bookings in a check-in range.
func ListBookings(ctx context.Context, db *guardedsql.DB, in ListBookingsIn) (BookingsOut, error) {
	if err := parseRange(in.From, in.To); err != nil {
		return BookingsOut{}, err
	}
	if in.Limit <= 0 {
		in.Limit = 50
	}
	if in.Limit > 200 || in.Offset < 0 {
		return BookingsOut{}, server.InvalidInput("limit must be 1-200 and offset not negative")
	}
	q, err := ListBookingsQuery(in)
	if err != nil {
		return BookingsOut{}, err
	}
	rows, err := db.Query(ctx, q)
	if err != nil {
		return BookingsOut{}, err
	}
	bs, err := collectBookings(rows, in.Limit)
	return BookingsOut{Bookings: nonNil(bs)}, err
}

// GetBookingIn is the input of get_booking.
type GetBookingIn struct {
	ID int64 `json:"id"`
}

// BookingDetail is a booking with its guest and payments.
type BookingDetail struct {
	Booking  Booking   `json:"booking"`
	Guest    Guest     `json:"guest"`
	Payments []Payment `json:"payments"`
}

// GetBooking returns one booking. Another tenant's booking id is "not
// found", exactly like an id that does not exist.
func GetBooking(ctx context.Context, db *guardedsql.DB, in GetBookingIn) (BookingDetail, error) {
	sel, b := bookingQuery()
	q, err := sel.Where(b.ID().Eq(in.ID)).Build()
	if err != nil {
		return BookingDetail{}, err
	}
	rows, err := db.Query(ctx, q)
	if err != nil {
		return BookingDetail{}, err
	}
	bk, err := guardedsql.CollectOne(rows, scanBooking)
	if err != nil {
		return BookingDetail{}, err
	}
	g := guestsT.As("g")
	gq, err := builder.Select(g.ID(), g.HotelID(), g.FullName(), g.Email(), g.Phone(), g.CountryCode()).
		From(g.Ref()).Where(g.ID().Eq(bk.GuestID)).Build()
	if err != nil {
		return BookingDetail{}, err
	}
	var guest Guest
	if err := db.QueryRow(ctx, gq).Scan(&guest.ID, &guest.HotelID, &guest.FullName, &guest.Email, &guest.Phone, &guest.Country); err != nil {
		return BookingDetail{}, err
	}
	p := paymentsT.As("p")
	pq, err := builder.Select(p.ID(), p.AmountCents(), p.Method(), p.CardNumber(), p.PaidAt()).
		From(p.Ref()).Where(p.BookingID().Eq(bk.ID)).OrderBy(p.ID().Asc()).Build()
	if err != nil {
		return BookingDetail{}, err
	}
	prow, err := db.Query(ctx, pq)
	if err != nil {
		return BookingDetail{}, err
	}
	pays, err := guardedsql.CollectRows(prow, func(rs *guardedsql.Rows) (Payment, error) {
		var x Payment
		var card *string
		err := rs.Scan(&x.ID, &x.AmountCents, &x.Method, &card, timeInto(&x.PaidAt))
		if card != nil {
			x.CardNumber = *card
		}
		return x, err
	})
	return BookingDetail{Booking: bk, Guest: guest, Payments: nonNil(pays)}, err
}

// CreateBookingIn is the input of create_booking.
type CreateBookingIn struct {
	RoomID   int64  `json:"room_id"`
	GuestID  int64  `json:"guest_id"`
	CheckIn  string `json:"check_in" jsonschema:"YYYY-MM-DD"`
	CheckOut string `json:"check_out" jsonschema:"YYYY-MM-DD"`
}

// CreatedOut reports a created booking.
type CreatedOut struct {
	ID         int64 `json:"id"`
	TotalCents int64 `json:"total_cents"`
}

// CreateBooking books a room. The room and the guest must both be in the
// caller's scope (the guard checks the room, the booking's scope parent;
// the tool checks the guest is of the same hotel), and the room free.
func CreateBooking(ctx context.Context, db *guardedsql.DB, in CreateBookingIn) (CreatedOut, error) {
	if err := parseRange(in.CheckIn, in.CheckOut); err != nil {
		return CreatedOut{}, err
	}
	ci, _ := time.Parse(time.DateOnly, in.CheckIn)
	co, _ := time.Parse(time.DateOnly, in.CheckOut)
	nights := int64(co.Sub(ci).Hours() / 24)
	var out CreatedOut
	err := db.Tx(ctx, func(tx *guardedsql.Tx) error {
		r, g := roomsT.As("r"), guestsT.As("g")
		q, err := builder.Select(r.RateCents(), r.HotelID()).From(r.Ref()).Where(r.ID().Eq(in.RoomID)).Build()
		if err != nil {
			return err
		}
		var rate int64
		var hotelID string
		if err := tx.QueryRow(ctx, q).Scan(&rate, &hotelID); err != nil {
			return err // another tenant's room: not found
		}
		gq, err := builder.Select(g.ID()).From(g.Ref()).Where(g.ID().Eq(in.GuestID), g.HotelID().Eq(hotelID)).Build()
		if err != nil {
			return err
		}
		var gid int64
		if err := tx.QueryRow(ctx, gq).Scan(&gid); err != nil {
			return err
		}
		b := bookingsT.As("b")
		cq, err := builder.Select(builder.CountAll()).From(b.Ref()).Where(
			b.RoomID().Eq(in.RoomID), b.Status().Ne("cancelled"),
			b.CheckIn().Lt(in.CheckOut), b.CheckOut().Gt(in.CheckIn)).Build()
		if err != nil {
			return err
		}
		var clashes int64
		if err := tx.QueryRow(ctx, cq).Scan(&clashes); err != nil {
			return err
		}
		if clashes > 0 {
			return server.InvalidInput("room %d is not free from %s to %s", in.RoomID, in.CheckIn, in.CheckOut)
		}
		out, err = insertBooking(ctx, tx, in, rate*nights) // writes.go: INSERT ... RETURNING
		return err
	})
	return out, err
}

// CancelBookingIn is the input of cancel_booking.
type CancelBookingIn struct {
	ID int64 `json:"id"`
}

// CancelledOut reports a cancellation.
type CancelledOut struct {
	ID     int64  `json:"id"`
	Status string `json:"status"`
}

// CancelBooking sets a booking's status to cancelled. Another tenant's
// booking is "not found" and stays untouched.
func CancelBooking(ctx context.Context, db *guardedsql.DB, in CancelBookingIn) (CancelledOut, error) {
	u, err := builder.UpdateTable(bookingsT.Ref()).Set("status", "cancelled").Where(bookingsT.ID().Eq(in.ID)).ExpectOne().Build()
	if err != nil {
		return CancelledOut{}, err
	}
	if _, err := db.Exec(ctx, u); err != nil {
		return CancelledOut{}, err
	}
	return CancelledOut{ID: in.ID, Status: "cancelled"}, nil
}

// FindGuestIn is the input of find_guest.
type FindGuestIn struct {
	Query string `json:"query" jsonschema:"a name prefix, or an exact e-mail address"`
}

// GuestsOut lists guests.
type GuestsOut struct {
	Guests []Guest `json:"guests"`
}

// FindGuest searches guests by name prefix or e-mail.
func FindGuest(ctx context.Context, db *guardedsql.DB, in FindGuestIn) (GuestsOut, error) {
	if len(in.Query) < 2 {
		return GuestsOut{}, server.InvalidInput("query must have at least 2 characters")
	}
	g := guestsT.As("g")
	gs, err := queryGuests(ctx, db, g, builder.Or(g.FullName().HasPrefix(in.Query), g.Email().Eq(in.Query)), 50)
	return GuestsOut{Guests: nonNil(gs)}, err
}

// queryGuests lists guests g matching where, in name and id order.
func queryGuests(ctx context.Context, db *guardedsql.DB, g GuestsTable, where builder.Pred, limit int) ([]Guest, error) {
	q, err := builder.Select(g.ID(), g.HotelID(), g.FullName(), g.Email(), g.Phone(), g.CountryCode()).
		From(g.Ref()).Where(where).OrderBy(g.FullName().Asc(), g.ID().Asc()).Limit(limit).Build()
	if err != nil {
		return nil, err
	}
	rows, err := db.Query(ctx, q)
	if err != nil {
		return nil, err
	}
	return guardedsql.CollectRows(rows, func(rs *guardedsql.Rows) (Guest, error) {
		var x Guest
		err := rs.Scan(&x.ID, &x.HotelID, &x.FullName, &x.Email, &x.Phone, &x.Country)
		return x, err
	})
}

// RevenueReportIn is the input of revenue_report.
type RevenueReportIn struct {
	From string `json:"from" jsonschema:"YYYY-MM-DD"`
	To   string `json:"to" jsonschema:"YYYY-MM-DD, exclusive"`
}

// HotelRevenue is one line of the report.
type HotelRevenue struct {
	HotelID      string `json:"hotel_id"`
	HotelName    string `json:"hotel_name"`
	Bookings     int64  `json:"bookings"`
	RevenueCents int64  `json:"revenue_cents"`
}

// RevenueOut is the report.
type RevenueOut struct {
	Hotels       []HotelRevenue `json:"hotels"`
	TotalCents   int64          `json:"total_cents"`
	BookingCount int64          `json:"booking_count"`
}

// RevenueReport aggregates uncancelled bookings per hotel.
func RevenueReport(ctx context.Context, db *guardedsql.DB, in RevenueReportIn) (RevenueOut, error) {
	if err := parseRange(in.From, in.To); err != nil {
		return RevenueOut{}, err
	}
	b, r, h := bookingsT.As("b"), roomsT.As("r"), hotelsT.As("h")
	q, err := builder.Select(h.ID(), h.Name(), builder.CountAll(), builder.Sum(b.TotalCents())).
		From(b.Ref()).Join(r.Ref(), r.ID().EqCol(b.RoomID())).Join(h.Ref(), h.ID().EqCol(r.HotelID())).
		Where(b.Status().Ne("cancelled"), b.CheckIn().Ge(in.From), b.CheckIn().Lt(in.To)).
		GroupBy(h.ID(), h.Name()).OrderBy(h.ID().Asc()).Build()
	if err != nil {
		return RevenueOut{}, err
	}
	rows, err := db.Query(ctx, q)
	if err != nil {
		return RevenueOut{}, err
	}
	lines, err := guardedsql.CollectRows(rows, func(rs *guardedsql.Rows) (HotelRevenue, error) {
		var x HotelRevenue
		err := rs.Scan(&x.HotelID, &x.HotelName, &x.Bookings, &x.RevenueCents)
		return x, err
	})
	out := RevenueOut{Hotels: nonNil(lines)}
	for _, l := range lines {
		out.TotalCents += l.RevenueCents
		out.BookingCount += l.Bookings
	}
	return out, err
}

// nonNil keeps empty results as [] rather than null on the wire.
func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}
