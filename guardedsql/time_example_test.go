package guardedsql_test

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/tenantmcp/tenantmcp/builder"
	"github.com/tenantmcp/tenantmcp/guardedsql"
	"github.com/tenantmcp/tenantmcp/scope"
	"github.com/tenantmcp/tenantmcp/scope/scopetest"
)

// Time in queries: a rental tool lists a shop's overdue rentals with the
// days overdue and the late fee computed by the engine, extends one by a
// month (January 31 becomes February 28), and reads the dates back as
// time.Time in UTC. The same code gives the same answers on PostgreSQL and
// MariaDB/MySQL.
func Example_timeExpressions() {
	dir, _ := os.MkdirTemp("", "guardedsql-time")
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "rentals.db")
	raw, _ := sql.Open("sqlite", path)
	for _, q := range []string{
		`CREATE TABLE shops (id TEXT PRIMARY KEY)`,
		`CREATE TABLE rentals (id INTEGER PRIMARY KEY, shop_id TEXT NOT NULL REFERENCES shops(id), due TEXT NOT NULL, returned TEXT)`,
		`INSERT INTO shops VALUES ('north'), ('south')`,
		`INSERT INTO rentals VALUES (1, 'north', '2026-01-31', NULL), (2, 'south', '2026-01-10', NULL),
			(3, 'north', '2026-01-20', '2026-01-23 18:00:00'), (4, 'north', '2026-02-15', NULL)`,
	} {
		if _, err := raw.Exec(q); err != nil {
			fmt.Println(err)
			return
		}
	}
	raw.Close()

	sch := builder.MustSchema(builder.SchemaDef{
		Levels: []builder.Level{{Name: "shop", Key: builder.TextKey}},
		Tables: []builder.TableDef{
			{Name: "shops", Columns: []string{"id"}, PrimaryKey: []string{"id"}, Levels: map[string]string{"id": "shop"}},
			{Name: "rentals", Columns: []string{"id", "shop_id", "due", "returned"}, PrimaryKey: []string{"id"},
				ForeignKeys: []builder.ForeignKey{{Columns: []string{"shop_id"}, RefTable: "shops"}},
				Levels:      map[string]string{"shop_id": "shop"},
				// Declared as dates: SQLite stores them as text.
				Types: map[string]string{"due": "date", "returned": "timestamp"}},
		},
	})
	ctx := context.Background()
	db, err := guardedsql.Open(ctx, "sqlite:"+path, sch, guardedsql.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer db.Close()
	north := scopetest.NewContext(ctx, scopetest.New("clerk", []scope.Grant{{Level: "shop", ID: "north"}}))

	r := sch.Table("rentals")
	// "Today" is fixed for the example; builder.Today() is the engine's.
	today := time.Date(2026, 2, 20, 0, 0, 0, 0, time.UTC)
	// Days late: until the return, or until today while not returned.
	late := builder.DiffDays(builder.Coalesce(r.Col("returned"), today), r.Col("due"))
	q := builder.Must(builder.Select(r.Col("id"), r.Col("due"), late.As("days_late"), late.Mul(150).As("fee_cents")).
		From(r).Where(late.Gt(0)).OrderBy(late.Desc()).Build())
	rows, err := db.Query(north, q)
	if err != nil {
		fmt.Println(err)
		return
	}
	for rows.Next() {
		var id, days, fee int64
		var due time.Time
		if err := rows.Scan(&id, &due, &days, &fee); err != nil {
			fmt.Println(err)
			return
		}
		fmt.Println(id, due.Format(time.DateOnly), days, "days late, fee", fee)
	}
	rows.Close()

	// Extend rental 1 by a month: the month's end is clamped.
	up := builder.Must(builder.UpdateTable(r).SetExpr("due", r.Col("due").Add(builder.Months(1))).
		Where(r.Col("id").Eq(1)).ExpectOne().Build())
	if _, err := db.Exec(north, up); err != nil {
		fmt.Println(err)
		return
	}
	var due time.Time
	err = db.QueryRow(north, builder.Must(builder.Select(r.Col("due")).From(r).Where(r.Col("id").Eq(1)).Build())).Scan(&due)
	fmt.Println(due, err)

	// An interval added to a non-time column is refused before anything runs.
	_, err = builder.Select(r.Col("shop_id").Add(builder.Days(1)).As("x")).From(r).Build()
	fmt.Println(err)
	// Output:
	// 1 2026-01-31 20 days late, fee 3000
	// 4 2026-02-15 5 days late, fee 750
	// 3 2026-01-20 3 days late, fee 450
	// 2026-02-28 00:00:00 +0000 UTC <nil>
	// builder: invalid statement: value does not fit the column's type: not a date or time: the time an interval is added to is text (column rentals.shop_id)
}
