//go:build tenantmcp_faults

package guardfault

import (
	"sync"
	"sync/atomic"
	"testing"
)

// Enabled reports whether fault injection is compiled in: true in builds
// with the tag tenantmcp_faults, where the functions below switch faults
// on in a test binary and the guard reads them.
const Enabled = true

var dropped atomic.Pointer[string]

// DropPredicate makes the guard render "always true" instead of the tenant
// predicate for every reference to table (reads, and the parent checks of
// writes) until the returned restore function is called. Only one table can
// be dropped at a time. It panics outside a test binary.
func DropPredicate(table string) (restore func()) {
	if !testing.Testing() {
		panic("guardfault: used outside a test binary")
	}
	t := table
	prev := dropped.Swap(&t)
	return func() { dropped.Store(prev) }
}

// Dropped reports whether the guard must omit the predicate for table.
// The guard calls it for every tenant-bound table reference.
func Dropped(table string) bool {
	p := dropped.Load()
	return p != nil && *p == table
}

var ancestorsIgnored, tokenRolesEverywhere atomic.Bool

// set switches b on until the returned restore function is called. It
// panics outside a test binary.
func set(b *atomic.Bool) (restore func()) {
	if !testing.Testing() {
		panic("guardfault: used outside a test binary")
	}
	b.Store(true)
	return func() { b.Store(false) }
}

// IgnoreAncestors makes the guard's scope document treat every grant
// confined to ancestors as a plain grant of its id (the behaviour before
// grants were checked along the whole group path) until restore is called.
// It panics outside a test binary.
func IgnoreAncestors() (restore func()) { return set(&ancestorsIgnored) }

// AncestorsIgnored reports whether IgnoreAncestors is in effect.
func AncestorsIgnored() bool { return ancestorsIgnored.Load() }

// BindTokenRolesEverywhere makes package claims bind the token-wide roles
// claim to every grant of a token, however many there are (the behaviour
// before roles were bound per grant), until restore is called. It panics
// outside a test binary.
func BindTokenRolesEverywhere() (restore func()) { return set(&tokenRolesEverywhere) }

// TokenRolesEverywhere reports whether BindTokenRolesEverywhere is in
// effect.
func TokenRolesEverywhere() bool { return tokenRolesEverywhere.Load() }

var (
	offMu sync.RWMutex
	off   = map[Fix]int{}
)

// Disable switches fix off until the returned restore function is called.
// It panics outside a test binary.
func Disable(fix Fix) (restore func()) {
	if !testing.Testing() {
		panic("guardfault: used outside a test binary")
	}
	offMu.Lock()
	off[fix]++
	offMu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			offMu.Lock()
			off[fix]--
			offMu.Unlock()
		})
	}
}

// Off reports whether fix is switched off. Outside a test binary nothing
// can switch a fix off, so it is false.
func Off(fix Fix) bool {
	offMu.RLock()
	defer offMu.RUnlock()
	return off[fix] > 0
}

var rawEngineErrors, noRecheck atomic.Bool

// RawEngineErrors makes guardedsql return the engine's errors untranslated
// (their text included) until restore is called. It panics outside a test
// binary.
func RawEngineErrors() (restore func()) { return set(&rawEngineErrors) }

// EngineErrorsRaw reports whether RawEngineErrors is in effect.
func EngineErrorsRaw() bool { return rawEngineErrors.Load() }

// NoRecheck makes guardedsql skip its row-level security re-checks (the
// periodic one and the one of new connections) until restore is called.
// It panics outside a test binary.
func NoRecheck() (restore func()) { return set(&noRecheck) }

// RecheckOff reports whether NoRecheck is in effect.
func RecheckOff() bool { return noRecheck.Load() }
