package guardedsql_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tenantmcp/tenantmcp/builder"
	"github.com/tenantmcp/tenantmcp/guardedsql"
	"github.com/tenantmcp/tenantmcp/guardedsql/postgres"
	"github.com/tenantmcp/tenantmcp/internal/logbuf"
	"github.com/tenantmcp/tenantmcp/scope"
)

// TestPostgresPolicyDriftCaughtWhileServing alters a policy under load
// (ALTER POLICY ... USING (true) by the owner) on an RLS-only DB, which
// would then serve every tenant's bookings, and on a default DB (guard
// predicates too). Within one re-check interval every call fails closed
// with ErrRLSPolicyMissing naming the table, no call started after that
// returns a foreign row (the default DB never does), both DBs log the
// failure, and once the policy is re-applied they serve again and log the
// recovery.
func TestPostgresPolicyDriftCaughtWhileServing(t *testing.T) {
	const interval = 300 * time.Millisecond
	logs := &logbuf.Buffer{}
	logger := slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
	h := newPostgresHotel(t, enginePostgres.dsn(t), seedModel(3, 2, 2, 2), guardedsql.Options{Logger: logger, Engine: postgres.Options{RLSOnly: true, Recheck: interval}})
	ctx := context.Background()
	both, err := postgres.New(ctx, h.app, h.sch, guardedsql.Options{Logger: logger, Engine: postgres.Options{Key: h.key, Recheck: interval}})
	if err != nil {
		t.Fatal(err)
	}
	own := h.m.visible([]scope.Grant{chainG("acme")}).bookings
	b := h.sch.Table("bookings")
	q := builder.Must(builder.Select(b.Col("id")).From(b).Build())

	type result struct {
		start time.Time
		end   time.Time
		ids   []int64
		err   error
	}
	var (
		mu      sync.Mutex
		results = map[string][]result{}
		stop    atomic.Bool
		wg      sync.WaitGroup
	)
	for name, db := range map[string]*guardedsql.DB{"rls-only": h.db, "default": both} {
		for range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for !stop.Load() {
					start := time.Now()
					ids, err := guardedsql.All(grantCtx(chainG("acme")), db, q, guardedsql.Scalar[int64])
					mu.Lock()
					results[name] = append(results[name], result{start, time.Now(), ids, err})
					mu.Unlock()
					time.Sleep(5 * time.Millisecond)
				}
			}()
		}
	}
	time.Sleep(interval)
	alterStart := time.Now()
	if _, err := h.owner.Exec(ctx, `ALTER POLICY tenantmcp_scope ON bookings USING (true)`); err != nil {
		t.Fatal(err)
	}
	altered := time.Now() // the ALTER has committed
	time.Sleep(3 * interval)
	reapplying := time.Now()
	if err := postgres.ApplyRLS(ctx, h.owner, h.sch, postgres.Options{Key: h.key}); err != nil {
		t.Fatal(err)
	}
	reapplied := time.Now()
	time.Sleep(3 * interval)
	stop.Store(true)
	wg.Wait()

	for name, rs := range results {
		var refused, servedAfter int
		for _, r := range rs {
			foreign := 0
			for _, id := range r.ids {
				if !own[id] {
					foreign++
				}
			}
			// A call still running when the ALTER began (however early it
			// started: a loaded machine can stretch one) may see it, until
			// the re-check has had its interval.
			inWindow := r.end.After(alterStart) && r.start.Before(altered.Add(interval))
			failClosed := r.start.After(altered.Add(interval)) && r.start.Before(reapplying)
			switch {
			case foreign > 0 && (name == "default" || !inWindow):
				t.Errorf("%s: a call at +%v returned %d foreign bookings", name, r.start.Sub(altered), foreign)
			case failClosed && r.err == nil:
				t.Errorf("%s: a call at +%v was served after the drift's interval", name, r.start.Sub(altered))
			case failClosed && !errors.Is(r.err, postgres.ErrRLSUnsafe):
				t.Errorf("%s: drift error %v, want ErrRLSUnsafe", name, r.err)
			case failClosed && errors.Is(r.err, postgres.ErrRLSPolicyMissing) && !strings.Contains(r.err.Error(), `"bookings"`):
				t.Errorf("%s: drift error %v does not name the table", name, r.err)
			case r.start.Before(alterStart.Add(-100*time.Millisecond)) && r.err != nil && !errors.Is(r.err, postgres.ErrRLSUnsafe):
				// (A call that was slow to run may meet the drift too:
				// refused, as it should be.)
				t.Errorf("%s: before the drift: %v", name, r.err)
			}
			if failClosed && errors.Is(r.err, postgres.ErrRLSPolicyMissing) {
				refused++ // a check that ran into a concurrent migration fails closed too, unnamed
			}
			// Served again once a check has passed: the next check runs
			// at most an interval after the last failing one began (which
			// may be a new connection's, begun while ApplyRLS ran), and
			// takes its own time on a loaded machine.
			if r.start.After(reapplied.Add(2 * interval)) {
				if r.err != nil || len(r.ids) != len(own) {
					t.Errorf("%s: after re-applying: %d rows, %v", name, len(r.ids), r.err)
				}
				servedAfter++
			}
		}
		if refused == 0 || servedAfter == 0 {
			t.Errorf("%s: %d calls refused during the drift, %d served after; the load did not cover the phases", name, refused, servedAfter)
		}
	}
	out := logs.String()
	if strings.Count(out, "row-level security check failed") < 2 || !strings.Contains(out, "passes again") || !strings.Contains(out, "bookings") {
		t.Errorf("log records missing:\n%s", out)
	}
}

