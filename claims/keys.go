package claims

import (
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rsa"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/MicahParks/jwkset"
	"github.com/MicahParks/keyfunc/v3"
)

// minRSABits is the smallest RSA modulus accepted from a JWKS.
const minRSABits = 2048

// maxNegativeKIDs bounds the negative cache. When it is full and nothing in
// it has expired, new unknown kids are simply not remembered: the refresh
// rate limit still holds, so the only cost is a weaker guarantee, never an
// unbounded map.
const maxNegativeKIDs = 10000

// maxKIDLength: a longer kid is refused without a refresh.
const maxKIDLength = 256

// keySource holds the JWKS keys in a jwkset memory storage and serves them
// through keyfunc. The fetching is done here rather than by jwkset's HTTP
// storage because that storage (a) retries a failed first fetch only after a
// full refresh interval, (b) makes every caller with an unknown kid block on
// one shared rate limiter, for up to a minute, (c) reads JWKS responses
// without a size limit, and (d) cannot tell whether keys were ever loaded.
type keySource struct {
	store *jwkset.MemoryJWKSet
	kf    keyfunc.Keyfunc
	log   *slog.Logger

	ready     atomic.Bool
	readyCh   chan struct{}
	readyOnce sync.Once

	// Remote only (url != "").
	url             string
	client          *http.Client
	refreshInterval time.Duration
	unknownInterval time.Duration
	negativeTTL     time.Duration
	httpTimeout     time.Duration
	maxJWKSBytes    int64
	ctx             context.Context // ends with Close
	cancel          context.CancelFunc
	done            chan struct{}
	// kick tells the background loop that a fetch for an unknown kid failed,
	// so that it retries with backoff instead of waiting out a full refresh
	// interval: a key published during a JWKS blip is then loaded as soon as
	// the endpoint answers again.
	kick chan struct{}

	fetchMu sync.Mutex // one fetch at a time, so an old response never overwrites a newer one

	minRefresh time.Duration // lower bound on a Cache-Control max-age

	mu           sync.Mutex
	nextUnknown  time.Time  // earliest start of the next unknown-kid fetch
	unknownFails int        // consecutive failed unknown-kid fetches
	pending      *fetchCall // the next unknown-kid fetch, scheduled but not started
	negative     map[string]time.Time

	// The token cache's view of the key set (see keygen.go).
	gen      atomic.Uint64
	fpMu     sync.Mutex
	fp       [32]byte // SHA-256 of the installed public keys
	hasFP    bool
	onChange func() // set before the first install; purges the token cache
}

// fetchCall is one unknown-kid fetch that several callers may wait on.
type fetchCall struct {
	start time.Time     // when it is scheduled to start
	done  chan struct{} // closed when the fetch ends
	err   error         // its outcome; read only after done is closed
}

func newKeySource(log *slog.Logger) (*keySource, error) {
	store := jwkset.NewMemoryStorage()
	kf, err := keyfunc.New(keyfunc.Options{Storage: store, Ctx: context.Background()})
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrConfig, err)
	}
	return &keySource{store: store, kf: kf, log: log, readyCh: make(chan struct{}), negative: make(map[string]time.Time)}, nil
}

// loadStatic installs a JWKS document once.
func (k *keySource) loadStatic(doc []byte) error {
	keys, err := k.parseJWKS(doc)
	if err != nil {
		return fmt.Errorf("%w: static JWKS: %v", ErrConfig, err)
	}
	k.install(keys)
	return nil
}

