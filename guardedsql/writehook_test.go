package guardedsql_test

import (
	"context"
	"errors"
	"testing"

	"github.com/tenantmcp/tenantmcp/builder"
	"github.com/tenantmcp/tenantmcp/guardedsql"
)

// TestCallWritesAndIdempotencyClaim, on every engine: WithCallWrites
// counts the write transactions committed under its context (single
// writes, ExecReturning, Tx with a write; not a read-only Tx, not a
// rolled-back one), and records its claim in the first write's own
// transaction: a write that rolls back leaves no claim; a second call with
// the same claim has its write rolled back with ErrIdempotencyKeyTaken, so
// the key's write is made once.
func TestCallWritesAndIdempotencyClaim(t *testing.T) {
	forEachEngine(t, func(t *testing.T, e engine) {
		h := e.newHotel(t)
		ddl, err := guardedsql.IdempotencyDDL(e.name, "")
		if err != nil {
			t.Fatal(err)
		}
		if e.name == "postgres" {
			ddl = append(ddl, `GRANT SELECT, INSERT, UPDATE, DELETE ON `+guardedsql.IdempotencyTable+` TO PUBLIC`)
		}
		for _, q := range ddl {
			if _, err := h.raw.Exec(q); err != nil {
				t.Fatalf("%s: %v", q, err)
			}
		}
		bg := context.Background()
		if err := h.db.CheckIdempotency(bg); err != nil {
			t.Fatal(err)
		}
		hotel := h.m.hotels[0]
		scoped := grantCtx(chainG(hotel.Chain))
		rooms := h.sch.Table("rooms")
		insert := func(number string) builder.Mutation {
			return builder.Must(builder.InsertInto(rooms).Columns("hotel_id", "number", "rate").Values(hotel.ID, number, 1).Build())
		}
		readAll := builder.Must(builder.Select(rooms.Col("id")).From(rooms).Build())

		// Counting, without a claim.
		ctx, w := guardedsql.WithCallWrites(scoped, nil)
		if _, err := h.db.Exec(ctx, insert("cw-1")); err != nil {
			t.Fatal(err)
		}
		if err := h.db.Tx(ctx, func(tx *guardedsql.Tx) error {
			rows, err := tx.Query(ctx, readAll)
			if err == nil {
				rows.Close()
			}
			return err
		}); err != nil {
			t.Fatal(err)
		}
		if w.Committed() != 1 {
			t.Fatalf("after one write and a read-only Tx: Committed = %d, want 1", w.Committed())
		}
		boom := errors.New("boom")
		if err := h.db.Tx(ctx, func(tx *guardedsql.Tx) error {
			if _, err := tx.Exec(ctx, insert("cw-rolled")); err != nil {
				return err
			}
			return boom
		}); !errors.Is(err, boom) {
			t.Fatal(err)
		}
		if err := h.db.Tx(ctx, func(tx *guardedsql.Tx) error { _, err := tx.Exec(ctx, insert("cw-2")); return err }); err != nil {
			t.Fatal(err)
		}
		if w.Committed() != 2 || w.Claimed() {
			t.Fatalf("Committed = %d (want 2: the rolled-back Tx is not counted), Claimed = %v", w.Committed(), w.Claimed())
		}

		// A claim rolled back with its write is not recorded.
		claim := &guardedsql.IdempotencyClaim{ID: "claim-" + e.name, Args: "args", CreatedAt: 1}
		ctx, w = guardedsql.WithCallWrites(scoped, claim)
		_ = h.db.Tx(ctx, func(tx *guardedsql.Tx) error {
			if _, err := tx.Exec(ctx, insert("claim-rolled")); err != nil {
				return err
			}
			return boom
		})
		if _, found, err := h.db.LookupIdempotency(bg, claim.ID); err != nil || found || w.Claimed() {
			t.Fatalf("after a rolled-back write: found %v, claimed %v, %v; want no claim", found, w.Claimed(), err)
		}
		// The first write records it, atomically; a second one in the
		// same call does not try again.
		if _, err := h.db.Exec(ctx, insert("claim-1")); err != nil {
			t.Fatal(err)
		}
		if _, err := h.db.Exec(ctx, insert("claim-1b")); err != nil {
			t.Fatal(err)
		}
		rec, found, err := h.db.LookupIdempotency(bg, claim.ID)
		if err != nil || !found || rec.Args != "args" || rec.Result != "" || !w.Claimed() || w.Committed() != 2 {
			t.Fatalf("after the call's writes: %+v found %v claimed %v committed %d %v", rec, found, w.Claimed(), w.Committed(), err)
		}
		if err := h.db.StoreIdempotencyResult(bg, claim.ID, "sealed"); err != nil {
			t.Fatal(err)
		}
		if err := h.db.StoreIdempotencyResult(bg, claim.ID, "second"); err != nil {
			t.Fatal(err)
		}
		if rec, _, _ := h.db.LookupIdempotency(bg, claim.ID); rec.Result != "sealed" {
			t.Fatalf("stored result %q, want the first one kept", rec.Result)
		}
		// Another call with the same claim: its write is rolled back.
		ctx2, w2 := guardedsql.WithCallWrites(scoped, claim)
		_, err = h.db.Exec(ctx2, insert("claim-2"))
		if !errors.Is(err, guardedsql.ErrIdempotencyKeyTaken) || !w2.KeyTaken() || w2.Committed() != 0 {
			t.Fatalf("second claim: %v, taken %v, committed %d; want ErrIdempotencyKeyTaken and nothing committed", err, w2.KeyTaken(), w2.Committed())
		}
		err = h.db.Tx(ctx2, func(tx *guardedsql.Tx) error { _, err := tx.Exec(ctx2, insert("claim-2")); return err })
		if !errors.Is(err, guardedsql.ErrIdempotencyKeyTaken) {
			t.Fatalf("second claim in a Tx: %v", err)
		}
		for number, want := range map[string]int{"cw-1": 1, "cw-2": 1, "cw-rolled": 0, "claim-rolled": 0, "claim-1": 1, "claim-1b": 1, "claim-2": 0} {
			var n int
			if err := h.raw.QueryRow("SELECT COUNT(*) FROM rooms WHERE number = ?", number).Scan(&n); err != nil {
				t.Fatal(err)
			}
			if n != want {
				t.Errorf("rooms numbered %s: %d, want %d", number, n, want)
			}
		}
		if n, err := h.db.PruneIdempotency(bg, 2); err != nil || n != 1 {
			t.Fatalf("prune: %d %v", n, err)
		}
	})
}
