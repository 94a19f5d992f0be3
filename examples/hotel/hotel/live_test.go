package hotel_test

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"net/url"
	"os"
	"slices"
	"strings"
	"testing"

	_ "github.com/go-sql-driver/mysql"
	_ "github.com/jackc/pgx/v5/stdlib"

	"github.com/tenantmcp/tenantmcp/examples/hotel/hotel"
	"github.com/tenantmcp/tenantmcp/guardedsql/postgres"
)

// The hotel server end to end on live PostgreSQL (row-level security, an
// application role that is neither superuser nor owner) and MariaDB/MySQL.
// Point them at a server with TENANTMCP_TEST_POSTGRES_DSN and
// TENANTMCP_TEST_MYSQL_DSN (see README); each run creates its own database
// (and role) and drops it.

func randName(prefix string) string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}

func TestLivePostgres(t *testing.T) {
	data := hotel.Generate(11, hotel.Size{Chains: 3, HotelsPerChain: 3, RoomsPerHotel: 8, GuestsPerHotel: 10, BookingsPerRoom: 6})
	pg := provisionPostgres(t, data)
	runLive(t, pg.app, pg.key, data)

	// The server refuses to start as a role that bypasses row-level security.
	if _, err := hotel.New(context.Background(), hotel.Options{Addr: "127.0.0.1:0", DB: pg.admin, RLSKey: pg.key}); err == nil || !strings.Contains(err.Error(), "row-level security") {
		t.Fatalf("hotel.New as the superuser: err = %v, want a row-level security refusal", err)
	}
}

// livePostgresDemo creates a demo database with its application role (both
// dropped at cleanup) and returns the administrator's and the role's DSN.
func livePostgresDemo(t *testing.T) (admin, app string, key postgres.Key, data *hotel.Data) {
	t.Helper()
	data = hotel.Generate(11, hotel.Size{Chains: 3, HotelsPerChain: 3, RoomsPerHotel: 8, GuestsPerHotel: 10, BookingsPerRoom: 6})
	pg := provisionPostgres(t, data)
	return pg.admin, pg.app, pg.key, data
}

// livePostgres is a fresh hotel database on the live PostgreSQL: the
// admin (superuser) DSN of that database and the application role's, and
// the scope-signing key SetupDemo installed.
type livePostgres struct {
	admin, app string
	key        postgres.Key
}

// provisionPostgres creates a uniquely named database and application
// role, loads d with SetupDemo, and drops both when the test ends. It skips
// t unless TENANTMCP_TEST_POSTGRES_DSN is set.
func provisionPostgres(t *testing.T, d *hotel.Data) livePostgres {
	t.Helper()
	admin := os.Getenv("TENANTMCP_TEST_POSTGRES_DSN")
	if admin == "" {
		t.Skip("set TENANTMCP_TEST_POSTGRES_DSN=postgres://postgres@127.0.0.1:5432/test?sslmode=disable to run the hotel on PostgreSQL")
	}
	ctx := context.Background()
	root, err := sql.Open("pgx", admin)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { root.Close() }) // registered first, so it runs after the drops
	dbName, role := randName("tm_hotel_"), randName("tm_hotel_app_")
	if _, err := root.ExecContext(ctx, "CREATE DATABASE "+dbName); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if _, err := root.ExecContext(ctx, "DROP DATABASE IF EXISTS "+dbName+" WITH (FORCE)"); err != nil {
			t.Errorf("dropping %s: %v", dbName, err)
		}
		if _, err := root.ExecContext(ctx, "DROP ROLE IF EXISTS "+role); err != nil {
			t.Errorf("dropping role %s: %v", role, err)
		}
	})
	u, _ := url.Parse(admin)
	u.Path = "/" + dbName
	key, err := postgres.NewKey("hotel-live")
	if err != nil {
		t.Fatal(err)
	}
	if err := hotel.SetupDemo(ctx, u.String(), role, key, d); err != nil {
		t.Fatal(err)
	}
	app := *u
	app.User = url.User(role)
	return livePostgres{admin: u.String(), app: app.String(), key: key}
}

func TestLiveMySQL(t *testing.T) {
	admin := os.Getenv("TENANTMCP_TEST_MYSQL_DSN")
	if admin == "" {
		t.Skip("set TENANTMCP_TEST_MYSQL_DSN=mysql://root@tcp(127.0.0.1:3306)/test to run the hotel on MariaDB/MySQL")
	}
	ctx := context.Background()
	native := strings.TrimPrefix(admin, "mysql://")
	root, err := sql.Open("mysql", native)
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
	data := hotel.Generate(11, hotel.Size{Chains: 3, HotelsPerChain: 3, RoomsPerHotel: 8, GuestsPerHotel: 10, BookingsPerRoom: 6})
	if err := hotel.SetupDemo(ctx, dsn, "", postgres.Key{}, data); err != nil {
		t.Fatal(err)
	}
	runLive(t, dsn, postgres.Key{}, data)
}

