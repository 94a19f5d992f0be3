package claims_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tenantmcp/tenantmcp/claims"
)

// randomKID is a fresh kid no JWKS ever holds.
func randomKIDHex(t testing.TB) string {
	t.Helper()
	b := make([]byte, 12)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return "junk-" + hex.EncodeToString(b)
}

// A key rotation in the middle of a flood of tokens with random kids, with
// the default UnknownKIDInterval: the provider publishes a new key while
// every few milliseconds a token naming a never-published kid arrives (each
// a new kid, so the negative cache never helps). A token signed with the
// new key must verify within seconds, not after the flood's fetch budget
// frees up, and the flood must cost about one JWKS fetch per interval. The
// background refresh is an hour away, so only the unknown-kid path can pick
// the key up. Real keys, real signatures, a loopback JWKS server.
func TestRotationUnderRandomKIDFlood(t *testing.T) {
	k := testKeys(t)
	srv := newJWKSServer(t, jwksOf(t, k.rsa))
	v := remoteVerifier(t, srv, func(c *claims.Options) {
		c.RefreshInterval = time.Hour
		c.UnknownKIDInterval = 0 // the default
	})
	if err := v.WaitReady(context.Background()); err != nil {
		t.Fatal(err)
	}
	junk := make([]string, 3000)
	for i := range junk {
		s := k.ed
		s.kid = randomKIDHex(t)
		junk[i] = sign(t, s, validClaims())
	}
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	var wg sync.WaitGroup
	var flood, wrong atomic.Int64
	floodStart := time.Now()
	// Half the flood waits for the coalesced fetch (as an HTTP request
	// without deadline does), half gives up after 20 ms, so new kids keep
	// arriving all the time.
	const workers = 32
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			patience := 10 * time.Second
			if w%2 == 1 {
				patience = 20 * time.Millisecond
			}
			for i := w; ctx.Err() == nil; i += workers {
				vctx, cancel := context.WithTimeout(ctx, patience)
				_, _, err := v.Verify(vctx, junk[i%len(junk)])
				cancel()
				flood.Add(1)
				if err == nil || (!errors.Is(err, claims.ErrUnknownKey) && ctx.Err() == nil) {
					wrong.Add(1)
				}
				time.Sleep(2 * time.Millisecond)
			}
		}()
	}
	// Let the flood use up the fetch budget, then rotate.
	time.Sleep(300 * time.Millisecond)
	srv.set(jwksOf(t, k.rsa, k.rsa2))
	rotated := time.Now()
	newTok := sign(t, k.rsa2, validClaims())
	eventually(t, 8*time.Second, "the new key to verify during the flood", func() bool {
		_, _, err := v.Verify(context.Background(), newTok)
		return err == nil
	})
	took := time.Since(rotated)
	stop()
	wg.Wait()
	elapsed := time.Since(floodStart)
	hits := srv.hits.Load()
	t.Logf("new key verified %s after its publication during a flood of %d random-kid tokens; %d JWKS fetches in %s (default UnknownKIDInterval %s)",
		took, flood.Load(), hits, elapsed.Round(time.Millisecond), claims.DefaultUnknownKIDInterval)
	if n := wrong.Load(); n > 0 {
		t.Errorf("%d random-kid tokens were not refused with ErrUnknownKey", n)
	}
	// One initial fetch, then at most one per interval (plus the one the
	// flood's first token started).
	if allowed := int64(elapsed/claims.DefaultUnknownKIDInterval) + 3; hits > allowed {
		t.Errorf("%d JWKS fetches in %s of flood, want at most %d (one per UnknownKIDInterval)", hits, elapsed, allowed)
	}
}

// A second rotation soon after a first: the kid of the first new key was
// fetched for a moment ago, and another new key appears right after. It
// must not wait out a long interval either.
func TestSecondRotationWithinInterval(t *testing.T) {
	k := testKeys(t)
	srv := newJWKSServer(t, jwksOf(t, k.rsa))
	v := remoteVerifier(t, srv, func(c *claims.Options) {
		c.RefreshInterval = time.Hour
		c.UnknownKIDInterval = 0 // the default
	})
	if err := v.WaitReady(context.Background()); err != nil {
		t.Fatal(err)
	}
	srv.set(jwksOf(t, k.rsa, k.rsa2))
	verifyOK(t, v, sign(t, k.rsa2, validClaims()), "first rotation")
	ec := k.ec
	ec.kid = "ec-rotated"
	srv.set(jwksOf(t, k.rsa2, ec))
	start := time.Now()
	verifyOK(t, v, sign(t, ec, validClaims()), "second rotation right after the first")
	t.Logf("second new key verified after %s", time.Since(start))
}

