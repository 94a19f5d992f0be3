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

// TestSetExprReturning: SET hits = hits + ? with RETURNING gives the value
// the engine computed, on every engine and on MariaDB also through the
// MySQL fallback (locked keys, UPDATE, read back), which once sent the
// expression's column a NULL instead; another tenant's counter returns no
// row and keeps its value.
func TestSetExprReturning(t *testing.T) {
	forEachEngine(t, func(t *testing.T, e engine) {
		modes := []string{"native"}
		if e.name == "mysql" {
			modes = append(modes, "fallback")
		}
		for _, mode := range modes {
			t.Run(mode, func(t *testing.T) {
				s, sch, db := newCounters(t, e)
				if mode == "fallback" && !guardedsql.MySQLFallbackForTest(db) {
					t.Skip("not a MariaDB server")
				}
				c := sch.Table("counters")
				add := func(id int64, n int) builder.Update {
					return builder.Must(builder.UpdateTable(c).SetExpr("hits", c.Col("hits").Add(n)).
						Where(c.Col("id").Eq(id)).Returning("hits").Build())
				}
				ctx := grantCtx(scope.Grant{Level: "tenant", ID: "a"})
				rows, err := db.ExecReturning(ctx, add(3, 7))
				if err != nil {
					t.Fatal(err)
				}
				got, err := guardedsql.CollectRows(rows, guardedsql.Scalar[int64])
				if err != nil || len(got) != 1 || got[0] != 307 {
					t.Fatalf("RETURNING hits = %v (%v), want [307]", got, err)
				}
				if v := s.count(`SELECT hits FROM counters WHERE id = 3`); v != 307 {
					t.Fatalf("stored hits = %d, want 307", v)
				}
				rows, err = db.ExecReturning(ctx, add(4, 7))
				if err != nil {
					t.Fatal(err)
				}
				if got, err := guardedsql.CollectRows(rows, guardedsql.Scalar[int64]); err != nil || len(got) != 0 {
					t.Fatalf("another tenant's counter returned %v (%v)", got, err)
				}
				if v := s.count(`SELECT hits FROM counters WHERE id = 4`); v != 400 {
					t.Fatalf("another tenant's counter = %d, want 400", v)
				}
			})
		}
	})
}
