package guardedsql_test

import (
	"strings"
	"sync"
	"testing"

	"github.com/tenantmcp/tenantmcp/builder"
	"github.com/tenantmcp/tenantmcp/guardedsql"
)

// TestLostUpdateForUpdate: two goroutines each run 20 read-modify-write
// increments of one room's rate, each in DB.Tx as SELECT ... FOR UPDATE
// then UPDATE with the value read + 1. None may be lost: the final rate is
// the initial one + 40 on every engine. On PostgreSQL and MariaDB/MySQL
// the row lock makes the second reader wait for the first's commit; on
// SQLite the transaction itself does (BEGIN IMMEDIATE takes the database's
// write lock before the read), which this test proves as well. The other
// rooms, including another tenant's with an interleaved id, are unchanged.
func TestLostUpdateForUpdate(t *testing.T) {
	forEachEngine(t, func(t *testing.T, e engine) {
		h := e.newHotel(t)
		ctx := grantCtx(hotelG(7))
		var target int64
		for _, r := range h.m.rooms {
			if r.Hotel == 7 {
				target = r.ID
				break
			}
		}
		rate := func(id int64) (n int64) {
			t.Helper()
			if err := h.raw.QueryRow("SELECT rate FROM rooms WHERE id = ?", id).Scan(&n); err != nil {
				t.Fatal(err)
			}
			return n
		}
		total := func() (n int64) {
			t.Helper()
			if err := h.raw.QueryRow("SELECT SUM(rate) FROM rooms WHERE id <> ?", target).Scan(&n); err != nil {
				t.Fatal(err)
			}
			return n
		}
		before, others := rate(target), total()
		rooms := h.sch.Table("rooms")
		read := builder.Must(builder.Select(rooms.Col("rate")).From(rooms).Where(rooms.Col("id").Eq(target)).ForUpdate().Build())
		const workers, each = 2, 20
		var wg sync.WaitGroup
		errs := make(chan error, workers*each)
		for range workers {
			wg.Go(func() {
				for range each {
					errs <- h.db.Tx(ctx, func(tx *guardedsql.Tx) error {
						v, err := guardedsql.One(ctx, tx, read, guardedsql.Scalar[int64])
						if err != nil {
							return err
						}
						_, err = tx.Exec(ctx, builder.Must(builder.UpdateTable(rooms).Set("rate", v+1).Where(rooms.Col("id").Eq(target)).ExpectOne().Build()))
						return err
					})
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatalf("increment: %v", err)
			}
		}
		if got := rate(target) - before; got != workers*each {
			t.Errorf("increments kept: %d of %d (%d lost)", got, workers*each, workers*each-got)
		}
		if got := total(); got != others {
			t.Errorf("other rooms' rates changed: sum %d, was %d", got, others)
		}
	})
}

// TestForUpdateLocksOnlyOwnRows (PostgreSQL): under a chain grant the guard
// joins a room's hotel to test the scope, but FOR UPDATE OF locks only the
// room: while the transaction holds it, another connection can lock the
// hotel (NOWAIT succeeds) but not the room (NOWAIT fails).
func TestForUpdateLocksOnlyOwnRows(t *testing.T) {
	e := enginePostgres
	e.dsn(t)
	h := e.newHotel(t)
	room := h.m.rooms[0]
	var chain string
	for _, ho := range h.m.hotels {
		if ho.ID == room.Hotel {
			chain = ho.Chain
		}
	}
	ctx := grantCtx(chainG(chain))
	rooms := h.sch.Table("rooms").As("r")
	q := builder.Must(builder.Select(rooms.Col("rate")).From(rooms).Where(rooms.Col("id").Eq(room.ID)).ForUpdate().Build())
	text, _, err := h.db.Render(ctx, q)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(text, `JOIN "hotels"`) || !strings.HasSuffix(text, `FOR UPDATE OF "r"`) {
		t.Fatalf("expected a path join to hotels and FOR UPDATE OF \"r\":\n%s", text)
	}
	err = h.db.Tx(ctx, func(tx *guardedsql.Tx) error {
		if _, err := guardedsql.One(ctx, tx, q, guardedsql.Scalar[int64]); err != nil {
			return err
		}
		other, err := h.raw.Begin()
		if err != nil {
			return err
		}
		defer other.Rollback()
		var id int64
		if err := other.QueryRow("SELECT id FROM hotels WHERE id = ? FOR UPDATE NOWAIT", room.Hotel).Scan(&id); err != nil {
			t.Errorf("the parent hotel is locked too: %v", err)
		}
		if err := other.QueryRow("SELECT id FROM rooms WHERE id = ? FOR UPDATE NOWAIT", room.ID).Scan(&id); err == nil || !strings.Contains(err.Error(), "could not obtain lock") {
			t.Errorf("the room is not locked: %v", err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
