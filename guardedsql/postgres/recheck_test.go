package postgres

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/puddle/v2"

	"github.com/tenantmcp/tenantmcp/guardedsql"
	"github.com/tenantmcp/tenantmcp/guardedsql/internal/engine"
	"github.com/tenantmcp/tenantmcp/internal/logbuf"
)

// fakeMonitor is a monitor on a clock the test moves, whose check returns
// what *result holds and counts its runs.
func fakeMonitor(t *testing.T, interval time.Duration, result *error, runs *atomic.Int64) (*monitor, *time.Time, *logbuf.Buffer) {
	t.Helper()
	logs := &logbuf.Buffer{}
	clock := time.Now()
	check := func(ctx context.Context, _ engine.Querier) error {
		runs.Add(1)
		return *result
	}
	m := newMonitor(check, nil, interval, slog.New(slog.NewTextHandler(logs, nil)), clock)
	m.now = func() time.Time { return clock }
	return m, &clock, logs
}

// An abandoned call must not turn the row-level security verdict into a
// failure for every tenant: a new connection's check it interrupted fails
// that call only.
func TestRecheckInterruptedByCallerFailsOnlyThatCall(t *testing.T) {
	m := newMonitor(func(ctx context.Context, _ engine.Querier) error {
		<-ctx.Done() // a check still running when its caller gives up
		return ctx.Err()
	}, nil, time.Minute, slog.New(slog.DiscardHandler), time.Now())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	err := m.connCheck(ctx, nil)
	if !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, ErrRLSUnsafe) {
		t.Fatalf("interrupted check returned %v, want the caller's own context error", err)
	}
	if err := m.gate(context.Background(), time.Time{}); err != nil {
		t.Fatalf("after an interrupted new-connection check, gate = %v, want the start-up verdict", err)
	}
	// A genuine finding stands even if its caller has gone meanwhile.
	m.check = func(context.Context, engine.Querier) error { return ErrRLSPolicyMissing }
	gone, cancel2 := context.WithCancel(context.Background())
	cancel2()
	if err := m.connCheck(gone, nil); !errors.Is(err, ErrRLSPolicyMissing) {
		t.Fatalf("a failing check under a cancelled caller = %v", err)
	}
	if err := m.gate(context.Background(), time.Time{}); !errors.Is(err, ErrRLSPolicyMissing) {
		t.Fatalf("a failing check was not recorded because its caller had gone: gate = %v", err)
	}
}

// The gate only reads the verdict: however late the check is, a call
// never runs it (a call may hold the pool's last connection). Past the
// verdict's expiry a statement of a transaction begun after it is refused
// at once with the retryable unavailable error that also matches
// ErrRLSUnsafe, one begun before it is served, and a call outside a
// transaction waits for the check in flight (here: until it gives up).
func TestRecheckGateNeverRunsTheCheck(t *testing.T) {
	var result error
	var runs atomic.Int64
	m, clock, _ := fakeMonitor(t, time.Minute, &result, &runs)
	began := *clock
	*clock = clock.Add(59 * time.Second) // due, not yet expired
	if err := m.gate(context.Background(), time.Time{}); err != nil {
		t.Fatalf("gate before expiry = %v", err)
	}
	*clock = clock.Add(2 * time.Second) // expired
	err := m.gate(context.Background(), *clock)
	if !errors.Is(err, ErrRLSUnsafe) || !guardedsql.IsUnavailable(err) {
		t.Fatalf("transaction's gate past expiry = %v, want ErrRLSUnsafe and retryable unavailable", err)
	}
	if err := m.gate(context.Background(), began); err != nil {
		t.Fatalf("a transaction begun on the fresh verdict: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if err := m.gate(ctx, time.Time{}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a call past expiry with no check in flight = %v, want it to wait until its deadline", err)
	}
	if runs.Load() != 0 {
		t.Fatalf("the gate ran the check %d times", runs.Load())
	}
}

// A call outside a transaction that finds the verdict expired waits for
// the check in flight and is served on its pass.
func TestRecheckExpiredCallWaitsForTheCheck(t *testing.T) {
	var result error
	var runs atomic.Int64
	m, clock, _ := fakeMonitor(t, time.Minute, &result, &runs)
	*clock = clock.Add(2 * time.Minute)
	served := make(chan error, 1)
	go func() { served <- m.gate(context.Background(), time.Time{}) }()
	time.Sleep(20 * time.Millisecond)
	select {
	case err := <-served:
		t.Fatalf("served before the check passed: %v", err)
	default:
	}
	m.record(context.Background(), nil, "periodic", *clock)
	if err := <-served; err != nil {
		t.Fatalf("after the check passed: %v", err)
	}
}