// TestPostgresNewConnectionChecked: a connection opened after the drift
// is vetted before its first guarded statement, even if the periodic
// check is not due.
func TestPostgresNewConnectionChecked(t *testing.T) {
	h := newPostgresHotel(t, enginePostgres.dsn(t), seedModel(2, 2, 2, 1))
	ctx := context.Background()
	cfg := h.appCfg.Copy()
	cfg.MaxConns = 1
	pool := pgConnect(t, cfg)
	defer pool.Close()
	db, err := postgres.New(ctx, pool, h.sch, guardedsql.Options{Engine: postgres.Options{Key: h.key, RLSOnly: true, Recheck: time.Hour}})
	if err != nil {
		t.Fatal(err)
	}
	b := h.sch.Table("bookings")
	q := builder.Must(builder.Select(b.Col("id")).From(b).Build())
	if _, err := guardedsql.All(grantCtx(chainG("acme")), db, q, guardedsql.Scalar[int64]); err != nil {
		t.Fatal(err)
	}
	if _, err := h.owner.Exec(ctx, `ALTER POLICY tenantmcp_scope ON bookings USING (true)`); err != nil {
		t.Fatal(err)
	}
	// The same connection: the hourly check is not due.
	if _, err := guardedsql.All(grantCtx(chainG("acme")), db, q, guardedsql.Scalar[int64]); err != nil {
		t.Fatalf("vetted connection: %v", err)
	}
	// Replace the pool's only connection.
	c, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	c.Conn().Close(ctx)
	c.Release()
	ids, err := guardedsql.All(grantCtx(chainG("acme")), db, q, guardedsql.Scalar[int64])
	if !errors.Is(err, postgres.ErrRLSPolicyMissing) || len(ids) != 0 {
		t.Fatalf("new connection after the drift: %d rows, %v", len(ids), err)
	}
}

