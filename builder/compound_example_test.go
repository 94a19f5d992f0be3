package builder_test

import (
	"fmt"

	"github.com/tenantmcp/tenantmcp/builder"
)

// Rooms that are either booked or numbered 101, through a CTE, a union and
// a derived table: every table reference inside is one of the query's
// Tables, which guardedsql guards one by one.
func ExampleUnion() {
	sch := builder.MustSchema(hotelDef())
	b, r := sch.Table("bookings").As("b"), sch.Table("rooms").As("r")
	booked := builder.With("booked", builder.Must(builder.Select(b.Col("room_id")).From(b).Build()))
	k := booked.Ref()
	u := builder.Must(builder.Union(
		builder.Must(builder.Select(k.Col("room_id")).From(k).Build()),
		builder.Must(builder.Select(r.Col("id").As("room_id")).From(r).Where(r.Col("number").Eq("101")).Build()),
	).Build())
	d := builder.Derived(u, "d")
	q, err := builder.Select(d.Col("room_id")).From(d).With(booked).Build()
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, t := range q.Tables() {
		if t.Name() == "bookings" || t.Name() == "rooms" {
			fmt.Println(t.Alias(), "reads", t.Name())
		}
	}
	// Unordered output:
	// b reads bookings
	// r reads rooms
}

// Keyset pages: the cursor holds the last row's key values, opaquely.
func ExampleKeyset() {
	sch := builder.MustSchema(hotelDef())
	b := sch.Table("bookings").As("b")
	ks := builder.Keyset{Keys: []builder.Order{b.Col("check_in").Desc(), b.Col("id").Asc()}}
	base := builder.Select(b.Col("id"), b.Col("check_in")).From(b)
	first := builder.Must(ks.Page(base, "", 50).Build()) // the first page
	next, err := ks.Cursor("2025-03-01", 1234)           // from the last row of a page
	if err != nil {
		fmt.Println(err)
		return
	}
	second, err := ks.Page(base, next, 50).Build()
	fmt.Println(first.IsZero(), second.IsZero(), err)
	_, err = ks.Page(base, "forged!", 50).Build()
	fmt.Println(err)
	// Output:
	// false false <nil>
	// builder: invalid statement: bad keyset cursor: not base64url
}
