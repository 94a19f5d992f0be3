package claims

import (
	"testing"
	"time"
)

// backoff doubles from base up to limit and draws each wait from the upper
// half of that value, so replicas that failed together spread out.
func TestBackoffDoublesWithJitter(t *testing.T) {
	const base, limit = time.Second, 10 * time.Second
	for n, want := range []time.Duration{0, 1, 2, 4, 8, 10, 10} {
		if n == 0 {
			continue
		}
		want *= time.Second
		seen := map[time.Duration]bool{}
		for range 200 {
			d := backoff(base, limit, n)
			if d <= want/2-1 || d > want {
				t.Fatalf("backoff(%d) = %s, want in (%s, %s]", n, d, want/2, want)
			}
			seen[d] = true
		}
		if len(seen) < 100 {
			t.Errorf("backoff(%d): only %d distinct waits in 200 draws; no jitter", n, len(seen))
		}
	}
}
