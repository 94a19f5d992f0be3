package hotel

import (
	"context"
	"errors"
	"time"

	"github.com/tenantmcp/tenantmcp/builder"
	"github.com/tenantmcp/tenantmcp/guardedsql"
	"github.com/tenantmcp/tenantmcp/server"
)

// BookFreeRoomIn is the input of book_free_room.
type BookFreeRoomIn struct {
	// GuestID is the guest; the room is one of the guest's hotel (no
	// tenant in any input: the hotel is read under the caller's scope).
	GuestID  int64  `json:"guest_id"`
	CheckIn  string `json:"check_in" jsonschema:"YYYY-MM-DD"`
	CheckOut string `json:"check_out" jsonschema:"YYYY-MM-DD"`
	// Method is how the stay is paid: "card" (the default) or "cash".
	Method string `json:"method,omitempty" jsonschema:"card or cash"`
}

// BookedOut reports a booking made by book_free_room with its payment.
type BookedOut struct {
	BookingID   int64 `json:"booking_id"`
	RoomID      int64 `json:"room_id"`
	Nights      int64 `json:"nights"`
	AmountCents int64 `json:"amount_cents"`
	// Attempts is how many times the transaction ran: 1, plus one per
	// retry after losing a race with a concurrent booking.
	Attempts int `json:"attempts"`
}

// BookFreeRetries bounds the retries of book_free_room's transaction
// after a serialization failure or deadlock. Every caller wants the
// lowest free room, so on PostgreSQL each commit makes the others' lock
// of that room a serialization failure: 8 clients booking at once cost
// up to ~20 attempts for the unluckiest call (TestBookFreeRoomConcurrent).
const BookFreeRetries = 50

// BookFreeRoom takes the lowest-numbered room of the guest's hotel that
// is free for the dates, books it for the guest and records the payment
// of the stay, nights × the room's rate, all in one serializable
// transaction: under any number of concurrent callers, a room is never
// given twice for the same night and a booking never lacks its payment.
// The engine computes the nights and the amount from the dates
// (builder.DiffDays), so the price is the room's rate as the transaction
// read it. A transaction that loses a race (a serialization failure on
// PostgreSQL, a deadlock on MariaDB/MySQL, a busy database on SQLite)
// runs again, up to BookFreeRetries times; it then sees the room taken and
// picks the next one.
//
// The guest must be in the caller's scope: another tenant's guest is not
// found (guardedsql.ErrNotFound) and nothing is booked.
func BookFreeRoom(ctx context.Context, db *guardedsql.DB, in BookFreeRoomIn) (BookedOut, error) {
	if err := parseRange(in.CheckIn, in.CheckOut); err != nil {
		return BookedOut{}, err
	}
	switch in.Method {
	case "":
		in.Method = "card"
	case "card", "cash":
	default:
		return BookedOut{}, server.InvalidInput("method must be card or cash")
	}
	r, b, g := roomsT.As("r"), bookingsT.As("b"), guestsT.As("g")
	guest, err := builder.Select(g.HotelID()).From(g.Ref()).Where(g.ID().Eq(in.GuestID)).Build()
	if err != nil {
		return BookedOut{}, err
	}
	// The rooms with a stay overlapping the dates (dates compare as
	// ISO-8601 text on SQLite, as DATE elsewhere).
	taken, err := builder.Select(b.RoomID()).From(b.Ref()).Where(
		b.Status().Ne("cancelled"), b.CheckIn().Lt(in.CheckOut), b.CheckOut().Gt(in.CheckIn)).Build()
	if err != nil {
		return BookedOut{}, err
	}
	nights := builder.DiffDays(in.CheckOut, in.CheckIn)
	var out BookedOut
	attempts := 0
	err = db.TxWith(ctx, guardedsql.TxOptions{Isolation: guardedsql.Serializable, MaxRetries: BookFreeRetries}, func(tx *guardedsql.Tx) error {
		attempts++
		out = BookedOut{}
		var hotelID string
		if err := tx.QueryRow(ctx, guest).Scan(&hotelID); err != nil {
			return err // another tenant's guest: not found
		}
		free, err := builder.Select(r.ID(), nights.As("nights"), nights.Mul(r.RateCents()).As("amount_cents")).
			From(r.Ref()).Where(r.HotelID().Eq(hotelID), r.ID().NotInQuery(taken)).
			OrderBy(r.ID().Asc()).Limit(1).ForUpdate().Build()
		if err != nil {
			return err
		}
		if err := tx.QueryRow(ctx, free).Scan(&out.RoomID, &out.Nights, &out.AmountCents); err != nil {
			if errors.Is(err, guardedsql.ErrNotFound) {
				return server.InvalidInput("no room of the guest's hotel is free from %s to %s", in.CheckIn, in.CheckOut)
			}
			return err
		}
		now := time.Now().UTC()
		ins, err := builder.InsertInto(bookingsT.Ref()).
			Columns("room_id", "guest_id", "check_in", "check_out", "status", "total_cents", "created_at").
			Values(out.RoomID, in.GuestID, in.CheckIn, in.CheckOut, "confirmed", out.AmountCents, now).
			Returning("id").Build()
		if err != nil {
			return err
		}
		rows, err := tx.ExecReturning(ctx, ins)
		if err != nil {
			return err
		}
		if out.BookingID, err = guardedsql.CollectOne(rows, guardedsql.Scalar[int64]); err != nil {
			return err
		}
		pay, err := builder.InsertInto(paymentsT.Ref()).Columns("booking_id", "amount_cents", "method", "paid_at").
			Values(out.BookingID, out.AmountCents, in.Method, now).Build()
		if err != nil {
			return err
		}
		_, err = tx.Exec(ctx, pay)
		return err
	})
	out.Attempts = attempts
	if err != nil {
		return BookedOut{}, err
	}
	return out, nil
}
