// Package guardfault is a test-only fault injector for the tenant guard.
// DropPredicate makes guardedsql omit the tenant predicate for one table,
// simulating a bug in predicate generation, so that a property suite can
// show it notices such a bug (a mutation check). IgnoreAncestors and
// BindTokenRolesEverywhere undo, one at a time, the checks of grants along
// the whole group path and of roles bound per grant. It panics outside a test
// binary, so production code cannot switch the guard off through it.
package guardfault
