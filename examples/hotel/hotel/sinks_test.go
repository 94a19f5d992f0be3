package hotel_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tenantmcp/tenantmcp/examples/hotel/hotel"
	"github.com/tenantmcp/tenantmcp/flow"
)

// The server refuses to start on a flow policy that does not validate, or
// that names a tool the server does not have, saying where.
func TestFlowPolicyCheckedAtStart(t *testing.T) {
	dir := t.TempDir()
	for name, c := range map[string]struct{ policy, want string }{
		"bad level":    {"{\n  \"version\": 1,\n  \"tools\": {\"revenue_report\": \"restricted\"}\n}", "bad.json:3:"},
		"unknown tool": {"{\n  \"version\": 1,\n  \"tools\": {\"revenue_reports\": \"internal\"}\n}", `"revenue_reports" is not a registered tool`},
		"not a sink": {"{\"version\": 1, \"declassify\": [{\"reason\": \"r\", \"sink\": \"get_booking\", \"to\": \"$owner\", \"max_level\": \"secret\"}]}",
			`"get_booking" is not a registered sink`},
	} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(dir, "bad.json")
			if err := os.WriteFile(path, []byte(c.policy), 0o600); err != nil {
				t.Fatal(err)
			}
			app, err := hotel.New(context.Background(), hotel.Options{Addr: "127.0.0.1:0", FlowPolicy: path})
			if err == nil {
				app.Close()
				t.Fatal("started")
			}
			if !errors.Is(err, flow.ErrPolicy) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v, want ErrPolicy and %q", err, c.want)
			}
		})
	}
}

// The sinks record what they would send, in the canonical form the policy
// judged, and nothing when the policy denies.
func TestSinksRecordToOutbox(t *testing.T) {
	h := start(t, false)
	cs := h.connect(t, h.tokenFor(t, "bob"))
	if _, res := call[hotel.SentOut](t, cs, "post_webhook", map[string]any{"url": "https://Hooks.Partner.example./in", "body": "{}"}); res.IsError {
		t.Fatal(text(res))
	}
	call[hotel.RevenueOut](t, cs, "revenue_report", map[string]any{"from": "2026-01-01", "to": "2027-01-01"})
	_, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "post_webhook", Arguments: map[string]any{"url": "https://hooks.partner.example/in", "body": "{}"}})
	if err == nil || !strings.Contains(err.Error(), flow.RuleLevel) {
		t.Fatalf("internal data to an untrusted webhook: %v", err)
	}
	msgs := h.app.Outbox.Messages()
	if len(msgs) != 1 || msgs[0].To != "https://hooks.partner.example" || msgs[0].Subject != "bob" || msgs[0].Kind != flow.URL {
		t.Fatalf("outbox = %+v", msgs)
	}
}

// A sink's receipt echoes its destination ({"status":"queued","to":…}):
// that echo must not taint the sender, so a subject who has read nothing
// can send twice.
func TestSinkEchoDoesNotTaint(t *testing.T) {
	h := start(t, true)
	cs := h.connect(t, h.tokenFor(t, "bob"))
	for _, to := range []string{"x@evil.example", "y@evil.example"} {
		if _, res := call[hotel.SentOut](t, cs, "send_confirmation_email", map[string]any{"to": to, "body": "hello"}); res.IsError {
			t.Fatalf("send to %s: %s", to, text(res))
		}
	}
	if n := len(h.app.Outbox.Messages()); n != 2 {
		t.Fatalf("outbox has %d messages, want 2", n)
	}
}
