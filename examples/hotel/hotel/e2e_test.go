package hotel_test

import (
	"context"
	"encoding/json"
	"github.com/tenantmcp/tenantmcp/internal/logbuf"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tenantmcp/tenantmcp/claims/devtoken"
	"github.com/tenantmcp/tenantmcp/examples/hotel/hotel"
)

type harness struct {
	app   *hotel.App
	audit *logbuf.Buffer
	logs  *logbuf.Buffer
}

// start runs the hotel server in process on a loopback port with the
// embedded SQLite database and the development issuer.
func start(t *testing.T, stateless bool) *harness {
	return startWith(t, hotel.Options{Sessions: !stateless, Seed: 7}, nil)
}

// startWith starts the server with cfg; data, if not nil, is what an
// external database (cfg.DB) was loaded with.
func startWith(t *testing.T, cfg hotel.Options, data *hotel.Data) *harness {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	h := &harness{audit: &logbuf.Buffer{}, logs: &logbuf.Buffer{}}
	cfg.Addr = "127.0.0.1:0"
	cfg.Logger = slog.New(slog.NewJSONHandler(h.logs, nil))
	cfg.AuditLogger = slog.New(slog.NewJSONHandler(h.audit, nil))
	app, err := hotel.New(ctx, cfg)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	if data != nil {
		app.Data = data
	}
	h.app = app
	done := make(chan error, 1)
	go func() { done <- app.Serve(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
		app.Close()
	})
	return h
}

type bearer struct {
	token string
	base  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.base.RoundTrip(r)
}

func (h *harness) tokenFor(t *testing.T, subject string) string {
	t.Helper()
	for _, u := range hotel.DemoUsers {
		if u.Subject == subject {
			tok, err := h.app.Token(u, time.Hour)
			if err != nil {
				t.Fatal(err)
			}
			return tok
		}
	}
	t.Fatalf("no demo user %s", subject)
	return ""
}

// failf reports a failed call together with the server's (redacted) log,
// where internal errors are explained under their correlation id.
func (h *harness) failf(t *testing.T, format string, args ...any) {
	t.Helper()
	t.Fatalf(format+"\nserver log:\n%s", append(args, h.logs.String())...)
}

func (h *harness) connect(t *testing.T, token string) *mcp.ClientSession {
	t.Helper()
	return h.dial(t, token, nil, true)
}

// dial connects a go-sdk client with opts over streamable HTTP with token:
// a 2025-11-25 session where the server has sessions, 2026-07-28 otherwise.
func (h *harness) dial(t *testing.T, token string, opts *mcp.ClientOptions, noStandaloneSSE bool) *mcp.ClientSession {
	t.Helper()
	var so *mcp.ClientSessionOptions
	if h.app.HTTP.Sessions {
		so = &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"}
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "e2e", Version: "1"}, opts)
	cs, err := client.Connect(context.Background(), &mcp.StreamableClientTransport{
		Endpoint:             h.app.HTTP.ResourceURL,
		HTTPClient:           &http.Client{Transport: bearer{token, http.DefaultTransport}},
		DisableStandaloneSSE: noStandaloneSSE,
		MaxRetries:           -1,
	}, so)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

func call[T any](t *testing.T, cs *mcp.ClientSession, tool string, args any) (T, *mcp.CallToolResult) {
	t.Helper()
	var out T
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", tool, err)
	}
	if !res.IsError {
		raw, _ := json.Marshal(res.StructuredContent)
		if err := json.Unmarshal(raw, &out); err != nil {
			t.Fatalf("%s: decoding %s: %v", tool, raw, err)
		}
	}
	return out, res
}

