package claims_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/tenantmcp/tenantmcp/claims"
	"github.com/tenantmcp/tenantmcp/scope"
)

// uncached turns the token cache off, for the oracle verifier every cached
// result is compared with.
func uncached(c *claims.Options) { c.TokenCacheSize = -1 }

type verified struct {
	sc  scope.Scope
	c   *claims.Claims
	err error
}

func verifyAt(v *claims.Verifier, token string) verified {
	sc, c, err := v.Verify(context.Background(), token)
	return verified{sc, c, err}
}

// sameOutcome fails unless got is exactly what the oracle's fresh
// verification gave: the same error (text and sentinels), or the same
// scope and Claims.
func sameOutcome(t *testing.T, what string, got, want verified) {
	t.Helper()
	if (got.err == nil) != (want.err == nil) {
		t.Fatalf("%s: cached Verify err = %v, fresh err = %v", what, got.err, want.err)
	}
	if want.err != nil {
		if got.err.Error() != want.err.Error() {
			t.Fatalf("%s: cached Verify err %q, fresh %q", what, got.err, want.err)
		}
		for _, s := range []error{claims.ErrExpired, claims.ErrNotYetValid, claims.ErrUnknownKey, claims.ErrBadSignature, claims.ErrMalformed} {
			if errors.Is(got.err, s) != errors.Is(want.err, s) {
				t.Fatalf("%s: errors.Is(%v) differs: cached %v, fresh %v", what, s, got.err, want.err)
			}
		}
		if !got.sc.IsZero() || got.c != nil {
			t.Fatalf("%s: a refusal came with a scope or claims", what)
		}
		return
	}
	if !got.sc.Equal(want.sc) {
		t.Fatalf("%s: cached scope %v, fresh %v", what, got.sc, want.sc)
	}
	if !reflect.DeepEqual(got.c, want.c) {
		t.Fatalf("%s: cached claims %+v, fresh %+v", what, got.c, want.c)
	}
}

// Three tenants with interleaved grants: a hit must give each token its own
// scope and claims, equal to a fresh verification, and no edit a caller
// makes to the Claims it got may leak into the next hit.
func TestTokenCacheHitEqualsFresh(t *testing.T) {
	k := testKeys(t)
	v := staticVerifier(t, nil)
	oracle := staticVerifier(t, uncached)
	toks := []string{
		sign(t, k.ed, claimsFor("alice", "/tenants/acme", "/tenants/globex/hotels/h-17")),
		sign(t, k.rsa, claimsFor("bob", "/tenants/globex")),
		sign(t, k.ec, claimsFor("carol", "/tenants/initech/hotels/h-2", "/tenants/acme/hotels/h-1")),
	}
	for round := range 3 {
		for i, tok := range toks {
			want := verifyAt(oracle, tok)
			if want.err != nil {
				t.Fatalf("token %d: %v", i, want.err)
			}
			before := claims.CacheHits(v)
			got := verifyAt(v, tok)
			sameOutcome(t, fmt.Sprintf("round %d token %d", round, i), got, want)
			if hit := claims.CacheHits(v) - before; hit != min(uint64(round), 1) {
				t.Fatalf("round %d token %d: %d cache hits, want %d", round, i, hit, min(round, 1))
			}
			// The caller owns what it got: scribble over all of it.
			got.c.Subject = "mallory"
			got.c.Groups[0] = "/tenants/evil"
			got.c.Audience[0] = "elsewhere"
			got.c.Matches[0].Grant.ID = "evil"
			got.c.Matches[0].Grant.Roles = append(got.c.Matches[0].Grant.Roles, "admin")
			if len(got.c.Matches[0].Within) > 0 {
				got.c.Matches[0].Within[0].ID = "evil"
			}
		}
	}
	if n := claims.CacheLen(v); n != len(toks) {
		t.Fatalf("cache holds %d tokens, want %d", n, len(toks))
	}
}

func TestTokenCacheDisabled(t *testing.T) {
	k := testKeys(t)
	v := staticVerifier(t, uncached)
	tok := sign(t, k.ed, validClaims())
	for range 3 {
		verifyOK(t, v, tok, "uncached")
	}
	if h, n := claims.CacheHits(v), claims.CacheLen(v); h != 0 || n != 0 {
		t.Fatalf("TokenCacheSize -1: %d hits, %d entries; want none", h, n)
	}
}

