package guardedsql_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tenantmcp/tenantmcp/builder"
	"github.com/tenantmcp/tenantmcp/guardedsql"
	"github.com/tenantmcp/tenantmcp/scope"
)

// The time expressions of builder/time.go on every engine: the same rows
// give the same times and counts on SQLite, PostgreSQL and MariaDB/MySQL,
// in UTC, month ends clamped; each tenant computes on its own rows only.

var eventsDDL = []string{
	`CREATE TABLE tenants (id KEY_T PRIMARY KEY)`,
	`CREATE TABLE events (id INT_T PRIMARY KEY, tenant_id KEY_T NOT NULL REFERENCES tenants(id), name KEY_T NOT NULL, on_day DATE_T NOT NULL, happened_at TS_T NOT NULL, due DATE_T, touched TS_T)`,
}

var eventsDef = builder.SchemaDef{
	Levels: []builder.Level{{Name: "tenant", Key: builder.TextKey}},
	Tables: []builder.TableDef{
		{Name: "tenants", Columns: []string{"id"}, PrimaryKey: []string{"id"}, Levels: map[string]string{"id": "tenant"}},
		{Name: "events", Columns: []string{"id", "tenant_id", "name", "on_day", "happened_at", "due", "touched"}, PrimaryKey: []string{"id"},
			ForeignKeys: []builder.ForeignKey{{Columns: []string{"tenant_id"}, RefTable: "tenants"}},
			Levels:      map[string]string{"tenant_id": "tenant"},
			Types:       map[string]string{"name": "text", "on_day": "date", "happened_at": "timestamp", "due": "date", "touched": "timestamp"}},
	},
}

// event is a row of events: odd ids are tenant a's, even ids b's, and the
// dates sit on month ends and leap days.
type event struct {
	id       int64
	day, at  time.Time
	tenantID string
}

func utc(s string) time.Time {
	t, ok := builder.ParseTime(s)
	if !ok {
		panic(s)
	}
	return t
}

var events = []event{
	{1, utc("2026-01-31"), utc("2026-01-31 23:30:00"), "a"},
	{2, utc("2024-02-29"), utc("2024-02-29 12:00:00"), "b"},
	{3, utc("2026-03-31"), utc("2026-03-30 00:00:00"), "a"},
	{4, utc("2026-12-31"), utc("2026-12-31 23:59:59"), "b"},
	{5, utc("2024-01-31"), utc("2024-01-31 10:15:30"), "a"},
	{6, utc("2025-05-31"), utc("2025-06-01 00:00:01"), "b"},
}

// newEvents provisions the events tables on e with the rows of events.
func newEvents(t *testing.T, e engine) (*builder.Schema, *guardedsql.DB) {
	t.Helper()
	dateT, tsT := "TEXT", "TEXT" // SQLite: ISO-8601 text, as the hotel example stores it
	switch e.name {
	case "postgres":
		dateT, tsT = "DATE", "TIMESTAMPTZ"
	case "mysql":
		dateT, tsT = "DATE", "DATETIME"
	}
	ddl := make([]string, len(eventsDDL))
	for i, q := range eventsDDL {
		ddl[i] = strings.NewReplacer("DATE_T", dateT, "TS_T", tsT).Replace(q)
	}
	s := newScratch(t, e, ddl)
	s.mustExec(t, `INSERT INTO tenants VALUES ('a'), ('b')`)
	for _, ev := range events {
		s.mustExec(t, `INSERT INTO events (id, tenant_id, name, on_day, happened_at) VALUES (?, ?, ?, ?, ?)`,
			ev.id, ev.tenantID, fmt.Sprintf("event %d", ev.id), ev.day.Format(time.DateOnly), ev.at.Format(time.DateTime))
	}
	sch := builder.MustSchema(eventsDef)
	db, err := s.open(sch)
	if err != nil {
		t.Fatal(err)
	}
	return sch, db
}

// addMonths is t plus n calendar months, a day past the month's end
// clamped to its last day (Go's AddDate normalises instead).
func addMonths(t time.Time, n int) time.Time {
	first := time.Date(t.Year(), t.Month(), 1, t.Hour(), t.Minute(), t.Second(), t.Nanosecond(), time.UTC).AddDate(0, n, 0)
	last := first.AddDate(0, 1, -1).Day()
	return first.AddDate(0, 0, min(t.Day(), last)-1)
}

func midnight(t time.Time) time.Time {
	return time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, time.UTC)
}

func tenantCtx(id string) context.Context { return grantCtx(scope.Grant{Level: "tenant", ID: id}) }

