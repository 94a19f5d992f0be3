package postgres

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/tenantmcp/tenantmcp/guardedsql/internal/engine"
)

// An abandoned call must not turn the row-level security verdict into a
// failure for every tenant: the check it interrupted fails that call only,
// and the next caller runs it again.
func TestRecheckInterruptedByCallerFailsOnlyThatCall(t *testing.T) {
	var checks int
	unsafe := false
	check := func(ctx context.Context, _ engine.Querier) error {
		checks++
		if unsafe {
			return ErrRLSUnsafe
		}
		<-ctx.Done() // a check still running when its caller gives up
		return ctx.Err()
	}
	m := newMonitor(check, nil, time.Minute, slog.New(slog.NewTextHandler(io.Discard, nil)))
	clock := time.Now()
	m.now = func() time.Time { return clock }

	for _, when := range []string{"periodic", "new connection"} {
		clock = clock.Add(2 * time.Minute) // the periodic check is due
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
		var err error
		if when == "periodic" {
			err = m.gate(ctx)
		} else {
			err = m.connCheck(ctx, nil)
		}
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, ErrRLSUnsafe) {
			t.Fatalf("%s: interrupted check returned %v, want the caller's own context error", when, err)
		}
		if m.failing.Load() != nil {
			t.Fatalf("%s: an interrupted check was recorded as a failing verdict", when)
		}
		if m.now().UnixNano() < m.due.Load() {
			t.Fatalf("%s: an interrupted check postponed the next one", when)
		}
	}

	// The next caller, whose context is live, runs the check itself.
	unsafe = true
	before := checks
	if err := m.gate(context.Background()); !errors.Is(err, ErrRLSUnsafe) {
		t.Fatalf("gate after interrupted checks = %v, want ErrRLSUnsafe from a check that ran", err)
	}
	if checks != before+1 {
		t.Fatalf("the next caller ran %d checks, want 1", checks-before)
	}
	// A genuine finding stands even if its caller has gone meanwhile.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	clock = clock.Add(2 * time.Minute)
	if err := m.gate(ctx); !errors.Is(err, ErrRLSUnsafe) {
		t.Fatalf("a failing check under a cancelled caller = %v, want ErrRLSUnsafe recorded", err)
	}
	if m.failing.Load() == nil {
		t.Fatal("a failing check was not recorded because its caller had gone")
	}
}
