package otelserver

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"slices"
	"strings"
	"sync"

	"github.com/tenantmcp/tenantmcp/scope"
)

// OtherTenant is the tenant label of every tenant outside the top N
// (Options.TenantTopN).
const OtherTenant = "other"

// tenantPromoteCalls is how many calls a tenant label must be known to
// have made (a lower bound, see topN) before it takes a free slot of the
// top N. It keeps a burst of one-off tenants at start-up from taking the
// slots the busy tenants should have.
const tenantPromoteCalls = 20

// Pseudonym is the default tenant label of Options.TenantTopN: "t_"
// followed by 12 hex digits of SHA-256 (HMAC-SHA-256 under key, when key
// is not empty) over the scope's root tenants (the outermost grant of each
// grant, "level:id", sorted, each once). It never holds a tenant id, and
// grants within one root share its label. Without a key it is a pseudonym,
// not a secret: whoever can list candidate tenant ids can hash them and
// match; give every replica the same key (Options.TenantLabelKey) when the
// scraper must not learn which tenant is which.
func Pseudonym(sc scope.Scope, key []byte) string {
	var roots []string
	for _, g := range sc.Grants() {
		if len(g.Within) > 0 {
			g = g.Within[0]
		}
		roots = append(roots, g.Level+":"+g.ID)
	}
	slices.Sort(roots)
	roots = slices.Compact(roots)
	msg := []byte(strings.Join(roots, "\x00"))
	var sum []byte
	if len(key) > 0 {
		m := hmac.New(sha256.New, key)
		m.Write(msg)
		sum = m.Sum(nil)
	} else {
		s := sha256.Sum256(msg)
		sum = s[:]
	}
	return "t_" + hex.EncodeToString(sum[:6])
}

// topN bounds the tenant label to at most n values plus OtherTenant.
//
// Invariant (the cardinality bound): named never holds more than n labels
// and a label is returned as itself only when it is in named; anything
// else is OtherTenant. Named labels stay named for the life of the
// process: a series once exported stays in the cumulative Prometheus
// output, so demoting a tenant would not shrink it, only add "other"
// samples that hide its later calls.
//
// Which tenants are named: while slots are free, calls are counted in a
// space-saving sketch of bounded size (Metwally et al.: a new label
// replaces the least counted one and inherits its count as its error), and
// a label whose guaranteed count (count minus error) reaches
// tenantPromoteCalls takes a slot. A tenant making more than 1/capacity of
// the calls is always in the sketch, so the busiest tenants reach the
// threshold first; a crowd of light tenants only raises the error of the
// entries they churn, never their guaranteed count. Memory: at most
// capacity sketch entries plus n names.
type topN struct {
	mu       sync.Mutex
	n        int
	capacity int
	named    map[string]struct{}
	sketch   map[string]*ssEntry
}

type ssEntry struct{ count, err int64 }

func newTopN(n int) *topN {
	return &topN{n: n, capacity: max(8*n, 256), named: make(map[string]struct{}, n), sketch: map[string]*ssEntry{}}
}

// label returns v if v is (or now becomes) one of the top n, else
// OtherTenant.
func (t *topN) label(v string) string {
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, ok := t.named[v]; ok {
		return v
	}
	if len(t.named) >= t.n {
		return OtherTenant
	}
	e := t.sketch[v]
	if e == nil {
		e = &ssEntry{}
		if len(t.sketch) >= t.capacity {
			minK, minE := "", (*ssEntry)(nil)
			for k, x := range t.sketch {
				if minE == nil || x.count < minE.count {
					minK, minE = k, x
				}
			}
			delete(t.sketch, minK)
			e = &ssEntry{count: minE.count, err: minE.count}
		}
		t.sketch[v] = e
	}
	e.count++
	if e.count-e.err < tenantPromoteCalls {
		return OtherTenant
	}
	t.named[v] = struct{}{}
	delete(t.sketch, v)
	if len(t.named) >= t.n {
		t.sketch = nil // every slot taken: nothing more to count
	}
	return v
}
