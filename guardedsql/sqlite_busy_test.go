package guardedsql_test

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"sync"
	"testing"

	"github.com/tenantmcp/tenantmcp/builder"
	"github.com/tenantmcp/tenantmcp/guardedsql"
)

// TestSQLiteConcurrentWritesNeverBusy hammers an SQLite file opened with
// Open from concurrent writers (atomic inserts, single-statement updates
// and deletes) and readers of two chains with interleaved ids, through the
// guard: no call may fail (SQLITE_BUSY or otherwise), every acknowledged
// insert is there afterwards, and no reader sees the other chain's rooms.
func TestSQLiteConcurrentWritesNeverBusy(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "busy.db")
	raw, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	m := seedModel(2, 2, 2, 1) // acme and globex, interleaved ids
	if err := m.load(ctx, raw); err != nil {
		t.Fatal(err)
	}
	raw.Close()
	sch := builder.MustSchema(hotelDef)
	db, err := guardedsql.Open(ctx, "sqlite:"+path, sch, guardedsql.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()

	rooms := sch.Table("rooms")
	const writers, readers, rounds = 6, 6, 40
	chains := []string{"acme", "globex"}
	var mu sync.Mutex
	acked := map[string]map[string]bool{"acme": {}, "globex": {}}
	errs := make(chan error, writers+readers)
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			chain := chains[w%2]
			cctx := grantCtx(chainG(chain))
			hotel := hotelOfChainM(m, chain)
			for i := range rounds {
				number := fmt.Sprintf("w%d-%d", w, i)
				ins := builder.Must(builder.InsertInto(rooms).Columns("hotel_id", "number", "rate").Values(hotel, number, i).Build())
				if _, err := db.Exec(cctx, ins); err != nil {
					errs <- fmt.Errorf("writer %d insert %d: %w", w, i, err)
					return
				}
				mu.Lock()
				acked[chain][number] = true
				mu.Unlock()
				up := builder.Must(builder.UpdateTable(rooms).Set("rate", i+1).Where(rooms.Col("number").Eq(number)).Build())
				if _, err := db.Exec(cctx, up); err != nil {
					errs <- fmt.Errorf("writer %d update %d: %w", w, i, err)
					return
				}
			}
		}()
	}
	r := sch.Table("rooms").As("r")
	h := sch.Table("hotels").As("h")
	q := builder.Must(builder.Select(r.Col("number"), h.Col("chain_id")).From(r).Join(h, h.Col("id").EqCol(r.Col("hotel_id"))).Build())
	type row struct {
		Number string
		Chain  string `db:"chain_id"`
	}
	for rd := range readers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			chain := chains[rd%2]
			for i := range rounds {
				got, err := guardedsql.All(grantCtx(chainG(chain)), db, q, guardedsql.RowToStruct[row])
				if err != nil {
					errs <- fmt.Errorf("reader %d query %d: %w", rd, i, err)
					return
				}
				for _, g := range got {
					if g.Chain != chain {
						errs <- fmt.Errorf("reader of %s saw room %s of %s", chain, g.Number, g.Chain)
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	for _, chain := range chains {
		got, err := guardedsql.All(grantCtx(chainG(chain)), db, q, guardedsql.RowToStruct[row])
		if err != nil {
			t.Fatal(err)
		}
		seen := map[string]bool{}
		for _, g := range got {
			seen[g.Number] = true
		}
		for n := range acked[chain] {
			if !seen[n] {
				t.Errorf("%s: acknowledged room %s is missing", chain, n)
			}
		}
	}
}
