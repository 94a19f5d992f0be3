package claims

import (
	"context"
	"time"
)

// Hooks for the external tests of the token cache.

// SetClock replaces the clock of v's exp/nbf/iat checks, cached or fresh.
func SetClock(v *Verifier, now func() time.Time) { v.now = now }

// CacheHits is how many Verify calls v answered from its token cache.
func CacheHits(v *Verifier) uint64 {
	if v.cache == nil {
		return 0
	}
	return v.cache.hits.Load()
}

// CacheLen is how many tokens v's cache holds.
func CacheLen(v *Verifier) int {
	if v.cache == nil {
		return 0
	}
	return v.cache.len()
}

// RefreshNow fetches v's JWKS once, synchronously, as the background
// refresh would.
func RefreshNow(ctx context.Context, v *Verifier) error {
	_, err := v.keys.fetch(ctx)
	return err
}
