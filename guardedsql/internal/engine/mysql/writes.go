package mysql

import (
	"database/sql"

	"github.com/tenantmcp/tenantmcp/internal/guardfault"
)

// ReturningOn implements dialect.ReturningWriter: MariaDB 10.5+ takes
// INSERT ... RETURNING and DELETE ... RETURNING but not UPDATE ...
// RETURNING; MySQL takes none.
func (d Dialect) ReturningOn(stmt string) bool {
	return d.MariaDB && (stmt == "insert" || stmt == "delete")
}

// WritesByKey implements dialect.KeyedWriter: InnoDB locks what it scans.
func (Dialect) WritesByKey() bool { return !guardfault.Off(guardfault.KeyedWrites) }

// GuardedIsolation is the isolation level a guarded transaction on MySQL or
// MariaDB begins with: the level the caller asked for, and READ COMMITTED
// when it asked none (sql.LevelDefault). This is the one place that
// default is chosen; a per-transaction option passes its level through
// here.
//
// Why READ COMMITTED: under InnoDB's REPEATABLE READ a locking read,
// UPDATE or DELETE keeps a lock on every row it scanned, other tenants'
// included (and gap locks between them), and an INSERT ... SELECT or a
// write whose WHERE holds a subquery takes shared locks on the rows that
// subquery reads; so one tenant's open transaction would block another's
// writes to its own rows, and a row another tenant holds would make a
// guarded statement wait instead of missing it. Under READ COMMITTED those
// reads are consistent (non-locking) reads and the locks on rows that did
// not match are released at once.
func GuardedIsolation(requested sql.IsolationLevel) sql.IsolationLevel {
	if requested == sql.LevelDefault && !guardfault.Off(guardfault.KeyedWrites) {
		return sql.LevelReadCommitted
	}
	return requested
}
