package claims

import (
	"testing"
	"time"

	"github.com/tenantmcp/tenantmcp/internal/mint"
	"github.com/tenantmcp/tenantmcp/scope"
)

// An entry stored by a verification that began before the key set changed
// (so after the purge that change caused) carries the old generation and
// is never a hit. This is the race the purge alone cannot close.
func TestTokenCacheStaleGenerationNeverHits(t *testing.T) {
	tc := newTokenCache(4)
	sc, err := mint.Scope("alice", []scope.Grant{{Level: "chain", ID: "acme"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	c := &Claims{Subject: "alice", Expiry: now.Add(time.Hour), IssuedAt: now}
	key := tokenKey("header.payload.signature")
	tc.purge()                  // the key set changed to generation 2 ...
	tc.put(key, 1, sc, c, 0, 0) // ... while a verification begun under 1 ran
	if _, _, ok := tc.get(key, 2, now); ok {
		t.Fatal("an entry verified under key-set generation 1 was a hit under generation 2")
	}
	if tc.len() != 0 {
		t.Fatal("the stale entry was not dropped")
	}
	tc.put(key, 2, sc, c, 0, 0)
	if got, _, ok := tc.get(key, 2, now); !ok || !got.Equal(sc) {
		t.Fatal("an entry of the current generation was not a hit")
	}
	if _, _, ok := tc.get(tokenKey("header.payload.signaturf"), 2, now); ok {
		t.Fatal("a different token was a hit")
	}
}
