// Package guard renders builder's sealed statements to SQL for one dialect
// and one scope, adding the tenant predicates. It is the only code in
// guardedsql that produces SQL text from a statement.
//
// Reads: every tenant-bound table reference gets a predicate that follows
// the schema graph to the levels the scope holds grants at; the predicate
// of the FROM table goes to WHERE, that of a joined table to its ON clause
// (so a LEFT JOIN turns out-of-scope rows into NULLs, never into rows).
// User conditions are parenthesised and ANDed with the guard; nothing the
// user writes can sit in an OR around it.
//
// Two rewrites replace a predicate by something equivalent and cheaper
// for references that must match (FROM and inner joins; see refModes):
// a reference inner-joined to its guarded scope parent on its parent
// foreign key needs no predicate (elision), and otherwise a primary-key
// scope path is added as inner joins with the level test in WHERE (path
// join) instead of an IN subquery. Options.PredicatesOnly turns both off.
//
// Writes: UPDATE and DELETE carry the read predicate of their target. An
// INSERT becomes INSERT ... SELECT <values> WHERE <checks>, and an UPDATE
// that assigns a scope column carries the same checks: every foreign key
// to a tenant-bound table must point at a row the scope can read, every
// level column not covered by such a key must hold a granted id, and a row
// with no scope parent must itself be in scope. A check that fails inserts
// or updates nothing, which guardedsql reports as not found.
//
// After rendering, the set of references the guard visited is compared
// with the set the builder recorded when it sealed the statement; any
// difference is ErrInternal and nothing is sent.
//
// Files, by concern: guard.go (Render, the plan types and the renderer's
// core), predicates.go (the read guard of one reference, expressions and
// predicates), select.go (reference modes, path joins and the SELECT
// clauses), mutate.go (write checks and the INSERT, UPDATE and DELETE
// plans), scalar.go (expressions beyond columns and aggregates), compound.go
// (derived tables, CTEs, set operations, locking reads) and writes.go
// (RETURNING, upserts, multi-row inserts and INSERT ... SELECT).
package guard