// fakeClock is a settable clock shared by a cached verifier and its oracle.
type fakeClock struct{ ns atomic.Int64 }

func (f *fakeClock) now() time.Time             { return time.Unix(0, f.ns.Load()) }
func (f *fakeClock) set(t time.Time)            { f.ns.Store(t.UnixNano()) }
func (f *fakeClock) install(v *claims.Verifier) { claims.SetClock(v, f.now) }

// Expiry, nbf and iat are checked on every hit, with the Verifier's clock
// and leeway, at the same instants as a fresh verification: one second
// before exp+leeway both accept, at exp+leeway both refuse with
// ErrExpired, and a clock set back before nbf-leeway or iat-leeway makes
// both refuse with ErrNotYetValid.
func TestTokenCacheRechecksTime(t *testing.T) {
	k := testKeys(t)
	const leeway = 30 * time.Second
	v := staticVerifier(t, func(c *claims.Options) { c.Leeway = leeway })
	oracle := staticVerifier(t, func(c *claims.Options) { c.Leeway = leeway; c.TokenCacheSize = -1 })
	var clk fakeClock
	clk.install(v)
	clk.install(oracle)

	t0 := time.Now().Truncate(time.Second)
	exp := t0.Add(5 * time.Minute)
	nbf := t0.Add(time.Minute)
	c := claimsFor("alice", "/tenants/acme")
	c["iat"], c["exp"] = t0.Unix(), exp.Unix()
	plain := sign(t, k.ed, c)
	c = claimsFor("bob", "/tenants/globex")
	c["iat"], c["nbf"], c["exp"] = t0.Unix(), nbf.Unix(), exp.Unix()
	withNBF := sign(t, k.ed, c)

	steps := []struct {
		at      time.Time
		tok     string
		wantErr error // nil: accepted
	}{
		{t0, plain, nil},
		{t0.Add(time.Second), plain, nil}, // a hit
		{exp.Add(leeway - time.Second), plain, nil},
		{exp.Add(leeway), plain, claims.ErrExpired},
		{t0, plain, nil}, // the clock goes back: verified afresh, cached again
		{exp.Add(leeway - time.Nanosecond), plain, nil},
		{exp.Add(time.Hour), plain, claims.ErrExpired},
		{t0, plain, nil},
		{t0.Add(-leeway - time.Second), plain, claims.ErrNotYetValid}, // before iat-leeway
		{t0, withNBF, claims.ErrNotYetValid},                          // before nbf-leeway
		{nbf, withNBF, nil},
		{nbf.Add(-leeway), withNBF, nil}, // a hit, exactly at nbf-leeway
		{nbf.Add(-leeway - time.Nanosecond), withNBF, claims.ErrNotYetValid},
		{nbf, withNBF, nil},
		{exp.Add(leeway), withNBF, claims.ErrExpired},
	}
	for i, s := range steps {
		clk.set(s.at)
		want := verifyAt(oracle, s.tok)
		if s.wantErr == nil && want.err != nil || s.wantErr != nil && !errors.Is(want.err, s.wantErr) {
			t.Fatalf("step %d: the oracle says %v, the test expects %v", i, want.err, s.wantErr)
		}
		sameOutcome(t, fmt.Sprintf("step %d at t0%+v", i, s.at.Sub(t0)), verifyAt(v, s.tok), want)
	}
	if claims.CacheHits(v) < 4 {
		t.Fatalf("only %d cache hits: the accepting steps did not exercise the cache", claims.CacheHits(v))
	}
}

