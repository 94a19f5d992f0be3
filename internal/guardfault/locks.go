package guardfault

// Issue 26 §1–2: locks and engine errors across tenants.
const (
	// GuardFirst: a caller's condition that could raise an engine error is
	// evaluated only under CASE WHEN <tenant test> THEN ... END (guard's
	// order.go). Disabled, it is a plain conjunct beside the tenant test,
	// which the engine may evaluate first on another tenant's row;
	// property 50 must notice.
	GuardFirst Fix = "guard_first"
	// KeyedWrites: on MySQL/MariaDB a guarded UPDATE, DELETE, locking read
	// or upsert first reads the keys of its rows in scope without locking,
	// then writes or locks only those keys, in a READ COMMITTED
	// transaction. Disabled, the statement locks as it scans (and waits for
	// another tenant's locked row); property 49 must notice.
	KeyedWrites Fix = "keyed_writes"
)