// A call woken by a record reads the verdict that record stored: record
// wakes the waiters only after storing it. (CI once saw a waiter read the
// expired verdict between the wake-up and the store.) Many rounds, since
// the window is a few instructions wide.
func TestRecheckWaiterSeesTheRecordedVerdict(t *testing.T) {
	for i := range 3000 {
		var result error
		var runs atomic.Int64
		m, clock, _ := fakeMonitor(t, time.Minute, &result, &runs)
		*clock = clock.Add(2 * time.Minute)
		served := make(chan error, 1)
		started := make(chan struct{})
		go func() {
			close(started)
			served <- m.gate(context.Background(), time.Time{})
		}()
		<-started
		m.record(context.Background(), nil, "periodic", *clock)
		if err := <-served; err != nil {
			t.Fatalf("round %d: a call waiting for the check was refused after it passed: %v", i, err)
		}
	}
}

// A check that found no free connection (the wait bound expired: every
// connection is held by calls) verifies nothing and refutes nothing: the
// verdict stands until it expires, the check runs again soon, the expiry
// is logged once, and the next passing check serves again.
func TestRecheckBusyPoolKeepsVerdictUntilExpiry(t *testing.T) {
	result := fmt.Errorf("reading installed policies: %w", engine.ErrBusy)
	var runs atomic.Int64
	m, clock, logs := fakeMonitor(t, time.Minute, &result, &runs)
	ctx := context.Background()
	*clock = clock.Add(31 * time.Second) // the loop's check is due
	if !m.tick(ctx) {
		t.Fatal("the loop stopped on a busy pool")
	}
	if err := m.gate(ctx, time.Time{}); err != nil {
		t.Fatalf("a busy pool failed the calls before the verdict expired: %v", err)
	}
	if due := time.Duration(m.due.Load() - clock.UnixNano()); due <= 0 || due > lockRetry {
		t.Fatalf("after a busy check the next runs in %s, want soon (≤ %s)", due, lockRetry)
	}
	*clock = clock.Add(30 * time.Second) // past the verdict's minute
	m.tick(ctx)
	m.tick(ctx)
	if err := m.gate(ctx, *clock); !errors.Is(err, ErrRLSUnsafe) || !guardedsql.IsUnavailable(err) {
		t.Fatalf("past expiry gate = %v, want the retryable refusal", err)
	}
	if n := strings.Count(logs.String(), "verdict expired"); n != 1 {
		t.Fatalf("expiry logged %d times, want once:\n%s", n, logs.String())
	}
	if strings.Contains(logs.String(), "check failed") {
		t.Fatalf("a busy pool was logged as a failed check:\n%s", logs.String())
	}
	result = nil
	m.tick(ctx)
	if err := m.gate(ctx, time.Time{}); err != nil {
		t.Fatalf("after a passing check gate = %v", err)
	}
	if !strings.Contains(logs.String(), "passes again") {
		t.Fatalf("recovery not logged:\n%s", logs.String())
	}
	// A real finding still fails closed at once.
	result = ErrRLSPolicyMissing
	m.tick(ctx)
	if err := m.gate(ctx, time.Time{}); !errors.Is(err, ErrRLSPolicyMissing) {
		t.Fatalf("a failing check: gate = %v", err)
	}
}

// The loop refreshes the verdict before it expires, so calls on a real
// clock are never refused while the check passes, and stop ends it.
func TestRecheckLoopRefreshesAhead(t *testing.T) {
	const interval = 80 * time.Millisecond
	var runs atomic.Int64
	m := newMonitor(func(context.Context, engine.Querier) error { runs.Add(1); return nil }, nil, interval, slog.New(slog.DiscardHandler), time.Now())
	m.start()
	end := time.Now().Add(8 * interval)
	for time.Now().Before(end) {
		if err := m.gate(context.Background(), time.Time{}); err != nil {
			t.Fatalf("gate while the check passes: %v", err)
		}
		time.Sleep(time.Millisecond)
	}
	m.stop()
	n := runs.Load()
	if n < 5 {
		t.Fatalf("%d periodic checks in 8 intervals", n)
	}
	time.Sleep(2 * interval)
	if runs.Load() != n {
		t.Fatal("the check ran after stop")
	}
	m.stop() // twice is fine
}

// A DB on a caller's pool that the caller closed without DB.Close: the
// loop ends on its own instead of logging failures forever.
func TestRecheckLoopEndsWithItsPool(t *testing.T) {
	m := newMonitor(func(context.Context, engine.Querier) error {
		return fmt.Errorf("beginning: %w", puddle.ErrClosedPool)
	}, nil, 20*time.Millisecond, slog.New(slog.DiscardHandler), time.Now())
	m.start()
	select {
	case <-m.done:
	case <-time.After(5 * time.Second):
		t.Fatal("the loop outlived its closed pool")
	}
}
