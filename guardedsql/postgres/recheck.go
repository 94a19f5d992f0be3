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
	"github.com/tenantmcp/tenantmcp/guardedsql/internal/engine/postgres/pgxdriver"
	"github.com/tenantmcp/tenantmcp/internal/guardfault"
)

// lockRetry is how soon a check that timed out on a lock runs again.
const lockRetry = 250 * time.Millisecond

// checkTimeout bounds a periodic check that hangs (with the interval, if
// longer); its lock waits are bounded more tightly (CheckLockTimeout).
const checkTimeout = 5 * time.Second

// maxAwait bounds how long a call whose verdict has expired waits for the
// check in flight.
const maxAwait = time.Second

// errCheckInterrupted marks a new connection's row-level security check
// cut short by its caller's context; it fails that call only.
var errCheckInterrupted = errors.New("guardedsql: row-level security check interrupted by the caller")

// errVerdictExpired is what calls get when the periodic check has not
// passed for a whole interval because it could not run (no pooled
// connection came free for it, or the database is unreachable): nothing
// recent is verified, so the statement is refused, and the refusal is
// retryable.
var errVerdictExpired = fmt.Errorf("%w: %w: the periodic re-check has not passed within its interval (it is waiting for a pooled connection or a lock, or the database is unreachable)", guardedsql.ErrUnavailable, ErrRLSUnsafe)

// verdict is the outcome of the latest row-level security check.
type verdict struct {
	err   error // nil while the check passes
	start int64 // unix nanoseconds when the check that gave it began
	until int64 // a passing verdict serves statements until then
}

// monitor keeps the row-level security verified after start-up.
//
// Invariant: a guarded PostgreSQL statement is sent only if the latest
// check passed and began less than one interval before the statement (in
// a transaction: before the transaction's first gate), and only on a
// connection that passed the check itself. The periodic check runs in the
// monitor's own goroutine, half an interval before the verdict expires,
// never on a caller's; a call waits for it only when it is that late, and
// never while holding a pooled connection (in a transaction), so no call
// can keep the check from a connection.
type monitor struct {
	check    func(ctx context.Context, q engine.Querier) error
	pool     engine.Pool
	interval time.Duration
	log      *slog.Logger
	now      func() time.Time

	mu      sync.Mutex    // orders record's writes
	changed chan struct{} // closed and replaced by every record (under mu)
	verdict atomic.Pointer[verdict]
	due     atomic.Int64  // unix nanoseconds of the next periodic check
	kick    chan struct{} // tells the loop that due moved earlier
	expired bool          // the expiry has been logged (under mu)

	onCaller sync.Mutex // gateOnCaller's one check at a time

	stopOnce sync.Once
	cancel   context.CancelFunc // stops the loop
	done     chan struct{}      // closed when the loop has stopped
}

// newMonitor returns a monitor whose verdict is the start-up check's,
// which passed when it began at checked. Its loop runs once start is
// called.
func newMonitor(check func(context.Context, engine.Querier) error, pool engine.Pool, interval time.Duration, log *slog.Logger, checked time.Time) *monitor {
	m := &monitor{check: check, pool: pool, interval: interval, log: log, now: time.Now, kick: make(chan struct{}, 1), changed: make(chan struct{})}
	if m.interval <= 0 {
		m.interval = DefaultRecheck
	}
	if m.log == nil {
		m.log = slog.Default()
	}
	m.verdict.Store(&verdict{start: checked.UnixNano(), until: checked.Add(m.interval).UnixNano()})
	m.due.Store(m.refreshAt(checked))
	return m
}

// refreshAt is when the periodic check after one begun at start runs:
// half an interval before its verdict expires, so that a check waiting
// for a busy pool still passes in time.
func (m *monitor) refreshAt(start time.Time) int64 {
	return start.Add(m.interval / 2).UnixNano()
}

// start runs the periodic check in its own goroutine until stop.
func (m *monitor) start() {
	if guardfault.Off(guardfault.RecheckOffCaller) {
		return // the callers run it (gateOnCaller)
	}
	ctx, cancel := context.WithCancel(context.Background())
	m.cancel, m.done = cancel, make(chan struct{})
	go m.loop(ctx)
}

// stop ends the loop and waits for it; it is safe to call more than once
// and on a monitor that never started.
func (m *monitor) stop() {
	m.stopOnce.Do(func() {
		if m.cancel != nil {
			m.cancel()
			<-m.done
		}
	})
}

