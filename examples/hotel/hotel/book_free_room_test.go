package hotel_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tenantmcp/tenantmcp/builder"
	"github.com/tenantmcp/tenantmcp/examples/hotel/hotel"
	"github.com/tenantmcp/tenantmcp/guardedsql"
	"github.com/tenantmcp/tenantmcp/guardedsql/postgres"
	"github.com/tenantmcp/tenantmcp/scope"
	"github.com/tenantmcp/tenantmcp/scope/scopetest"
)

// bookFreeSize is the data set of the book_free_room tests: the hotel they
// book has 8 rooms.
var bookFreeSize = hotel.Size{Chains: 2, HotelsPerChain: 2, RoomsPerHotel: 8, GuestsPerHotel: 10, BookingsPerRoom: 2}

// openBookFree opens the hotel database with d on engine ("sqlite",
// "postgres", "mysql"), skipping t for a live engine whose DSN is unset.
func openBookFree(t *testing.T, engine string, d *hotel.Data) *guardedsql.DB {
	t.Helper()
	ctx := context.Background()
	var (
		dsn  string
		opts guardedsql.Options
	)
	switch engine {
	case "sqlite":
		path := filepath.Join(t.TempDir(), "hotel.db")
		raw, err := sql.Open("sqlite", "file:"+path+"?_pragma=foreign_keys(1)")
		if err != nil {
			t.Fatal(err)
		}
		err = hotel.Create(ctx, raw, hotel.SQLite, d)
		raw.Close()
		if err != nil {
			t.Fatal(err)
		}
		dsn = "sqlite:" + path
	case "postgres":
		pg := provisionPostgres(t, d) // live_test.go
		dsn, opts.Engine = pg.app, postgres.Options{Key: pg.key}
	case "mysql":
		dsn = provisionMySQL(t, d)
	}
	db, err := guardedsql.Open(ctx, dsn, hotel.Schema, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// provisionMySQL creates a uniquely named database on the live
// MariaDB/MySQL with d loaded, dropped when the test ends, and returns its
// DSN. It skips t unless TENANTMCP_TEST_MYSQL_DSN is set.
func provisionMySQL(t *testing.T, d *hotel.Data) string {
	t.Helper()
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
	if err := hotel.SetupDemo(ctx, dsn, "", postgres.Key{}, d); err != nil {
		t.Fatal(err)
	}
	return dsn
}

func hotelCtx(id string) context.Context {
	return scopetest.NewContext(context.Background(), scopetest.New("clerk-"+id, []scope.Grant{{Level: hotel.LevelHotel, ID: id}}))
}

// stay is a booking of the tests, as book_free_room reported it or as the
// database holds it.
type stay struct {
	id, room, amount int64
	in, out          time.Time
	payments         []int64
}

// TestBookFreeRoomConcurrent: 8 clients × 200 calls of book_free_room on
// one hotel of 8 rooms, random stays of 1–4 nights in 2031, on every
// engine. Whatever the interleaving: no room is given twice for a night
// (0 double allocations), every booking made has exactly one payment of
// nights × the room's rate (0 lost payments), every call either books or
// answers "no room free" (0 internal errors, 0 retries exhausted), and
// the database holds exactly the bookings the calls reported. The retries
// the races cost are logged.
func TestBookFreeRoomConcurrent(t *testing.T) {
	const clients, iterations = 8, 200
	for _, engine := range []string{"sqlite", "postgres", "mysql"} {
		t.Run(engine, func(t *testing.T) {
			d := hotel.Generate(5, bookFreeSize)
			db := openBookFree(t, engine, d)
			h := d.Hotels[0].ID
			rate := map[int64]int64{}
			for _, r := range d.Rooms {
				if r.HotelID == h {
					rate[r.ID] = r.RateCents
				}
			}
			var guests []int64
			for _, g := range d.Guests {
				if g.HotelID == h {
					guests = append(guests, g.ID)
				}
			}
			ctx := hotelCtx(h)
			first := time.Date(2031, 1, 1, 0, 0, 0, 0, time.UTC)
			var (
				mu                                sync.Mutex
				booked                            []stay
				noRoom, gaveUp, internal, retries int
				maxAttempts                       int
				firstInternal                     error
				wg                                sync.WaitGroup
			)
			start := time.Now()
			for c := range clients {
				wg.Add(1)
				go func() {
					defer wg.Done()
					rng := rand.New(rand.NewPCG(uint64(c), 26))
					for range iterations {
						in := first.AddDate(0, 0, rng.IntN(365))
						out := in.AddDate(0, 0, 1+rng.IntN(4))
						res, err := hotel.BookFreeRoom(ctx, db, hotel.BookFreeRoomIn{GuestID: guests[rng.IntN(len(guests))],
							CheckIn: in.Format(time.DateOnly), CheckOut: out.Format(time.DateOnly)})
						mu.Lock()
						switch {
						case err == nil:
							booked = append(booked, stay{id: res.BookingID, room: res.RoomID, amount: res.AmountCents, in: in, out: out})
							retries += res.Attempts - 1
							maxAttempts = max(maxAttempts, res.Attempts)
							if want := int64(out.Sub(in)/(24*time.Hour)) * rate[res.RoomID]; res.AmountCents != want || res.Nights != int64(out.Sub(in)/(24*time.Hour)) {
								internal++
								firstInternal = cmpErr(firstInternal, fmt.Errorf("booking %d: %d nights, %d cents, want %d", res.BookingID, res.Nights, res.AmountCents, want))
							}
						case strings.HasPrefix(err.Error(), "no room of the guest's hotel"):
							noRoom++
						case guardedsql.IsRetryable(err):
							gaveUp++
						default:
							internal++
							firstInternal = cmpErr(firstInternal, err)
						}
						mu.Unlock()
					}
				}()
			}
			wg.Wait()
			elapsed := time.Since(start)

			// What the database holds, read under the same scope.
			b, p := hotel.NewBookingsTable(hotel.Schema, "b"), hotel.NewPaymentsTable(hotel.Schema, "p")
			held := map[int64]*stay{}
			rows, err := db.Query(ctx, builder.Must(builder.Select(b.ID(), b.RoomID(), b.TotalCents(), b.CheckIn(), b.CheckOut()).
				From(b.Ref()).Where(b.CheckIn().Ge("2031-01-01")).Build()))
			if err != nil {
				t.Fatal(err)
			}
			for rows.Next() {
				var s stay
				if err := rows.Scan(&s.id, &s.room, &s.amount, &s.in, &s.out); err != nil {
					t.Fatal(err)
				}
				held[s.id] = &s
			}
			if err := rows.Err(); err != nil {
				t.Fatal(err)
			}
			rows.Close()
			rows, err = db.Query(ctx, builder.Must(builder.Select(p.BookingID(), p.AmountCents()).From(p.Ref()).
				Join(b.Ref(), b.ID().EqCol(p.BookingID())).Where(b.CheckIn().Ge("2031-01-01")).Build()))
			if err != nil {
				t.Fatal(err)
			}
			for rows.Next() {
				var id, amount int64
				if err := rows.Scan(&id, &amount); err != nil {
					t.Fatal(err)
				}
				if s := held[id]; s != nil {
					s.payments = append(s.payments, amount)
				}
			}
			if err := rows.Err(); err != nil {
				t.Fatal(err)
			}
			rows.Close()

			lost, doubles := 0, 0
			for _, s := range booked {
				h := held[s.id]
				if h == nil || h.room != s.room || !h.in.Equal(s.in) || !h.out.Equal(s.out) || h.amount != s.amount {
					lost++
					t.Errorf("booking %d as reported %+v, as held %+v", s.id, s, h)
				}
			}
			byRoom := map[int64][]*stay{}
			for _, s := range held {
				if len(s.payments) != 1 || s.payments[0] != s.amount {
					lost++
					t.Errorf("booking %d (%d cents) has payments %v, want exactly one of its amount", s.id, s.amount, s.payments)
				}
				byRoom[s.room] = append(byRoom[s.room], s)
			}
			for room, ss := range byRoom {
				slices.SortFunc(ss, func(a, b *stay) int { return a.in.Compare(b.in) })
				for i := 1; i < len(ss); i++ {
					if ss[i].in.Before(ss[i-1].out) {
						doubles++
						t.Errorf("room %d given twice: booking %d (%v–%v) and %d (%v–%v)", room, ss[i-1].id, ss[i-1].in, ss[i-1].out, ss[i].id, ss[i].in, ss[i].out)
					}
				}
			}
			t.Logf("%s: %d clients × %d calls in %v: %d booked, %d no room free, %d retries (at most %d attempts for one call), %d retries exhausted, %d double allocations, %d lost payments, %d internal errors",
				engine, clients, iterations, elapsed.Round(time.Millisecond), len(booked), noRoom, retries, maxAttempts, gaveUp, doubles, lost, internal)
			if len(held) != len(booked) {
				t.Errorf("the database holds %d bookings of 2031, the calls reported %d", len(held), len(booked))
			}
			if internal > 0 || gaveUp > 0 {
				t.Errorf("%d internal errors (first: %v), %d calls out of retries", internal, firstInternal, gaveUp)
			}
			if len(booked) == 0 || noRoom+len(booked)+gaveUp+internal != clients*iterations {
				t.Errorf("%d booked + %d no room + %d gave up + %d internal != %d calls", len(booked), noRoom, gaveUp, internal, clients*iterations)
			}
		})
	}
}

func cmpErr(first, err error) error {
	if first != nil {
		return first
	}
	return err
}

// TestBookFreeRoomIsolation: a clerk of another chain naming this hotel's
// guest gets not found and books nothing here; their own call books a
// room of their own guest's hotel, with the amount from the dates.
func TestBookFreeRoomIsolation(t *testing.T) {
	d := hotel.Generate(5, bookFreeSize)
	db := openBookFree(t, "sqlite", d)
	mine, theirs := d.Hotels[0].ID, ""
	for _, h := range d.Hotels {
		if h.ChainID != d.Hotels[0].ChainID {
			theirs = h.ID
			break
		}
	}
	_, myGuest := firstRoomAndGuest(d, mine)
	_, theirGuest := firstRoomAndGuest(d, theirs)
	in := hotel.BookFreeRoomIn{GuestID: myGuest, CheckIn: "2031-02-27", CheckOut: "2031-03-02"}
	if _, err := hotel.BookFreeRoom(hotelCtx(theirs), db, in); !errors.Is(err, guardedsql.ErrNotFound) {
		t.Errorf("other tenant naming this hotel's guest: %v, want not found", err)
	}
	in.GuestID = theirGuest
	got, err := hotel.BookFreeRoom(hotelCtx(theirs), db, in)
	if err != nil {
		t.Fatal(err)
	}
	var rate int64
	for _, r := range d.Rooms {
		if r.ID == got.RoomID {
			if r.HotelID != theirs {
				t.Errorf("booked room %d of hotel %s, want one of %s", r.ID, r.HotelID, theirs)
			}
			rate = r.RateCents
		}
	}
	if got.Nights != 3 || got.AmountCents != 3*rate || got.Attempts != 1 {
		t.Errorf("booked %+v, want 3 nights at %d", got, rate)
	}
	// Nothing of 2031 in this hotel.
	b := hotel.NewBookingsTable(hotel.Schema, "b")
	n, err := guardedsql.One(hotelCtx(mine), db, builder.Must(builder.Select(builder.CountAll()).From(b.Ref()).Where(b.CheckIn().Ge("2031-01-01")).Build()), guardedsql.Scalar[int64])
	if err != nil || n != 0 {
		t.Errorf("this hotel's 2031 bookings: %d, %v; want 0", n, err)
	}
}