// runLive runs the isolation end-to-end checks against a server on dsn.
func runLive(t *testing.T, dsn string, key postgres.Key, d *hotel.Data) {
	h := startWith(t, hotel.Options{DB: dsn, RLSKey: key}, d)
	// Issue 13: grants hold along the whole group path, roles per grant.
	t.Run("group path ancestors", func(t *testing.T) { checkGroupPathAncestors(t, h, d) })
	t.Run("roles per grant", func(t *testing.T) { checkGrantRoles(t, h, d) })
	alice := h.allBookings(t, h.connect(t, h.tokenFor(t, "alice")))
	bob := h.allBookings(t, h.connect(t, h.tokenFor(t, "bob")))
	carol := h.allBookings(t, h.connect(t, h.tokenFor(t, "carol")))
	for who, c := range map[string]struct {
		got            []hotel.Booking
		chains, hotels []string
	}{
		"alice": {alice, []string{"acme"}, nil},
		"bob":   {bob, []string{"globex"}, nil},
		"carol": {carol, nil, []string{"acme-paris"}},
	} {
		want := expectedBookings(d, c.chains, c.hotels)
		got := idsOf(c.got)
		if len(want) == 0 || len(got) != len(want) {
			t.Fatalf("%s: %d bookings, want %d", who, len(got), len(want))
		}
		for i := range got {
			if got[i] != want[i] {
				t.Fatalf("%s: booking sets differ at %d: %d vs %d", who, i, got[i], want[i])
			}
		}
	}
	cs := h.connect(t, h.tokenFor(t, "alice"))
	var globex int64
	for _, b := range d.Bookings {
		if d.ChainOfHotel(d.HotelOfBooking(b.ID)) == "globex" {
			globex = b.ID
			break
		}
	}
	for _, tool := range []string{"get_booking", "cancel_booking"} {
		if _, res := call[hotel.BookingDetail](t, cs, tool, map[string]any{"id": globex}); !res.IsError || text(res) != "not found" {
			t.Fatalf("alice %s(globex booking) = %q, want not found", tool, text(res))
		}
	}
	// Writes: carol books a room of her hotel and reads it back.
	carolCS := h.connect(t, h.tokenFor(t, "carol"))
	room, guest := firstRoomAndGuest(d, "acme-paris")
	created, res := call[hotel.CreatedOut](t, carolCS, "create_booking", map[string]any{"room_id": room, "guest_id": guest, "check_in": "2028-01-10", "check_out": "2028-01-12"})
	if res.IsError || created.ID == 0 {
		t.Fatalf("create_booking: %s (%+v)", text(res), created)
	}
	got, res := call[hotel.BookingDetail](t, carolCS, "get_booking", map[string]any{"id": created.ID})
	if res.IsError || got.Booking.HotelID != "acme-paris" || got.Booking.CheckIn != "2028-01-10" {
		t.Fatalf("get_booking(new): %s %+v", text(res), got.Booking)
	}
	rev, res := call[hotel.RevenueOut](t, h.connect(t, h.tokenFor(t, "bob")), "revenue_report", map[string]any{"from": "2026-01-01", "to": "2027-01-01"})
	if res.IsError || len(rev.Hotels) != 3 {
		t.Fatalf("revenue_report: %s %+v", text(res), rev)
	}
	// Resources, prompt and completions run the same guard on this engine.
	var own hotel.BookingDetail
	readJSON(t, cs, hotel.BookingURI(created.ID), &own)
	if own.Booking.ID != created.ID {
		t.Fatalf("alice reads her chain's booking: %+v", own.Booking)
	}
	if e := readErr(t, cs, hotel.BookingURI(globex)); e.Message != readErr(t, cs, hotel.BookingURI(999999999)).Message {
		t.Fatalf("foreign read %q differs from a missing one", e.Message)
	}
	g := d.Guests[guest-1]
	comp, err := carolCS.Complete(context.Background(), &mcp.CompleteParams{
		Ref:      &mcp.CompleteReference{Type: "ref/prompt", Name: hotel.PromptGuestBriefing},
		Argument: mcp.CompleteParamsArgument{Name: "guest", Value: g.FullName[:3]}})
	if err != nil || !slices.Contains(comp.Completion.Values, g.FullName) {
		t.Fatalf("completion: %v %+v", err, comp)
	}
	for _, v := range comp.Completion.Values {
		found := false
		for _, x := range d.Guests {
			found = found || x.HotelID == "acme-paris" && x.FullName == v
		}
		if !found {
			t.Fatalf("carol was offered %q, not a guest of her hotel", v)
		}
	}
	if _, err := carolCS.GetPrompt(context.Background(), &mcp.GetPromptParams{Name: hotel.PromptGuestBriefing, Arguments: map[string]string{"guest": g.FullName}}); err != nil {
		t.Fatalf("prompt: %v", err)
	}
}