// TestTimeExprSameOnEveryEngine: interval arithmetic (days, hours,
// minutes, seconds, months with month-end clamping), differences in days
// and seconds and truncation to day and month, in the select list, WHERE
// (against a time.Time bound in another zone) and ORDER BY, give the
// values computed in Go, scanned as time.Time in UTC; each tenant gets
// exactly its own rows.
func TestTimeExprSameOnEveryEngine(t *testing.T) {
	forEachEngine(t, func(t *testing.T, e engine) {
		sch, db := newEvents(t, e)
		ev := sch.Table("events")
		day, at := ev.Col("on_day"), ev.Col("happened_at")
		// 2024-06-01 00:00 UTC, written in India's zone.
		bound := time.Date(2024, 6, 1, 5, 30, 0, 0, time.FixedZone("IST", 5*3600+1800))
		q := builder.Must(builder.Select(ev.Col("id"),
			day.Add(builder.Months(1)).As("m_plus"), day.Sub(builder.Months(1)).As("m_minus"),
			day.Add(builder.Months(12)).As("y_plus"), day.Add(builder.Days(1)).As("d_plus"),
			at.Add(builder.Minutes(90)).As("min_plus"), at.Sub(builder.Seconds(3600)).As("s_minus"),
			at.Add(builder.Hours(2)).As("h_plus"), at.Sub(builder.Days(ev.Col("id"))).As("d_minus_id"),
			builder.DiffDays(at, day).As("dd"), builder.DiffSeconds(at, day).As("ds"),
			builder.DiffDays(day.Add(builder.Months(1)), day).As("month_days"),
			builder.TruncMonth(at).As("tm"), builder.TruncDay(at).As("td"),
		).From(ev).Where(at.Add(builder.Days(1)).Gt(bound)).
			OrderBy(builder.DiffSeconds(at, day).Desc(), ev.Col("id").Asc()).Build())
		for _, ten := range []string{"a", "b"} {
			t.Run(ten, func(t *testing.T) {
				type row struct {
					id                int64
					times             [10]time.Time
					dd, ds, monthDays int64
				}
				var want []row
				for _, x := range events {
					if x.tenantID != ten || !x.at.Add(24*time.Hour).After(bound) {
						continue
					}
					want = append(want, row{id: x.id,
						times: [10]time.Time{addMonths(x.day, 1), addMonths(x.day, -1), addMonths(x.day, 12), x.day.AddDate(0, 0, 1),
							x.at.Add(90 * time.Minute), x.at.Add(-time.Hour), x.at.Add(2 * time.Hour), x.at.AddDate(0, 0, -int(x.id)),
							time.Date(x.at.Year(), x.at.Month(), 1, 0, 0, 0, 0, time.UTC), midnight(x.at)},
						dd:        int64(midnight(x.at).Sub(x.day) / (24 * time.Hour)),
						ds:        int64(x.at.Sub(x.day) / time.Second),
						monthDays: int64(addMonths(x.day, 1).Sub(x.day) / (24 * time.Hour)),
					})
				}
				slices.SortStableFunc(want, func(a, b row) int {
					if a.ds != b.ds {
						return int(b.ds - a.ds)
					}
					return int(a.id - b.id)
				})
				if len(want) != 2 {
					t.Fatalf("test data: %d rows for %s, want 2", len(want), ten)
				}
				rows, err := db.Query(tenantCtx(ten), q)
				if err != nil {
					t.Fatal(err)
				}
				var got []row
				for rows.Next() {
					var r row
					if err := rows.Scan(&r.id, &r.times[0], &r.times[1], &r.times[2], &r.times[3], &r.times[4], &r.times[5], &r.times[6], &r.times[7],
						&r.dd, &r.ds, &r.monthDays, &r.times[8], &r.times[9]); err != nil {
						t.Fatal(err)
					}
					got = append(got, r)
				}
				if err := rows.Err(); err != nil {
					t.Fatal(err)
				}
				rows.Close()
				if len(got) != len(want) {
					t.Fatalf("got %d rows %v, want %v", len(got), got, want)
				}
				for i := range got {
					for j, tm := range got[i].times {
						if tm.Location() != time.UTC {
							t.Errorf("row %d time %d in %v, want UTC", got[i].id, j, tm.Location())
						}
					}
					if got[i] != want[i] {
						t.Errorf("row %d:\n got %v\nwant %v", i, got[i], want[i])
					}
				}
			})
		}
	})
}

