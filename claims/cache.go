package claims

import (
	"container/list"
	"crypto/sha256"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tenantmcp/tenantmcp/scope"
)

// DefaultTokenCacheSize is the number of verified tokens a Verifier
// remembers when Options.TokenCacheSize is zero.
const DefaultTokenCacheSize = 1024

// tokenCache remembers the outcome of successful verifications, so that a
// client presenting the same bearer token on every call pays for the
// signature check and the claim mapping once per token, not once per call.
//
// It is keyed by the SHA-256 of the token: the token itself is never stored,
// so neither a heap dump of the map nor a debug print of a key shows a
// usable credential. Only successes are cached; a refusal is always
// recomputed.
//
// Invariant: a hit returns a result only when a fresh verification, run at
// the same instant, would succeed with the same result. Everything a fresh
// verification checks is either fixed for the Verifier's lifetime (issuer,
// audience, algorithms, mapping, size limit, the HMAC key), fixed for the
// token (its bytes, hence its signature and claims), or one of two things
// that change: the time, re-checked on every hit against the token's
// exp/nbf/iat with the Verifier's clock and leeway exactly as golang-jwt
// checks them, and the key set, whose generation is recorded before the
// fresh verification starts and must still be current at the hit.
type tokenCache struct {
	max int

	mu  sync.Mutex
	lru list.List // of *cacheEntry, most recently used first
	m   map[[sha256.Size]byte]*list.Element

	hits atomic.Uint64 // for tests and diagnostics
}

type cacheEntry struct {
	key [sha256.Size]byte
	// gen is the key-set generation read before the verification that
	// produced this entry began (see keySource.generation).
	gen uint64
	sc  scope.Scope // immutable, shared by every hit
	c   *Claims     // never handed out: each hit gets a deep copy
	// A hit needs validFrom <= now < expires: expires is exp+leeway (as
	// golang-jwt's exp check) and validFrom the later of nbf-leeway and
	// iat-leeway (its nbf and iat checks).
	validFrom, expires time.Time
}

func newTokenCache(size int) *tokenCache {
	return &tokenCache{max: size, m: make(map[[sha256.Size]byte]*list.Element, min(size, 1024))}
}

func tokenKey(token string) [sha256.Size]byte { return sha256.Sum256([]byte(token)) }

// get returns the cached result for key if it is still what a verification
// at now with the key-set generation gen would give. An entry that no
// longer is (expired, not yet valid at a clock that went back, or verified
// under an older key set) is dropped, and the caller verifies afresh, which
// yields the exact error an uncached Verifier gives.
func (tc *tokenCache) get(key [sha256.Size]byte, gen uint64, now time.Time) (scope.Scope, *Claims, bool) {
	tc.mu.Lock()
	el, ok := tc.m[key]
	if !ok {
		tc.mu.Unlock()
		return scope.Scope{}, nil, false
	}
	e := el.Value.(*cacheEntry)
	if e.gen != gen || !now.Before(e.expires) || now.Before(e.validFrom) {
		tc.lru.Remove(el)
		delete(tc.m, key)
		tc.mu.Unlock()
		return scope.Scope{}, nil, false
	}
	tc.lru.MoveToFront(el)
	sc, c := e.sc, e.c
	tc.mu.Unlock()
	tc.hits.Add(1)
	return sc, c.clone(), true
}

// put remembers a successful verification made under generation gen,
// evicting the least recently used entry when full. c is copied, so the
// caller may hand its own c out.
//
// maxLifetime (0: none) is Options.MaxTokenLifetime: its exp-now check
// passes from exp-maxLifetime-leeway on, so that instant also bounds
// validFrom, and a clock that goes back never makes a hit of a token a
// fresh verification would refuse with ErrLifetime. (Its exp-iat check
// does not depend on the time.)
func (tc *tokenCache) put(key [sha256.Size]byte, gen uint64, sc scope.Scope, c *Claims, leeway, maxLifetime time.Duration) {
	e := &cacheEntry{key: key, gen: gen, sc: sc, c: c.clone(), expires: c.Expiry.Add(leeway)}
	bounds := []time.Time{c.NotBefore, c.IssuedAt}
	if maxLifetime > 0 {
		// t-leeway below is the instant exp-now = maxLifetime+leeway.
		bounds = append(bounds, c.Expiry.Add(-maxLifetime))
	}
	for _, t := range bounds {
		if !t.IsZero() && t.Add(-leeway).After(e.validFrom) {
			e.validFrom = t.Add(-leeway)
		}
	}
	tc.mu.Lock()
	defer tc.mu.Unlock()
	if el, ok := tc.m[key]; ok {
		el.Value = e
		tc.lru.MoveToFront(el)
		return
	}
	for tc.lru.Len() >= tc.max {
		old := tc.lru.Back()
		tc.lru.Remove(old)
		delete(tc.m, old.Value.(*cacheEntry).key)
	}
	tc.m[key] = tc.lru.PushFront(e)
}

// purge drops every entry. The generation check alone already refuses
// them; purging frees their memory at once when the key set changes.
func (tc *tokenCache) purge() {
	tc.mu.Lock()
	defer tc.mu.Unlock()
	tc.lru.Init()
	clear(tc.m)
}

func (tc *tokenCache) len() int {
	tc.mu.Lock()
	defer tc.mu.Unlock()
	return tc.lru.Len()
}

// clone is a deep copy: a caller that edits the Claims it got must not
// change what the next hit returns.
func (c *Claims) clone() *Claims {
	out := *c
	out.Audience = slices.Clone(c.Audience)
	out.Groups = slices.Clone(c.Groups)
	out.Roles = slices.Clone(c.Roles)
	out.OAuthScopes = slices.Clone(c.OAuthScopes)
	if c.Matches != nil {
		out.Matches = make([]Match, len(c.Matches))
		for i, m := range c.Matches {
			m.Grant = cloneGrant(m.Grant)
			m.Within = cloneGrants(m.Within)
			out.Matches[i] = m
		}
	}
	return &out
}

func cloneGrant(g scope.Grant) scope.Grant {
	g.Within = cloneGrants(g.Within)
	g.Roles = slices.Clone(g.Roles)
	return g
}

func cloneGrants(gs []scope.Grant) []scope.Grant {
	if gs == nil {
		return nil
	}
	out := make([]scope.Grant, len(gs))
	for i, g := range gs {
		out[i] = cloneGrant(g)
	}
	return out
}
