package guardfault

// Fix names one check that closes a modelling gap (issue 13 §3–7). Disable
// switches it off so that the conformance mutation check can show which
// property notices its absence.
type Fix string

const (
	// NullableFK: a level column covered by a composite tenant foreign key
	// is checked on its own when the key has a NULL part in the written row.
	NullableFK Fix = "nullable_fk"
	// PathKey: a scope-path foreign key must reference a primary key or a
	// unique constraint (declared graph and live catalog).
	PathKey Fix = "path_key"
	// Catalog: the schema graph is compared with the live catalog at Open
	// (global tables that look tenant-bound, unenforced foreign keys).
	Catalog Fix = "catalog"
	// Collation: level and path-key columns must compare byte-exactly.
	Collation Fix = "collation"
	// Typed: bound values are converted to their column's type.
	Typed Fix = "typed"
	// Windows: the read predicates of a statement holding a window
	// function or a scalar subquery (issue 15). Switching it off drops
	// them, which the window property (P44) must notice.
	Windows Fix = "windows"
	// RecheckInterrupt: a new connection's row-level security check cut
	// short by its caller's context fails that call only. Switching it off
	// records it as a failed check, so every tenant's statements fail
	// closed until the next one; TestRecheckInterruptedByCallerFailsOnlyThatCall
	// (guardedsql/postgres) must notice.
	RecheckInterrupt Fix = "recheck_interrupt"
	// RecheckOffCaller: the periodic PostgreSQL row-level security check
	// runs in its own goroutine ahead of the verdict's expiry, and a check
	// that found no free connection leaves the verdict standing until it
	// expires. Switching it off brings back the earlier design: the caller
	// whose statement finds the check due runs it, holding its own
	// connection (inside a transaction), and a check the busy pool kept
	// from running fails every tenant closed; property 48 must notice.
	RecheckOffCaller Fix = "recheck_off_caller"
	// CheckLockBound: the PostgreSQL row-level security check runs under
	// a lock_timeout, so a migration's table lock makes calls fail fast
	// with the retryable unavailable error. Switching it off lets the
	// check wait for the lock, and every call with it; property 51 must
	// notice.
	CheckLockBound Fix = "check_lock_bound"
	// PrivateCache: package server marks every list and resource read
	// cacheScope "private" (they depend on the caller). Switching it off
	// marks them "public", which the server's shared-cache test must
	// notice.
	PrivateCache Fix = "private_cache"
	// StateBindings: package server refuses a requestState bound to
	// another request or caller. Switching it off skips the comparison,
	// which the server's consent binding checks must notice.
	StateBindings Fix = "state_bindings"
	// StateReplay: package server spends a requestState's nonce once.
	// Switching it off skips the spend, which the server's replay checks
	// must notice.
	StateReplay Fix = "state_replay"
	// TaintFunctionsOnly: package flow/pgtaint gives the application role
	// only EXECUTE on its functions, and New refuses a role that may write
	// the taint table. Switching it off grants the role DML on the table
	// (as before issue 29) and skips that check, which the erase test
	// (TestAppRoleCannotEraseTaint's scenario) must notice.
	TaintFunctionsOnly Fix = "taint_functions_only"
	// IdempotencyClaim: package guardedsql records a call's idempotency
	// key inside its write transaction. Switching it off commits the write
	// without the key, which the server's retry test must notice (a retry
	// writes twice).
	IdempotencyClaim Fix = "idempotency_claim"
	// WriteUnconfirmed: package server answers write.unconfirmed when a
	// call that committed a write cannot release its result. Switching it
	// off answers a plain internal error, which the server's taint-failure
	// test must notice.
	WriteUnconfirmed Fix = "write_unconfirmed"
)