// TestTimeExprWrites: SET of an UPDATE computes a due date and stamps the
// current time from each tenant's own rows only; a time.Time inserted in
// another zone reads back as the same instant in UTC, compares equal to
// itself in WHERE and is 0 seconds from its own date at midnight.
func TestTimeExprWrites(t *testing.T) {
	forEachEngine(t, func(t *testing.T, e engine) {
		sch, db := newEvents(t, e)
		ev := sch.Table("events")
		day := ev.Col("on_day")
		ctxA, ctxB := tenantCtx("a"), tenantCtx("b")
		before := time.Now().UTC().Add(-2 * time.Second)
		res, err := db.Exec(ctxA, builder.Must(builder.UpdateTable(ev).
			SetExpr("due", day.Add(builder.Days(30))).SetExpr("touched", builder.Now()).Where(ev.Col("id").Gt(0)).Build()))
		if err != nil {
			t.Fatal(err)
		}
		if res.RowsAffected != 3 {
			t.Fatalf("tenant a's UPDATE of every id changed %d rows, want its 3", res.RowsAffected)
		}
		after := time.Now().UTC().Add(2 * time.Second)
		q := builder.Must(builder.Select(ev.Col("id"), ev.Col("due"), ev.Col("touched")).From(ev).OrderBy(ev.Col("id").Asc()).Build())
		type dueRow struct {
			id      int64
			due     sql.NullTime
			touched *time.Time
		}
		read := func(ctx context.Context) []dueRow {
			rows, err := db.Query(ctx, q)
			if err != nil {
				t.Fatal(err)
			}
			out, err := guardedsql.CollectRows(rows, func(r *guardedsql.Rows) (dueRow, error) {
				var d dueRow
				return d, r.Scan(&d.id, &d.due, &d.touched)
			})
			if err != nil {
				t.Fatal(err)
			}
			return out
		}
		gotA := read(ctxA)
		if len(gotA) != 3 {
			t.Fatalf("tenant a reads %d rows, want 3", len(gotA))
		}
		for _, r := range gotA {
			x := events[r.id-1]
			if x.tenantID != "a" || !r.due.Valid || !r.due.Time.Equal(x.day.AddDate(0, 0, 30)) || r.due.Time.Location() != time.UTC {
				t.Errorf("a: row %d due %v, want %v (UTC)", r.id, r.due, x.day.AddDate(0, 0, 30))
			}
			if r.touched == nil || r.touched.Before(before.Truncate(time.Second)) || r.touched.After(after) {
				t.Errorf("a: row %d touched %v, want between %v and %v", r.id, r.touched, before, after)
			}
		}
		for _, r := range read(ctxB) {
			if r.due.Valid || r.touched != nil {
				t.Errorf("b: row %d changed by tenant a's UPDATE: due %v, touched %v", r.id, r.due, r.touched)
			}
		}

		ist := time.FixedZone("IST", 5*3600+1800)
		at := time.Date(2026, 7, 1, 5, 30, 0, 0, ist) // 2026-07-01 00:00 UTC
		if _, err := db.Exec(ctxA, builder.Must(builder.InsertInto(ev).Columns("id", "tenant_id", "name", "on_day", "happened_at").
			Values(7, "a", "event 7", "2026-07-01", at).Build())); err != nil {
			t.Fatal(err)
		}
		for _, ctx := range []context.Context{ctxA, ctxB} {
			rows, err := db.Query(ctx, builder.Must(builder.Select(ev.Col("id"), ev.Col("happened_at"), builder.DiffSeconds(ev.Col("happened_at"), day)).
				From(ev).Where(ev.Col("happened_at").Eq(at)).Build()))
			if err != nil {
				t.Fatal(err)
			}
			type r7 struct {
				id int64
				at time.Time
				ds int64
			}
			got, err := guardedsql.CollectRows(rows, func(r *guardedsql.Rows) (r7, error) {
				var x r7
				return x, r.Scan(&x.id, &x.at, &x.ds)
			})
			if err != nil {
				t.Fatal(err)
			}
			want := []r7{{7, at.UTC(), 0}}
			if ctx == ctxB {
				want = nil // tenant b sees nothing of a's row
			}
			if !slices.Equal(got, want) {
				t.Errorf("WHERE happened_at = %v: got %v, want %v", at, got, want)
			}
		}
	})
}

// TestTimeNowToday: Now and Today are the current UTC time (to the second)
// and date on every engine, and DiffDays counts from them.
func TestTimeNowToday(t *testing.T) {
	forEachEngine(t, func(t *testing.T, e engine) {
		sch, db := newEvents(t, e)
		ev := sch.Table("events")
		before := time.Now().UTC().Truncate(time.Second)
		var now, today time.Time
		var age int64
		err := db.QueryRow(tenantCtx("a"), builder.Must(builder.Select(builder.Now(), builder.Today(), builder.DiffDays(builder.Today(), ev.Col("on_day"))).
			From(ev).Where(ev.Col("id").Eq(1)).Build())).Scan(&now, &today, &age)
		if err != nil {
			t.Fatal(err)
		}
		after := time.Now().UTC()
		if now.Before(before) || now.After(after) || now.Nanosecond() != 0 || now.Location() != time.UTC {
			t.Errorf("Now() = %v, want a whole UTC second between %v and %v", now, before, after)
		}
		if d := midnight(after); !today.Equal(d) && !today.Equal(midnight(before)) {
			t.Errorf("Today() = %v, want %v", today, d)
		}
		if want := int64(midnight(today).Sub(events[0].day) / (24 * time.Hour)); age != want {
			t.Errorf("DiffDays(Today(), on_day) = %d, want %d", age, want)
		}
	})
}

