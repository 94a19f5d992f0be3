package guardedsql_test

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	sq "github.com/Masterminds/squirrel"
	"modernc.org/sqlite"

	"github.com/tenantmcp/tenantmcp/builder"
	"github.com/tenantmcp/tenantmcp/guardedsql"
	sqlengine "github.com/tenantmcp/tenantmcp/guardedsql/internal/engine"
	sqlitedialect "github.com/tenantmcp/tenantmcp/guardedsql/internal/engine/sqlite"
	gsqlite "github.com/tenantmcp/tenantmcp/guardedsql/sqlite"
	"github.com/tenantmcp/tenantmcp/scope"
)

// Benchmarks. Rewrite cost: BenchmarkRewrite renders a typical guarded
// query (build + guard + squirrel), next to squirrel building the same
// unguarded text by hand. Query cost: BenchmarkQuery runs each query
// hand-written (the tenant filter written by an expert, chain id as a plain
// parameter) and guarded on the same *sql.DB in the same run;
// BenchmarkRatio interleaves the two and reports guarded/hand.

var benchSch = builder.MustSchema(hotelDef)

func benchQ1() builder.Query {
	b := benchSch.Table("bookings").As("b")
	return builder.Must(builder.Select(b.Col("id"), b.Col("check_in"), b.Col("nights")).From(b).
		Where(b.Col("check_in").Ge("2025-03-01"), b.Col("check_in").Lt("2025-04-01")).
		OrderBy(b.Col("check_in").Asc(), b.Col("id").Asc()).Limit(50).Build())
}

func benchQ2() builder.Query {
	p := benchSch.Table("payments").As("p")
	b := benchSch.Table("bookings").As("b")
	r := benchSch.Table("rooms").As("r")
	return builder.Must(builder.Select(r.Col("hotel_id"), builder.Sum(p.Col("amount")).As("revenue")).From(p).
		Join(b, b.Col("id").EqCol(p.Col("booking_id"))).
		Join(r, r.Col("id").EqCol(b.Col("room_id"))).
		GroupBy(r.Col("hotel_id")).Build())
}

func benchQ3(id int64) builder.Query {
	b := benchSch.Table("bookings").As("b")
	return builder.Must(builder.Select(b.Col("id"), b.Col("status")).From(b).Where(b.Col("id").Eq(id)).Build())
}

const (
	handQ1 = `SELECT b.id, b.check_in, b.nights FROM bookings b JOIN rooms r ON r.id = b.room_id JOIN hotels h ON h.id = r.hotel_id
WHERE h.chain_id = ? AND b.check_in >= ? AND b.check_in < ? ORDER BY b.check_in, b.id LIMIT 50`
	handQ2 = `SELECT r.hotel_id, SUM(p.amount) AS revenue FROM payments p JOIN bookings b ON b.id = p.booking_id
JOIN rooms r ON r.id = b.room_id JOIN hotels h ON h.id = r.hotel_id WHERE h.chain_id = ? GROUP BY r.hotel_id`
	handQ3 = `SELECT b.id, b.status FROM bookings b JOIN rooms r ON r.id = b.room_id JOIN hotels h ON h.id = r.hotel_id
WHERE b.id = ? AND h.chain_id = ?`
	// The same with a hotel grant.
	handQ1Hotel = `SELECT b.id, b.check_in, b.nights FROM bookings b JOIN rooms r ON r.id = b.room_id
WHERE r.hotel_id = ? AND b.check_in >= ? AND b.check_in < ? ORDER BY b.check_in, b.id LIMIT 50`
	handQ2Hotel = `SELECT r.hotel_id, SUM(p.amount) AS revenue FROM payments p JOIN bookings b ON b.id = p.booking_id
JOIN rooms r ON r.id = b.room_id WHERE r.hotel_id = ? GROUP BY r.hotel_id`
)

type sqliteBench struct {
	raw     *sql.DB
	guarded *guardedsql.DB
	exists  *guardedsql.DB
	m       *model
}

var (
	benchOnce sync.Once
	benchData *sqliteBench
	benchErr  error
)

