package guardedsql_test

import (
	"errors"
	"sync"
	"testing"

	"github.com/tenantmcp/tenantmcp/builder"
	"github.com/tenantmcp/tenantmcp/guardedsql"
	"github.com/tenantmcp/tenantmcp/scope"
)

// TestLostUpdateSetExpr: two goroutines each increment one counter 20
// times with SET hits = hits + 1 (UpdateBuilder.SetExpr), each increment
// its own call: none is lost (issue 15 lost 18 of 40 with read-modify-
// write). The neighbouring rows, another tenant's included, are untouched,
// and the same update aimed at the other tenant's counter changes nothing.
func TestLostUpdateSetExpr(t *testing.T) {
	forEachEngine(t, func(t *testing.T, e engine) {
		s, sch, db := newCounters(t, e)
		c := sch.Table("counters")
		inc := func(id int64) builder.Update {
			return builder.Must(builder.UpdateTable(c).SetExpr("hits", c.Col("hits").Add(1)).
				Where(c.Col("id").Eq(id)).ExpectOne().Build())
		}
		ctx := grantCtx(scope.Grant{Level: "tenant", ID: "a"})
		const workers, each = 2, 20
		var wg sync.WaitGroup
		errs := make(chan error, workers*each)
		for range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range each {
					if _, err := db.Exec(ctx, inc(3)); err != nil {
						errs <- err
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Errorf("increment: %v", err)
		}
		if got := s.count(`SELECT hits FROM counters WHERE id = 3`); got != 300+workers*each {
			t.Fatalf("hits = %d, want %d: %d increments lost", got, 300+workers*each, 300+workers*each-got)
		}
		// Tenant a cannot increment b's counter 4 (interleaved with a's 3).
		if _, err := db.Exec(ctx, inc(4)); !errors.Is(err, guardedsql.ErrNotFound) {
			t.Fatalf("increment of another tenant's counter: err = %v, want ErrNotFound", err)
		}
		for id, want := range map[int64]int{2: 200, 4: 400, 5: 500} {
			if got := s.count(`SELECT hits FROM counters WHERE id = ?`, id); got != want {
				t.Errorf("counter %d = %d, want %d untouched", id, got, want)
			}
		}
	})
}
