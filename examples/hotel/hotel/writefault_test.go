package hotel_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/tenantmcp/tenantmcp/claims/devtoken"
	"github.com/tenantmcp/tenantmcp/examples/hotel/hotel"
	"github.com/tenantmcp/tenantmcp/guardedsql/postgres"
	"github.com/tenantmcp/tenantmcp/internal/cutproxy"
	"github.com/tenantmcp/tenantmcp/internal/rpctest"
	"github.com/tenantmcp/tenantmcp/server"
)

// The fault suite of issue 29 §2 ("no write applied without its answer"):
// clients book rooms with book_free_room, each logical booking with its
// own idempotency key, and retry on every error with the same key; each
// client also sends every acknowledged booking once more, as a client
// whose answer was lost would. On PostgreSQL the flow taint store (pgtaint,
// in the same database through a cutproxy) is cut mid-run, so calls commit
// their booking and then fail to record the result's taint. Counted:
// bookings acknowledged, answers write.unconfirmed, other errors,
// duplicates after the retries (must be 0) and acknowledged bookings lost
// (must be 0). Before issue 29 a cut taint store answered "internal
// error" and each retry booked another room.

const envWriteFaultSeconds = "TENANTMCP_WRITEFAULT_SECONDS"

// writeFaultFigures is what one run measured.
type writeFaultFigures struct {
	ops, acked, unconfirmed, internal, unavailable, other, attempts, replays int
	duplicates, lost, mismatched                                             int
	// opsUnconfirmed: bookings answered write.unconfirmed at least once
	// before their result.
	opsUnconfirmed int
}

func (f writeFaultFigures) String() string {
	return fmt.Sprintf("%d bookings asked in %d calls: %d acknowledged, %d answers write.unconfirmed (%d bookings), %d internal error, %d unavailable, %d other errors; %d replays of acknowledged bookings; %d duplicates after retries, %d acknowledged bookings lost, %d replays with another answer",
		f.ops, f.attempts, f.acked, f.unconfirmed, f.opsUnconfirmed, f.internal, f.unavailable, f.other, f.replays, f.duplicates, f.lost, f.mismatched)
}

func writeFaultSeconds(t *testing.T) time.Duration {
	if v := os.Getenv(envWriteFaultSeconds); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			t.Fatalf("%s=%q: want a positive number of seconds", envWriteFaultSeconds, v)
		}
		return time.Duration(n) * time.Second
	}
	return 4 * time.Second
}

func writeFaultData() *hotel.Data {
	return hotel.Generate(29, hotel.Size{Chains: 3, HotelsPerChain: 1, RoomsPerHotel: 30, GuestsPerHotel: 4, BookingsPerRoom: 1})
}

// TestWriteFaultTaintStoreCutPostgres: the figure of issue 29 §2 on
// PostgreSQL, the taint store cut for the middle of the run.
func TestWriteFaultTaintStoreCutPostgres(t *testing.T) {
	data := writeFaultData()
	pg := provisionPostgres(t, data)
	u, err := url.Parse(pg.app)
	if err != nil {
		t.Fatal(err)
	}
	proxy, err := cutproxy.Start(u.Host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { proxy.Close() })
	tu := *u
	tu.Host = proxy.Addr
	h := startWith(t, hotel.Options{DB: pg.app, RLSKey: pg.key, TaintDSN: tu.String()}, data)
	admin, err := sql.Open("pgx", pg.admin)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	f := runWriteFault(t, h, data, admin, "$1", "$2", proxy)
	if f.unconfirmed == 0 {
		t.Errorf("no call was answered write.unconfirmed while the taint store was cut: the outage hit no write (run longer with %s)", envWriteFaultSeconds)
	}
}

