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

func TestTypeScriptSDKClient(t *testing.T) {
	dir := interopDir(t)
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skipf("node not on PATH: %v", err)
	}
	for _, stateless := range []bool{false, true} {
		t.Run(map[bool]string{false: "stateful", true: "stateless"}[stateless], func(t *testing.T) {
			h := start(t, stateless)
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			args := `{"from":"2026-01-01","to":"2026-02-01","limit":200}`
			cmd := exec.CommandContext(ctx, node, filepath.Join(dir, "ts-client.mjs"), h.app.HTTP.ResourceURL, h.tokenFor(t, "bob"), "list_bookings", args)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("ts client: %v\n%s", err, stderr.String())
			}
			var got struct {
				Server            map[string]any `json:"server"`
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