// TestPostgresRecheckUnderMigrationLock: while a migration holds ACCESS
// EXCLUSIVE on a tenant-bound table in an open transaction, the periodic
// row-level security check would wait for it; bounded by
// postgres.CheckLockTimeout it gives up, and calls (even of a table the
// migration does not lock) fail fast with the retryable unavailable error
// instead of hanging until their deadline, and never run on the
// unverified verdict. Once the migration ends, calls are served again.
func TestPostgresRecheckUnderMigrationLock(t *testing.T) {
	const interval = 200 * time.Millisecond
	h := newPostgresHotel(t, enginePostgres.dsn(t), seedModel(2, 1, 1, 1), guardedsql.Options{Logger: slog.New(slog.DiscardHandler), Engine: postgres.Options{Recheck: interval}})
	ctx := context.Background()
	countries := h.sch.Table("countries")
	q := builder.Must(builder.Select(countries.Col("code")).From(countries).Build())
	call := func() (time.Duration, error) {
		cctx, cancel := context.WithTimeout(grantCtx(chainG(h.m.chains[0].ID)), 20*time.Second)
		defer cancel()
		start := time.Now()
		_, err := guardedsql.All(cctx, h.db, q, guardedsql.Scalar[string])
		return time.Since(start), err
	}
	if _, err := call(); err != nil {
		t.Fatal(err)
	}
	migration, err := h.admin.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer migration.Rollback(ctx)
	if _, err := migration.Exec(ctx, "LOCK TABLE rooms IN ACCESS EXCLUSIVE MODE"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * interval) // the check is due
	for i := range 3 {
		d, err := call()
		t.Logf("call %d under the lock: %s, %v", i, d, err)
		if err == nil {
			t.Fatalf("call %d served while the check could not run", i)
		}
		if !guardedsql.IsUnavailable(err) || !errors.Is(err, postgres.ErrRLSUnsafe) {
			t.Errorf("call %d: %v, want the unavailable error, failing closed (ErrRLSUnsafe)", i, err)
		}
		if d > 3*time.Second {
			t.Errorf("call %d took %s: it waited for the migration's lock", i, d)
		}
	}
	if err := migration.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		_, err := call()
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not served again after the migration ended: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestPostgresRecheckSaturatedPool: transactions hold every pooled
// connection, back to back, while the periodic row-level security check
// comes due again and again. The check must find its connection between
// them without any call waiting for it: no statement is refused, every
// read returns exactly the tenant's rows, and nothing is logged as a
// failed or expired check. A policy altered afterwards is still caught,
// which shows the check kept running rather than being skipped.
func TestPostgresRecheckSaturatedPool(t *testing.T) {
	h := newPostgresHotel(t, enginePostgres.dsn(t), seedModel(3, 2, 2, 2))
	db, s := saturatePool(t, h)
	if len(s.fails) > 0 {
		t.Fatalf("%d workers stopped on an error with the pool saturated, first: %v", len(s.fails), s.fails[0])
	}
	if s.txs < 40 {
		t.Fatalf("only %d transactions ran: the load did not saturate the pool", s.txs)
	}
	if strings.Contains(s.logs, "check failed") || strings.Contains(s.logs, "verdict expired") {
		t.Fatalf("the saturated pool was logged as a failing check:\n%s", s.logs)
	}
	ctx := context.Background()
	if _, err := h.owner.Exec(ctx, `ALTER POLICY tenantmcp_scope ON bookings USING (true)`); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := postgres.ApplyRLS(ctx, h.owner, h.sch, postgres.Options{Key: h.key}); err != nil {
			t.Fatal(err)
		}
	}()
	b := h.sch.Table("bookings")
	q := builder.Must(builder.Select(b.Col("id")).From(b).Build())
	deadline := time.Now().Add(10 * saturateInterval)
	for {
		_, err := guardedsql.All(grantCtx(chainG("acme")), db, q, guardedsql.Scalar[int64])
		if errors.Is(err, postgres.ErrRLSPolicyMissing) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the altered policy was not caught within 10 intervals (last call: %v): the check stopped running", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// saturateInterval is the re-check interval of saturatePool: long enough
// that a check slowed down by a loaded machine still passes within half
// of it.
const saturateInterval = 400 * time.Millisecond

type saturation struct {
	txs   int64
	fails []error
	logs  string
}

// saturatePool runs, on a DB over a pool of two connections, four
// workers whose transactions read the tenant's bookings three times each,
// back to back, for eight re-check intervals, and stops each worker at its
// first error (a wrong row count or a foreign row is one).
func saturatePool(t *testing.T, h *pgHotel) (*guardedsql.DB, saturation) {
	t.Helper()
	ctx := context.Background()
	cfg := h.appCfg.Copy()
	cfg.MaxConns = 2
	pool := pgConnect(t, cfg)
	t.Cleanup(pool.Close)
	logs := &logbuf.Buffer{}
	db, err := postgres.New(ctx, pool, h.sch, guardedsql.Options{
		Logger:   slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelWarn})),
		PoolWait: 2 * time.Second,
		Engine:   postgres.Options{Key: h.key, Recheck: saturateInterval},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	own := h.m.visible([]scope.Grant{chainG("acme")}).bookings
	b := h.sch.Table("bookings")
	q := builder.Must(builder.Select(b.Col("id")).From(b).Build())
	var (
		txs  atomic.Int64
		mu   sync.Mutex
		s    saturation
		stop atomic.Bool
		wg   sync.WaitGroup
	)
	for range 4 { // twice the pool: a transaction always waits for a connection
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stop.Load() {
				err := db.Tx(grantCtx(chainG("acme")), func(tx *guardedsql.Tx) error {
					for range 3 {
						ids, err := guardedsql.All(grantCtx(chainG("acme")), tx, q, guardedsql.Scalar[int64])
						if err != nil {
							return err
						}
						if len(ids) != len(own) {
							return fmt.Errorf("%d bookings, want %d", len(ids), len(own))
						}
						for _, id := range ids {
							if !own[id] {
								return fmt.Errorf("a foreign booking %d", id)
							}
						}
						time.Sleep(time.Millisecond) // hold the connection a little
					}
					return nil
				})
				if err != nil {
					mu.Lock()
					s.fails = append(s.fails, err)
					mu.Unlock()
					return
				}
				txs.Add(1)
			}
		}()
	}
	time.Sleep(8 * saturateInterval)
	stop.Store(true)
	wg.Wait()
	s.txs, s.logs = txs.Load(), logs.String()
	return db, s
}
