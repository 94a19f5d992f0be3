//go:build !tenantmcp_faults

package guardfault

// Enabled reports whether fault injection is compiled in. Without the tag
// tenantmcp_faults it is false: every query below is a constant false the
// compiler inlines away, so the guard contains no fault check, and every
// setter panics with [NotBuilt].
const Enabled = false

// notBuilt is what every setter panics with in a build without the tag.
const notBuilt = "guardfault: " + NotBuilt

// DropPredicate panics: fault injection is not compiled in.
func DropPredicate(table string) (restore func()) { panic(notBuilt) }

// Dropped is false: nothing can drop a predicate in this build.
func Dropped(table string) bool { return false }

// IgnoreAncestors panics: fault injection is not compiled in.
func IgnoreAncestors() (restore func()) { panic(notBuilt) }

// AncestorsIgnored is false.
func AncestorsIgnored() bool { return false }

// BindTokenRolesEverywhere panics: fault injection is not compiled in.
func BindTokenRolesEverywhere() (restore func()) { panic(notBuilt) }

// TokenRolesEverywhere is false.
func TokenRolesEverywhere() bool { return false }

// Disable panics: fault injection is not compiled in.
func Disable(fix Fix) (restore func()) { panic(notBuilt) }

// Off is false: no fix can be switched off in this build.
func Off(fix Fix) bool { return false }

// RawEngineErrors panics: fault injection is not compiled in.
func RawEngineErrors() (restore func()) { panic(notBuilt) }

// EngineErrorsRaw is false.
func EngineErrorsRaw() bool { return false }

// NoRecheck panics: fault injection is not compiled in.
func NoRecheck() (restore func()) { panic(notBuilt) }

// RecheckOff is false.
func RecheckOff() bool { return false }
