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