// A key that leaves the JWKS, or a kid republished with other key material,
// stops verifying cached tokens the moment the new set is installed, just as
// it stops verifying fresh ones; a refresh returning the same keys keeps the
// cache.
func TestTokenCacheKeyRetiredOrReplaced(t *testing.T) {
	k := testKeys(t)
	srv := newJWKSServer(t, jwksOf(t, k.rsa, k.rsa2))
	v := remoteVerifier(t, srv, nil)
	oracle := remoteVerifier(t, srv, uncached)
	ctx := context.Background()
	for _, x := range []*claims.Verifier{v, oracle} {
		if err := x.WaitReady(ctx); err != nil {
			t.Fatal(err)
		}
	}
	refresh := func() {
		t.Helper()
		for _, x := range []*claims.Verifier{v, oracle} {
			if err := claims.RefreshNow(ctx, x); err != nil {
				t.Fatal(err)
			}
		}
	}
	oldTok := sign(t, k.rsa, validClaims())
	newTok := sign(t, k.rsa2, claimsFor("bob", "/tenants/globex"))
	for range 2 {
		verifyOK(t, v, oldTok, "old key, published")
		verifyOK(t, v, newTok, "new key, published")
	}
	hits := claims.CacheHits(v)
	if hits != 2 {
		t.Fatalf("%d cache hits, want 2", hits)
	}

	// The same keys again: nothing changed, the entries stay.
	refresh()
	verifyOK(t, v, oldTok, "old key after an unchanged refresh")
	if claims.CacheHits(v) != hits+1 {
		t.Fatal("an unchanged refresh emptied the cache")
	}

	// rsa-1 is retired.
	srv.set(jwksOf(t, k.rsa2))
	refresh()
	if n := claims.CacheLen(v); n != 0 {
		t.Fatalf("the key set changed and %d entries survived", n)
	}
	sameOutcome(t, "retired key", verifyAt(v, oldTok), verifyAt(oracle, oldTok))
	if _, _, err := v.Verify(ctx, oldTok); !errors.Is(err, claims.ErrUnknownKey) {
		t.Fatalf("retired key: %v, want ErrUnknownKey", err)
	}
	sameOutcome(t, "remaining key", verifyAt(v, newTok), verifyAt(oracle, newTok))

	// rsa-1 comes back, cached, then its kid is republished with another
	// key (rsa2's material under rsa-1's kid): the old signature no longer
	// verifies, cached or not.
	srv.set(jwksOf(t, k.rsa, k.rsa2))
	refresh()
	verifyOK(t, v, oldTok, "old key republished")
	verifyOK(t, v, oldTok, "old key republished, cached")
	srv.set(jwksOf(t, signer{kid: k.rsa.kid, alg: k.rsa.alg, priv: k.rsa2.priv}, k.rsa2))
	refresh()
	got, want := verifyAt(v, oldTok), verifyAt(oracle, oldTok)
	sameOutcome(t, "kid with new material", got, want)
	if !errors.Is(got.err, claims.ErrBadSignature) {
		t.Fatalf("kid with new material: %v, want ErrBadSignature", got.err)
	}
}

// The cache is keyed by the whole token: a token differing in any one byte
// (header, payload or signature) is never a hit and is refused exactly as
// a fresh verification refuses it.
func TestTokenCacheOneByteDiffers(t *testing.T) {
	k := testKeys(t)
	v := staticVerifier(t, nil)
	oracle := staticVerifier(t, uncached)
	for _, s := range []signer{k.ed, k.rsa, k.ec} {
		tok := sign(t, s, claimsFor("alice", "/tenants/acme"))
		verifyOK(t, v, tok, "original")
		verifyOK(t, v, tok, "original, cached")
		for i := 0; i < len(tok); i += max(1, len(tok)/40) {
			if tok[i] == '.' {
				continue
			}
			b := []byte(tok)
			if b[i] == 'A' {
				b[i] = 'B'
			} else {
				b[i] = 'A'
			}
			tampered := string(b)
			before := claims.CacheHits(v)
			got := verifyAt(v, tampered)
			if got.err == nil {
				t.Fatalf("%s: token with byte %d changed verified", s.alg, i)
			}
			sameOutcome(t, fmt.Sprintf("%s byte %d", s.alg, i), got, verifyAt(oracle, tampered))
			if claims.CacheHits(v) != before {
				t.Fatalf("%s: token with byte %d changed was a cache hit", s.alg, i)
			}
		}
		before := claims.CacheHits(v)
		verifyOK(t, v, tok, "original after the forgeries")
		if claims.CacheHits(v) != before+1 {
			t.Fatalf("%s: the original is no longer cached", s.alg)
		}
	}
}

