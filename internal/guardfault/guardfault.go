package guardfault

import (
	"sync/atomic"
	"testing"
)

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
