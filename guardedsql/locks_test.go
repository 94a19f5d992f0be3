package guardedsql_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/tenantmcp/tenantmcp/builder"
	"github.com/tenantmcp/tenantmcp/guardedsql"
)

// lockWait is the lock wait bound of the lock tests (Options.LockTimeout):
// a probe that waited for a lock takes at least this long, so an answer
// "far below" it cannot have waited.
const lockWait = 2 * time.Second

// lockProbe is one guarded statement tenant B runs while tenant A holds
// locks: run returns its answer as a comparable string ("ok 0 rows",
// "err: ...").
type lockProbe struct {
	name string
	run  func(ctx context.Context, id int64) string
}

// answer renders a probe's outcome for comparison: the error's text (the
// guard's errors carry no value of the row), or the row count.
func answer(n int64, err error) string {
	if err != nil {
		return "err: " + err.Error()
	}
	return fmt.Sprintf("ok %d", n)
}

// TestForeignLockIsLikeMissing (issue 26 §1): while tenant A's open
// transaction holds locks on its rows (a guarded UPDATE that scans, a
// SELECT ... FOR UPDATE, a DELETE of one of them), tenant B naming A's
// locked row answers exactly like naming an id that does not exist — the
// same error or row count — in a time far below the lock wait, for
// UPDATE and DELETE (plain and ExpectOne), UPDATE ... RETURNING, a
// SELECT ... FOR UPDATE and an upsert whose conflict lands on A's row;
// and B's own writes are not blocked by A's transaction. The probes must
// really have run: each is timed, and the own-row control must change a
// row.
//
// Known open: on PostgreSQL the upsert probe waits for A's transaction
// (logged, not asserted; see the guardedsql package doc, "Locks across
// tenants").
//
// On SQLite a write transaction locks the whole database: every write of
// every tenant waits for A's commit alike, the missing id included, so the
// foreign row answers like the missing one (both time out the same way);
// the own-row control is skipped there.
func TestForeignLockIsLikeMissing(t *testing.T) {
	forEachEngine(t, func(t *testing.T, e engine) {
		opts := guardedsql.Options{LockTimeout: lockWait}
		h := e.newHotel(t, opts)
		rooms, pays := h.sch.Table("rooms"), h.sch.Table("payments")
		// A: hotel 1; B: hotel 2 (another chain). Room ids interleave.
		var roomA, roomB, hotelB int64
		for _, r := range h.m.rooms {
			switch {
			case r.Hotel == 1 && roomA == 0:
				roomA = r.ID
			case r.Hotel == 2 && roomB == 0:
				roomB, hotelB = r.ID, r.Hotel
			}
		}
		missing := int64(1_000_000)
		ctxA, ctxB := grantCtx(hotelG(1)), grantCtx(hotelG(hotelB))
		upd := func(id int64, one bool) builder.Mutation {
			u := builder.UpdateTable(rooms).Set("rate", 999).Where(rooms.Col("id").Eq(id))
			if one {
				u = u.ExpectOne()
			}
			return builder.Must(u.Build())
		}
		probes := []lockProbe{
			{"update", func(ctx context.Context, id int64) string {
				r, err := h.db.Exec(ctx, upd(id, false))
				return answer(r.RowsAffected, err)
			}},
			{"update_expect_one", func(ctx context.Context, id int64) string {
				r, err := h.db.Exec(ctx, upd(id, true))
				return answer(r.RowsAffected, err)
			}},
			{"update_returning", func(ctx context.Context, id int64) string {
				rows, err := h.db.ExecReturning(ctx, builder.Must(builder.UpdateTable(rooms).Set("rate", 998).Where(rooms.Col("id").Eq(id)).ExpectOne().Returning("rate").Build()))
				if err != nil {
					return answer(0, err)
				}
				got, err := guardedsql.CollectRows(rows, guardedsql.Scalar[int64])
				return answer(int64(len(got)), err)
			}},
			{"delete_expect_one", func(ctx context.Context, id int64) string {
				// Rolled back in a transaction: an own row would go, but
				// the probes name only A's row and a missing id.
				var n int64
				err := h.db.Tx(ctx, func(tx *guardedsql.Tx) error {
					r, err := tx.Exec(ctx, builder.Must(builder.DeleteFrom(pays).Where(pays.Col("id").Eq(id)).ExpectOne().Build()))
					n = r.RowsAffected
					return err
				})
				return answer(n, err)
			}},
			{"select_for_update", func(ctx context.Context, id int64) string {
				var n int64
				err := h.db.Tx(ctx, func(tx *guardedsql.Tx) error {
					v, err := guardedsql.One(ctx, tx, builder.Must(builder.Select(rooms.Col("rate")).From(rooms).Where(rooms.Col("id").Eq(id)).ForUpdate().Build()), guardedsql.Scalar[int64])
					n = v
					return err
				})
				return answer(n, err)
			}},
			{"upsert", func(ctx context.Context, id int64) string {
				// The conflict is A's row (id) for the foreign probe; for
				// the missing one, a fresh id under A's hotel: P47's miss.
				hotel := hotelB
				if id == missing {
					hotel = 1
				}
				ib := builder.InsertInto(rooms).Columns("id", "hotel_id", "number", "rate").Values(id, hotel, "X1", 5).OnConflict("id").DoUpdate("rate")
				r, err := h.db.Exec(ctx, builder.Must(ib.Build()))
				return answer(r.RowsAffected, err)
			}},
		}
		// Payments of A (for the DELETE probe): a payment of hotel 1.
		var payA int64
		for _, p := range h.m.payments {
			if h.m.hotelOfBooking(p.Booking) == 1 {
				payA = p.ID
				break
			}
		}
		if payA == 0 {
			t.Fatal("no payment of hotel 1 in the model")
		}
		type timing struct {
			name            string
			foreign, miss   time.Duration
			fAnswer, answer string
		}
		var got []timing
		ownDone := time.Duration(-1)
		hold := func(lockA func(tx *guardedsql.Tx) error) error {
			return h.db.Tx(ctxA, func(tx *guardedsql.Tx) error {
				if err := lockA(tx); err != nil {
					return fmt.Errorf("A locking: %w", err)
				}
				for _, p := range probes {
					id := roomA
					if p.name == "delete_expect_one" {
						id = payA
					}
					// On SQLite every write waits for A's commit: bound
					// the wait so that both probes end the same way.
					bound := 3 * lockWait
					if e.name == "sqlite" {
						bound = 300 * time.Millisecond
					}
					timed := func(id int64) (string, time.Duration) {
						pctx, cancel := context.WithTimeout(ctxB, bound)
						defer cancel()
						start := time.Now()
						a := p.run(pctx, id)
						return a, time.Since(start)
					}
					fa, tf := timed(id)
					ma, tm := timed(missing)
					got = append(got, timing{p.name, tf, tm, fa, ma})
				}
				if e.name != "sqlite" {
					// B's write to its own row is not blocked by A.
					start := time.Now()
					err := h.db.Tx(ctxB, func(tx *guardedsql.Tx) error {
						_, err := tx.Exec(ctxB, upd(roomB, true))
						if err != nil {
							return err
						}
						return errRollback
					})
					if !errors.Is(err, errRollback) {
						t.Errorf("B's update of its own room while A holds locks: %v", err)
					}
					ownDone = time.Since(start)
				}
				return errRollback
			})
		}
		locks := []struct {
			name string
			fn   func(tx *guardedsql.Tx) error
		}{
			// A scanning UPDATE (no index on number): under REPEATABLE READ
			// InnoDB locks every row it reads, other tenants' too.
			{"update_scan", func(tx *guardedsql.Tx) error {
				_, err := tx.Exec(ctxA, builder.Must(builder.UpdateTable(rooms).Set("rate", 1).Where(rooms.Col("number").Ne("none")).Build()))
				return err
			}},
			{"for_update", func(tx *guardedsql.Tx) error {
				_, err := guardedsql.All(ctxA, tx, builder.Must(builder.Select(rooms.Col("id")).From(rooms).Where(rooms.Col("rate").Gt(0)).ForUpdate().Build()), guardedsql.Scalar[int64])
				if err != nil {
					return err
				}
				_, err = tx.Exec(ctxA, builder.Must(builder.DeleteFrom(pays).Where(pays.Col("id").Eq(payA)).Build()))
				return err
			}},
		}
		for _, l := range locks {
			got = got[:0]
			if err := hold(l.fn); !errors.Is(err, errRollback) {
				t.Fatalf("%s: A's transaction: %v", l.name, err)
			}
			if len(got) != len(probes) {
				t.Fatalf("%s: %d of %d probes ran", l.name, len(got), len(probes))
			}
			for _, g := range got {
				if e.name == "postgres" && g.name == "upsert" {
					// Open (issue 26 §1, reported): INSERT ... ON CONFLICT
					// waits for the transaction that updated the
					// conflicting row, and row-level security hides that
					// row from every read that could tell first.
					t.Logf("%s/%s/%s (known open on PostgreSQL): foreign locked %v (%s), missing %v (%s)", e.name, l.name, g.name, g.foreign.Round(time.Millisecond), g.fAnswer, g.miss.Round(time.Millisecond), g.answer)
					continue
				}
				t.Logf("%s/%s/%s: foreign locked %v (%s), missing %v (%s)", e.name, l.name, g.name, g.foreign.Round(time.Millisecond), g.fAnswer, g.miss.Round(time.Millisecond), g.answer)
				if g.fAnswer != g.answer {
					t.Errorf("%s/%s: foreign locked row answers %q, a missing id %q", l.name, g.name, g.fAnswer, g.answer)
				}
				if e.name != "sqlite" && g.foreign > lockWait/4 {
					t.Errorf("%s/%s: foreign locked row took %v (lock wait %v): it waited for the lock", l.name, g.name, g.foreign, lockWait)
				}
			}
			if e.name != "sqlite" {
				t.Logf("%s/%s: B's own update %v", e.name, l.name, ownDone.Round(time.Millisecond))
				if ownDone > lockWait/4 {
					t.Errorf("%s: B's update of its own row took %v: A's transaction blocked it", l.name, ownDone)
				}
			}
		}
		// Nothing of A's changed (A rolled back, B changed nothing).
		var rate int64
		if err := h.raw.QueryRow("SELECT rate FROM rooms WHERE id = ?", roomA).Scan(&rate); err != nil {
			t.Fatal(err)
		}
		if rate == 999 || rate == 998 || rate == 5 || rate == 1 {
			t.Errorf("A's room rate is %d: a probe or A's rolled-back update changed it", rate)
		}
	})
}

