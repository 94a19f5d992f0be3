package flow

import (
	"context"
	"errors"
	"hash/maphash"
	"slices"
	"sync"
	"time"
)

// ErrTaintStore is wrapped by the errors of a Store that cannot read or
// write a taint. The checker fails closed on it: a sink call whose taint
// cannot be read is denied (RuleTaintStore), and a result whose label
// cannot be recorded is withheld (Call.Record returns the error).
var ErrTaintStore = errors.New("flow: taint store unavailable")

// Key identifies one taint: the verified subject and, under ScopeSession,
// the session ("" under ScopeSubject, and for calls with neither an MCP
// session nor a conversation id).
type Key struct {
	Subject string
	Session string
}

// Taint is the stored form of one taint: the join of the labels of every
// result a subject (or session) has received, with the calls that
// introduced each part of it and the data subjects it is about. A Store
// keeps it; categories are by name, so replicas that intern categories in
// different orders share it, and it encodes to JSON as is.
//
// A taint only grows (Join); it is dropped only whole.
type Taint struct {
	Level      Level    `json:"level,omitempty"`
	Categories []string `json:"categories,omitempty"` // sorted
	// From names the call that introduced each category, and each level
	// step (one entry per level from Public up to Level).
	From []TaintOrigin `json:"from,omitempty"`
	// Owners are the canonical e-mail addresses of the data subjects of
	// the categorised results, at most 8; OwnersUnknown is set when some
	// categorised result had none the checker could read, or past 8.
	// $owner matches only with exactly one known owner.
	Owners        []string `json:"owners,omitempty"`
	OwnersUnknown bool     `json:"owners_unknown,omitempty"`
}

// TaintOrigin is the call that brought a category (Category set) or a
// level (Level set) into a taint.
type TaintOrigin struct {
	Category string `json:"category,omitempty"`
	Level    Level  `json:"level,omitempty"`
	Tool     string `json:"tool"`
	CallID   string `json:"call_id"`
	// Session is the session string of the call ("mcp:<id>",
	// "conv:<id>" or ""), for Origin.SameSession.
	Session string `json:"session,omitempty"`
}

// maxOwners bounds the data subjects a taint tracks; past it the owners are
// unknown and $owner never matches.
const maxOwners = 8

// MaxKeysPerSubject bounds the session taints (Key.Session != "") a Store
// keeps for one subject under ScopeSession; past it a store joins further
// sessions into the subject's taint (Key{Subject}), and reads that one for
// them: more taint, never less.
const MaxKeysPerSubject = 1024

// Join merges u into t: the higher level, the union of the categories, the
// origins of what u adds that t did not have, and the data subjects.
// Nothing in t is removed or lowered. Join never modifies the backing
// arrays of t's slices (it appends to clipped copies), so a copy of t
// taken before Join still reads the old taint.
func (t *Taint) Join(u Taint) {
	old := t.Level.rank()
	for _, o := range u.From {
		switch {
		case o.Category != "":
			if !slices.Contains(t.Categories, o.Category) && !t.hasCatOrigin(o.Category) {
				t.From = append(slices.Clip(t.From), o)
			}
		case o.Level.rank() > old && o.Level.rank() <= u.Level.rank() && !t.hasLevelOrigin(o.Level):
			t.From = append(slices.Clip(t.From), o)
		}
	}
	if u.Level.rank() > old {
		t.Level = u.Level.rank().level()
	}
	cats := slices.Clip(t.Categories)
	for _, c := range u.Categories {
		if !slices.Contains(cats, c) {
			cats = append(cats, c)
		}
	}
	if len(cats) != len(t.Categories) {
		slices.Sort(cats)
		t.Categories = cats
	}
	if len(u.Categories) == 0 || t.OwnersUnknown {
		return
	}
	if u.OwnersUnknown {
		t.OwnersUnknown, t.Owners = true, nil
		return
	}
	for _, w := range u.Owners {
		if !slices.Contains(t.Owners, w) {
			if len(t.Owners) == maxOwners {
				t.OwnersUnknown, t.Owners = true, nil
				return
			}
			t.Owners = append(slices.Clip(t.Owners), w)
		}
	}
}

func (t *Taint) hasCatOrigin(c string) bool {
	return slices.ContainsFunc(t.From, func(o TaintOrigin) bool { return o.Category == c })
}

func (t *Taint) hasLevelOrigin(l Level) bool {
	return slices.ContainsFunc(t.From, func(o TaintOrigin) bool { return o.Category == "" && o.Level == l })
}

// owner returns the sole data subject, if the taint has exactly one known.
func (t *Taint) owner() (string, bool) {
	if t.OwnersUnknown || len(t.Owners) != 1 || len(t.Categories) == 0 {
		return "", false
	}
	return t.Owners[0], true
}