// start begins fetching in the background. The first fetch happens at once;
// a failed fetch (the first or any later one) is retried with jittered
// exponential backoff (1 s doubling, at most refreshInterval), and after a
// success the set is fetched again after the response's Cache-Control
// max-age, bounded to [minRefresh, refreshInterval] (refreshInterval when the
// response names none). A failed refresh keeps the keys already loaded.
//
// Invariant: while the JWKS endpoint answers, a key removed from it stops
// verifying at most refreshInterval (plus one HTTP timeout) after its
// removal, because no wait between two fetches is longer than that, whatever
// max-age the endpoint sends.
func (k *keySource) start() {
	k.ctx, k.cancel = context.WithCancel(context.Background())
	k.done = make(chan struct{})
	k.kick = make(chan struct{}, 1)
	go func() {
		defer close(k.done)
		base := min(time.Second, k.refreshInterval)
		failures := 0
		for {
			var wait time.Duration
			if maxAge, err := k.fetch(k.ctx); err != nil {
				if k.ctx.Err() != nil {
					return
				}
				failures++
				wait = backoff(base, k.refreshInterval, failures)
				k.log.Warn("claims: JWKS refresh failed; keeping the keys already loaded",
					"url", k.url, "error", err, "ready", k.ready.Load(), "retry_in", wait)
			} else {
				failures = 0
				wait = k.refreshAfter(maxAge)
				// Jitter only shortens the wait, so that replicas spread out
				// without weakening the bound on a retired key.
				wait -= randDuration(wait / 10)
			}
			t := time.NewTimer(wait)
		waiting:
			for {
				select {
				case <-k.ctx.Done():
					t.Stop()
					return
				case <-k.kick:
					// An unknown-kid fetch failed. Unless already backing
					// off, retry soon rather than after a full interval.
					if failures == 0 {
						failures = 1
						t.Reset(backoff(base, k.refreshInterval, 1))
					}
				case <-t.C:
					break waiting
				}
			}
		}
	}()
}

// refreshAfter is the wait before the next regular fetch after a response
// whose freshness lifetime is maxAge (negative: the response named none):
// maxAge bounded to [minRefresh, refreshInterval], or refreshInterval.
func (k *keySource) refreshAfter(maxAge time.Duration) time.Duration {
	if maxAge < 0 {
		return k.refreshInterval
	}
	return min(max(maxAge, min(k.minRefresh, k.refreshInterval)), k.refreshInterval)
}

// freshness reads a JWKS response's remaining freshness lifetime from its
// Cache-Control (RFC 9111: max-age, less Age; no-cache and no-store count as
// zero). It is negative when the response names none or the header does not
// parse, and the caller then uses its own interval.
func freshness(h http.Header) time.Duration {
	age := time.Duration(0)
	if a, err := strconv.ParseInt(strings.TrimSpace(h.Get("Age")), 10, 64); err == nil && a > 0 {
		age = time.Duration(min(a, 1<<31)) * time.Second
	}
	out := time.Duration(-1)
	for _, v := range h.Values("Cache-Control") {
		for _, d := range strings.Split(v, ",") {
			name, val, _ := strings.Cut(strings.TrimSpace(d), "=")
			switch strings.ToLower(name) {
			case "no-cache", "no-store":
				return 0
			case "max-age":
				n, err := strconv.ParseInt(strings.Trim(val, `"`), 10, 64)
				if err != nil || n < 0 {
					return -1
				}
				out = max(time.Duration(min(n, 1<<31))*time.Second-age, 0)
			}
		}
	}
	return out
}

// backoff is the jittered wait before retry number n (1, 2, ...): base
// doubled n-1 times, capped at limit, then drawn from its upper half so that
// replicas that failed together do not retry together.
func backoff(base, limit time.Duration, n int) time.Duration {
	d := base
	for i := 1; i < n && d < limit; i++ {
		d *= 2
	}
	d = min(d, limit)
	return d - randDuration(d/2)
}

// randDuration is uniform in [0, d); 0 for d <= 0.
func randDuration(d time.Duration) time.Duration {
	if d <= 0 {
		return 0
	}
	return time.Duration(rand.Int64N(int64(d)))
}

func (k *keySource) close() {
	if k.cancel != nil {
		k.cancel()
		<-k.done
	}
}

