package engine

import (
	"context"
	"time"
)

// Conn is what an engine package hands guardedsql.OpenConn: the pool and
// dialect a DB guards, and what the engine learnt about the server at
// start-up. Only this module's engine packages make one.
type Conn struct {
	// Pool runs the statements; DB.Close closes it (a pool adapting a
	// caller's *sql.DB or *pgxpool.Pool leaves that open).
	Pool Pool
	// Dialect renders the statements and reads the catalog.
	Dialect Dialect
	// SetStatement: the server bounds one statement with SET STATEMENT
	// ... FOR (MariaDB), which a MySQL DB's StatementTimeout and
	// LockTimeout need.
	SetStatement bool
	// NoIntersectExcept: the server has no INTERSECT or EXCEPT (MySQL
	// before 8.0.31); the guard refuses them.
	NoIntersectExcept bool
	// PredicatesOnly turns off the guard's join-aware rewrites (tests).
	PredicatesOnly bool
	// Gate, if set, runs before every guarded statement is sent and
	// before a transaction begins; its error fails the statement closed
	// (PostgreSQL: the row-level security re-check's verdict). txBegan is
	// zero outside a transaction, where the gate may wait for a check in
	// flight; inside one it is when the transaction's own gate began, and
	// the gate must not wait (the caller holds a pooled connection). It
	// is installed after the start-up checks.
	Gate func(ctx context.Context, txBegan time.Time) error
	// Verify, if set, is DB.Check's check of the engine's own isolation
	// on q (PostgreSQL: the row-level security check). An error meaning
	// the database is unreachable wraps guardedsql.ErrUnavailable.
	Verify func(ctx context.Context, q Querier) error
	// Stop, if set, ends the engine's background work (PostgreSQL: the
	// periodic re-check); DB.Close calls it before closing the pool.
	Stop func()
}
