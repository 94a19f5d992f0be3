package claims_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"github.com/tenantmcp/tenantmcp/internal/logbuf"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"

	"github.com/tenantmcp/tenantmcp/claims"
)

func verifyOK(t *testing.T, v *claims.Verifier, token, what string) {
	t.Helper()
	if _, _, err := v.Verify(context.Background(), token); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

func TestRemoteJWKSVerifies(t *testing.T) {
	k := testKeys(t)
	srv := newJWKSServer(t, jwksOf(t, k.rsa, k.ec, k.ed))
	v := remoteVerifier(t, srv, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := v.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	for _, s := range []signer{k.rsa, k.ec, k.ed} {
		verifyOK(t, v, sign(t, s, validClaims()), s.alg)
	}
	if got := srv.hits.Load(); got != 1 {
		t.Errorf("%d JWKS requests for cached keys, want 1", got)
	}
}

func TestNotReadyUntilKeysLoad(t *testing.T) {
	k := testKeys(t)
	srv := newJWKSServer(t, jwksOf(t, k.rsa))
	srv.down.Store(true)
	v := remoteVerifier(t, srv, func(c *claims.Options) { c.RefreshInterval = 50 * time.Millisecond })
	token := sign(t, k.rsa, validClaims())

	eventually(t, 5*time.Second, "a failed first fetch", func() bool { return srv.hits.Load() >= 1 })
	if v.Ready() {
		t.Fatal("Ready with no keys loaded")
	}
	_, _, err := v.Verify(context.Background(), token)
	if !errors.Is(err, claims.ErrNotReady) {
		t.Fatalf("Verify before keys load: %v, want ErrNotReady", err)
	}
	if errors.Is(err, auth.ErrInvalidToken) {
		t.Error("ErrNotReady blames the token")
	}
	short, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if err := v.WaitReady(short); !errors.Is(err, claims.ErrNotReady) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("WaitReady timing out: %v", err)
	}

	srv.down.Store(false)
	ctx, cancel2 := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel2()
	if err := v.WaitReady(ctx); err != nil {
		t.Fatalf("WaitReady after the JWKS came up: %v", err)
	}
	verifyOK(t, v, token, "after keys loaded")
}

func TestKeyRotation(t *testing.T) {
	k := testKeys(t)
	srv := newJWKSServer(t, jwksOf(t, k.rsa))
	v := remoteVerifier(t, srv, func(c *claims.Options) {
		c.RefreshInterval = 100 * time.Millisecond
		c.UnknownKIDInterval = 50 * time.Millisecond
	})
	if err := v.WaitReady(context.Background()); err != nil {
		t.Fatal(err)
	}
	oldTok := sign(t, k.rsa, validClaims())
	newTok := sign(t, k.rsa2, validClaims())
	verifyOK(t, v, oldTok, "old key before rotation")
	if _, _, err := v.Verify(context.Background(), newTok); !errors.Is(err, claims.ErrUnknownKey) {
		t.Fatalf("new key before it is published: %v, want ErrUnknownKey", err)
	}

	// The provider publishes the new key next to the old one.
	srv.set(jwksOf(t, k.rsa, k.rsa2))
	eventually(t, 5*time.Second, "the new key to verify", func() bool {
		_, _, err := v.Verify(context.Background(), newTok)
		return err == nil
	})
	verifyOK(t, v, oldTok, "old key during the overlap")

	// Then it retires the old key.
	srv.set(jwksOf(t, k.rsa2))
	eventually(t, 5*time.Second, "the old key to stop verifying", func() bool {
		_, _, err := v.Verify(context.Background(), oldTok)
		return errors.Is(err, claims.ErrUnknownKey)
	})
	verifyOK(t, v, newTok, "new key after rotation")
}

func TestJWKSOutageKeepsCachedKeys(t *testing.T) {
	k := testKeys(t)
	srv := newJWKSServer(t, jwksOf(t, k.ec))
	v := remoteVerifier(t, srv, func(c *claims.Options) { c.RefreshInterval = 20 * time.Millisecond })
	if err := v.WaitReady(context.Background()); err != nil {
		t.Fatal(err)
	}
	token := sign(t, k.ec, validClaims())
	verifyOK(t, v, token, "before the outage")

	srv.down.Store(true)
	before := srv.hits.Load()
	eventually(t, 5*time.Second, "three failed refreshes", func() bool { return srv.hits.Load() >= before+3 })
	verifyOK(t, v, token, "during the outage")
	if !v.Ready() {
		t.Error("not Ready during an outage with cached keys")
	}

	// A JWKS without usable keys counts as an outage too, not as revocation.
	srv.down.Store(false)
	srv.set([]byte(`{"keys":[]}`))
	before = srv.hits.Load()
	eventually(t, 5*time.Second, "two empty refreshes", func() bool { return srv.hits.Load() >= before+2 })
	verifyOK(t, v, token, "after an empty JWKS")
}

func randomKID(t *testing.T) string {
	b := make([]byte, 12)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// A flood of tokens with random kids costs at most one JWKS fetch per
// UnknownKIDInterval, counted at the JWKS server.
func TestKIDFloodIsRateLimited(t *testing.T) {
	k := testKeys(t)
	srv := newJWKSServer(t, jwksOf(t, k.ed))
	const interval = 400 * time.Millisecond
	v := remoteVerifier(t, srv, func(c *claims.Options) { c.UnknownKIDInterval = interval })
	if err := v.WaitReady(context.Background()); err != nil {
		t.Fatal(err)
	}
	flood := func() []string {
		toks := make([]string, 100)
		for i := range toks {
			s := k.ed
			s.kid = randomKID(t)
			toks[i] = sign(t, s, validClaims())
		}
		return toks
	}
	run := func(toks []string) time.Duration {
		start := time.Now()
		var wg sync.WaitGroup
		for _, tok := range toks {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if _, _, err := v.Verify(context.Background(), tok); !errors.Is(err, claims.ErrUnknownKey) {
					t.Errorf("random kid: %v, want ErrUnknownKey", err)
				}
			}()
		}
		wg.Wait()
		return time.Since(start)
	}
	for round := range 2 {
		toks := flood()
		before := srv.hits.Load()
		took := run(toks)
		refreshes := srv.hits.Load() - before
		allowed := int64(took/interval) + 1
		t.Logf("round %d: 100 random kids in %s caused %d JWKS fetches", round, took, refreshes)
		if refreshes > allowed {
			t.Errorf("round %d: %d fetches in %s, at most %d allowed (one per %s)", round, refreshes, took, allowed, interval)
		}
		// The first unknown kid's fetch, and the one after it that the kids
		// arriving while it ran share (a fetch already under way may predate
		// their key's publication).
		if round == 0 && (refreshes < 1 || refreshes > 2) {
			t.Errorf("round 0: %d fetches, want 1 or 2", refreshes)
		}
		time.Sleep(interval)
	}
}

// A client that keeps presenting the same bogus kid does not use up the
// refresh budget: a genuine new key is still picked up at once.
func TestNegativeCacheKeepsBudgetForRotation(t *testing.T) {
	k := testKeys(t)
	srv := newJWKSServer(t, jwksOf(t, k.rsa))
	const interval = 300 * time.Millisecond
	v := remoteVerifier(t, srv, func(c *claims.Options) { c.UnknownKIDInterval = interval })
	if err := v.WaitReady(context.Background()); err != nil {
		t.Fatal(err)
	}
	bogus := k.rsaOther
	bogus.kid = "bogus"
	bogusTok := sign(t, bogus, validClaims())
	if _, _, err := v.Verify(context.Background(), bogusTok); !errors.Is(err, claims.ErrUnknownKey) {
		t.Fatalf("bogus kid: %v", err)
	}
	if got := srv.hits.Load(); got != 2 {
		t.Fatalf("%d JWKS fetches after the first bogus kid, want 2 (initial + one refresh)", got)
	}
	time.Sleep(interval + 50*time.Millisecond)

	// A new interval: the bogus kid, repeated, fetches nothing ...
	for range 50 {
		if _, _, err := v.Verify(context.Background(), bogusTok); !errors.Is(err, claims.ErrUnknownKey) {
			t.Fatalf("bogus kid again: %v", err)
		}
	}
	if got := srv.hits.Load(); got != 2 {
		t.Fatalf("repeating a bogus kid fetched the JWKS again: %d fetches", got)
	}
	// ... so a key rotation published now is picked up by the first token
	// that uses it.
	srv.set(jwksOf(t, k.rsa, k.rsa2))
	verifyOK(t, v, sign(t, k.rsa2, validClaims()), "new key right after a bogus-kid flood")
	if got := srv.hits.Load(); got != 3 {
		t.Errorf("%d JWKS fetches, want 3", got)
	}
}

func TestCloseStopsRefresh(t *testing.T) {
	k := testKeys(t)
	srv := newJWKSServer(t, jwksOf(t, k.ed))
	v := remoteVerifier(t, srv, func(c *claims.Options) { c.RefreshInterval = 10 * time.Millisecond })
	if err := v.WaitReady(context.Background()); err != nil {
		t.Fatal(err)
	}
	v.Close()
	n := srv.hits.Load()
	time.Sleep(100 * time.Millisecond)
	if got := srv.hits.Load(); got != n {
		t.Errorf("%d fetches after Close", got-n)
	}
	verifyOK(t, v, sign(t, k.ed, validClaims()), "after Close")
}

func TestJWKSRedirectMustStaySecure(t *testing.T) {
	k := testKeys(t)
	real := newJWKSServer(t, jwksOf(t, k.ed))
	redirect := func(to string) *jwksServer {
		s := &jwksServer{}
		s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			s.hits.Add(1)
			http.Redirect(w, r, to, http.StatusFound)
		}))
		t.Cleanup(s.Close)
		return s
	}

	// Loopback to loopback is as good as the configured URL.
	ok := remoteVerifier(t, redirect(real.URL+"/certs"), nil)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := ok.WaitReady(ctx); err != nil {
		t.Fatalf("loopback redirect: %v", err)
	}

	// To plain http elsewhere is refused before any request is made.
	bad := redirect("http://jwks.example.invalid/certs")
	var logs logbuf.Buffer
	v := remoteVerifier(t, bad, func(c *claims.Options) { c.Logger = slog.New(slog.NewTextHandler(&logs, nil)) })
	eventually(t, 5*time.Second, "the refusal to be logged", func() bool {
		return strings.Contains(logs.String(), "redirect to a JWKS URL that is not https")
	})
	if v.Ready() {
		t.Fatal("Ready after a redirect to plain http")
	}
}
