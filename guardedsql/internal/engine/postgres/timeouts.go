package postgres

import (
	"context"
	"strconv"
	"time"

	"github.com/tenantmcp/tenantmcp/guardedsql/internal/engine"
	"github.com/tenantmcp/tenantmcp/internal/guardfault"
)

// Timeouts bound what one guarded transaction may spend in the server.
//
// They are set in the same transaction as the scope, transaction-local
// (set_config(..., true), the function form of SET LOCAL), queued ahead of
// the scope setting in the same pipelined batch: no extra round trip, and
// like the scope they end with the transaction, so a pooled connection
// never carries one call's bounds into another. A lock wait therefore
// cannot outlive the call that started it: the server cancels the
// statement (SQLSTATE 57014, or 55P03 for lock_timeout) even when the
// client's cancel request never arrives.
type Timeouts struct {
	// Statement is statement_timeout; zero leaves the role's setting.
	Statement time.Duration
	// Lock is lock_timeout; zero leaves the role's setting.
	Lock time.Duration
}

func (t Timeouts) zero() bool { return t.Statement <= 0 && t.Lock <= 0 }

// session queues (or runs), on tx, the statement that sets both bounds.
func (t Timeouts) session(ctx context.Context, tx engine.Querier) error {
	if t.zero() {
		return nil
	}
	// A zero bound is sent as the setting's current value, so that only the
	// configured one changes.
	st, lk := ms(t.Statement, "statement_timeout"), ms(t.Lock, "lock_timeout")
	q := `SELECT set_config('statement_timeout', ` + st + `, true), set_config('lock_timeout', ` + lk + `, true)`
	if dt, ok := driverTx[deferrer](tx); ok {
		dt.Defer(q)
		return nil
	}
	_, err := tx.Exec(ctx, q)
	return err
}

// ms renders d as a quoted millisecond literal (at least 1 ms, since 0
// would disable the bound), or, for d <= 0, as the setting's current value.
// Only integers and fixed names reach the text, never caller input.
func ms(d time.Duration, name string) string {
	if d <= 0 {
		return "current_setting('" + name + "')"
	}
	return "'" + strconv.FormatInt(max(d.Milliseconds(), 1), 10) + "'"
}

// CheckLockTimeout bounds every lock wait of the row-level security check
// (Check): the catalog reads wait for the lock of a table a migration
// holds (ACCESS EXCLUSIVE, for as long as its transaction lasts), and a
// check that waits makes every call wait behind it, until the caller's
// deadline or forever. Bounded, the check fails with lock_not_available
// (55P03) instead, which guardedsql answers with its retryable
// "unavailable" error while refusing to serve on an unverified verdict.
const CheckLockTimeout = 500 * time.Millisecond

// checkLockSQL sets CheckLockTimeout for the rest of the check's
// transaction (set_config(..., true): it ends with it).
var checkLockSQL = `SELECT pg_catalog.set_config('lock_timeout', ` + ms(CheckLockTimeout, "") + `, true)`

// boundLocks puts CheckLockTimeout on the check transaction tx, in the
// batch of its first statement where the driver queues statements.
func boundLocks(ctx context.Context, tx engine.Querier) error {
	if guardfault.Off(guardfault.CheckLockBound) {
		return nil
	}
	if dt, ok := driverTx[deferrer](tx); ok {
		dt.Defer(checkLockSQL)
		return nil
	}
	_, err := tx.Exec(ctx, checkLockSQL)
	return err
}
