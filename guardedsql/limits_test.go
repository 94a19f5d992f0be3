package guardedsql_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/tenantmcp/tenantmcp/builder"
	"github.com/tenantmcp/tenantmcp/guardedsql"
)

// lockBooking locks booking id through the unguarded admin handle, as a
// long transaction of another client would, until the returned func runs.
func lockBooking(t *testing.T, h *hotelDB, id int64) (release func()) {
	t.Helper()
	tx, err := h.raw.BeginTx(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(`UPDATE bookings SET nights = nights WHERE id = ?`, id); err != nil {
		tx.Rollback()
		t.Fatal(err)
	}
	var once sync.Once
	release = func() { once.Do(func() { tx.Rollback() }) }
	t.Cleanup(release)
	return release
}

func touchBooking(h *hotelDB, id int64) builder.Mutation {
	bk := h.sch.Table("bookings")
	return builder.Must(builder.UpdateTable(bk).Set("status", "checked").Where(bk.Col("id").Eq(id)).ExpectOne().Build())
}

// TestLockWaitEndsAtTimeout: a guarded write that waits on a row another
// transaction holds is stopped by the database at the lock/statement
// timeout set with the scope, long before the caller's own deadline, with
// an error IsTimeout recognises; and the bound does not stay on the pooled
// connection for the next statement.
func TestLockWaitEndsAtTimeout(t *testing.T) {
	bounds := map[string]guardedsql.Options{
		"lock":      {StatementTimeout: 5 * time.Second, LockTimeout: time.Second},
		"statement": {StatementTimeout: time.Second},
	}
	for _, e := range []engine{enginePostgres, engineMySQL} {
		for name, opts := range bounds {
			t.Run(e.name+"/"+name, func(t *testing.T) {
				e.dsn(t)
				h := e.newHotel(t, opts)
				b := h.m.bookings[0]
				chain := h.m.hotelOf(b.Room).Chain
				release := lockBooking(t, h, b.ID)
				ctx, cancel := context.WithTimeout(grantCtx(chainG(chain)), 20*time.Second)
				defer cancel()
				start := time.Now()
				_, err := h.db.Exec(ctx, touchBooking(h, b.ID))
				took := time.Since(start)
				t.Logf("%s: blocked write ended after %s: %v", e.name, took.Round(time.Millisecond), err)
				if !guardedsql.IsTimeout(err) {
					t.Fatalf("blocked write: err = %v, want a database timeout (IsTimeout)", err)
				}
				if ctx.Err() != nil || took > 15*time.Second {
					t.Fatalf("the call's own deadline ended the wait (%s), not the database timeout", took)
				}
				release()
				// The same pool still runs statements without the bound: a
				// write that takes no lock wait succeeds.
				if _, err := h.db.Exec(ctx, touchBooking(h, b.ID)); err != nil {
					t.Fatalf("after the lock is released: %v", err)
				}
				// Nothing stays set on the connections: the bound was local to
				// the call's transaction (statement on MariaDB).
				var v string
				q := `SELECT current_setting('statement_timeout')`
				if e.name == "mysql" {
					q = `SELECT @@SESSION.max_statement_time`
				}
				if err := h.raw.QueryRow(q).Scan(&v); err != nil {
					t.Fatal(err)
				}
				if v != "0" && v != "0.000000" {
					t.Errorf("statement timeout left on a connection: %q", v)
				}
			})
		}
	}
}

// TestPoolWaitBusy: with every connection held by calls waiting on a lock,
// a further call gets ErrBusy after the pool-wait bound instead of queueing
// until its deadline; the observer sees the wait. Once the lock goes, the
// held calls finish and the pool serves again.
func TestPoolWaitBusy(t *testing.T) {
	e := enginePostgres
	e.dsn(t)
	var mu sync.Mutex
	var busySeen int
	h := newPostgresHotel(t, e.dsn(t), seedModel(3, 3, 4, 2), guardedsql.Options{
		PoolWait: 300 * time.Millisecond,
		PoolWaitObserver: func(_ context.Context, _ time.Duration, busy bool) {
			if busy {
				mu.Lock()
				busySeen++
				mu.Unlock()
			}
		},
	})
	conns := int(h.app.Config().MaxConns)
	b := h.m.bookings[0]
	chain := h.m.hotelOf(b.Room).Chain
	release := lockBooking(t, h.hotelDB, b.ID)
	var wg sync.WaitGroup
	holdErrs := make(chan error, conns)
	for range conns {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(grantCtx(chainG(chain)), 20*time.Second)
			defer cancel()
			_, err := h.db.Exec(ctx, touchBooking(h.hotelDB, b.ID))
			holdErrs <- err
		})
	}
	// Wait until every connection is taken by a blocked statement.
	deadline := time.Now().Add(10 * time.Second)
	for h.app.Stat().AcquiredConns() < int32(conns) {
		if time.Now().After(deadline) {
			t.Fatalf("only %d of %d connections taken", h.app.Stat().AcquiredConns(), conns)
		}
		time.Sleep(10 * time.Millisecond)
	}
	other := h.m.bookings[len(h.m.bookings)-1]
	ctx, cancel := context.WithTimeout(grantCtx(chainG(h.m.hotelOf(other.Room).Chain)), 20*time.Second)
	defer cancel()
	start := time.Now()
	_, err := h.db.Exec(ctx, touchBooking(h.hotelDB, other.ID))
	took := time.Since(start)
	t.Logf("call on a saturated pool (%d connections) answered after %s: %v", conns, took.Round(time.Millisecond), err)
	if !errors.Is(err, guardedsql.ErrBusy) {
		t.Fatalf("err = %v, want ErrBusy", err)
	}
	if took > 10*time.Second {
		t.Fatalf("busy answer took %s", took)
	}
	mu.Lock()
	if busySeen == 0 {
		t.Error("the pool-wait observer saw no busy wait")
	}
	mu.Unlock()
	release()
	wg.Wait()
	close(holdErrs)
	for err := range holdErrs {
		if err != nil {
			t.Errorf("held call after the lock was released: %v", err)
		}
	}
	if _, err := h.db.Exec(ctx, touchBooking(h.hotelDB, other.ID)); err != nil {
		t.Fatalf("after the pool drained: %v", err)
	}
}

