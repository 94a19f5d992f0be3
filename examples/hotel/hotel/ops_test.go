package hotel_test

import (
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/tenantmcp/tenantmcp/examples/hotel/hotel"
)

func get(t *testing.T, u string) (int, string) {
	t.Helper()
	resp, err := http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// The hotel server answers the probes, and with -metrics serves the call
// counts at /metrics without naming the caller or the chain.
func TestProbesAndMetrics(t *testing.T) {
	h := startWith(t, hotel.Options{Seed: 7, Metrics: true}, nil)
	u, err := url.Parse(h.app.HTTP.ResourceURL)
	if err != nil {
		t.Fatal(err)
	}
	base := u.Scheme + "://" + u.Host
	if code, body := get(t, base+"/healthz"); code != 200 {
		t.Fatalf("/healthz: %d %s", code, body)
	}
	if code, body := get(t, base+"/readyz"); code != 200 || !strings.Contains(body, `"ready":true`) {
		t.Fatalf("/readyz: %d %s", code, body)
	}
	cs := h.connect(t, h.tokenFor(t, "alice"))
	for range 2 {
		if _, res := call[hotel.BookingsOut](t, cs, "list_bookings", map[string]any{"from": "2025-01-01", "to": "2028-01-01"}); res.IsError {
			h.failf(t, "list_bookings: %s", text(res))
		}
	}
	code, body := get(t, base+"/metrics")
	if code != 200 || !strings.Contains(body, `tenantmcp_tool_calls_total{outcome="ok",tool="list_bookings"} 2`) {
		t.Fatalf("/metrics: %d\n%s", code, body)
	}
	for _, secret := range []string{"alice", "acme"} {
		if strings.Contains(body, secret) {
			t.Errorf("/metrics names %q", secret)
		}
	}

	// Metrics are opt-in.
	off := startWith(t, hotel.Options{Seed: 7}, nil)
	u, _ = url.Parse(off.app.HTTP.ResourceURL)
	if code, _ := get(t, u.Scheme+"://"+u.Host+"/metrics"); code != http.StatusNotFound {
		t.Errorf("/metrics without -metrics: %d, want 404", code)
	}
}
