package hotel_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/tenantmcp/tenantmcp/examples/hotel/hotel"
	"github.com/tenantmcp/tenantmcp/internal/mcpfixture"
)

// The interop tests run clients nobody on this project wrote against the
// hotel server: the TypeScript SDK's v1 and v2 clients, pinned in
// interop/package.json (the official conformance suite runs against
// internal/mcpfixture). They need `npm ci --prefix interop` (CI
// does it) and skip with that instruction otherwise.

func interopDir(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs("../../../interop")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "@modelcontextprotocol", "sdk")); err != nil {
		t.Skipf("interop clients not installed: run `npm ci --prefix interop` from the repository root (%v)", err)
	}
	return dir
}

// TestTypeScriptSDKClient connects the v1 SDK (2025 handshake, to both
// modes) and the v2 client pinned to 2026-07-28 (server/discover, no
// fallback) to the hotel, lists the tools and calls one as bob.
func TestTypeScriptSDKClient(t *testing.T) {
	dir := interopDir(t)
	node, err := mcpfixture.Node(dir, 20) // both clients run on Node 20
	if err != nil {
		t.Skip(err)
	}
	for _, c := range []struct {
		name     string
		sessions bool
		pin      string // the v2 client's protocol revision; "" is the v1 SDK
	}{
		{"v1/sessions", true, ""},
		{"v1/default", false, ""},
		// The hotel as the README starts it (no flags) serves 2026-07-28.
		{"v2/2026-07-28/default", false, "2026-07-28"},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := startWith(t, hotel.Options{Sessions: c.sessions, Seed: 7}, nil)
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			args := []string{filepath.Join(dir, "ts-client.mjs")}
			if c.pin != "" {
				args = append(args, "--pin", c.pin)
			}
			args = append(args, h.app.HTTP.ResourceURL, h.tokenFor(t, "bob"), "list_bookings", `{"from":"2026-01-01","to":"2026-02-01","limit":200}`)
			cmd := exec.CommandContext(ctx, node, args...)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("ts client: %v\n%s", err, stderr.String())
			}
			var got struct {
				Server            map[string]any `json:"server"`
				ProtocolVersion   string         `json:"protocolVersion"`
				Tools             []string       `json:"tools"`
				IsError           bool           `json:"isError"`
				StructuredContent hotel.BookingsOut
				Text              []string `json:"text"`
			}
			if err := json.Unmarshal(out, &got); err != nil {
				t.Fatalf("ts client output %q: %v", out, err)
			}
			for _, tool := range []string{"list_bookings", "get_booking", "search_availability", "revenue_report"} {
				if !slices.Contains(got.Tools, tool) {
					t.Errorf("tools/list lacks %s: %v", tool, got.Tools)
				}
			}
			if got.ProtocolVersion != c.pin {
				t.Errorf("negotiated protocol %q, want %q", got.ProtocolVersion, c.pin)
			}
			if got.IsError || len(got.StructuredContent.Bookings) == 0 {
				t.Fatalf("call failed or empty: %s", out)
			}
			d := h.app.Data
			want := 0
			for _, b := range d.Bookings {
				if d.ChainOfHotel(d.HotelOfBooking(b.ID)) == "globex" && b.CheckIn >= "2026-01-01" && b.CheckIn < "2026-02-01" {
					want++
				}
			}
			if len(got.StructuredContent.Bookings) != want {
				t.Errorf("%d bookings, want %d", len(got.StructuredContent.Bookings), want)
			}
			for _, b := range got.StructuredContent.Bookings {
				if d.ChainOfHotel(b.HotelID) != "globex" {
					t.Fatalf("bob received booking %d of hotel %s", b.ID, b.HotelID)
				}
			}
		})
	}
}
