package claims_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/tenantmcp/tenantmcp/claims"
)

// A key rotation that coincides with a JWKS blip: a token signed with the
// new key arrives while the endpoint fails (together with a flood of random
// kids), then the endpoint comes back publishing the new key. The failed
// fetch must not be remembered as "kid unknown": the new key verifies
// within one UnknownKIDInterval of the endpoint's recovery, with real
// signed tokens against a loopback JWKS server. The background refresh is
// an hour away, so only the unknown-kid path can recover in time.
func TestJWKSBlipDuringRotationRecovers(t *testing.T) {
	k := testKeys(t)
	srv := newJWKSServer(t, jwksOf(t, k.rsa))
	const interval = 400 * time.Millisecond
	v := remoteVerifier(t, srv, func(c *claims.Options) {
		c.RefreshInterval = time.Hour
		c.UnknownKIDInterval = interval
	})
	if err := v.WaitReady(context.Background()); err != nil {
		t.Fatal(err)
	}
	oldTok := sign(t, k.rsa, validClaims())
	newTok := sign(t, k.rsa2, validClaims())

	// The blip: the endpoint fails while the provider rotates.
	srv.down.Store(true)
	srv.set(jwksOf(t, k.rsa, k.rsa2))
	before := srv.hits.Load()
	blipStart := time.Now()
	if _, _, err := v.Verify(context.Background(), newTok); !errors.Is(err, claims.ErrUnknownKey) {
		t.Fatalf("new key during the blip: %v, want ErrUnknownKey", err)
	}
	var wg sync.WaitGroup
	for range 100 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := k.ed
			s.kid = randomKID(t)
			if _, _, err := v.Verify(context.Background(), sign(t, s, validClaims())); !errors.Is(err, claims.ErrUnknownKey) {
				t.Errorf("random kid during the blip: %v, want ErrUnknownKey", err)
			}
		}()
	}
	wg.Wait()
	verifyOK(t, v, oldTok, "old key during the blip")
	time.Sleep(interval / 2)
	blip := time.Since(blipStart)
	// Flood protection holds during the blip too: failed fetches back off.
	if n, allowed := srv.hits.Load()-before, int64(blip/(interval/2))+1; n > allowed {
		t.Errorf("%d JWKS fetches during a %s blip with 101 unknown kids, at most %d allowed", n, blip, allowed)
	}

	srv.down.Store(false)
	recovered := time.Now()
	eventually(t, 5*time.Second, "the new key to verify after the blip", func() bool {
		_, _, err := v.Verify(context.Background(), newTok)
		return err == nil
	})
	took := time.Since(recovered)
	t.Logf("new key verifies %s after the JWKS recovered (UnknownKIDInterval %s)", took, interval)
	if took > interval+100*time.Millisecond {
		t.Errorf("new key verified %s after the JWKS recovered, want within one UnknownKIDInterval (%s)", took, interval)
	}
	verifyOK(t, v, oldTok, "old key after the blip")
}

// Only a successful fetch that lacks a kid may remember it as unknown: the
// same kid, asked for again after the next allowed fetch time, is fetched
// for again when the previous fetch failed, and not when it succeeded.
func TestNegativeCacheOnlyAfterSuccessfulFetch(t *testing.T) {
	k := testKeys(t)
	srv := newJWKSServer(t, jwksOf(t, k.rsa))
	const interval = 200 * time.Millisecond
	v := remoteVerifier(t, srv, func(c *claims.Options) { c.UnknownKIDInterval = interval })
	if err := v.WaitReady(context.Background()); err != nil {
		t.Fatal(err)
	}
	unknown := k.rsaOther
	unknown.kid = "not-yet-published"
	tok := sign(t, unknown, validClaims())

	// fetches verifies tok, which must be refused, and returns how many
	// JWKS fetches that took.
	fetches := func(what string) int64 {
		t.Helper()
		n := srv.hits.Load()
		if _, _, err := v.Verify(context.Background(), tok); !errors.Is(err, claims.ErrUnknownKey) {
			t.Fatalf("%s: %v, want ErrUnknownKey", what, err)
		}
		return srv.hits.Load() - n
	}
	next := func() { time.Sleep(interval + 50*time.Millisecond) }

	srv.down.Store(true)
	if got := fetches("during the outage"); got != 1 {
		t.Fatalf("%d fetches for the first unknown kid, want 1", got)
	}
	next()
	if got := fetches("still during the outage"); got != 1 {
		t.Fatalf("the kid of a failed fetch was remembered: %d fetches on asking again, want 1", got)
	}

	// Now a fetch succeeds and lacks the kid: that one is remembered.
	srv.down.Store(false)
	next()
	if got := fetches("after a successful fetch without the kid"); got != 1 {
		t.Fatalf("%d fetches, want 1", got)
	}
	next()
	if got := fetches("negative-cached kid"); got != 0 {
		t.Errorf("a kid a successful fetch lacked was fetched for again: %d fetches", got)
	}
}