func text(res *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

// allBookings pages through list_bookings for the whole demo year.
func (h *harness) allBookings(t *testing.T, cs *mcp.ClientSession) []hotel.Booking {
	var all []hotel.Booking
	for off := 0; ; off += 200 {
		page, res := call[hotel.BookingsOut](t, cs, "list_bookings", map[string]any{"from": "2025-01-01", "to": "2028-01-01", "limit": 200, "offset": off})
		if res.IsError {
			h.failf(t, "list_bookings: %s", text(res))
		}
		all = append(all, page.Bookings...)
		if len(page.Bookings) < 200 {
			return all
		}
	}
}

// expectedBookings computes, from the generated data and independently of
// the guard, the booking ids a grant set may see.
func expectedBookings(d *hotel.Data, chains, hotels []string) []int64 {
	var ids []int64
	for _, b := range d.Bookings {
		h := d.HotelOfBooking(b.ID)
		if slices.Contains(hotels, h) || slices.Contains(chains, d.ChainOfHotel(h)) {
			ids = append(ids, b.ID)
		}
	}
	slices.Sort(ids)
	return ids
}

func idsOf(bs []hotel.Booking) []int64 {
	ids := make([]int64, len(bs))
	for i, b := range bs {
		ids[i] = b.ID
	}
	slices.Sort(ids)
	return ids
}

func TestChainsSeeDisjointBookings(t *testing.T) {
	for _, stateless := range []bool{false, true} {
		t.Run(map[bool]string{false: "stateful", true: "stateless"}[stateless], func(t *testing.T) {
			h := start(t, stateless)
			d := h.app.Data
			alice := h.allBookings(t, h.connect(t, h.tokenFor(t, "alice")))
			bob := h.allBookings(t, h.connect(t, h.tokenFor(t, "bob")))
			carol := h.allBookings(t, h.connect(t, h.tokenFor(t, "carol")))

			for _, c := range []struct {
				who            string
				got            []hotel.Booking
				chains, hotels []string
			}{
				{"alice", alice, []string{"acme"}, nil},
				{"bob", bob, []string{"globex"}, nil},
				{"carol", carol, nil, []string{"acme-paris"}},
			} {
				want := expectedBookings(d, c.chains, c.hotels)
				if len(want) == 0 {
					t.Fatalf("%s: the seed gives no bookings to compare", c.who)
				}
				if got := idsOf(c.got); !slices.Equal(got, want) {
					t.Errorf("%s: %d bookings, want %d (first got %v, first want %v)", c.who, len(got), len(want), head(got), head(want))
				}
			}
			for _, a := range idsOf(alice) {
				if _, found := slices.BinarySearch(idsOf(bob), a); found {
					t.Fatalf("booking %d seen by both chains", a)
				}
			}
		})
	}
}

func head(s []int64) []int64 { return s[:min(5, len(s))] }

func TestCrossChainIDIsNotFound(t *testing.T) {
	h := start(t, false)
	d := h.app.Data
	alice := h.connect(t, h.tokenFor(t, "alice"))
	bob := h.connect(t, h.tokenFor(t, "bob"))
	var globexBooking int64
	for _, b := range d.Bookings {
		if d.ChainOfHotel(d.HotelOfBooking(b.ID)) == "globex" && b.Status != "cancelled" {
			globexBooking = b.ID
			break
		}
	}
	_, res := call[hotel.BookingDetail](t, alice, "get_booking", map[string]any{"id": globexBooking})
	if !res.IsError || text(res) != "not found" {
		t.Fatalf("alice get_booking(globex %d) = %q (isError %v), want not found", globexBooking, text(res), res.IsError)
	}
	_, res = call[hotel.BookingDetail](t, alice, "get_booking", map[string]any{"id": 999999})
	if !res.IsError || text(res) != "not found" {
		t.Fatalf("nonexistent id: %q, want the same not found", text(res))
	}
	_, res = call[hotel.CancelledOut](t, alice, "cancel_booking", map[string]any{"id": globexBooking})
	if !res.IsError || text(res) != "not found" {
		t.Fatalf("alice cancel_booking(globex) = %q, want not found", text(res))
	}
	own, res := call[hotel.BookingDetail](t, bob, "get_booking", map[string]any{"id": globexBooking})
	if res.IsError {
		t.Fatalf("bob get_booking(own): %s", text(res))
	}
	if own.Booking.Status == "cancelled" {
		t.Fatal("alice's cancel of a globex booking changed it")
	}
	// A room of another chain cannot be booked either.
	var globexRoom, acmeGuest int64
	for _, r := range d.Rooms {
		if d.ChainOfHotel(r.HotelID) == "globex" {
			globexRoom = r.ID
			break
		}
	}
	for _, g := range d.Guests {
		if d.ChainOfHotel(g.HotelID) == "acme" {
			acmeGuest = g.ID
			break
		}
	}
	_, res = call[hotel.CreatedOut](t, alice, "create_booking", map[string]any{"room_id": globexRoom, "guest_id": acmeGuest, "check_in": "2027-03-01", "check_out": "2027-03-03"})
	if !res.IsError || text(res) != "not found" {
		t.Fatalf("alice create_booking in a globex room = %q, want not found", text(res))
	}
}

func TestCreateAndCancelOwnBooking(t *testing.T) {
	h := start(t, false)
	d := h.app.Data
	carol := h.connect(t, h.tokenFor(t, "carol"))
	room, guest := firstRoomAndGuest(d, "acme-paris")
	created, res := call[hotel.CreatedOut](t, carol, "create_booking", map[string]any{"room_id": room, "guest_id": guest, "check_in": "2027-06-01", "check_out": "2027-06-04"})
	if res.IsError || created.ID == 0 {
		t.Fatalf("create_booking: %s", text(res))
	}
	_, res = call[hotel.CreatedOut](t, carol, "create_booking", map[string]any{"room_id": room, "guest_id": guest, "check_in": "2027-06-02", "check_out": "2027-06-03"})
	if !res.IsError || !strings.Contains(text(res), "not free") {
		t.Fatalf("double booking: %q", text(res))
	}
	got, res := call[hotel.BookingDetail](t, carol, "get_booking", map[string]any{"id": created.ID})
	if res.IsError || got.Booking.Status != "confirmed" || got.Booking.HotelID != "acme-paris" {
		t.Fatalf("get_booking(new) = %+v %s", got.Booking, text(res))
	}
	// Cancelling needs the manager role: alice, manager of the chain.
	alice := h.connect(t, h.tokenFor(t, "alice"))
	_, res = call[hotel.CancelledOut](t, alice, "cancel_booking", map[string]any{"id": created.ID})
	if res.IsError {
		t.Fatalf("cancel_booking: %s", text(res))
	}
	// A hotel-level user cannot see (or book) a sibling hotel of its chain.
	var sibling int64
	for _, b := range d.Bookings {
		if hid := d.HotelOfBooking(b.ID); hid != "acme-paris" && d.ChainOfHotel(hid) == "acme" {
			sibling = b.ID
			break
		}
	}
	if _, res := call[hotel.BookingDetail](t, carol, "get_booking", map[string]any{"id": sibling}); !res.IsError || text(res) != "not found" {
		t.Fatalf("carol sees sibling hotel booking %d: %s", sibling, text(res))
	}
	if _, res := call[hotel.BookingDetail](t, alice, "get_booking", map[string]any{"id": sibling}); res.IsError {
		t.Fatalf("alice (chain) cannot see her chain's booking %d: %s", sibling, text(res))
	}
}

func TestAuthFailuresAre401WithChallenge(t *testing.T) {
	h := start(t, false)
	alice := hotel.DemoUsers[0]
	expired, err := h.app.Issuer.Mint(devtoken.Token{Subject: alice.Subject, Groups: alice.Groups, TTL: -time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	wrongAud, err := h.app.Issuer.Mint(devtoken.Token{Subject: alice.Subject, Groups: alice.Groups, Audience: "https://other.example/mcp"})
	if err != nil {
		t.Fatal(err)
	}
	noScope, err := h.app.Issuer.Mint(devtoken.Token{Subject: "mallory", Groups: []string{"/somewhere/else"}})
	if err != nil {
		t.Fatal(err)
	}
	body := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}`
	for name, auth := range map[string]string{
		"no token": "", "expired": "Bearer " + expired, "wrong audience": "Bearer " + wrongAud,
		"no tenant group": "Bearer " + noScope, "garbage": "Bearer not.a.jwt",
	} {
		t.Run(name, func(t *testing.T) {
			req, _ := http.NewRequest("POST", h.app.HTTP.ResourceURL, strings.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			if auth != "" {
				req.Header.Set("Authorization", auth)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusUnauthorized {
				t.Fatalf("status %d, want 401", resp.StatusCode)
			}
			ch := resp.Header.Get("WWW-Authenticate")
			if !strings.HasPrefix(ch, "Bearer ") || !strings.Contains(ch, `resource_metadata="`+strings.TrimSuffix(h.app.HTTP.ResourceURL, "/mcp")+"/.well-known/oauth-protected-resource/mcp\"") {
				t.Fatalf("WWW-Authenticate = %q", ch)
			}
		})
	}
	resp, err := http.Get(strings.TrimSuffix(h.app.HTTP.ResourceURL, "/mcp") + "/.well-known/oauth-protected-resource/mcp")
	if err != nil {
		t.Fatal(err)
	}
	var meta map[string]any
	err = json.NewDecoder(resp.Body).Decode(&meta)
	resp.Body.Close()
	if err != nil || meta["resource"] != h.app.HTTP.ResourceURL {
		t.Fatalf("metadata = %v, %v", meta, err)
	}
}

