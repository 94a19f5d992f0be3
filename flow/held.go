package flow

import (
	"hash/maphash"
	"slices"
	"sync"
	"time"
)

// Writes a call may skip.
//
// Call.Record joins a result's label into the caller's taint, and a Join
// also marks the taint used: the taint is then kept for retain from that
// exposure. A Join is needed exactly when it would change what the store
// holds or postpone when it may drop it. Record skips it in two cases:
//
//   - the label is public with no category. Such a taint changes no
//     decision (every destination is cleared for public data, and the data
//     subjects count only with a category), so it needs no recording and
//     no retention.
//   - this process knows the store holds every part of the label (the
//     level, each category, the data subjects) and marked the taint used
//     at most [touchSlack] ago: by a Join of this process, or by the Load
//     of a sink call's check. The checker hands every store a retention of
//     the policy's retain plus that slack (Checker.retain), so a taint
//     used at time u is kept until at least u + retain + slack, which is
//     at least now + retain: a re-exposure within the slack is kept for
//     the policy's retain without a write.
//
// Invariant: what a skipped Join would have added is held by the store,
// durably, until at least now + the policy's retain. The cache only ever
// skips a write, never a read: a sink call's check always reads the store,
// which holds what other replicas joined.

// touchSlack is how long after marking a taint used this process may skip
// re-marking it for a result that adds nothing: retain/1024, at most
// 250 ms (58 ms at the shortest retain of a minute). Every taint is kept
// that much longer than the policy's retain. It is short because it is
// also how long a result already held is released without the store
// answering: a few writes per second per busy key remove nearly all of
// them, and a store outage still shows within a quarter of a second.
func touchSlack(retain time.Duration) time.Duration {
	return min(retain/1024, 250*time.Millisecond)
}

// heldPerShard bounds the keys the cache remembers per shard; past it a
// key not yet remembered is simply written every time.
const heldPerShard = 4096

// heldCache remembers, per key, a part of the taint this process knows its
// store holds and a time at or before which the store last marked it used.
type heldCache struct {
	seed   maphash.Seed
	slack  int64 // touchSlack in nanoseconds
	shards [nShards]heldShard
}

type heldShard struct {
	mu        sync.Mutex
	m         map[Key]*heldEntry
	lastSweep int64
}

// heldEntry is what the store is known to hold under a key: the stored
// level (not raised by the categories' levels), the categories and the
// data subjects, as of a use at or after at (unix nanoseconds).
type heldEntry struct {
	level         rank
	cats          catSet
	owners        []string
	ownersUnknown bool
	at            int64
}

func newHeldCache(slack time.Duration) *heldCache {
	h := &heldCache{seed: maphash.MakeSeed(), slack: int64(slack)}
	for i := range h.shards {
		h.shards[i].m = map[Key]*heldEntry{}
	}
	return h
}

func (h *heldCache) shard(k Key) *heldShard {
	return &h.shards[maphash.Comparable(h.seed, k)%nShards]
}

// heldState is what covers knows of a label.
type heldState uint8

const (
	heldNo       heldState = iota // not known to be held: join it
	heldYes                       // held: joining it changes nothing
	heldIfOwners                  // held if its data subjects are: ask again with them
)

// covers reports whether the store is known to hold a result's label l
// and was marked used within the slack before now, so that joining it
// would change nothing that counts. It mirrors Taint.Join: a level not
// above the stored one, categories already stored, and, for a label with
// categories, data subjects already stored (or the stored ones already
// unknown). The data subjects (who, unknown: bad) are read only when
// whoKnown; without them a label that needs them is heldIfOwners, so the
// caller extracts them only when they count.
func (h *heldCache) covers(k Key, l label, who []string, bad, whoKnown bool, now time.Time) heldState {
	sh := h.shard(k)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	e := sh.m[k]
	switch {
	case e == nil || now.UnixNano()-e.at > h.slack || l.level > e.level || l.cats&^e.cats != 0:
		return heldNo
	case l.cats == 0 || e.ownersUnknown:
		return heldYes
	case !whoKnown:
		return heldIfOwners
	case bad:
		return heldNo
	}
	for _, w := range who {
		if !slices.Contains(e.owners, w) {
			return heldNo
		}
	}
	return heldYes
}

// note records that the store, at now, was marked used and holds at least
// level lv, categories cats and data subjects who (unknown: bad): after a
// Join that returned nil, or a Load. A fresh entry's content is kept too:
// the taint is dropped only whole, and it was marked used within the
// slack, so the store still holds it and the use at now keeps all of it.
func (h *heldCache) note(k Key, lv rank, cats catSet, who []string, bad bool, now time.Time) {
	n := now.UnixNano()
	sh := h.shard(k)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	sh.sweep(n, h.slack)
	e := sh.m[k]
	if e == nil || n-e.at > h.slack || n < e.at {
		if e == nil && len(sh.m) >= heldPerShard {
			return
		}
		e = &heldEntry{}
		sh.m[k] = e
	}
	e.at = n
	e.level = max(e.level, lv)
	if cats == 0 {
		return
	}
	e.cats |= cats
	switch {
	case e.ownersUnknown:
	case bad:
		e.ownersUnknown, e.owners = true, nil
	default:
		for _, w := range who {
			if slices.Contains(e.owners, w) {
				continue
			}
			if len(e.owners) == maxOwners {
				e.ownersUnknown, e.owners = true, nil
				return
			}
			e.owners = append(e.owners, w)
		}
	}
}

// sweep drops the entries older than the slack, at most once per slack.
// Call with sh.mu held.
func (sh *heldShard) sweep(now, slack int64) {
	if now-sh.lastSweep < slack {
		return
	}
	sh.lastSweep = now
	for k, e := range sh.m {
		if now-e.at > slack {
			delete(sh.m, k)
		}
	}
}