// The default staleness of a retired key is at most a minute: the issue's
// bound, kept by the defaults rather than left to configuration.
func TestDefaultStalenessBound(t *testing.T) {
	if claims.DefaultRefreshInterval > time.Minute {
		t.Errorf("DefaultRefreshInterval = %s: a retired key keeps verifying that long; want at most 1m", claims.DefaultRefreshInterval)
	}
	if claims.DefaultUnknownKIDInterval > 5*time.Second {
		t.Errorf("DefaultUnknownKIDInterval = %s: a newly published key waits that long; want at most 5s", claims.DefaultUnknownKIDInterval)
	}
}

// cacheControlServer is a JWKS endpoint that sends a Cache-Control header.
func cacheControlServer(t *testing.T, cc string, doc []byte) (*httptest.Server, *atomic.Pointer[[]byte], *atomic.Int64) {
	t.Helper()
	var cur atomic.Pointer[[]byte]
	cur.Store(&doc)
	var hits atomic.Int64
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		w.Header().Set("Cache-Control", cc)
		w.Header().Set("Content-Type", "application/jwk-set+json")
		w.Write(*cur.Load())
	}))
	t.Cleanup(s.Close)
	return s, &cur, &hits
}

// A JWKS response's Cache-Control max-age sets the refresh: with the default
// RefreshInterval (a minute) and MinRefreshInterval (5 s), an endpoint that
// says max-age=5 has a retired key refused within about five seconds.
func TestRetiredKeyHonoursMaxAge(t *testing.T) {
	k := testKeys(t)
	s, cur, hits := cacheControlServer(t, "public, max-age=5", jwksOf(t, k.rsa, k.rsa2))
	v, err := claims.New(claims.Options{
		Issuer: testIssuer, Audience: []string{testAudience}, JWKSURL: s.URL, Mapping: defaultMapping(), Logger: quietLog,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { v.Close() })
	if err := v.WaitReady(context.Background()); err != nil {
		t.Fatal(err)
	}
	oldTok := sign(t, k.rsa, validClaims())
	verifyOK(t, v, oldTok, "old key before retirement")
	doc := jwksOf(t, k.rsa2)
	cur.Store(&doc)
	retired := time.Now()
	eventually(t, 9*time.Second, "the retired key to stop verifying (max-age=5)", func() bool {
		_, _, err := v.Verify(context.Background(), oldTok)
		return errors.Is(err, claims.ErrUnknownKey)
	})
	t.Logf("retired key refused %s after it left the JWKS (max-age=5, %d fetches)", time.Since(retired), hits.Load())
}

// A max-age longer than RefreshInterval is cut to it, and one shorter than
// MinRefreshInterval raised to it: the bounds hold whatever the endpoint
// says.
func TestMaxAgeBounded(t *testing.T) {
	k := testKeys(t)
	for _, c := range []struct {
		cc             string
		min, refresh   time.Duration
		window         time.Duration
		minHits, maxHi int64
	}{
		// max-age a day, RefreshInterval 300ms: fetches every ~300ms.
		{"max-age=86400", 100 * time.Millisecond, 300 * time.Millisecond, 1600 * time.Millisecond, 4, 8},
		// max-age 0 / no-cache, MinRefreshInterval 500ms: no faster than that.
		{"no-cache", 500 * time.Millisecond, time.Hour, 1600 * time.Millisecond, 2, 5},
		{"max-age=0", 500 * time.Millisecond, time.Hour, 1600 * time.Millisecond, 2, 5},
	} {
		t.Run(c.cc, func(t *testing.T) {
			s, _, hits := cacheControlServer(t, c.cc, jwksOf(t, k.rsa))
			v, err := claims.New(claims.Options{
				Issuer: testIssuer, Audience: []string{testAudience}, JWKSURL: s.URL, Mapping: defaultMapping(), Logger: quietLog,
				RefreshInterval: c.refresh, MinRefreshInterval: c.min,
			})
			if err != nil {
				t.Fatal(err)
			}
			defer v.Close()
			time.Sleep(c.window)
			n := hits.Load()
			t.Logf("%q: %d fetches in %s (min %s, max %s)", c.cc, n, c.window, c.min, c.refresh)
			if n < c.minHits || n > c.maxHi {
				t.Errorf("%q: %d fetches in %s, want %d..%d", c.cc, n, c.window, c.minHits, c.maxHi)
			}
		})
	}
}

// Tokens live at most MaxTokenLifetime, 24 hours by default: by exp-iat, and
// by exp-now for a token without iat (or with a backdated one).
func TestTokenLifetimeBoundedByDefault(t *testing.T) {
	k := testKeys(t)
	v := staticVerifier(t, nil)
	now := time.Now()
	for _, c := range []struct {
		name     string
		iat, exp time.Time
		ok       bool
	}{
		{"one hour", now, now.Add(time.Hour), true},
		{"23 hours", now, now.Add(23 * time.Hour), true},
		{"48 hours by exp-iat", now, now.Add(48 * time.Hour), false},
		{"a year", now, now.Add(365 * 24 * time.Hour), false},
		{"no iat, exp in 48 hours", time.Time{}, now.Add(48 * time.Hour), false},
		{"no iat, exp in an hour", time.Time{}, now.Add(time.Hour), true},
		{"iat 30h ago, exp in an hour", now.Add(-30 * time.Hour), now.Add(time.Hour), false},
	} {
		t.Run(c.name, func(t *testing.T) {
			cl := validClaims()
			cl["exp"] = c.exp.Unix()
			if c.iat.IsZero() {
				delete(cl, "iat")
			} else {
				cl["iat"] = c.iat.Unix()
			}
			_, _, err := v.Verify(context.Background(), sign(t, k.rsa, cl))
			switch {
			case c.ok && err != nil:
				t.Fatalf("refused: %v", err)
			case !c.ok && err == nil:
				t.Fatal("a token living longer than 24h was accepted with the default options")
			case !c.ok && !errors.Is(err, claims.ErrLifetime):
				t.Fatalf("got %v, want ErrLifetime", err)
			}
		})
	}
	// Configurable: a longer bound accepts it, a negative one means none.
	long := validClaims()
	long["exp"] = now.Add(48 * time.Hour).Unix()
	tok := sign(t, k.rsa, long)
	for _, max := range []time.Duration{72 * time.Hour, -1} {
		v := staticVerifier(t, func(o *claims.Options) { o.MaxTokenLifetime = max })
		if _, _, err := v.Verify(context.Background(), tok); err != nil {
			t.Errorf("MaxTokenLifetime %s: 48h token refused: %v", max, err)
		}
	}
	short := staticVerifier(t, func(o *claims.Options) { o.MaxTokenLifetime = 10 * time.Minute })
	if _, _, err := short.Verify(context.Background(), sign(t, k.rsa, claimsWithTTL(time.Hour))); !errors.Is(err, claims.ErrLifetime) {
		t.Errorf("MaxTokenLifetime 10m: 1h token: %v, want ErrLifetime", err)
	}
}

func claimsWithTTL(d time.Duration) map[string]any {
	c := validClaims()
	c["exp"] = time.Now().Add(d).Unix()
	return c
}

// The token cache keeps the lifetime bound exactly: a token verified and
// cached, then presented at a clock that went back so far that exp-now
// exceeds MaxTokenLifetime, is refused with ErrLifetime as a fresh
// verification would, not served from the cache.
func TestCachedTokenLifetimeRechecked(t *testing.T) {
	k := testKeys(t)
	v := staticVerifier(t, nil)
	now := time.Now()
	var shift atomic.Int64
	claims.SetClock(v, func() time.Time { return now.Add(time.Duration(shift.Load())) })
	c := validClaims()
	delete(c, "iat")
	c["exp"] = now.Add(20 * time.Hour).Unix()
	tok := sign(t, k.rsa, c)
	verifyOK(t, v, tok, "20h token")
	verifyOK(t, v, tok, "20h token, cached")
	if claims.CacheHits(v) == 0 {
		t.Fatal("the second verification was not a cache hit")
	}
	shift.Store(int64(-10 * time.Hour))
	if _, _, err := v.Verify(context.Background(), tok); !errors.Is(err, claims.ErrLifetime) {
		t.Fatalf("clock 10h back (exp-now 30h): %v, want ErrLifetime", err)
	}
}