// benchSetup builds 40 chains x 10 hotels x 20 rooms x 10 bookings
// (80,000 bookings, ~53,000 payments) once per process.
func benchSetup(b *testing.B) *sqliteBench {
	benchOnce.Do(func() {
		dir, err := osMkdirTemp()
		if err != nil {
			benchErr = err
			return
		}
		conn, err := sqlite.NewConnector("file:" + filepath.Join(dir, "bench.db") + "?_pragma=foreign_keys(1)&_pragma=synchronous(0)&_pragma=journal_mode(wal)")
		if err != nil {
			benchErr = err
			return
		}
		raw := sql.OpenDB(conn)
		m := seedModel(40, 10, 20, 10)
		start := time.Now()
		if err := m.load(context.Background(), raw); err != nil {
			benchErr = err
			return
		}
		if _, err := raw.Exec(`ANALYZE`); err != nil {
			benchErr = err
			return
		}
		g, _ := gsqlite.New(context.Background(), raw, benchSch, guardedsql.Options{})
		ex, _ := guardedsql.NewForTest(sqlengine.StdPool(raw, false), sqlitedialect.Dialect{Style: sqlengine.PathExists}, benchSch, guardedsql.Options{})
		benchData = &sqliteBench{raw: raw, guarded: g, exists: ex, m: m}
		fmt.Printf("bench dataset: %d hotels, %d rooms, %d bookings, %d payments, loaded in %s\n",
			len(m.hotels), len(m.rooms), len(m.bookings), len(m.payments), time.Since(start).Round(time.Millisecond))
	})
	if benchErr != nil {
		b.Fatal(benchErr)
	}
	return benchData
}

// resultRows is what *sql.Rows and *guardedsql.Rows have in common.
type resultRows interface {
	Columns() ([]string, error)
	Next() bool
	Scan(dest ...any) error
	Err() error
	Close() error
}

func drainRaw(b *testing.B, rows *sql.Rows, err error) int {
	if err != nil {
		b.Fatal(err)
	}
	return drain(b, rows)
}

func drainGuarded(b *testing.B, rows *guardedsql.Rows, err error) int {
	if err != nil {
		b.Fatal(err)
	}
	return drain(b, rows)
}

// drain scans every row into throwaway values and counts them.
func drain(b *testing.B, rows resultRows) int {
	defer rows.Close()
	cols, _ := rows.Columns()
	vals := make([]any, len(cols))
	ptrs := make([]any, len(cols))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	n := 0
	for rows.Next() {
		if err := rows.Scan(ptrs...); err != nil {
			b.Fatal(err)
		}
		n++
	}
	if err := rows.Err(); err != nil {
		b.Fatal(err)
	}
	return n
}