// The cache never holds more than TokenCacheSize tokens and evicts the
// least recently used.
func TestTokenCacheBoundedLRU(t *testing.T) {
	k := testKeys(t)
	v := staticVerifier(t, func(c *claims.Options) { c.TokenCacheSize = 2 })
	a := sign(t, k.ed, claimsFor("alice", "/tenants/acme"))
	b := sign(t, k.ed, claimsFor("bob", "/tenants/globex"))
	c := sign(t, k.ed, claimsFor("carol", "/tenants/initech"))
	hitsOf := func(tok string) uint64 {
		before := claims.CacheHits(v)
		verifyOK(t, v, tok, "token")
		return claims.CacheHits(v) - before
	}
	for _, step := range []struct {
		tok  string
		hits uint64
	}{{a, 0}, {b, 0}, {a, 1}, {c, 0}, {a, 1}, {c, 1}, {b, 0}, {a, 0}} {
		if got := hitsOf(step.tok); got != step.hits {
			t.Fatalf("hits %d, want %d", got, step.hits)
		}
		if n := claims.CacheLen(v); n > 2 {
			t.Fatalf("cache holds %d tokens, bound 2", n)
		}
	}
}

// Concurrent callers over more tokens than the cache holds, so that entries
// are evicted while others are being hit, each get their own token's scope.
// Run with -race.
func TestTokenCacheConcurrent(t *testing.T) {
	k := testKeys(t)
	v := staticVerifier(t, func(c *claims.Options) { c.TokenCacheSize = 3 })
	oracle := staticVerifier(t, uncached)
	tenants := []string{"acme", "globex", "initech"}
	var toks []string
	var want []verified
	for i := range 6 {
		c := claimsFor(fmt.Sprintf("user-%d", i), "/tenants/"+tenants[i%3])
		c["jti"] = fmt.Sprint(i)
		tok := sign(t, []signer{k.ed, k.ec}[i%2], c)
		w := verifyAt(oracle, tok)
		if w.err != nil {
			t.Fatal(w.err)
		}
		toks, want = append(toks, tok), append(want, w)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := range 8 {
		wg.Go(func() {
			for n := range 300 {
				i := (g + n*(g+1)) % len(toks)
				sc, c, err := v.Verify(context.Background(), toks[i])
				switch {
				case err != nil:
					errs <- err
					return
				case !sc.Equal(want[i].sc) || !reflect.DeepEqual(c, want[i].c):
					errs <- fmt.Errorf("token %d gave %v / %s, want %v / %s", i, sc, c.Subject, want[i].sc, want[i].c.Subject)
					return
				}
				c.Groups[0] = "scribbled" // a caller's own copy
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if claims.CacheHits(v) == 0 {
		t.Fatal("no cache hits: the test did not exercise the cache")
	}
	if n := claims.CacheLen(v); n > 3 {
		t.Fatalf("cache holds %d tokens, bound 3", n)
	}
}

// HMAC tokens are cached too; the HMAC key never changes, so only time and
// the token bytes matter.
func TestTokenCacheHMAC(t *testing.T) {
	secret := []byte("0123456789abcdef0123456789abcdef")
	cfg := func(size int) func(*claims.Options) {
		return func(c *claims.Options) {
			c.JWKS, c.HMACKey, c.Algorithms, c.TokenCacheSize = nil, secret, []string{"HS256"}, size
		}
	}
	v, oracle := staticVerifier(t, cfg(0)), staticVerifier(t, cfg(-1))
	tok, err := jwt.NewWithClaims(jwt.SigningMethodHS256, validClaims()).SignedString(secret)
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		sameOutcome(t, "HS256", verifyAt(v, tok), verifyAt(oracle, tok))
	}
	if claims.CacheHits(v) != 1 {
		t.Fatalf("%d hits, want 1", claims.CacheHits(v))
	}
	forged, err := jwt.NewWithClaims(jwt.SigningMethodHS256, validClaims()).SignedString([]byte("another secret, 32 bytes long!!!"))
	if err != nil {
		t.Fatal(err)
	}
	got := verifyAt(v, forged)
	sameOutcome(t, "HS256 forged", got, verifyAt(oracle, forged))
	if !errors.Is(got.err, claims.ErrBadSignature) {
		t.Fatalf("forged HS256: %v, want ErrBadSignature", got.err)
	}
}