// TestTimeExprTypeChecks: Build refuses an interval added to a text
// column, a difference of a text column, a count that is not an integer
// and a string that is not a date, with ErrNotTime or ErrType.
func TestTimeExprTypeChecks(t *testing.T) {
	sch := builder.MustSchema(eventsDef)
	ev := sch.Table("events")
	name, day := ev.Col("name"), ev.Col("on_day")
	for _, tc := range []struct {
		what string
		x    builder.Expr
		want error
	}{
		{"text + interval", name.Add(builder.Days(1)), builder.ErrNotTime},
		{"text - interval", name.Sub(builder.Months(1)), builder.ErrNotTime},
		{"DiffDays(text, date)", builder.DiffDays(name, day), builder.ErrNotTime},
		{"DiffSeconds(date, number)", builder.DiffSeconds(day, 3), builder.ErrNotTime},
		{"DiffDays(not a date string)", builder.DiffDays(day, "yesterday"), builder.ErrNotTime},
		{"interval of a real", day.Add(builder.Seconds(1.5)), builder.ErrType},
		{"interval of a text column", day.Add(builder.Days(name)), builder.ErrType},
		{"interval of a string", day.Add(builder.Days("3")), builder.ErrType},
		{"zero Interval", day.Add(builder.Interval{}), builder.ErrInvalid},
		{"date + number", day.Add(3), builder.ErrType},
	} {
		_, err := builder.Select(tc.x.As("x")).From(ev).Build()
		if !errors.Is(err, tc.want) {
			t.Errorf("%s: Build error %v, want %v", tc.what, err, tc.want)
		}
	}
	if _, err := builder.Select(day.Add(builder.Days(ev.Col("id"))).As("x"), builder.DiffDays(day, "2026-01-05").As("y")).From(ev).Build(); err != nil {
		t.Errorf("date + id days, DiffDays(date, date string): %v", err)
	}
}

// TestTimeScanForms: a time scans as time.Time in UTC from every form a
// driver hands back (time.Time in any zone, SQLite's text, MySQL's bytes),
// NULL into the nullable destinations only, and text that is no time is
// an error.
func TestTimeScanForms(t *testing.T) {
	sch, db := newEvents(t, engineSQLite)
	ev := sch.Table("events")
	var d, a time.Time
	var p *time.Time
	var n sql.NullTime
	var any1 any
	if err := db.QueryRow(tenantCtx("a"), builder.Must(builder.Select(ev.Col("on_day"), ev.Col("happened_at"), ev.Col("due"), ev.Col("due"), ev.Col("happened_at")).
		From(ev).Where(ev.Col("id").Eq(1)).Build())).Scan(&d, &a, &p, &n, &any1); err != nil {
		t.Fatal(err)
	}
	if !d.Equal(events[0].day) || !a.Equal(events[0].at) || d.Location() != time.UTC || p != nil || n.Valid {
		t.Errorf("scan: %v %v %v %v", d, a, p, n)
	}
	// SQLite hands back text for a TEXT column; declared a timestamp, it
	// scans into an any as a time.Time.
	if tm, ok := any1.(time.Time); !ok || !tm.Equal(events[0].at) || tm.Location() != time.UTC {
		t.Errorf("into any: %#v", any1)
	}
	// A time expression too; an undeclared text column stays text.
	var now, name any
	if err := db.QueryRow(tenantCtx("a"), builder.Must(builder.Select(builder.Now(), ev.Col("name")).
		From(ev).Where(ev.Col("id").Eq(1)).Build())).Scan(&now, &name); err != nil {
		t.Fatal(err)
	}
	if _, ok := now.(time.Time); !ok {
		t.Errorf("Now() into any: %#v", now)
	}
	if name != "event 1" {
		t.Errorf("name into any: %#v", name)
	}
	err := db.QueryRow(tenantCtx("a"), builder.Must(builder.Select(ev.Col("due")).From(ev).Where(ev.Col("id").Eq(1)).Build())).Scan(&d)
	if err == nil {
		t.Error("NULL into *time.Time: no error")
	}
	err = db.QueryRow(tenantCtx("a"), builder.Must(builder.Select(ev.Col("name")).From(ev).Where(ev.Col("id").Eq(1)).Build())).Scan(&d)
	if err == nil || strings.Contains(err.Error(), "event 1") {
		t.Errorf("text into *time.Time: %v (want an error without the value)", err)
	}
}
