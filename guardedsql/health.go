package guardedsql

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"net"
)

// ErrUnavailable is wrapped by the error Check returns when the database
// cannot be reached. IsUnavailable tells the same condition from any error
// a statement returned.
var ErrUnavailable = errors.New("guardedsql: database unavailable")

// Check reports whether the database is reachable and, on PostgreSQL,
// whether the row-level security verified at start-up is still in force
// for the connected role (guardedsql/postgres.CheckRLS again: a migration
// may have dropped a policy or altered the role since). It is meant for
// readiness probes. An unreachable database yields an error wrapping
// ErrUnavailable; a failed RLS check an error matching
// guardedsql/postgres.ErrRLSUnsafe. The error never contains the DSN.
func (db *DB) Check(ctx context.Context) error {
	rows, err := db.pool.Query(ctx, "SELECT 1")
	if err == nil {
		for rows.Next() {
		}
		err = rows.Err()
		rows.Close()
	}
	if err != nil {
		if IsUnavailable(err) || ctx.Err() != nil {
			return fmt.Errorf("%w: %w", ErrUnavailable, err)
		}
		return fmt.Errorf("guardedsql: health check: %w", err)
	}
	if db.verify != nil {
		return db.verify(ctx, db.pool)
	}
	return nil
}

// IsUnavailable reports whether err means that the database could not be
// reached or is not accepting work right now (refused or dropped
// connection, server shutting down or starting up, too many connections),
// as opposed to a fault in the statement or the data. Retrying such a call
// later may succeed; retrying any other failure will not. It recognises
// the errors of pgx, go-sql-driver/mysql and the network.
func IsUnavailable(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, ErrUnavailable) || errors.Is(err, driver.ErrBadConn) {
		return true
	}
	// The registered engines' driver errors (pgconn, go-sql-driver/mysql).
	for _, e := range registered() {
		if e.Unavailable(err) {
			return true
		}
	}
	// The caller's own deadline or cancellation is not an outage (and
	// context.DeadlineExceeded would otherwise pass for a net.Error).
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return false
	}
	// A connection lost mid-statement: the driver reports the broken
	// socket as a net.Error, or as an unexpected EOF.
	var netErr net.Error
	return errors.As(err, &netErr) || errors.Is(err, io.ErrUnexpectedEOF)
}