// fetch downloads the JWKS and replaces the stored keys with it, and returns
// the response's freshness lifetime (see freshness). A response without a
// single usable key is an error and leaves the stored keys alone: an empty
// set is far likelier to be an outage than a deliberate revocation of every
// key.
func (k *keySource) fetch(ctx context.Context) (time.Duration, error) {
	k.fetchMu.Lock()
	defer k.fetchMu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, k.httpTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, k.url, nil)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Accept", "application/jwk-set+json, application/json")
	resp, err := k.client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("JWKS endpoint answered %s", resp.Status)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, k.maxJWKSBytes+1))
	if err != nil {
		return 0, fmt.Errorf("reading JWKS: %w", err)
	}
	if int64(len(body)) > k.maxJWKSBytes {
		return 0, fmt.Errorf("JWKS larger than %d bytes", k.maxJWKSBytes)
	}
	keys, err := k.parseJWKS(body)
	if err != nil {
		return 0, err
	}
	k.install(keys)
	return freshness(resp.Header), nil
}

func (k *keySource) install(keys []jwkset.JWK) {
	_ = k.store.KeyReplaceAll(context.Background(), keys) // the memory storage never fails
	k.noteKeys(keys)
	k.ready.Store(true)
	k.readyOnce.Do(func() { close(k.readyCh) })
}

// parseJWKS keeps the keys that can verify a signature: RSA of at least
// 2048 bits, ECDSA on P-256/384/521 and Ed25519, with "use" absent or "sig".
// Private members of a JWK are ignored and symmetric keys are dropped, so a
// JWKS can never supply an HMAC secret. Unusable keys are skipped, not fatal,
// so that one exotic key does not take the whole set down.
func (k *keySource) parseJWKS(doc []byte) ([]jwkset.JWK, error) {
	var set struct {
		Keys []json.RawMessage `json:"keys"`
	}
	if err := json.Unmarshal(doc, &set); err != nil {
		return nil, fmt.Errorf("JWKS is not a JSON object with a keys array: %w", err)
	}
	var out []jwkset.JWK
	seen := make(map[string]bool)
	for i, raw := range set.Keys {
		var m jwkset.JWKMarshal
		if err := json.Unmarshal(raw, &m); err != nil {
			k.log.Warn("claims: skipping JWKS entry", "index", i, "error", err)
			continue
		}
		if m.USE != "" && m.USE != jwkset.UseSig {
			continue
		}
		jwk, err := jwkset.NewJWKFromMarshal(m, jwkset.JWKMarshalOptions{Private: false}, jwkset.JWKValidateOptions{})
		if err != nil {
			k.log.Warn("claims: skipping JWKS entry", "index", i, "kid", m.KID, "error", err)
			continue
		}
		if reason := unusableKey(jwk.Key()); reason != "" {
			k.log.Warn("claims: skipping JWKS entry", "index", i, "kid", m.KID, "reason", reason)
			continue
		}
		if seen[m.KID] {
			k.log.Warn("claims: skipping JWKS entry with a duplicate kid", "index", i, "kid", m.KID)
			continue
		}
		seen[m.KID] = true
		out = append(out, jwk)
	}
	if len(out) == 0 {
		return nil, errors.New("JWKS holds no usable signature verification key")
	}
	return out, nil
}

func unusableKey(key any) string {
	switch key := key.(type) {
	case *rsa.PublicKey:
		if key.N.BitLen() < minRSABits {
			return fmt.Sprintf("RSA key shorter than %d bits", minRSABits)
		}
	case *ecdsa.PublicKey:
		switch key.Curve {
		case elliptic.P256(), elliptic.P384(), elliptic.P521():
		default:
			return "unsupported curve"
		}
	case ed25519.PublicKey:
	default:
		return fmt.Sprintf("key type %T cannot verify signatures", key)
	}
	return ""
}

func (k *keySource) has(kid string) bool {
	_, err := k.store.KeyRead(context.Background(), kid)
	return err == nil
}

// maxUnknownKIDWait bounds how long a token naming an unknown kid waits for
// the next unknown-kid fetch; when that fetch is scheduled later (a long
// UnknownKIDInterval, or a backoff after failures), the token is refused at
// once instead.
const maxUnknownKIDWait = 5 * time.Second