// TestWriteFaultRetriesMySQL: the same clients on MariaDB/MySQL, where the
// taint store is in process: no outage, but every acknowledged booking is
// sent again with its key, as after a lost answer, and must not book
// twice (the idempotency table on that engine).
func TestWriteFaultRetriesMySQL(t *testing.T) {
	admin := os.Getenv("TENANTMCP_TEST_MYSQL_DSN")
	if admin == "" {
		t.Skip("set TENANTMCP_TEST_MYSQL_DSN=mysql://root@tcp(127.0.0.1:3306)/test to run the hotel on MariaDB/MySQL")
	}
	ctx := context.Background()
	root, err := sql.Open("mysql", strings.TrimPrefix(admin, "mysql://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { root.Close() })
	dbName := randName("tm_hotel_")
	if _, err := root.ExecContext(ctx, "CREATE DATABASE "+dbName); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if _, err := root.ExecContext(ctx, "DROP DATABASE IF EXISTS "+dbName); err != nil {
			t.Errorf("dropping %s: %v", dbName, err)
		}
	})
	slash := strings.LastIndex(admin, "/")
	dsn := admin[:slash+1] + dbName
	if q := strings.Index(admin[slash:], "?"); q >= 0 {
		dsn += admin[slash+q:]
	}
	data := writeFaultData()
	if err := hotel.SetupDemo(ctx, dsn, "", postgres.Key{}, data); err != nil {
		t.Fatal(err)
	}
	h := startWith(t, hotel.Options{DB: dsn}, data)
	db, err := sql.Open("mysql", strings.TrimPrefix(dsn, "mysql://"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	runWriteFault(t, h, data, db, "?", "?", nil)
}

// runWriteFault runs the clients for the run's seconds, cutting proxy (if
// any) for the second quarter to the third, then checks the database.
func runWriteFault(t *testing.T, h *harness, d *hotel.Data, db *sql.DB, p1, p2 string, proxy *cutproxy.Proxy) writeFaultFigures {
	dur := writeFaultSeconds(t)
	endpoint := h.app.HTTP.ResourceURL
	type op struct {
		guest   int64
		checkIn string
		booking int64 // acknowledged booking, 0 if never
	}
	type client struct {
		tok   string
		guest int64
		ops   []op
	}
	var clients []*client
	for ci, c := range d.Chains {
		hotelID := d.HotelsOf(c.ID)[0]
		var guests []int64
		for _, g := range d.Guests {
			if g.HotelID == hotelID {
				guests = append(guests, g.ID)
			}
		}
		for i := range 2 {
			tok, err := h.app.Issuer.Mint(devtoken.Token{Subject: fmt.Sprintf("%s-writer-%d", c.ID, i), Groups: []string{"/tenants/" + c.ID}, Roles: []string{"manager"}, TTL: time.Hour})
			if err != nil {
				t.Fatal(err)
			}
			clients = append(clients, &client{tok: tok, guest: guests[(ci+i)%len(guests)]})
		}
	}
	var mu sync.Mutex
	var f writeFaultFigures
	answer := func(r rpctest.Reply, err error) bool {
		mu.Lock()
		defer mu.Unlock()
		f.attempts++
		switch {
		case err == nil && r.OK():
			return true
		case r.Err != nil && r.Err.Code == server.CodeWriteUnconfirmed:
			f.unconfirmed++
		case r.Err != nil && r.Err.Code == server.CodeUnavailable:
			f.unavailable++
		case strings.Contains(r.Text, "internal error"):
			f.internal++
		default:
			f.other++
			if f.other <= 3 {
				t.Logf("other answer: %d %v %q %v", r.Status, r.Err, r.Text, err)
			}
		}
		return false
	}
	ctx, cancel := context.WithTimeout(context.Background(), dur)
	defer cancel()
	if proxy != nil {
		go func() {
			select {
			case <-time.After(dur / 4):
				proxy.Cut()
				t.Logf("taint store cut at %s", dur/4)
			case <-ctx.Done():
				return
			}
			select {
			case <-time.After(dur / 4):
			case <-ctx.Done():
			}
			proxy.Restore()
			t.Logf("taint store restored")
		}()
	}
	// call books the op's night with its key, retrying every error with the
	// same key until a result (bounded: a run that cannot finish fails).
	call := func(c *client, key string, o op) (hotel.BookedOut, bool) {
		params := map[string]any{"name": "book_free_room", "arguments": map[string]any{"guest_id": o.guest, "check_in": o.checkIn,
			"check_out": dayAfter(o.checkIn)}, "_meta": map[string]any{server.MetaIdempotencyKey: key}}
		deadline := time.Now().Add(30 * time.Second)
		seen := false
		for time.Now().Before(deadline) {
			r, err := rpctest.Post(context.Background(), endpoint, c.tok, "tools/call", params)
			if r.Err != nil && r.Err.Code == server.CodeWriteUnconfirmed && !seen {
				seen = true
				mu.Lock()
				f.opsUnconfirmed++
				mu.Unlock()
			}
			if answer(r, err) {
				var out hotel.BookedOut
				if json.Unmarshal(r.Structured, &out) != nil || out.BookingID == 0 {
					t.Errorf("undecodable booking %s", r.Structured)
				}
				return out, true
			}
			time.Sleep(20 * time.Millisecond)
		}
		return hotel.BookedOut{}, false
	}
	var wg sync.WaitGroup
	for ci, c := range clients {
		wg.Go(func() {
			day := time.Date(2040, 1, 1, 0, 0, 0, 0, time.UTC).AddDate(0, 0, 1000*ci)
			for i := 0; ctx.Err() == nil; i++ {
				o := op{guest: c.guest, checkIn: day.AddDate(0, 0, i).Format(time.DateOnly)}
				key := fmt.Sprintf("writefault-%d-%d-%s", ci, i, randName(""))
				out, ok := call(c, key, o)
				if !ok {
					t.Errorf("client %d: booking %d never answered within 30 s", ci, i)
					return
				}
				o.booking = out.BookingID
				c.ops = append(c.ops, o)
				// The answer "was lost": the client sends it again.
				again, ok := call(c, key, o)
				mu.Lock()
				f.replays++
				if !ok || again.BookingID != out.BookingID {
					f.mismatched++
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	// Every logical booking: exactly one booking row for its guest and
	// night, and the one acknowledged.
	for _, c := range clients {
		for _, o := range c.ops {
			f.ops++
			f.acked++
			var n int
			if err := db.QueryRow(`SELECT COUNT(*) FROM bookings WHERE guest_id = `+p1+` AND check_in = `+p2, o.guest, o.checkIn).Scan(&n); err != nil {
				t.Fatal(err)
			}
			if n > 1 {
				f.duplicates += n - 1
			}
			var found int
			if err := db.QueryRow(`SELECT COUNT(*) FROM bookings WHERE id = `+p1, o.booking).Scan(&found); err != nil {
				t.Fatal(err)
			}
			if found != 1 {
				f.lost++
			}
		}
	}
	t.Logf("write fault figures (%s): %s", dur, f)
	if f.acked == 0 {
		t.Fatal("no booking was acknowledged: the run tested nothing")
	}
	if f.duplicates != 0 || f.lost != 0 || f.mismatched != 0 {
		t.Errorf("%d duplicate bookings after retries, %d acknowledged bookings lost, %d replays answered another booking: want 0, 0, 0", f.duplicates, f.lost, f.mismatched)
	}
	if f.internal != 0 {
		t.Errorf("%d calls answered \"internal error\": a write applied without its answer must say so (write.unconfirmed)", f.internal)
	}
	return f
}

// TestIdempotentBookingSQLite: the hotel on its embedded SQLite database
// (the default test run) accepts idempotency keys: the same key books
// once and answers the same booking, the header works as _meta does,
// other arguments with the key are invalid params, and without a key the
// same request books another room.
func TestIdempotentBookingSQLite(t *testing.T) {
	h := startWith(t, hotel.Options{}, nil)
	d := h.app.Data
	var guest int64
	for _, g := range d.Guests {
		if d.ChainOfHotel(g.HotelID) == "acme" {
			guest = g.ID
			break
		}
	}
	tok := h.tokenFor(t, "alice")
	endpoint := h.app.HTTP.ResourceURL
	book := func(checkIn string, meta map[string]any) rpctest.Reply {
		params := map[string]any{"name": "book_free_room", "arguments": map[string]any{"guest_id": guest, "check_in": checkIn, "check_out": dayAfter(checkIn)}}
		if meta != nil {
			params["_meta"] = meta
		}
		r, err := rpctest.Post(context.Background(), endpoint, tok, "tools/call", params)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	id := func(what string, r rpctest.Reply) int64 {
		t.Helper()
		var out hotel.BookedOut
		if !r.OK() || json.Unmarshal(r.Structured, &out) != nil || out.BookingID == 0 {
			t.Fatalf("%s: %+v", what, r)
		}
		return out.BookingID
	}
	key := map[string]any{server.MetaIdempotencyKey: "sqlite-booking-" + randName("")}
	first := id("first keyed booking", book("2041-05-01", key))
	if again := id("retry with the key", book("2041-05-01", key)); again != first {
		t.Fatalf("retry with the key booked %d, want the first booking %d", again, first)
	}
	if r := book("2041-05-02", key); r.Err == nil || r.Err.Code != jsonrpc.CodeInvalidParams {
		t.Fatalf("the key with other dates: %+v, want invalid params", r)
	}
	a, b := id("unkeyed", book("2041-06-01", nil)), id("unkeyed again", book("2041-06-01", nil))
	if a == b {
		t.Fatalf("two unkeyed bookings answered the same booking %d", a)
	}
}

func dayAfter(day string) string {
	d, _ := time.Parse(time.DateOnly, day)
	return d.AddDate(0, 0, 1).Format(time.DateOnly)
}