func TestPIIRevealedOnlyToAllowedRoles(t *testing.T) {
	h := start(t, false)
	d := h.app.Data
	var booking int64
	for _, b := range d.Bookings {
		if d.HotelOfBooking(b.ID) == "acme-paris" && b.Status != "cancelled" {
			booking = b.ID
			break
		}
	}
	guest := d.Guests[d.Bookings[booking-1].GuestID-1]
	var card string
	for _, p := range d.Payments {
		if p.BookingID == booking {
			card = p.CardNumber
		}
	}
	if card == "" {
		t.Fatal("seed has no payment for the booking")
	}
	canaries := []string{guest.Email, guest.Phone, card}

	alice := h.connect(t, h.tokenFor(t, "alice")) // manager: names only
	got, res := call[hotel.BookingDetail](t, alice, "get_booking", map[string]any{"id": booking})
	if res.IsError {
		t.Fatal(text(res))
	}
	raw, _ := json.Marshal(res.StructuredContent)
	for _, c := range canaries {
		if strings.Contains(string(raw), c) || strings.Contains(text(res), c) {
			t.Errorf("manager sees %q in clear", c)
		}
	}
	if got.Guest.FullName != guest.FullName {
		t.Errorf("manager should see the guest name, got %q", got.Guest.FullName)
	}
	found, res := call[hotel.GuestsOut](t, alice, "find_guest", map[string]any{"query": guest.Email})
	if res.IsError || len(found.Guests) == 0 {
		t.Fatalf("find_guest by e-mail: %s", text(res))
	}
	if strings.Contains(text(res), guest.Email) {
		t.Error("find_guest echoes the e-mail in clear to a manager")
	}

	carol := h.connect(t, h.tokenFor(t, "carol")) // front desk: contact details
	got, res = call[hotel.BookingDetail](t, carol, "get_booking", map[string]any{"id": booking})
	if res.IsError {
		t.Fatal(text(res))
	}
	if got.Guest.Email != guest.Email || got.Guest.Phone != guest.Phone {
		t.Errorf("front desk should see contact details, got %q %q", got.Guest.Email, got.Guest.Phone)
	}
	if len(got.Payments) == 0 || strings.Contains(text(res), card) {
		t.Errorf("card number in clear for the front desk: payments %+v", got.Payments)
	}
	// Nothing of it in the audit log or the server log, for anyone.
	logs := h.audit.String() + h.logs.String()
	for _, c := range append(canaries, guest.FullName, h.tokenFor(t, "carol")[:40]) {
		if strings.Contains(logs, c) {
			t.Errorf("log contains %q", c)
		}
	}
}