// A key the provider removes stops verifying within RefreshInterval of its
// removal, even when no token ever names an unknown kid.
func TestRetiredKeyStopsWithinRefreshInterval(t *testing.T) {
	k := testKeys(t)
	srv := newJWKSServer(t, jwksOf(t, k.rsa, k.rsa2))
	const refresh = 300 * time.Millisecond
	v := remoteVerifier(t, srv, func(c *claims.Options) { c.RefreshInterval = refresh })
	if err := v.WaitReady(context.Background()); err != nil {
		t.Fatal(err)
	}
	oldTok := sign(t, k.rsa, validClaims())
	verifyOK(t, v, oldTok, "old key before retirement")
	srv.set(jwksOf(t, k.rsa2))
	retired := time.Now()
	eventually(t, 5*time.Second, "the retired key to stop verifying", func() bool {
		_, _, err := v.Verify(context.Background(), oldTok)
		return errors.Is(err, claims.ErrUnknownKey)
	})
	took := time.Since(retired)
	t.Logf("retired key refused %s after it left the JWKS (RefreshInterval %s)", took, refresh)
	if took > refresh+150*time.Millisecond {
		t.Errorf("retired key verified for %s after it left the JWKS, want at most RefreshInterval (%s)", took, refresh)
	}
}

// A failed background refresh is retried with backoff, well before the
// next regular refresh, and the retries slow down while the outage lasts.
func TestFailedRefreshBacksOff(t *testing.T) {
	k := testKeys(t)
	srv := newJWKSServer(t, jwksOf(t, k.ec))
	srv.down.Store(true)
	remoteVerifier(t, srv, func(c *claims.Options) { c.RefreshInterval = time.Hour })
	time.Sleep(2500 * time.Millisecond)
	// Attempts at 0, then after [0.5,1] s, then after [1,2] s more: 2 or 3
	// in 2.5 s; a fixed 1 s retry would make 3, no backoff at all many.
	n := srv.hits.Load()
	t.Logf("%d fetches in 2.5 s of outage", n)
	if n < 2 || n > 3 {
		t.Errorf("%d fetches in 2.5 s of outage, want 2 or 3 (backoff from 1 s, doubling)", n)
	}
}

// An unknown-kid fetch that fails sends the background refresh into
// backoff: the JWKS is fetched again within about a second, without any
// further token and although RefreshInterval and UnknownKIDInterval are an
// hour, so the key published during the blip is already loaded when the
// next token names it.
func TestFailedUnknownKIDFetchSchedulesRetry(t *testing.T) {
	k := testKeys(t)
	srv := newJWKSServer(t, jwksOf(t, k.rsa))
	v := remoteVerifier(t, srv, func(c *claims.Options) {
		c.RefreshInterval = time.Hour
		c.UnknownKIDInterval = time.Hour
	})
	if err := v.WaitReady(context.Background()); err != nil {
		t.Fatal(err)
	}
	srv.down.Store(true)
	srv.set(jwksOf(t, k.rsa, k.rsa2))
	newTok := sign(t, k.rsa2, validClaims())
	if _, _, err := v.Verify(context.Background(), newTok); !errors.Is(err, claims.ErrUnknownKey) {
		t.Fatalf("during the blip: %v", err)
	}
	srv.down.Store(false)
	n := srv.hits.Load()
	eventually(t, 3*time.Second, "a background retry after the failed fetch", func() bool { return srv.hits.Load() > n })
	time.Sleep(200 * time.Millisecond) // let the retry install its keys
	n = srv.hits.Load()
	verifyOK(t, v, newTok, "new key after the background retry")
	if got := srv.hits.Load(); got != n {
		t.Errorf("the new key needed %d more fetches; the background retry should have loaded it", got-n)
	}
}