// TestSQLiteLockWaitBounded: on SQLite (opened with Open) the statement
// timeout also bounds the busy timeout, so a write waiting for the
// database lock another connection holds gives up at it, not after the
// default 5 s; and a statement that is not blocked still runs.
func TestSQLiteLockWaitBounded(t *testing.T) {
	h := newHotel(t)
	var seq int
	var name, path string
	if err := h.raw.QueryRow(`PRAGMA database_list`).Scan(&seq, &name, &path); err != nil {
		t.Fatal(err)
	}
	db, err := guardedsql.Open(context.Background(), "sqlite:"+path, h.sch, guardedsql.Options{StatementTimeout: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	b := h.m.bookings[0]
	ctx, cancel := context.WithTimeout(grantCtx(chainG(h.m.hotelOf(b.Room).Chain)), 20*time.Second)
	defer cancel()
	release := lockBooking(t, h, b.ID)
	start := time.Now()
	_, err = db.Exec(ctx, touchBooking(h, b.ID))
	took := time.Since(start)
	t.Logf("sqlite: blocked write ended after %s: %v", took.Round(time.Millisecond), err)
	if !guardedsql.IsTimeout(err) || took > 3*time.Second {
		t.Fatalf("blocked write: err = %v after %s, want a lock error well before the 5 s default busy timeout", err, took)
	}
	release()
	if _, err := db.Exec(ctx, touchBooking(h, b.ID)); err != nil {
		t.Fatalf("after the lock is released: %v", err)
	}
}

// TestPoolWaitBusyDatabaseSQL: the same bound on a database/sql pool
// (SQLite here; MySQL uses the same adapter): with its only connection
// taken, reads, writes and transactions fail with ErrBusy after the wait;
// once it is free they run, and each gives its connection back.
func TestPoolWaitBusyDatabaseSQL(t *testing.T) {
	h := newHotelSized(t, 3, 3, 4, 2, guardedsql.Options{PoolWait: 200 * time.Millisecond})
	h.raw.SetMaxOpenConns(1)
	b := h.m.bookings[0]
	ctx := grantCtx(chainG(h.m.hotelOf(b.Room).Chain))
	bk := h.sch.Table("bookings")
	read := builder.Must(builder.Select(bk.Col("id")).From(bk).Build())
	ops := map[string]func() error{
		"query": func() error {
			rows, err := h.db.Query(ctx, read)
			if err != nil {
				return err
			}
			for rows.Next() {
			}
			return rows.Close()
		},
		"exec": func() error { _, err := h.db.Exec(ctx, touchBooking(h, b.ID)); return err },
		"tx": func() error {
			return h.db.Tx(ctx, func(tx *guardedsql.Tx) error { _, err := tx.Exec(ctx, touchBooking(h, b.ID)); return err })
		},
	}
	held, err := h.raw.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for name, op := range ops {
		start := time.Now()
		if err := op(); !errors.Is(err, guardedsql.ErrBusy) || time.Since(start) > 10*time.Second {
			t.Fatalf("%s with the only connection taken: err = %v after %s, want ErrBusy", name, err, time.Since(start))
		}
	}
	held.Close()
	for range 3 { // more than the pool holds: each op must give its connection back
		for name, op := range ops {
			if err := op(); err != nil {
				t.Fatalf("%s with the connection free: %v", name, err)
			}
		}
	}
}
