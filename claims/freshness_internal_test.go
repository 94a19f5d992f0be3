package claims

import (
	"net/http"
	"testing"
	"time"
)

// freshness reads Cache-Control the way RFC 9111 means it, and
// refreshAfter keeps the result within [MinRefreshInterval,
// RefreshInterval] whatever the endpoint says.
func TestFreshnessAndRefreshBounds(t *testing.T) {
	k := &keySource{minRefresh: 5 * time.Second, refreshInterval: time.Minute}
	for _, c := range []struct {
		cc, age string
		fresh   time.Duration
		wait    time.Duration
	}{
		{"", "", -1, time.Minute},
		{"public, max-age=30", "", 30 * time.Second, 30 * time.Second},
		{"max-age=30", "25", 5 * time.Second, 5 * time.Second},
		{"max-age=30", "100", 0, 5 * time.Second},
		{"max-age=86400, must-revalidate", "", 86400 * time.Second, time.Minute},
		{"no-cache", "", 0, 5 * time.Second},
		{"no-store, max-age=600", "", 0, 5 * time.Second},
		{"max-age=2", "", 2 * time.Second, 5 * time.Second},
		{"max-age=bogus", "", -1, time.Minute},
		{"max-age=-5", "", -1, time.Minute},
		{`max-age="40"`, "", 40 * time.Second, 40 * time.Second},
		{"max-age=99999999999999999", "", time.Duration(1<<31) * time.Second, time.Minute},
	} {
		h := http.Header{}
		if c.cc != "" {
			h.Set("Cache-Control", c.cc)
		}
		if c.age != "" {
			h.Set("Age", c.age)
		}
		f := freshness(h)
		if f != c.fresh {
			t.Errorf("Cache-Control %q Age %q: freshness %s, want %s", c.cc, c.age, f, c.fresh)
		}
		if w := k.refreshAfter(f); w != c.wait {
			t.Errorf("Cache-Control %q Age %q: next refresh after %s, want %s", c.cc, c.age, w, c.wait)
		}
	}
}
