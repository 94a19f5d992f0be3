package hotel

import (
	"context"
	"time"

	"github.com/tenantmcp/tenantmcp/builder"
	"github.com/tenantmcp/tenantmcp/guardedsql"
)

// insertBooking inserts a confirmed booking and returns its id and total
// as the database stored them, through RETURNING: on every engine, without
// reading the row back by its values (PostgreSQL reports no last-insert
// id). The guard checks the room, the booking's scope parent, in the same
// statement; another tenant's room fails with guardedsql.ErrNotFound.
func insertBooking(ctx context.Context, tx *guardedsql.Tx, in CreateBookingIn, total int64) (CreatedOut, error) {
	ins, err := builder.InsertInto(bookingsT.Ref()).
		Columns("room_id", "guest_id", "check_in", "check_out", "status", "total_cents", "created_at").
		Values(in.RoomID, in.GuestID, in.CheckIn, in.CheckOut, "confirmed", total, time.Now().UTC().Format(time.DateTime)).
		Returning("id", "total_cents").Build()
	if err != nil {
		return CreatedOut{}, err
	}
	rows, err := tx.ExecReturning(ctx, ins)
	if err != nil {
		return CreatedOut{}, err
	}
	return guardedsql.CollectOne(rows, guardedsql.RowToStruct[CreatedOut])
}
