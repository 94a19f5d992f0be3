package builder_test

import (
	"fmt"

	"github.com/tenantmcp/tenantmcp/builder"
)

func ExampleNewSchema() {
	sch, err := builder.NewSchema(builder.SchemaDef{
		Levels: []builder.Level{{Name: "chain", Key: builder.TextKey}, {Name: "hotel", Key: builder.IntKey}},
		Tables: []builder.TableDef{
			{Name: "chains", Columns: []string{"id", "name"}, PrimaryKey: []string{"id"},
				Levels: map[string]string{"id": "chain"}},
			{Name: "hotels", Columns: []string{"id", "chain_id", "name"}, PrimaryKey: []string{"id"},
				ForeignKeys: []builder.ForeignKey{{Columns: []string{"chain_id"}, RefTable: "chains"}},
				Levels:      map[string]string{"id": "hotel", "chain_id": "chain"}},
			{Name: "rooms", Columns: []string{"id", "hotel_id", "number"}, PrimaryKey: []string{"id"},
				ForeignKeys: []builder.ForeignKey{{Columns: []string{"hotel_id"}, RefTable: "hotels"}}},
			{Name: "bookings", Columns: []string{"id", "room_id", "check_in"}, PrimaryKey: []string{"id"},
				ForeignKeys: []builder.ForeignKey{{Columns: []string{"room_id"}, RefTable: "rooms"}}},
			{Name: "countries", Columns: []string{"code", "name"}, PrimaryKey: []string{"code"}, Global: true},
		},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(sch.ScopePath("bookings"))
	fmt.Println(sch.ScopePath("countries"))

	// A tenant-bound table with no way to a level is refused at start-up.
	_, err = builder.NewSchema(builder.SchemaDef{
		Levels: []builder.Level{{Name: "chain", Key: builder.TextKey}},
		Tables: []builder.TableDef{{Name: "notes", Columns: []string{"id", "text"}}},
	})
	fmt.Println(err)
	// Output:
	// chain: bookings.room_id -> rooms.hotel_id -> hotels.chain_id
	// hotel: bookings.room_id -> rooms.hotel_id
	// global
	// builder: invalid schema: tenant-bound table "notes" has no level columns and no foreign key to a tenant-bound table (declare Levels or a Parent if each row is one tenant's; OwnedByReference if its rows belong to the tenants whose rows reference them, such as a shared address table; Global only if every tenant may read every row)
}

func ExampleSelect() {
	sch := builder.MustSchema(hotelDef())
	b := sch.Table("bookings").As("b")
	r := sch.Table("rooms").As("r")
	p := sch.Table("payments").As("p")

	paid := builder.Must(builder.Select(p.Col("booking_id")).From(p).Where(p.Col("amount").Ge(100)).Build())
	q, err := builder.Select(b.Col("id"), b.Col("check_in"), r.Col("number")).
		From(b).
		Join(r, r.Col("id").EqCol(b.Col("room_id"))).
		Where(b.Col("check_in").Between("2025-01-01", "2025-01-31"), b.Col("id").InQuery(paid)).
		OrderBy(b.Col("check_in").Asc()).
		Limit(20).
		Build()
	if err != nil {
		fmt.Println(err)
		return
	}
	// The sealed query knows every table it touches, subqueries included;
	// guardedsql adds a tenant predicate for each tenant-bound one.
	for _, t := range q.Tables() {
		fmt.Println(t.Name(), "as", t.Alias())
	}

	// Mistakes surface at Build, never as SQL.
	_, err = builder.Select(b.Col("chek_in")).From(b).Build()
	fmt.Println(err)
	// Output:
	// bookings as b
	// rooms as r
	// payments as p
	// builder: invalid statement: table bookings has no column "chek_in"
}

func ExampleUpdateTable() {
	sch := builder.MustSchema(hotelDef())
	bookings := sch.Table("bookings")
	upd, err := builder.UpdateTable(bookings).
		Set("check_in", "2025-02-01").
		Where(bookings.Col("id").Eq(42)).
		ExpectOne(). // guardedsql: ErrNotFound unless exactly this row is in scope
		Build()
	fmt.Println(len(upd.Tables()), err)
	// Output: 1 <nil>
}
