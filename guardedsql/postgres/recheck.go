package postgres

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tenantmcp/tenantmcp/guardedsql"
	"github.com/tenantmcp/tenantmcp/guardedsql/internal/engine"
	"github.com/tenantmcp/tenantmcp/internal/guardfault"
)

// lockRetry is how soon a check that timed out on a lock runs again.
const lockRetry = 250 * time.Millisecond

// errCheckInterrupted marks a row-level security check cut short by its
// caller's context; it fails that call only.
var errCheckInterrupted = errors.New("guardedsql: row-level security check interrupted by the caller")

// monitor keeps the row-level security verified after start-up.
//
// Invariant: a guarded PostgreSQL statement is sent only if the latest
// check passed and is younger than the interval, and only on a connection
// that passed the check itself.
type monitor struct {
	check    func(ctx context.Context, q engine.Querier) error
	pool     engine.Pool
	interval time.Duration
	log      *slog.Logger
	now      func() time.Time

	due     atomic.Int64          // unix nanoseconds of the next check
	failing atomic.Pointer[error] // the failing check's error, nil when passing
	mu      sync.Mutex            // one periodic check at a time
}

func newMonitor(check func(context.Context, engine.Querier) error, pool engine.Pool, interval time.Duration, log *slog.Logger) *monitor {
	m := &monitor{check: check, pool: pool, interval: interval, log: log, now: time.Now}
	if m.interval <= 0 {
		m.interval = DefaultRecheck
	}
	if m.log == nil {
		m.log = slog.Default()
	}
	m.due.Store(m.now().Add(m.interval).UnixNano())
	return m
}

// gate returns the current verdict, running the periodic check first if
// it is due (callers wait for it: no statement is served on a stale
// verdict).
func (m *monitor) gate(ctx context.Context) error {
	if guardfault.RecheckOff() {
		return nil
	}
	if m.now().UnixNano() >= m.due.Load() {
		var interrupted error
		m.mu.Lock()
		if start := m.now(); start.UnixNano() >= m.due.Load() {
			if err := m.record(ctx, m.check(ctx, m.pool), "periodic", start); errors.Is(err, errCheckInterrupted) {
				interrupted = err
			}
		}
		m.mu.Unlock()
		if interrupted != nil {
			// The verdict on record is older than the interval: this
			// call may not be served on it.
			return interrupted
		}
	}
	if p := m.failing.Load(); p != nil {
		return *p
	}
	return nil
}

// connCheck vets a new pooled connection.
func (m *monitor) connCheck(ctx context.Context, conn engine.Pool) error {
	if guardfault.RecheckOff() {
		return nil
	}
	start := m.now()
	if err := m.check(ctx, conn); err != nil {
		return m.record(ctx, err, "new connection", start)
	}
	return nil
}

// record stores the verdict of a check begun at start and schedules the
// next check one interval after that start (not after its end: what the
// check read may be as old as its start). It takes
// no lock: the periodic check (under m.mu) may acquire a new connection,
// whose own check records too. A failure is logged every time, a recovery
// once.
func (m *monitor) record(ctx context.Context, err error, when string, start time.Time) error {
	if err != nil && !errors.Is(err, ErrRLSUnsafe) && ctx.Err() != nil && !guardfault.Off(guardfault.RecheckInterrupt) {
		// The caller gave up (cancelled, or past its deadline) while the
		// check ran, which says nothing about the policies. Only this call
		// fails; the verdict and the schedule stay as they were, so one
		// tenant's abandoned call cannot make every tenant's statements
		// fail closed, and the next call runs the check again.
		return fmt.Errorf("%w: %w", errCheckInterrupted, ctx.Err())
	}
	next := m.interval
	if guardedsql.IsUnavailable(err) {
		// The database cannot be reached: the statements fail on their own
		// with a retryable error; the verdict stands, and the check is
		// retried soon.
		m.due.Store(start.Add(min(m.interval, time.Second)).UnixNano())
		return err
	}
	if err != nil && !errors.Is(err, ErrRLSUnsafe) && guardedsql.IsTimeout(err) {
		// The check waited for a lock longer than its bound
		// (postgres.CheckLockTimeout): a migration holds a table. Nothing
		// is verified, and what the migration commits may be a policy
		// change, so this fails closed like any check that could not run;
		// but it is a passing condition, not a fault, so the calls get the
		// retryable "unavailable" error instead of hanging behind the
		// lock, and the check runs again soon. Like every check that
		// could not run it matches ErrRLSUnsafe; it also matches
		// guardedsql.ErrUnavailable, which is what makes it retryable.
		err = fmt.Errorf("%w: %w: the check waited too long for a lock (a migration in progress?): %w", guardedsql.ErrUnavailable, ErrRLSUnsafe, err)
		m.failing.Store(&err)
		m.log.LogAttrs(ctx, slog.LevelWarn, "guardedsql: row-level security check blocked by a lock; refusing guarded statements (retryable) until it runs",
			slog.String("check", when))
		m.due.Store(start.Add(min(m.interval, lockRetry)).UnixNano())
		return err
	}
	if err != nil && !errors.Is(err, ErrRLSUnsafe) {
		// The check could not run (a deadlock with a concurrent
		// migration, a lost connection): nothing is verified, so this
		// fails closed as well.
		err = fmt.Errorf("%w: the re-check could not run: %w", ErrRLSUnsafe, err)
	}
	if err != nil {
		next = min(m.interval, time.Second)
		m.failing.Store(&err)
		m.log.LogAttrs(ctx, slog.LevelError, "guardedsql: row-level security check failed; refusing guarded statements",
			slog.String("check", when), slog.String("err", err.Error()))
	} else if m.failing.Swap(nil) != nil {
		m.log.LogAttrs(ctx, slog.LevelWarn, "guardedsql: row-level security check passes again; serving",
			slog.String("check", when))
	}
	m.due.Store(start.Add(next).UnixNano())
	return err
}
