package guardedsql

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/tenantmcp/tenantmcp/guardedsql/internal/engine"
	"github.com/tenantmcp/tenantmcp/scope"
)

// IsolationLevel is the isolation level of a transaction begun with
// [DB.TxWith].
//
// What each level means on each engine:
//
//   - PostgreSQL: the three levels are the engine's own (BEGIN ISOLATION
//     LEVEL …). DefaultIsolation is the server's default_transaction_isolation,
//     READ COMMITTED unless configured. Serializable is true serializability
//     (SSI): a transaction that could see an anomaly fails with a
//     serialization failure ([ErrRetryable]) instead.
//   - MariaDB and MySQL (InnoDB): the engine's levels (SET TRANSACTION
//     ISOLATION LEVEL … before the transaction). Serializable turns plain
//     reads into shared-locking reads, so conflicts surface as deadlocks
//     ([ErrRetryable]). DefaultIsolation is the default of guarded
//     transactions (see the mysql dialect), not necessarily the server's.
//   - SQLite: every transaction is serializable (one writer at a time; a
//     reader sees one snapshot), whatever the level asked: each level is
//     accepted and gets at least the guarantees it names. Conflicts surface
//     as SQLITE_BUSY ([ErrRetryable]).
type IsolationLevel int

const (
	// DefaultIsolation is the engine's default (on MariaDB/MySQL guarded
	// transactions: READ COMMITTED).
	DefaultIsolation IsolationLevel = iota
	// ReadCommitted: each statement sees what was committed before it
	// began.
	ReadCommitted
	// RepeatableRead: the transaction's reads see one snapshot (on InnoDB,
	// locking reads and writes see the latest committed rows).
	RepeatableRead
	// Serializable: the transaction commits only if the outcome is that
	// of some serial order of the transactions; otherwise it fails with
	// an error matching ErrRetryable.
	Serializable
)

var isoNames = [...]string{"default", "read committed", "repeatable read", "serializable"}

// String names the level ("serializable").
func (l IsolationLevel) String() string {
	if l >= 0 && int(l) < len(isoNames) {
		return isoNames[l]
	}
	return fmt.Sprintf("IsolationLevel(%d)", int(l))
}

func (l IsolationLevel) dialect() engine.Isolation {
	switch l {
	case ReadCommitted:
		return engine.IsoReadCommitted
	case RepeatableRead:
		return engine.IsoRepeatableRead
	case Serializable:
		return engine.IsoSerializable
	}
	return engine.IsoDefault
}

// TxOptions are the options of [DB.TxWith]. The zero value runs fn once
// at the engine's default isolation, as [DB.Tx] does.
type TxOptions struct {
	// Isolation is the transaction's isolation level.
	Isolation IsolationLevel
	// MaxRetries: how many more times fn runs after a retryable error
	// (serialization failure, deadlock, lock timeout that the engine says
	// may succeed on retry: see IsRetryable). Zero: fn runs once.
	MaxRetries int
	// RetryBackoff: base of the jittered exponential backoff between
	// attempts; zero means 10ms. The n-th retry waits between 1/2 and 3/2
	// of RetryBackoff·2ⁿ⁻¹, at most MaxRetryBackoff.
	RetryBackoff time.Duration
}

// DefaultRetryBackoff is the backoff base of TxOptions.RetryBackoff zero.
const DefaultRetryBackoff = 10 * time.Millisecond

// MaxRetryBackoff bounds the wait before any one retry (before jitter).
const MaxRetryBackoff = time.Second

// ErrRetryable is matched (errors.Is) by the errors of a transaction that
// lost a race with a concurrent one, on every engine: a serialization
// failure (PostgreSQL 40001; MariaDB's 1020 under snapshot isolation), a
// deadlock (PostgreSQL 40P01, MariaDB/MySQL 1213, and 1467, InnoDB's
// deadlock on a table's AUTO-INC lock), a lock wait that timed
// out or a lock not granted (PostgreSQL 55P03, MariaDB/MySQL 1205 and
// 3572), a busy or locked database (SQLite SQLITE_BUSY, SQLITE_LOCKED).
// The transaction was rolled back (or must be); running it again from the
// start may succeed. [DB.TxWith] does that with TxOptions.MaxRetries.
//
// Like every engine error, it carries the engine's error code and no text
// of the engine's: a deadlock's detail names other sessions' locks, which
// may be another tenant's. A lock timeout also matches IsTimeout.
var ErrRetryable = errors.New("guardedsql: retryable: the transaction conflicted with a concurrent one")