func TestAuditRecordPerCall(t *testing.T) {
	h := start(t, false)
	bob := h.connect(t, h.tokenFor(t, "bob"))
	call[hotel.RevenueOut](t, bob, "revenue_report", map[string]any{"from": "2026-01-01", "to": "2027-01-01"})
	call[hotel.BookingDetail](t, bob, "get_booking", map[string]any{"id": 1_000_000})
	call[hotel.RevenueOut](t, bob, "revenue_report", map[string]any{"from": "bad", "to": "2027-01-01"})
	var recs []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(h.audit.String()), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("audit line %q: %v", line, err)
		}
		recs = append(recs, m)
	}
	if len(recs) != 3 {
		t.Fatalf("%d audit records, want 3:\n%s", len(recs), h.audit.String())
	}
	want := []struct{ tool, outcome string }{{"revenue_report", "ok"}, {"get_booking", "not_found"}, {"revenue_report", "invalid_input"}}
	for i, w := range want {
		r := recs[i]
		if r["tool"] != w.tool || r["outcome"] != w.outcome || r["sub"] != "bob" {
			t.Errorf("record %d = %v, want tool %s outcome %s sub bob", i, r, w.tool, w.outcome)
		}
		if gs, _ := r["grants"].([]any); len(gs) != 1 || gs[0] != "chain:globex" {
			t.Errorf("record %d grants = %v", i, r["grants"])
		}
	}
	if rows, _ := recs[0]["rows"].(float64); rows != 4 {
		t.Errorf("revenue_report rows = %v, want 4 hotels", recs[0]["rows"])
	}
}