// Store keeps the taints of a Checker (Options.Store). The default,
// NewMemoryStore, is private to one process; a store that several server
// processes share (package flow/pgtaint keeps taints in the application's
// PostgreSQL database, out of the application role's reach;
// server/redisstore.NewTaints on Redis) lets N replicas behind a load balancer judge a sink
// call on one with what the subject read on another, and keeps taints
// across restarts.
//
// Every implementation keeps the invariant that a taint only grows: Join
// is atomic per key (of two concurrent Joins of one key, neither is lost),
// and a taint is dropped only whole, once it has not been used (loaded or
// joined) for retain (the checker passes the policy's taint.retain plus a
// small slack). A use never moves the last use back. The checker relies
// on a Load's mark as on a Join's: once a Load or Join has returned, the
// taint it read or wrote is kept until at least now + retain, and Call.Record
// skips a Join that would add nothing within that slack. An error must wrap
// ErrTaintStore; the checker then fails closed. A stored taint that does
// not decode is such an error, never an empty taint. A shared store
// should also have Ping(ctx) error, which the server's readiness check
// calls. The package internal/storetest checks an implementation against
// this contract.
type Store interface {
	// Load returns the taint under k, the zero Taint if there is none or
	// it has been idle longer than retain, and marks it used at now.
	Load(ctx context.Context, k Key, now time.Time, retain time.Duration) (Taint, error)
	// Join merges add into the taint under k (Taint.Join), creating it,
	// and marks it used at now. It returns only once the merge is durable
	// in the store: the server releases the result after it.
	Join(ctx context.Context, k Key, now time.Time, retain time.Duration, add Taint) error
}

// NewMemoryStore returns the in-process Store, the default of a Checker:
// sharded maps under mutexes, swept of idle taints as it is used. Its
// taints are lost when the process exits and are not seen by other
// processes: run one replica with it, or use a shared store.
func NewMemoryStore() Store {
	s := &memStore{seed: maphash.MakeSeed()}
	for i := range s.shards {
		s.shards[i].m = map[Key]*memEntry{}
		s.shards[i].perSub = map[string]int{}
	}
	return s
}

const nShards = 16

type memStore struct {
	seed   maphash.Seed
	shards [nShards]memShard
}

type memShard struct {
	mu        sync.Mutex
	m         map[Key]*memEntry
	perSub    map[string]int
	lastSweep int64
}

type memEntry struct {
	t       Taint
	touched int64 // unix nanoseconds of the last use
}

// All taints of a subject live in one shard, so the per-subject count is
// local to it.
func (s *memStore) shard(subject string) *memShard {
	return &s.shards[maphash.String(s.seed, subject)%nShards]
}

func (s *memStore) Load(_ context.Context, k Key, now time.Time, retain time.Duration) (Taint, error) {
	sh := s.shard(k.Subject)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	n := now.UnixNano()
	sh.sweep(n, retain)
	e := sh.m[k]
	if e == nil && k.Session != "" && sh.perSub[k.Subject] >= MaxKeysPerSubject {
		e = sh.m[Key{Subject: k.Subject}]
	}
	if e == nil || n-e.touched > int64(retain) {
		return Taint{}, nil
	}
	e.touched = max(e.touched, n) // a use never moves the last use back
	// A shallow copy is safe: Join never writes into shared backing arrays.
	return e.t, nil
}

func (s *memStore) Join(_ context.Context, k Key, now time.Time, retain time.Duration, add Taint) error {
	sh := s.shard(k.Subject)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	n := now.UnixNano()
	sh.sweep(n, retain)
	e := sh.m[k]
	if e == nil && k.Session != "" && sh.perSub[k.Subject] >= MaxKeysPerSubject {
		k.Session = ""
		e = sh.m[k]
	}
	switch {
	case e == nil:
		e = &memEntry{}
		sh.m[k] = e
		sh.perSub[k.Subject]++
	case n-e.touched > int64(retain):
		e.t = Taint{} // idle past retain: dropped whole, not yet swept
	}
	e.touched = max(e.touched, n)
	e.t.Join(add)
	return nil
}

// sweep drops entries idle longer than retain, at most every retain/8.
// Call with sh.mu held.
func (sh *memShard) sweep(now int64, retain time.Duration) {
	if now-sh.lastSweep < int64(retain/8) {
		return
	}
	sh.lastSweep = now
	for k, e := range sh.m {
		if now-e.touched > int64(retain) {
			delete(sh.m, k)
			if sh.perSub[k.Subject]--; sh.perSub[k.Subject] <= 0 {
				delete(sh.perSub, k.Subject)
			}
		}
	}
}
