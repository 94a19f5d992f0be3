package hotel

import (
	"context"
	"errors"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tenantmcp/tenantmcp/builder"
	"github.com/tenantmcp/tenantmcp/guardedsql"
	"github.com/tenantmcp/tenantmcp/server"
)

// registerReports adds the tools built on scalar expressions: rank_rooms
// (a window function) and add_charge (an atomic SET x = x + ?).
func registerReports(s *server.Server) error {
	ro := &mcp.ToolAnnotations{ReadOnlyHint: true}
	return errors.Join(
		server.AddTool(s, server.Tool{Name: "rank_rooms", Description: "Rooms ranked by revenue within each hotel for a date range (cancelled bookings excluded; managers only).", Annotations: ro, Require: Manager}, RankRooms),
		server.AddTool(s, server.Tool{Name: "add_charge", Description: "Add a charge (minibar, late check-out...) to an uncancelled booking's total."}, AddCharge),
	)
}

// RankRoomsIn is a date range of check-ins, and how many rooms per hotel
// to keep (0: all).
type RankRoomsIn struct {
	From string `json:"from" jsonschema:"first check-in date, YYYY-MM-DD"`
	To   string `json:"to" jsonschema:"check-in date to stop before, YYYY-MM-DD"`
	Top  int    `json:"top,omitempty" jsonschema:"rooms to keep per hotel; 0 for all"`
}

// RankedRoom is one room of the ranking.
type RankedRoom struct {
	HotelID      string `json:"hotel_id"`
	RoomNumber   string `json:"room_number"`
	Bookings     int64  `json:"bookings"`
	RevenueCents int64  `json:"revenue_cents"`
	// Rank is 1 for the hotel's best-earning room; ties share a rank.
	Rank int64 `json:"rank"`
}

// RankRoomsOut is the ranking, hotel by hotel.
type RankRoomsOut struct {
	Rooms []RankedRoom `json:"rooms"`
}

// RankRooms ranks each hotel's rooms by the revenue of their uncancelled
// bookings: RANK() OVER (PARTITION BY hotel ORDER BY SUM(total) DESC).
// The window sees only the caller's rows, like everything the guard
// renders, so a room of another tenant's hotel never takes a rank.
func RankRooms(ctx context.Context, db *guardedsql.DB, in RankRoomsIn) (RankRoomsOut, error) {
	if err := parseRange(in.From, in.To); err != nil {
		return RankRoomsOut{}, err
	}
	if in.Top < 0 {
		return RankRoomsOut{}, server.InvalidInput("top must not be negative")
	}
	b, r := bookingsT.As("b"), roomsT.As("r")
	hotel := r.HotelID()
	revenue := builder.Sum(b.TotalCents())
	rank := builder.Rank().Over(builder.Window().PartitionBy(hotel).OrderBy(revenue.Desc()))
	q, err := builder.Select(hotel, r.Number(), builder.CountAll(), revenue, rank).
		From(b.Ref()).Join(r.Ref(), r.ID().EqCol(b.RoomID())).
		Where(b.Status().Ne("cancelled"), b.CheckIn().Ge(in.From), b.CheckIn().Lt(in.To)).
		GroupBy(hotel, r.ID(), r.Number()).
		OrderBy(hotel.Asc(), rank.Asc(), r.Number().Asc()).Build()
	if err != nil {
		return RankRoomsOut{}, err
	}
	rows, err := db.Query(ctx, q)
	if err != nil {
		return RankRoomsOut{}, err
	}
	all, err := guardedsql.CollectRows(rows, func(rs *guardedsql.Rows) (RankedRoom, error) {
		var x RankedRoom
		err := rs.Scan(&x.HotelID, &x.RoomNumber, &x.Bookings, &x.RevenueCents, &x.Rank)
		return x, err
	})
	if err != nil {
		return RankRoomsOut{}, err
	}
	out := RankRoomsOut{Rooms: []RankedRoom{}}
	for _, x := range all {
		if in.Top == 0 || x.Rank <= int64(in.Top) {
			out.Rooms = append(out.Rooms, x)
		}
	}
	return out, nil
}

// AddChargeIn names a booking and the amount to add.
type AddChargeIn struct {
	BookingID   int64 `json:"booking_id"`
	AmountCents int64 `json:"amount_cents" jsonschema:"amount to add, in cents (1 to 100000)"`
}

// AddChargeOut is the booking's new total.
type AddChargeOut struct {
	BookingID  int64 `json:"booking_id"`
	TotalCents int64 `json:"total_cents"`
}

// AddCharge adds amount_cents to an uncancelled booking's total with one
// atomic UPDATE ... SET total_cents = total_cents + ?: concurrent charges
// all count (a read-modify-write would lose some). A booking of another
// tenant is not found, exactly like a missing one.
func AddCharge(ctx context.Context, db *guardedsql.DB, in AddChargeIn) (AddChargeOut, error) {
	if in.AmountCents < 1 || in.AmountCents > 100000 {
		return AddChargeOut{}, server.InvalidInput("amount_cents must be between 1 and 100000")
	}
	b := bookingsT
	out := AddChargeOut{BookingID: in.BookingID}
	err := db.Tx(ctx, func(tx *guardedsql.Tx) error {
		u, err := builder.UpdateTable(b.Ref()).SetExpr("total_cents", b.TotalCents().Add(in.AmountCents)).
			Where(b.ID().Eq(in.BookingID), b.Status().Ne("cancelled")).ExpectOne().Build()
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, u); err != nil {
			return err
		}
		q, err := builder.Select(b.TotalCents()).From(b.Ref()).Where(b.ID().Eq(in.BookingID)).Build()
		if err != nil {
			return err
		}
		return tx.QueryRow(ctx, q).Scan(&out.TotalCents)
	})
	return out, err
}