func (m *monitor) loop(ctx context.Context) {
	defer close(m.done)
	t := time.NewTimer(time.Hour)
	defer t.Stop()
	for {
		if wait := time.Duration(m.due.Load() - m.now().UnixNano()); wait > 0 {
			t.Reset(wait)
			select {
			case <-ctx.Done():
				return
			case <-m.kick:
			case <-t.C:
			}
			continue
		}
		if !m.tick(ctx) {
			return
		}
	}
}

// tick runs one periodic check and records it; it reports false once the
// monitor should stop (stopped, or its pool closed under it: a DB on a
// caller's pool that was closed without DB.Close).
func (m *monitor) tick(ctx context.Context) bool {
	start := m.now()
	cctx, cancel := context.WithTimeout(ctx, max(m.interval, checkTimeout))
	var err error
	if oc, ok := m.pool.(oneConn); ok {
		// One connection for all the check's reads: a busy pool is
		// waited for once, not once a query.
		err = oc.WithConn(cctx, func(c engine.Pool) error { return m.check(cctx, c) })
	} else {
		err = m.check(cctx, m.pool)
	}
	cancel()
	if ctx.Err() != nil || pgxdriver.Closed(err) {
		return false
	}
	m.record(ctx, err, "periodic", start)
	return true
}

// oneConn is a pool that lends one of its connections (pgxdriver's).
type oneConn interface {
	WithConn(ctx context.Context, fn func(engine.Pool) error) error
}

// gate returns the current verdict; it never runs the check. A
// statement of a transaction is served while the verdict passes and was
// fresh when the transaction's own gate began (txBegan), and never waits:
// its caller holds a pooled connection the check may need. Any other
// caller whose verdict has expired (the check is slower than half an
// interval) waits for the check in flight, at most maxAwait.
func (m *monitor) gate(ctx context.Context, txBegan time.Time) error {
	if guardfault.RecheckOff() {
		return nil
	}
	if guardfault.Off(guardfault.RecheckOffCaller) {
		return m.gateOnCaller(ctx)
	}
	v := m.verdict.Load()
	switch {
	case v.err != nil:
		return v.err
	case m.now().UnixNano() < v.until, !txBegan.IsZero() && txBegan.UnixNano() < v.until:
		return nil
	case !txBegan.IsZero():
		return errVerdictExpired
	}
	// Expired: wait for the next record. The channel is taken under the
	// lock record holds, and the verdict read again after it, so a check
	// recorded in between is seen here, a later one closes the channel.
	m.mu.Lock()
	changed := m.changed
	m.mu.Unlock()
	if v := m.verdict.Load(); v.err != nil || m.now().UnixNano() < v.until {
		return v.err
	}
	t := time.NewTimer(maxAwait)
	defer t.Stop()
	select {
	case <-changed: // the check in flight has been recorded
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return errVerdictExpired
	}
	if v := m.verdict.Load(); v.err != nil || m.now().UnixNano() < v.until {
		return v.err
	}
	return errVerdictExpired
}

// connCheck vets a new pooled connection, under its caller's context.
func (m *monitor) connCheck(ctx context.Context, conn engine.Pool) error {
	if guardfault.RecheckOff() {
		return nil
	}
	start := m.now()
	err := m.check(ctx, conn)
	if err != nil && !errors.Is(err, ErrRLSUnsafe) && ctx.Err() != nil && !guardfault.Off(guardfault.RecheckInterrupt) {
		// The caller gave up (cancelled, or past its deadline) while the
		// check ran, which says nothing about the policies. Only this call
		// fails; the verdict stays as it was, so one tenant's abandoned
		// call cannot make every tenant's statements fail closed.
		return fmt.Errorf("%w: %w", errCheckInterrupted, ctx.Err())
	}
	if err != nil {
		return m.record(ctx, err, "new connection", start)
	}
	return nil
}

// couldNotRun reports whether err means the check found no connection to
// run on: the pool stayed busy for the whole wait bound, the database is
// unreachable, or the check ran out of its interval. That verifies nothing
// and refutes nothing, so the verdict stands until it expires.
func couldNotRun(err error) bool {
	if guardfault.Off(guardfault.RecheckOffCaller) {
		return guardedsql.IsUnavailable(err) // the earlier rule: busy fails closed
	}
	return errors.Is(err, engine.ErrBusy) || guardedsql.IsUnavailable(err) || errors.Is(err, context.DeadlineExceeded)
}