// IsRetryable reports whether err matches ErrRetryable: the transaction
// that failed with it may succeed if run again from the start.
func IsRetryable(err error) bool { return errors.Is(err, ErrRetryable) }

// TxWith is [DB.Tx] with options: the transaction's isolation level, and
// how many times fn is run again when it fails with a retryable error.
//
// Each attempt is a new transaction under the scope of ctx (the same for
// every attempt: the scope is read from ctx, and each statement's context
// must still carry it), at the level asked. An attempt whose error
// matches ErrRetryable (fn's own error, wrapped or not, or the commit's)
// is rolled back and, while retries remain, fn runs again after a
// jittered exponential backoff; any other error, a nil one, or the end of
// ctx ends the loop. fn must therefore be safe to run more than once:
// everything it did in the database is rolled back with the attempt, but
// not what it did elsewhere. The error returned is the last attempt's;
// if ctx ended during a backoff it is joined with ctx's error.
//
// Invalid options (a level out of range, a negative MaxRetries or
// RetryBackoff) fail with ErrInvalid and begin nothing.
func (db *DB) TxWith(ctx context.Context, opts TxOptions, fn func(tx *Tx) error) error {
	if opts.Isolation < DefaultIsolation || opts.Isolation > Serializable {
		return fmt.Errorf("%w: unknown isolation level %d", ErrInvalid, int(opts.Isolation))
	}
	if opts.MaxRetries < 0 || opts.RetryBackoff < 0 {
		return fmt.Errorf("%w: negative MaxRetries or RetryBackoff", ErrInvalid)
	}
	base := opts.RetryBackoff
	if base == 0 {
		base = DefaultRetryBackoff
	}
	for attempt := 0; ; attempt++ {
		err := db.txOnce(ctx, opts.Isolation, fn)
		if err == nil || attempt >= opts.MaxRetries || !IsRetryable(err) {
			return err
		}
		if ctx.Err() != nil {
			return errors.Join(err, ctx.Err())
		}
		t := time.NewTimer(backoff(base, attempt))
		select {
		case <-ctx.Done():
			t.Stop()
			return errors.Join(err, ctx.Err())
		case <-t.C:
		}
	}
}

// backoff is the wait before retry n+1: base·2ⁿ capped at MaxRetryBackoff
// (or base, if larger), then jittered to between half and one and a half
// times that, so that transactions that collided do not collide again in
// step.
func backoff(base time.Duration, n int) time.Duration {
	d := base << min(n, 20)
	if limit := max(base, MaxRetryBackoff); d > limit || d <= 0 {
		d = limit
	}
	return d/2 + rand.N(d)
}

// txOnce runs fn in one transaction at level iso.
func (db *DB) txOnce(ctx context.Context, iso IsolationLevel, fn func(tx *Tx) error) (err error) {
	sc, ok := scope.FromContext(ctx)
	if !ok {
		return ErrNoScope
	}
	began := time.Now()
	if err := db.gate(ctx, time.Time{}); err != nil {
		return err
	}
	dtx, err := db.pool.Begin(engine.WithIsolation(ctx, iso.dialect()))
	if err != nil {
		return err
	}
	tx := &Tx{db: db, tx: dtx, sc: sc, began: began}
	defer func() {
		if p := recover(); p != nil {
			_ = dtx.Rollback(ctx)
			panic(p)
		}
	}()
	if db.d.NeedsTx() {
		ds := engine.EncodeScope(db.g.Levels, sc)
		if err := db.d.Session(ctx, dtx, sc, ds.Doc); err != nil {
			return errors.Join(err, dtx.Rollback(ctx))
		}
	}
	if err := fn(tx); err != nil {
		tx.done = true
		return errors.Join(err, dtx.Rollback(ctx))
	}
	tx.done = true
	if tx.wrote {
		// Counted for the call, with its idempotency claim recorded in
		// this same transaction (writehook.go).
		return db.commitWrite(ctx, dtx)
	}
	return dtx.Commit(ctx)
}
