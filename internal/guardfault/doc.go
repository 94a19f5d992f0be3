// Package guardfault is the tenant guard's fault injector for the
// mutation check: it removes one check of the guard at a time so that a
// property suite can show it notices (a suite that cannot fail proves
// nothing). DropPredicate makes guardedsql omit the tenant predicate for
// one table, simulating a bug in predicate generation. IgnoreAncestors and
// BindTokenRolesEverywhere undo, one at a time, the checks of grants along
// the whole group path and of roles bound per grant; Disable switches off
// one of the checks that close a modelling gap (a [Fix]: nullable
// composite foreign keys, path keys, the start-up catalog comparison,
// collations, typed values, ...); RawEngineErrors and NoRecheck switch off
// guardedsql's engine-error translation and its row-level security
// re-check.
//
// The faults are compiled only with the build tag tenantmcp_faults
// ([Tag]): go test -tags tenantmcp_faults ./... . In a default build
// [Enabled] is false, every query the guard calls (Dropped, Off, ...) is a
// constant false that the compiler inlines away, the package links no
// package testing, and every setter panics with [NotBuilt]: a production
// binary contains no fault check and nothing that can switch one on. With
// the tag the setters still panic outside a test binary.
package guardfault

// Tag is the build tag that compiles the faults in.
const Tag = "tenantmcp_faults"

// NotBuilt says why a fault cannot be switched on in a build without
// [Tag], and how to run the tests that need one.
const NotBuilt = "fault injection is compiled only with the build tag " + Tag + "; run the test with: go test -tags " + Tag + " ..."