// record stores the verdict of a check begun at start and schedules the
// next check. A verdict never replaces one whose check began later. A
// failure is logged every time, a recovery and an expiry once.
func (m *monitor) record(ctx context.Context, err error, when string, start time.Time) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	// Calls waiting in gate wake on the close and read the verdict without
	// the lock, so the channel closes only after the verdict is stored
	// (deferred: runs before the unlock, on every path).
	defer func() {
		close(m.changed)
		m.changed = make(chan struct{})
	}()
	cur := m.verdict.Load()
	if start.UnixNano() < cur.start {
		return err // a later check has spoken
	}
	next := m.refreshAt(start)
	switch {
	case err == nil:
		m.verdict.Store(&verdict{start: start.UnixNano(), until: start.Add(m.interval).UnixNano()})
		if cur.err != nil || m.expired {
			m.log.LogAttrs(ctx, slog.LevelWarn, "guardedsql: row-level security check passes again; serving",
				slog.String("check", when))
		}
		m.expired = false
	case !errors.Is(err, ErrRLSUnsafe) && couldNotRun(err):
		// Nothing was read: the verdict stands until it expires (gate
		// refuses past its until), and the check runs again soon.
		next = m.now().Add(min(m.interval/8, lockRetry)).UnixNano()
		if cur.err == nil && m.now().UnixNano() >= cur.until && !m.expired {
			m.expired = true
			m.log.LogAttrs(ctx, slog.LevelError, "guardedsql: row-level security verdict expired: the re-check could not run; refusing guarded statements (retryable) until it does",
				slog.String("check", when), slog.String("err", err.Error()))
		}
	case !errors.Is(err, ErrRLSUnsafe) && guardedsql.IsTimeout(err):
		// The check waited for a lock longer than its bound
		// (postgres.CheckLockTimeout): a migration holds a table. Nothing
		// is verified, and what the migration commits may be a policy
		// change, so this fails closed like any check that could not
		// read; but it is a passing condition, not a fault, so the calls
		// get the retryable "unavailable" error instead of hanging behind
		// the lock, and the check runs again soon. It matches
		// ErrRLSUnsafe and guardedsql.ErrUnavailable.
		err = fmt.Errorf("%w: %w: the check waited too long for a lock (a migration in progress?): %w", guardedsql.ErrUnavailable, ErrRLSUnsafe, err)
		m.verdict.Store(&verdict{err: err, start: start.UnixNano()})
		m.log.LogAttrs(ctx, slog.LevelWarn, "guardedsql: row-level security check blocked by a lock; refusing guarded statements (retryable) until it runs",
			slog.String("check", when))
		next = start.Add(min(m.interval, lockRetry)).UnixNano()
	default:
		if !errors.Is(err, ErrRLSUnsafe) {
			// The check failed while reading (a deadlock with a
			// concurrent migration, a lost connection): nothing is
			// verified, so this fails closed as well.
			err = fmt.Errorf("%w: the re-check could not run: %w", ErrRLSUnsafe, err)
		}
		m.verdict.Store(&verdict{err: err, start: start.UnixNano()})
		m.log.LogAttrs(ctx, slog.LevelError, "guardedsql: row-level security check failed; refusing guarded statements",
			slog.String("check", when), slog.String("err", err.Error()))
		next = start.Add(min(m.interval, time.Second)).UnixNano()
	}
	if next < m.due.Load() || when == "periodic" {
		m.due.Store(next)
		select {
		case m.kick <- struct{}{}:
		default:
		}
	}
	return err
}

// gateOnCaller is the design guardfault.RecheckOffCaller replaced, kept
// for the mutation check only: the caller whose statement finds the check
// due runs it, holding whatever connection its transaction holds.
func (m *monitor) gateOnCaller(ctx context.Context) error {
	if m.now().UnixNano() >= m.due.Load() {
		m.onCaller.Lock()
		if start := m.now(); start.UnixNano() >= m.due.Load() {
			m.record(ctx, m.check(ctx, m.pool), "periodic", start)
		}
		m.onCaller.Unlock()
	}
	return m.verdict.Load().err
}
