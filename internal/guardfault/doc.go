// Package guardfault is a test-only fault injector for the tenant guard.
// DropPredicate makes guardedsql omit the tenant predicate for one table,
// simulating a bug in predicate generation, so that a property suite can
// show it notices such a bug (a mutation check). IgnoreAncestors and
// BindTokenRolesEverywhere undo, one at a time, the checks of grants along
// the whole group path and of roles bound per grant; Disable switches off
// one of the checks that close a modelling gap (Fix: nullable composite
// foreign keys, path keys, the start-up catalog comparison, collations,
// typed values) for the same purpose; RawEngineErrors and NoRecheck switch
// off guardedsql's engine-error translation and its row-level security
// re-check. All panic outside a test binary, so production code cannot
// switch the guard off through them.
package guardfault
