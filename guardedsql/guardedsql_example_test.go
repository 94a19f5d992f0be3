package guardedsql_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/tenantmcp/tenantmcp/builder"
	"github.com/tenantmcp/tenantmcp/guardedsql"
	"github.com/tenantmcp/tenantmcp/guardedsql/sqlite"
	"github.com/tenantmcp/tenantmcp/scope"
	"github.com/tenantmcp/tenantmcp/scope/scopetest"
)

// exampleDB creates a small hotel database the way an application's
// migrations would (plain SQL, outside the guard) and returns its path.
func exampleDB() (string, func()) {
	dir, _ := os.MkdirTemp("", "guardedsql-example")
	path := filepath.Join(dir, "hotel.db")
	raw, _ := sql.Open("sqlite", path)
	defer raw.Close()
	m := seedModel(2, 2, 2, 1) // chains acme and globex
	if err := m.load(context.Background(), raw); err != nil {
		panic(err)
	}
	return path, func() { os.RemoveAll(dir) }
}

// A tool author's view: ~20 lines from scope to typed rows. The scope comes
// from the request context (here minted by scopetest, in production by the
// server from a verified token); the guard does the rest.
func Example() {
	path, cleanup := exampleDB()
	defer cleanup()
	ctx := context.Background()
	sch := builder.MustSchema(hotelDef)
	db, err := guardedsql.Open(ctx, "sqlite:"+path, sch, guardedsql.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer db.Close()

	type Booking struct {
		ID      int64
		Number  string
		CheckIn string
	}
	listBookings := func(ctx context.Context) ([]Booking, error) {
		b := sch.Table("bookings").As("b")
		r := sch.Table("rooms").As("r")
		q, err := builder.Select(b.Col("id"), r.Col("number"), b.Col("check_in")).
			From(b).
			Join(r, r.Col("id").EqCol(b.Col("room_id"))).
			OrderBy(b.Col("id").Asc()).
			Build()
		if err != nil {
			return nil, err
		}
		return guardedsql.All(ctx, db, q, guardedsql.RowToStruct[Booking])
	}

	acme := scopetest.NewContext(ctx, scopetest.New("alice", []scope.Grant{{Level: "chain", ID: "acme"}}))
	rows, err := listBookings(acme)
	fmt.Println(rows, err)

	// The other chain sees only its own bookings, though room numbers match.
	globex := scopetest.NewContext(ctx, scopetest.New("bob", []scope.Grant{{Level: "chain", ID: "globex"}}))
	rows, err = listBookings(globex)
	fmt.Println(rows, err)

	// No scope, no query: nothing is sent to the database.
	_, err = listBookings(ctx)
	fmt.Println(err)
	// Output:
	// [{1 101 2025-01-08} {3 101 2025-01-22} {5 102 2025-01-08} {7 102 2025-01-22}] <nil>
	// [{2 101 2025-01-15} {4 101 2025-01-01} {6 102 2025-01-15} {8 102 2025-01-01}] <nil>
	// guardedsql: no tenant scope in context
}

// Another tenant's row behaves exactly like a missing one, for reads and
// for writes.
func ExampleDB_Exec() {
	path, cleanup := exampleDB()
	defer cleanup()
	ctx := context.Background()
	sch := builder.MustSchema(hotelDef)
	db, _ := guardedsql.Open(ctx, "sqlite:"+path, sch, guardedsql.Options{})
	defer db.Close()
	acme := scopetest.NewContext(ctx, scopetest.New("alice", []scope.Grant{{Level: "chain", ID: "acme"}}))

	bookings := sch.Table("bookings")
	cancel := func(id int64) error {
		upd, err := builder.UpdateTable(bookings).Set("status", "cancelled").
			Where(bookings.Col("id").Eq(id)).ExpectOne().Build()
		if err != nil {
			return err
		}
		_, err = db.Exec(acme, upd)
		return err
	}
	fmt.Println(cancel(1))                                       // acme's booking
	fmt.Println(errors.Is(cancel(2), guardedsql.ErrNotFound))    // globex's booking
	fmt.Println(errors.Is(cancel(9999), guardedsql.ErrNotFound)) // nobody's

	// Inserting under another tenant's room is "not found" as well.
	ins, _ := builder.InsertInto(bookings).Columns("room_id", "check_in", "nights", "status").
		Values(2, "2025-03-01", 2, "confirmed").Build() // room 2 is globex's
	_, err := db.Exec(acme, ins)
	fmt.Println(errors.Is(err, guardedsql.ErrNotFound))
	// Output:
	// <nil>
	// true
	// true
	// true
}

// The schema can be read from the database's foreign keys; only the
// tenancy (level columns, global tables, ambiguous parents) is declared.
func ExampleIntrospect_sqlite() {
	path, cleanup := exampleDB()
	defer cleanup()
	raw, _ := sql.Open("sqlite", path)
	defer raw.Close()
	sch, err := sqlite.Introspect(context.Background(), raw, builder.Tenancy{
		Levels: []builder.Level{{Name: "chain", Key: builder.TextKey}, {Name: "hotel", Key: builder.IntKey}},
		LevelColumns: map[string]string{
			"chains.id": "chain", "hotels.id": "hotel", "hotels.chain_id": "chain", "guests.chain_id": "chain",
		},
		Global:  []string{"countries"},
		Parents: map[string]string{"bookings": "room_id"}, // bookings also references guests
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(sch.ScopePath("payments"))
	// Output:
	// chain: payments.booking_id -> bookings.room_id -> rooms.hotel_id -> hotels.chain_id
	// hotel: payments.booking_id -> bookings.room_id -> rooms.hotel_id
}

func ExampleDB_QueryRow() {
	path, cleanup := exampleDB()
	defer cleanup()
	ctx := context.Background()
	sch := builder.MustSchema(hotelDef)
	db, _ := guardedsql.Open(ctx, "sqlite:"+path, sch, guardedsql.Options{})
	defer db.Close()
	hotel1 := scopetest.NewContext(ctx, scopetest.New("hm", []scope.Grant{{Level: "hotel", ID: "1"}}))

	p := sch.Table("payments").As("p")
	q, _ := builder.Select(builder.Sum(p.Col("amount"))).From(p).Build()
	var total int64
	err := db.QueryRow(hotel1, q).Scan(&total)
	fmt.Println(total, err)
	// Output: 420 <nil>
}

// A write tool that books the first free room of a hotel: a read, then a
// write that depends on it. At Serializable isolation with retries two
// concurrent calls can never book the same room: the engine makes one of
// them fail with a retryable error, and TxWith runs it again, where it
// sees the room taken and books the next one.
func ExampleDB_TxWith() {
	path, cleanup := exampleDB()
	defer cleanup()
	ctx := context.Background()
	sch := builder.MustSchema(hotelDef)
	db, _ := guardedsql.Open(ctx, "sqlite:"+path, sch, guardedsql.Options{})
	defer db.Close()
	acme := scopetest.NewContext(ctx, scopetest.New("alice", []scope.Grant{{Level: "chain", ID: "acme"}}))

	rooms, bookings := sch.Table("rooms").As("r"), sch.Table("bookings")
	b := bookings.As("b")
	booked := builder.Must(builder.Select(b.Col("id")).From(b).Where(b.Col("room_id").EqCol(rooms.Col("id"))).Build())
	firstFree := builder.Must(builder.Select(rooms.Col("id")).From(rooms).
		Where(builder.NotExists(booked)).OrderBy(rooms.Col("id").Asc()).Limit(1).Build())

	bookFree := func(ctx context.Context, checkIn string) (room int64, err error) {
		opts := guardedsql.TxOptions{Isolation: guardedsql.Serializable, MaxRetries: 5}
		err = db.TxWith(ctx, opts, func(tx *guardedsql.Tx) error {
			id, err := guardedsql.One(ctx, tx, firstFree, guardedsql.Scalar[int64])
			if err != nil {
				return err // ErrNotFound: nothing free
			}
			ins, err := builder.InsertInto(bookings).Columns("room_id", "check_in", "nights", "status").
				Values(id, checkIn, 1, "confirmed").Build()
			if err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, ins); err != nil {
				return err
			}
			room = id
			return nil
		})
		return room, err
	}
	// Two new rooms in acme's hotel 1; every other room is booked.
	for _, number := range []string{"301", "302"} {
		ins, _ := builder.InsertInto(sch.Table("rooms")).Columns("hotel_id", "number", "rate").Values(1, number, 90).Build()
		if _, err := db.Exec(acme, ins); err != nil {
			fmt.Println(err)
			return
		}
	}
	for range 3 {
		room, err := bookFree(acme, "2026-12-24")
		switch {
		case errors.Is(err, guardedsql.ErrNotFound):
			fmt.Println("no free room")
		case guardedsql.IsRetryable(err):
			fmt.Println("still conflicting after the retries: ask the client to retry")
		case err != nil:
			fmt.Println(err)
		default:
			fmt.Println("booked room", room)
		}
	}
	// Output:
	// booked room 9
	// booked room 10
	// no free room
}