func BenchmarkRewrite(b *testing.B) {
	// Rendering never touches the pool, so none is opened (nor checked).
	db, err := guardedsql.NewForTest(sqlengine.StdPool(nil, false), sqlitedialect.Dialect{}, benchSch, guardedsql.Options{})
	if err != nil {
		b.Fatal(err)
	}
	ctx := grantCtx(chainG("acme"))
	b.Run("render-Q1", func(b *testing.B) {
		q := benchQ1()
		for b.Loop() {
			if _, _, err := db.Render(ctx, q); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("render-Q2", func(b *testing.B) {
		q := benchQ2()
		for b.Loop() {
			if _, _, err := db.Render(ctx, q); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("build+render-Q1", func(b *testing.B) {
		for b.Loop() {
			if _, _, err := db.Render(ctx, benchQ1()); err != nil {
				b.Fatal(err)
			}
		}
	})
	// Baseline: squirrel alone building the hand-written Q1 text.
	b.Run("baseline-squirrel-Q1", func(b *testing.B) {
		for b.Loop() {
			_, _, err := sq.Select("b.id", "b.check_in", "b.nights").From("bookings b").
				Join("rooms r ON r.id = b.room_id").Join("hotels h ON h.id = r.hotel_id").
				Where(sq.Eq{"h.chain_id": "acme"}).Where(sq.GtOrEq{"b.check_in": "2025-03-01"}).Where(sq.Lt{"b.check_in": "2025-04-01"}).
				OrderBy("b.check_in", "b.id").Limit(50).ToSql()
			if err != nil {
				b.Fatal(err)
			}
		}
	})
}

type benchCase struct {
	name    string
	grants  []scope.Grant
	q       builder.Query
	hand    string
	args    []any
	wantMin int
}

func benchCases(d *sqliteBench) []benchCase {
	// A booking of chain c005 for the point lookup.
	var bid int64
	for _, bk := range d.m.bookings {
		if d.m.hotelOf(bk.Room).Chain == "hooli" {
			bid = bk.ID
			break
		}
	}
	hotel := hotelOfChainM(d.m, "hooli")
	return []benchCase{
		{"Q1-range/chain", []scope.Grant{chainG("hooli")}, benchQ1(), handQ1, []any{"hooli", "2025-03-01", "2025-04-01"}, 50},
		{"Q2-revenue/chain", []scope.Grant{chainG("hooli")}, benchQ2(), handQ2, []any{"hooli"}, 10},
		{"Q3-lookup/chain", []scope.Grant{chainG("hooli")}, benchQ3(bid), handQ3, []any{bid, "hooli"}, 1},
		{"Q1-range/hotel", []scope.Grant{hotelG(hotel)}, benchQ1(), handQ1Hotel, []any{hotel, "2025-03-01", "2025-04-01"}, 10},
		{"Q2-revenue/hotel", []scope.Grant{hotelG(hotel)}, benchQ2(), handQ2Hotel, []any{hotel}, 1},
	}
}

func hotelOfChainM(m *model, chain string) int64 {
	for _, h := range m.hotels {
		if h.Chain == chain {
			return h.ID
		}
	}
	panic(chain)
}

func BenchmarkQuery(b *testing.B) {
	d := benchSetup(b)
	for _, c := range benchCases(d) {
		ctx := grantCtx(c.grants...)
		// Same rows both ways, checked once.
		hr, herr := d.raw.Query(c.hand, c.args...)
		nh := drainRaw(b, hr, herr)
		rows, err := d.guarded.Query(ctx, c.q)
		if ng := drainGuarded(b, rows, err); ng != nh || nh < c.wantMin {
			b.Fatalf("%s: guarded %d rows, hand %d", c.name, ng, nh)
		}
		b.Run(c.name+"/hand", func(b *testing.B) {
			for b.Loop() {
				rows, err := d.raw.Query(c.hand, c.args...)
				drainRaw(b, rows, err)
			}
		})
		b.Run(c.name+"/guarded", func(b *testing.B) {
			for b.Loop() {
				rows, err := d.guarded.Query(ctx, c.q)
				drainGuarded(b, rows, err)
			}
		})
		b.Run(c.name+"/guarded-exists", func(b *testing.B) {
			for b.Loop() {
				rows, err := d.exists.Query(ctx, c.q)
				drainGuarded(b, rows, err)
			}
		})
	}
}

// BenchmarkRatio alternates hand-written and guarded executions in one
// loop, so both see the same machine load, and reports guarded/hand. It
// also runs the guarded SQL pre-rendered (sql/hand): the difference
// between the two ratios is the per-call rendering cost.
func BenchmarkRatio(b *testing.B) {
	d := benchSetup(b)
	for _, c := range benchCases(d) {
		ctx := grantCtx(c.grants...)
		text, args, err := d.guarded.Render(ctx, c.q)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(c.name, func(b *testing.B) {
			var hand, guarded, pre time.Duration
			for b.Loop() {
				t0 := time.Now()
				rows, err := d.raw.Query(c.hand, c.args...)
				drainRaw(b, rows, err)
				t1 := time.Now()
				grows, err := d.guarded.Query(ctx, c.q)
				drainGuarded(b, grows, err)
				t2 := time.Now()
				prows, err := d.raw.Query(text, args...)
				drainRaw(b, prows, err)
				pre += time.Since(t2)
				guarded += t2.Sub(t1)
				hand += t1.Sub(t0)
			}
			b.ReportMetric(float64(hand.Nanoseconds())/float64(b.N), "hand-ns/op")
			b.ReportMetric(float64(guarded.Nanoseconds())/float64(b.N), "guarded-ns/op")
			b.ReportMetric(float64(guarded)/float64(hand), "guarded/hand")
			b.ReportMetric(float64(pre)/float64(hand), "sql/hand")
		})
	}
}

func osMkdirTemp() (string, error) { return os.MkdirTemp("", "guardedsql-bench") }
