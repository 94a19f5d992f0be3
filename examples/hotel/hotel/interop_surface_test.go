package hotel_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tenantmcp/tenantmcp/claims/devtoken"
	"github.com/tenantmcp/tenantmcp/examples/hotel/hotel"
	"github.com/tenantmcp/tenantmcp/server"
)

type tsOp map[string]any

type tsResult struct {
	OK    json.RawMessage `json:"ok"`
	Error *struct {
		Code    *int64          `json:"code"`
		Message string          `json:"message"`
		Data    json.RawMessage `json:"data"`
	} `json:"error"`
}

// runTS runs interop/ts-surface.mjs (the official TypeScript SDK) with ops.
func runTS(t *testing.T, h *harness, token, elicit string, ops ...tsOp) ([]tsResult, []string) {
	t.Helper()
	dir := interopDir(t)
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skipf("node not on PATH: %v", err)
	}
	js, _ := json.Marshal(ops)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, filepath.Join(dir, "ts-surface.mjs"), h.app.HTTP.ResourceURL, token, elicit, string(js))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("ts client: %v\n%s", err, stderr.String())
	}
	var got struct {
		Results  []tsResult `json:"results"`
		Elicited []string   `json:"elicited"`
	}
	if err := json.Unmarshal(out, &got); err != nil || len(got.Results) != len(ops) {
		t.Fatalf("ts client output %q: %v", out, err)
	}
	return got.Results, got.Elicited
}

// TestTypeScriptSDKSurface: resources, prompts, completions, per-tool
// authorization and consent, through the official TypeScript SDK.
func TestTypeScriptSDKSurface(t *testing.T) {
	h := start(t, false)
	d := h.app.Data
	acmeB, globexB := bookingOfChain(d, "acme"), bookingOfChain(d, "globex")
	g := someGuest(t, d)
	res, _ := runTS(t, h, h.tokenFor(t, "bob"), "none",
		tsOp{"op": "listResourceTemplates"},
		tsOp{"op": "readResource", "uri": hotel.BookingURI(globexB)},
		tsOp{"op": "readResource", "uri": hotel.BookingURI(acmeB)},
		tsOp{"op": "readResource", "uri": hotel.BookingURI(999999999)},
		tsOp{"op": "listPrompts"},
		tsOp{"op": "complete", "ref": map[string]any{"type": "ref/prompt", "name": hotel.PromptGuestBriefing}, "argument": map[string]any{"name": "guest", "value": g.FullName[:2]}},
	)
	if res[0].Error != nil || !strings.Contains(string(res[0].OK), hotel.URIBooking) {
		t.Errorf("templates: %s %+v", res[0].OK, res[0].Error)
	}
	var own struct {
		Contents []struct{ Text string } `json:"contents"`
	}
	json.Unmarshal(res[1].OK, &own)
	var detail hotel.BookingDetail
	if len(own.Contents) != 1 || json.Unmarshal([]byte(own.Contents[0].Text), &detail) != nil || detail.Booking.ID != globexB {
		t.Fatalf("bob's own booking: %s %+v", res[1].OK, res[1].Error)
	}
	foreign, missing := res[2].Error, res[3].Error
	if foreign == nil || missing == nil || *foreign.Code != *missing.Code ||
		strings.ReplaceAll(foreign.Message, hotel.BookingURI(acmeB), "URI") != strings.ReplaceAll(missing.Message, hotel.BookingURI(999999999), "URI") {
		t.Errorf("foreign read %+v vs missing read %+v", foreign, missing)
	}
	var comp struct {
		Completion struct{ Values []string } `json:"completion"`
	}
	json.Unmarshal(res[5].OK, &comp)
	var want []string
	for _, x := range d.Guests {
		if d.ChainOfHotel(x.HotelID) == "globex" && strings.HasPrefix(x.FullName, g.FullName[:2]) && !slices.Contains(want, x.FullName) {
			want = append(want, x.FullName)
		}
	}
	slices.Sort(want)
	if !slices.Equal(comp.Completion.Values, want) {
		t.Errorf("bob's completions %v, want %v", comp.Completion.Values, want)
	}

	// The front desk: no manager tools listed, a call refused.
	res, _ = runTS(t, h, h.tokenFor(t, "carol"), "none",
		tsOp{"op": "listTools"},
		tsOp{"op": "callTool", "name": "revenue_report", "arguments": map[string]any{"from": "2026-01-01", "to": "2027-01-01"}},
	)
	for _, tool := range []string{"cancel_booking", "revenue_report"} {
		if strings.Contains(string(res[0].OK), `"`+tool+`"`) {
			t.Errorf("carol's tools/list names %s", tool)
		}
	}
	// A role no token can add is a JSON-RPC denial (the session goes on),
	// not an HTTP 403 a client would re-authorize for.
	if res[1].Error == nil || res[1].Error.Code == nil || *res[1].Error.Code != server.CodeDenied || !strings.Contains(res[1].Error.Message, "denied") {
		t.Errorf("carol's revenue_report: %s %+v", res[1].OK, res[1].Error)
	}

	// Consent: accept sends, decline and no capability deny.
	guest, booking := paidBooking(t, d)
	for i, c := range []struct {
		elicit string
		sent   bool
	}{{"accept", true}, {"decline", false}, {"none", false}} {
		tok, err := h.app.Issuer.Mint(devtoken.Token{Subject: "carol+ts" + string(rune('a'+i)), Groups: []string{"/tenants/acme/hotels/acme-paris"}, Roles: []string{"front_desk"}, TTL: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		before := len(h.app.Outbox.Messages())
		res, asked := runTS(t, h, tok, c.elicit,
			tsOp{"op": "callTool", "name": "get_booking", "arguments": map[string]any{"id": booking}},
			tsOp{"op": "callTool", "name": "send_confirmation_email", "arguments": map[string]any{"to": guest.Email, "body": "invoice"}},
		)
		sent := len(h.app.Outbox.Messages()) - before
		if (sent == 1) != c.sent || (res[1].Error == nil) != c.sent {
			t.Errorf("%s: sent %d, result %s %+v", c.elicit, sent, res[1].OK, res[1].Error)
		}
		if c.elicit != "none" && (len(asked) != 1 || !strings.Contains(asked[0], "send_confirmation_email")) {
			t.Errorf("%s: asked %q", c.elicit, asked)
		}
		if !c.sent && res[1].Error != nil && (res[1].Error.Code == nil || *res[1].Error.Code != server.CodeDenied) {
			t.Errorf("%s: error %+v", c.elicit, res[1].Error)
		}
	}
}