func TestRevenueMatchesIndependentSum(t *testing.T) {
	h := start(t, false)
	d := h.app.Data
	bob := h.connect(t, h.tokenFor(t, "bob"))
	got, res := call[hotel.RevenueOut](t, bob, "revenue_report", map[string]any{"from": "2026-01-01", "to": "2026-07-01"})
	if res.IsError {
		t.Fatal(text(res))
	}
	want := map[string]int64{}
	var total int64
	for _, b := range d.Bookings {
		hid := d.HotelOfBooking(b.ID)
		if d.ChainOfHotel(hid) == "globex" && b.Status != "cancelled" && b.CheckIn >= "2026-01-01" && b.CheckIn < "2026-07-01" {
			want[hid] += b.TotalCents
			total += b.TotalCents
		}
	}
	if got.TotalCents != total || len(got.Hotels) != len(want) {
		t.Fatalf("revenue %d over %d hotels, want %d over %d", got.TotalCents, len(got.Hotels), total, len(want))
	}
	for _, l := range got.Hotels {
		if want[l.HotelID] != l.RevenueCents {
			t.Errorf("%s: %d, want %d", l.HotelID, l.RevenueCents, want[l.HotelID])
		}
	}
}

// firstRoomAndGuest returns a room and a guest of hotel in d.
func firstRoomAndGuest(d *hotel.Data, hotelID string) (room, guest int64) {
	for _, r := range d.Rooms {
		if r.HotelID == hotelID {
			room = r.ID
			break
		}
	}
	for _, g := range d.Guests {
		if g.HotelID == hotelID {
			guest = g.ID
			break
		}
	}
	return room, guest
}

// contactOf returns a non-cancelled booking of hotel and its guest's e-mail
// and phone.
func contactOf(t *testing.T, d *hotel.Data, hotelID string) (int64, string, string) {
	t.Helper()
	for _, b := range d.Bookings {
		if d.HotelOfBooking(b.ID) == hotelID && b.Status != "cancelled" {
			g := d.Guests[b.GuestID-1]
			return b.ID, g.Email, g.Phone
		}
	}
	t.Fatalf("seed has no booking at %s", hotelID)
	return 0, "", ""
}

// TestGrantRolesRevealOnlyTheirTenant (issue 13 §2): a role reveals PII of
// the tenant it was given for, not of every tenant the token reaches.
// Groups [/tenants/acme/hotels/acme-paris, /tenants/globex] with the roles
// claim [front_desk] used to show globex guests' e-mails and phones raw.
func TestGrantRolesRevealOnlyTheirTenant(t *testing.T) {
	h := start(t, false)
	checkGrantRoles(t, h, h.app.Data)
}