var errRollback = errors.New("rollback")

// hotelOfBooking returns the hotel of booking id in the model.
func (m *model) hotelOfBooking(id int64) int64 {
	for _, b := range m.bookings {
		if b.ID != id {
			continue
		}
		for _, r := range m.rooms {
			if r.ID == b.Room {
				return r.Hotel
			}
		}
	}
	return 0
}

// TestErrorKindIndependentOfOtherTenants (issue 26 §2): tenant B names
// tenant A's room together with a condition that raises an engine error
// on A's value (rate * 2^62 overflows a BIGINT for any rate above 1: an
// error in SELECT, UPDATE and DELETE on MariaDB, in every statement on
// PostgreSQL) or converts A's text (CAST(number AS INTEGER)). Each answer
// is exactly the answer for an id that does not exist: the tenant test
// decides before the caller's condition is evaluated. Before the fix
// MariaDB answered the foreign id with an engine error (ErrInvalidValue)
// and the missing id with "not found": one bit of A's value per probe.
// The control: on B's own room the same overflow is an error, so the
// probe really evaluates the condition.
func TestErrorKindIndependentOfOtherTenants(t *testing.T) {
	forEachEngine(t, func(t *testing.T, e engine) {
		h := e.newHotel(t)
		rooms, guests := h.sch.Table("rooms"), h.sch.Table("guests")
		var roomA, roomB int64
		for _, r := range h.m.rooms {
			switch {
			case r.Hotel == 1 && roomA == 0:
				roomA = r.ID
			case r.Hotel == 2 && roomB == 0:
				roomB = r.ID
			}
		}
		var guestA int64
		for _, g := range h.m.guests {
			if g.Chain == h.m.hotels[0].Chain {
				guestA = g.ID
				break
			}
		}
		ctxB := grantCtx(hotelG(2))
		overflow := rooms.Col("rate").Mul(int64(1) << 62).Gt(0)
		cast := builder.Cast(guests.Col("email"), builder.AsInteger).Eq(0)
		probes := map[string]func(id int64) string{
			"select_overflow": func(id int64) string {
				got, err := guardedsql.All(ctxB, h.db, builder.Must(builder.Select(rooms.Col("id")).From(rooms).Where(builder.And(rooms.Col("id").Eq(id), overflow)).Build()), guardedsql.Scalar[int64])
				return answer(int64(len(got)), err)
			},
			"update_overflow": func(id int64) string {
				r, err := h.db.Exec(ctxB, builder.Must(builder.UpdateTable(rooms).Set("number", "p").Where(builder.And(rooms.Col("id").Eq(id), overflow)).ExpectOne().Build()))
				return answer(r.RowsAffected, err)
			},
			"delete_overflow": func(id int64) string {
				var n int64
				err := h.db.Tx(ctxB, func(tx *guardedsql.Tx) error {
					r, err := tx.Exec(ctxB, builder.Must(builder.DeleteFrom(rooms).Where(builder.And(rooms.Col("id").Eq(id), overflow)).ExpectOne().Build()))
					n = r.RowsAffected
					if err != nil {
						return err
					}
					return errRollback
				})
				return answer(n, err)
			},
			"update_cast": func(id int64) string {
				if id == roomA {
					id = guestA
				}
				r, err := h.db.Exec(ctxB, builder.Must(builder.UpdateTable(guests).Set("name", "p").Where(builder.And(guests.Col("id").Eq(id), cast)).ExpectOne().Build()))
				return answer(r.RowsAffected, err)
			},
		}
		ran := 0
		for name, probe := range probes {
			foreign, missing := probe(roomA), probe(1_000_000)
			ran++
			t.Logf("%s/%s: foreign %q, missing %q", e.name, name, foreign, missing)
			if foreign != missing {
				t.Errorf("%s: another tenant's row answers %q, a missing id %q: the error depends on its value", name, foreign, missing)
			}
		}
		if ran != len(probes) {
			t.Fatalf("%d of %d probes ran", ran, len(probes))
		}
		// Control: the overflow really raises on a row in scope (not on
		// SQLite, whose integers overflow into reals).
		if e.name != "sqlite" {
			if own := probes["select_overflow"](roomB); !strings.HasPrefix(own, "err: ") {
				t.Errorf("own room: the overflowing condition answered %q, want an engine error", own)
			}
		}
	})
}
