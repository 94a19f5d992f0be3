package flow

import (
	"hash/maphash"
	"slices"
	"sync"
	"time"
)

// Key identifies one taint: the verified subject and, under ScopeSession,
// the session ("" under ScopeSubject, and for calls with neither an MCP
// session nor a conversation id).
type Key struct {
	Subject string
	Session string
}

// origin is the call that introduced something into a taint.
type origin struct {
	tool, callID, session string
}

type catOrigin struct {
	cat int
	origin
}

// maxOwners bounds the data subjects a taint tracks; past it the owners are
// unknown and $owner never matches.
const maxOwners = 8

// maxKeysPerSubject bounds the session taints of one subject under
// ScopeSession; past it further sessions share the subject's taint (more
// taint, never less).
const maxKeysPerSubject = 1024

// entry is one taint. It only grows: joins, never removals, until it is
// idle for the policy's retain time and is dropped whole.
type entry struct {
	lab       label
	levelFrom [rSecret + 1]origin // levelFrom[l]: the call that raised the taint to l
	catFrom   []catOrigin
	owners    []string // canonical e-mail addresses of the data subjects
	ownersBad bool     // owners unknown: some categorised result had none we could read
	touched   int64    // unix nanoseconds of the last use
}

// snapshot is what a check reads of a taint.
type snapshot struct {
	lab       label
	owners    []string
	ownersBad bool
}

// owner returns the sole data subject, if the taint has exactly one known.
func (s *snapshot) owner() (string, bool) {
	if s.ownersBad || len(s.owners) != 1 || s.lab.cats == 0 {
		return "", false
	}
	return s.owners[0], true
}

const nShards = 16

type store struct {
	seed   maphash.Seed
	retain time.Duration
	shards [nShards]shard
}

type shard struct {
	mu        sync.Mutex
	m         map[Key]*entry
	perSub    map[string]int
	lastSweep int64
}

func (s *store) init(retain time.Duration) {
	s.seed = maphash.MakeSeed()
	s.retain = retain
	for i := range s.shards {
		s.shards[i].m = map[Key]*entry{}
		s.shards[i].perSub = map[string]int{}
	}
}

// All taints of a subject live in one shard, so the per-subject count is
// local to it.
func (s *store) shard(subject string) *shard {
	return &s.shards[maphash.String(s.seed, subject)%nShards]
}

// get returns the entry for k, creating it (or, over the per-subject
// bound, falling back to the subject's shared entry). Call with sh.mu held.
func (s *store) get(sh *shard, k Key, now int64) *entry {
	s.sweep(sh, now)
	if e := sh.m[k]; e != nil {
		e.touched = now
		return e
	}
	if k.Session != "" && sh.perSub[k.Subject] >= maxKeysPerSubject {
		k.Session = ""
		if e := sh.m[k]; e != nil {
			e.touched = now
			return e
		}
	}
	e := &entry{touched: now}
	sh.m[k] = e
	sh.perSub[k.Subject]++
	return e
}

// sweep drops entries idle longer than retain, at most every retain/8.
func (s *store) sweep(sh *shard, now int64) {
	every := int64(s.retain / 8)
	if now-sh.lastSweep < every {
		return
	}
	sh.lastSweep = now
	for k, e := range sh.m {
		if now-e.touched > int64(s.retain) {
			delete(sh.m, k)
			if sh.perSub[k.Subject]--; sh.perSub[k.Subject] <= 0 {
				delete(sh.perSub, k.Subject)
			}
		}
	}
}

// snapshot reads the taint under k (the empty taint if there is none yet;
// past the per-subject bound, the subject's shared one).
func (s *store) snapshot(k Key, now int64) snapshot {
	sh := s.shard(k.Subject)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	s.sweep(sh, now)
	e := sh.m[k]
	if e == nil && k.Session != "" && sh.perSub[k.Subject] >= maxKeysPerSubject {
		e = sh.m[Key{Subject: k.Subject}]
	}
	if e == nil {
		return snapshot{}
	}
	e.touched = now
	return snapshot{lab: e.lab, owners: e.owners, ownersBad: e.ownersBad}
}

// join adds a result's label, data subjects and origin to the taint.
func (s *store) join(k Key, now int64, l label, owners []string, ownersBad bool, o origin) {
	sh := s.shard(k.Subject)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	e := s.get(sh, k, now)
	e.add(l, owners, ownersBad, o)
}

func (e *entry) add(l label, owners []string, ownersBad bool, o origin) {
	for lv := e.lab.level + 1; lv <= l.level; lv++ {
		e.levelFrom[lv] = o
	}
	if fresh := l.cats &^ e.lab.cats; fresh != 0 {
		fresh.each(func(i int) { e.catFrom = append(e.catFrom, catOrigin{cat: i, origin: o}) })
	}
	e.lab = e.lab.join(l)
	if l.cats == 0 || e.ownersBad {
		return
	}
	if ownersBad {
		e.ownersBad, e.owners = true, nil
		return
	}
	for _, w := range owners {
		if !slices.Contains(e.owners, w) {
			if len(e.owners) == maxOwners {
				e.ownersBad, e.owners = true, nil
				return
			}
			// Copy on write: snapshots share the old slice.
			e.owners = append(slices.Clip(e.owners), w)
		}
	}
}

// origins returns the origin of each category of cats and of level lv (0:
// none), for a witness.
func (s *store) origins(k Key, cats catSet, lv rank) (map[int]origin, origin) {
	sh := s.shard(k.Subject)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	e := sh.m[k]
	if e == nil && k.Session != "" {
		e = sh.m[Key{Subject: k.Subject}]
	}
	out := map[int]origin{}
	if e == nil {
		return out, origin{}
	}
	for _, co := range e.catFrom {
		if cats.has(co.cat) {
			out[co.cat] = co.origin
		}
	}
	var lo origin
	if lv > 0 && lv <= rSecret {
		lo = e.levelFrom[lv]
	}
	return out, lo
}