func checkGrantRoles(t *testing.T, h *harness, d *hotel.Data) {
	globexHotel := d.HotelsOf("globex")[0]
	gBooking, gEmail, gPhone := contactOf(t, d, globexHotel)
	pBooking, pEmail, pPhone := contactOf(t, d, "acme-paris")
	mint := func(groups, roles []string) *mcp.ClientSession {
		tok, err := h.app.Issuer.Mint(devtoken.Token{Subject: "dora", Groups: groups, Roles: roles, TTL: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		return h.connect(t, tok)
	}
	shows := func(cs *mcp.ClientSession, booking int64, secrets ...string) bool {
		t.Helper()
		_, res := call[hotel.BookingDetail](t, cs, "get_booking", map[string]any{"id": booking})
		if res.IsError {
			t.Fatalf("get_booking %d: %s", booking, text(res))
		}
		raw, _ := json.Marshal(res.StructuredContent)
		for _, s := range secrets {
			if strings.Contains(string(raw), s) || strings.Contains(text(res), s) {
				return true
			}
		}
		return false
	}
	for _, tc := range []struct {
		name          string
		groups, roles []string
		paris, globex bool // whose contact details may show
	}{
		{"roles claim, two grants", []string{"/tenants/acme/hotels/acme-paris", "/tenants/globex"}, []string{"front_desk"}, false, false},
		{"role-suffixed hotel group + plain chain", []string{"/tenants/acme/hotels/acme-paris/front_desk", "/tenants/globex"}, []string{"front_desk"}, false, false},
		{"role on each grant", []string{"/tenants/acme/hotels/acme-paris/front_desk", "/tenants/globex/roles/front_desk"}, nil, true, true},
		{"control: role-suffixed hotel group alone", []string{"/tenants/acme/hotels/acme-paris/front_desk"}, nil, true, false},
		{"control: roles claim with one grant", []string{"/tenants/acme/hotels/acme-paris"}, []string{"front_desk"}, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cs := mint(tc.groups, tc.roles)
			if got := shows(cs, pBooking, pEmail, pPhone); got != tc.paris {
				t.Errorf("acme-paris guest contact shown = %v, want %v", got, tc.paris)
			}
			if len(tc.groups) == 1 {
				return // globex is out of scope: get_booking would be not found
			}
			if got := shows(cs, gBooking, gEmail, gPhone); got != tc.globex {
				t.Errorf("globex guest contact shown = %v, want %v", got, tc.globex)
			}
		})
	}
}

// TestGroupPathAncestorsMustMatch (issue 13 §1): a hotel group names its
// chain, and a chain that is not the hotel's grants nothing:
// /tenants/initech/hotels/acme-paris reads none of acme-paris's bookings.
func TestGroupPathAncestorsMustMatch(t *testing.T) {
	h := start(t, false)
	checkGroupPathAncestors(t, h, h.app.Data)
}

func checkGroupPathAncestors(t *testing.T, h *harness, d *hotel.Data) {
	booking, _, _ := contactOf(t, d, "acme-paris")
	list := func(group string) (int, *mcp.CallToolResult) {
		tok, err := h.app.Issuer.Mint(devtoken.Token{Subject: "eve", Groups: []string{group}, Roles: []string{"manager"}, TTL: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		cs := h.connect(t, tok)
		_, res := call[hotel.BookingDetail](t, cs, "get_booking", map[string]any{"id": booking})
		out, lres := call[hotel.RevenueOut](t, cs, "revenue_report", map[string]any{"from": "2000-01-01", "to": "2100-01-01"})
		if lres.IsError {
			t.Fatalf("revenue_report as %s: %s", group, text(lres))
		}
		return int(out.BookingCount), res
	}
	if n, res := list("/tenants/acme/hotels/acme-paris"); res.IsError || n == 0 {
		t.Fatalf("control: the true path reads nothing (%d bookings; %s)", n, text(res))
	}
	room, guest := firstRoomAndGuest(d, "acme-paris")
	for _, g := range []string{"/tenants/initech/hotels/acme-paris", "/tenants/globex/hotels/acme-paris"} {
		n, res := list(g)
		if !res.IsError {
			t.Errorf("%s: get_booking of an acme-paris booking succeeded", g)
		}
		if n != 0 {
			t.Errorf("%s: revenue report counts %d bookings, want 0", g, n)
		}
		// Writes: no booking under acme-paris's rooms, no cancellation.
		tok, err := h.app.Issuer.Mint(devtoken.Token{Subject: "eve", Groups: []string{g}, Roles: []string{"manager"}, TTL: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		cs := h.connect(t, tok)
		if _, res := call[hotel.CreatedOut](t, cs, "create_booking", map[string]any{"room_id": room, "guest_id": guest, "check_in": "2027-07-01", "check_out": "2027-07-02"}); !res.IsError {
			t.Errorf("%s: create_booking in acme-paris succeeded", g)
		}
		if _, res := call[hotel.CancelledOut](t, cs, "cancel_booking", map[string]any{"id": booking}); !res.IsError {
			t.Errorf("%s: cancel_booking of an acme-paris booking succeeded", g)
		}
	}
}