// refreshForUnknownKID is called when a token names a kid that is not in the
// stored set. It waits for an unknown-kid fetch that starts after the call
// began (a fetch already running may have been sent before the key was
// published), and reports whether the kid is known afterwards. All callers
// waiting at one time share one fetch, and fetches start at least
// unknownInterval apart, so a flood of random kids costs one fetch per
// interval, never more, while a genuine new kid arriving in the middle of
// the flood waits at most one interval (plus the fetch) and is then served:
// junk kids cannot hold a real rotation out, they only share its fetch.
//
// Invariant: a kid is remembered as unknown (and then refused at once, with
// no wait, for negativeTTL) only when a fetch that started after it was
// asked for succeeded and lacked it. A failed fetch proves nothing about the
// kid, so it is never remembered; instead the next unknown-kid fetch may
// start after a jittered backoff (at most unknownInterval) and the
// background loop retries soon, so a key rotation that coincides with a
// JWKS outage is picked up once the endpoint answers. The negative cache
// keeps a client that repeats one bogus kid from waiting on every fetch.
func (k *keySource) refreshForUnknownKID(ctx context.Context, kid string) bool {
	if k.url == "" || len(kid) > maxKIDLength {
		return false
	}
	now := time.Now()
	k.mu.Lock()
	if until, ok := k.negative[kid]; ok && now.Before(until) {
		k.mu.Unlock()
		return false
	}
	call := k.pending
	if call == nil {
		start := now
		if k.nextUnknown.After(start) {
			start = k.nextUnknown
		}
		call = &fetchCall{start: start, done: make(chan struct{})}
	}
	wait := call.start.Sub(now)
	if dl, ok := ctx.Deadline(); wait > maxUnknownKIDWait || ok && now.Add(wait).After(dl) {
		k.mu.Unlock()
		return false // the next fetch is too far off to wait for
	}
	if k.pending == nil {
		k.pending = call
		// Until this fetch starts, every caller joins it.
		go k.fetchUnknown(call)
	}
	k.mu.Unlock()
	select {
	case <-call.done:
	case <-ctx.Done():
		return false
	}
	if k.has(kid) {
		return true
	}
	if call.err == nil {
		k.mu.Lock()
		k.rememberUnknown(kid, time.Now())
		k.mu.Unlock()
	}
	return false
}

// fetchUnknown runs one unknown-kid fetch at its scheduled start and sets
// when the next may start.
func (k *keySource) fetchUnknown(call *fetchCall) {
	if d := time.Until(call.start); d > 0 {
		t := time.NewTimer(d)
		select {
		case <-t.C:
		case <-k.ctx.Done():
			t.Stop()
		}
	}
	k.mu.Lock()
	// From now on a new caller schedules the next fetch: this one may have
	// been sent before its key was published.
	k.pending = nil
	start := time.Now()
	k.nextUnknown = start.Add(k.unknownInterval)
	k.mu.Unlock()
	var err error
	if err = k.ctx.Err(); err == nil {
		_, err = k.fetch(k.ctx)
	}
	k.mu.Lock()
	if err == nil {
		k.unknownFails = 0
	} else {
		k.unknownFails++
		k.nextUnknown = time.Now().Add(backoff(min(time.Second, k.unknownInterval), k.unknownInterval, k.unknownFails))
	}
	call.err = err
	k.mu.Unlock()
	close(call.done)
	if err != nil && k.ctx.Err() == nil {
		k.log.Warn("claims: JWKS refresh for an unknown kid failed; keeping the keys already loaded", "url", k.url, "error", err)
		select {
		case k.kick <- struct{}{}:
		default: // a kick is already pending
		}
	}
}

// rememberUnknown adds kid to the negative cache; k.mu is held.
func (k *keySource) rememberUnknown(kid string, now time.Time) {
	if len(k.negative) >= maxNegativeKIDs {
		for id, until := range k.negative {
			if !now.Before(until) {
				delete(k.negative, id)
			}
		}
		if len(k.negative) >= maxNegativeKIDs {
			return
		}
	}
	k.negative[kid] = now.Add(k.negativeTTL)
}
