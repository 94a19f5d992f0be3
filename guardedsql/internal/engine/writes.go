package engine

// ReturningWriter is implemented by dialects whose engine takes a
// RETURNING clause on some writes. ReturningOn reports whether stmt
// ("insert", "update" or "delete") takes one; where it does not, the guard
// returns the written rows through a fallback in the statement's
// transaction (guard's writes.go).
type ReturningWriter interface {
	ReturningOn(stmt string) bool
}

// UpsertStyle is how the guard runs an upsert (INSERT ... OnConflict ...
// DoUpdate) so that only a conflicting row in scope is ever updated.
type UpsertStyle int

const (
	// UpsertLocked: INSERT ... ON DUPLICATE KEY UPDATE with a no-op
	// assignment (inserts the row, or locks the conflicting one
	// exclusively without changing it), then read under that lock whether
	// the row is in scope, and update it or fail: MySQL, whose ON
	// DUPLICATE KEY UPDATE has no WHERE. The default.
	UpsertLocked UpsertStyle = iota
	// UpsertWhere: one INSERT ... ON CONFLICT (target) DO UPDATE SET ...
	// WHERE <conflicting row in scope> (SQLite).
	UpsertWhere
	// UpsertThenUpdate: INSERT ... ON CONFLICT (target) DO NOTHING, then,
	// if it inserted nothing, a guarded UPDATE of the conflicting row
	// (PostgreSQL: with row-level security, ON CONFLICT DO UPDATE raises an
	// error for a conflicting row the policy hides, before its WHERE is
	// evaluated, where a miss is wanted).
	UpsertThenUpdate
)

// Upserter is implemented by dialects with a conflict clause.
type Upserter interface {
	UpsertStyle() UpsertStyle
}

// KeyedWriter is implemented by dialects whose engine locks the rows a
// write or a locking read scans before it tests them (InnoDB: MySQL and
// MariaDB), so that a guarded statement naming another tenant's locked row
// would wait for that tenant's lock, and under REPEATABLE READ lock rows
// outside the scope. When WritesByKey reports true the guard first reads,
// without locking, the primary keys of the rows in scope that the
// statement would write or lock, then writes or locks exactly those keys
// (the guard still in the statement), in a READ COMMITTED transaction
// (issue 26 §1; guard's keyed.go).
type KeyedWriter interface {
	WritesByKey() bool
}
