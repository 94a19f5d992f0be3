package guardedsql_test

import (
	"database/sql"
	"errors"
	"strings"
	"testing"

	"github.com/tenantmcp/tenantmcp/builder"
	"github.com/tenantmcp/tenantmcp/guardedsql"
)

func TestRowHelpers(t *testing.T) {
	h := newHotel(t)
	ctx := grantCtx(hotelG(2))
	r := h.sch.Table("rooms").As("r")
	q := builder.Must(builder.Select(r.Col("id"), r.Col("number"), r.Col("rate")).From(r).OrderBy(r.Col("id").Asc()).Build())

	type room struct {
		ID     int64
		Number string
		Price  int64 `db:"rate"`
		Unused string
	}
	rooms, err := guardedsql.All(ctx, h.db, q, guardedsql.RowToStruct[room])
	if err != nil {
		t.Fatal(err)
	}
	var want []room
	for _, x := range h.m.rooms {
		if x.Hotel == 2 {
			want = append(want, room{ID: x.ID, Number: x.Number, Price: x.Rate})
		}
	}
	if len(rooms) != len(want) || len(want) == 0 {
		t.Fatalf("got %v, want %v", rooms, want)
	}
	for i := range want {
		if rooms[i] != want[i] {
			t.Fatalf("row %d: got %v, want %v", i, rooms[i], want[i])
		}
	}

	// A column with no field is an error, not silently dropped.
	type partial struct{ ID int64 }
	if _, err := guardedsql.All(ctx, h.db, q, guardedsql.RowToStruct[partial]); err == nil || !strings.Contains(err.Error(), "number") {
		t.Fatalf("missing field: %v", err)
	}
	if _, err := guardedsql.All(ctx, h.db, q, guardedsql.RowToStruct[int]); err == nil {
		t.Fatal("RowToStruct[int] accepted")
	}

	// A hand-written RowFunc.
	numbers, err := guardedsql.All(ctx, h.db, q, func(rs *guardedsql.Rows) (string, error) {
		var id, rate int64
		var n string
		err := rs.Scan(&id, &n, &rate)
		return n, err
	})
	if err != nil || len(numbers) != len(want) {
		t.Fatalf("%v %v", numbers, err)
	}

	// One and CollectOne: the only row, not found, or ambiguous.
	if _, err := guardedsql.One(ctx, h.db, q, guardedsql.RowToStruct[room]); !errors.Is(err, guardedsql.ErrAmbiguous) {
		t.Fatalf("One of several rows: %v", err)
	}
	q1 := builder.Must(builder.Select(r.Col("id"), r.Col("number"), r.Col("rate")).From(r).OrderBy(r.Col("id").Asc()).Limit(1).Build())
	first, err := guardedsql.One(ctx, h.db, q1, guardedsql.RowToStruct[room])
	if err != nil || first != want[0] {
		t.Fatalf("One: %v %v", first, err)
	}
	none := builder.Must(builder.Select(r.Col("id")).From(r).Where(r.Col("id").Eq(-1)).Build())
	if _, err := guardedsql.One(ctx, h.db, none, guardedsql.Scalar[int64]); !errors.Is(err, guardedsql.ErrNotFound) || !errors.Is(err, sql.ErrNoRows) {
		t.Fatalf("One on nothing: %v", err)
	}

	// Rows by hand, Close twice, Columns.
	rows, err := h.db.Query(ctx, q)
	if err != nil {
		t.Fatal(err)
	}
	cols, _ := rows.Columns()
	if strings.Join(cols, ",") != "id,number,rate" {
		t.Fatalf("columns %v", cols)
	}
	n := 0
	for rows.Next() {
		n++
	}
	if rows.Err() != nil || rows.Close() != nil || rows.Close() != nil || rows.Next() || n != len(want) {
		t.Fatalf("rows: n=%d err=%v", n, rows.Err())
	}

	// Scan errors surface.
	var wrong struct{}
	if err := h.db.QueryRow(ctx, q).Scan(&wrong); err == nil {
		t.Fatal("Scan into a struct pointer accepted")
	}
}
