package engine_test

import (
	"context"
	"database/sql"
	"path/filepath"
	"slices"
	"testing"
	"time"

	_ "modernc.org/sqlite"

	"github.com/tenantmcp/tenantmcp/guardedsql/internal/engine"
)

// openFile opens a fresh SQLite file with two tenants' rows, ids
// interleaved.
func openFile(t *testing.T, maxConns int) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+filepath.Join(t.TempDir(), "c.db")+"?_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(maxConns)
	t.Cleanup(func() { db.Close() })
	for _, q := range []string{
		`CREATE TABLE t (id INTEGER PRIMARY KEY, tenant TEXT NOT NULL, v TEXT)`,
		`INSERT INTO t VALUES (1,'acme','a1'),(2,'globex','g2'),(3,'acme','a3'),(4,'globex','g4')`,
	} {
		if _, err := db.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	return db
}

func ids(t *testing.T, rows engine.Rows, err error) []int64 {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		out = append(out, id)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

const byTenant = `SELECT id FROM t WHERE tenant = ? ORDER BY id`

// The cached statement is keyed by text only: the same text with another
// tenant's argument returns that tenant's rows, never the first caller's.
func TestStmtCacheBindsArgumentsPerCall(t *testing.T) {
	ctx := context.Background()
	p := engine.CachedStdPool(openFile(t, 2), true, 4)
	defer p.Close()
	for range 3 {
		r, err := p.Query(ctx, byTenant, "acme")
		if got := ids(t, r, err); !slices.Equal(got, []int64{1, 3}) {
			t.Fatalf("acme: %v", got)
		}
		r, err = p.Query(ctx, byTenant, "globex")
		if got := ids(t, r, err); !slices.Equal(got, []int64{2, 4}) {
			t.Fatalf("globex: %v", got)
		}
	}
}

// The cache holds at most its size; a statement evicted while its rows
// are open is closed only after them, and still reads correctly.
func TestStmtCacheEvictsWithRowsOpen(t *testing.T) {
	ctx := context.Background()
	db := openFile(t, 4)
	c := engine.NewStmtCache(db, 2)
	defer c.Close()
	open, err := c.Query(ctx, byTenant, "globex")
	if err != nil {
		t.Fatal(err)
	}
	for i, q := range []string{`SELECT id FROM t WHERE id = ?`, `SELECT id FROM t WHERE id > ?`, `SELECT id FROM t WHERE id < ?`} {
		r, err := c.Query(ctx, q, 2)
		ids(t, r, err)
		if n := c.Len(); n > 2 {
			t.Fatalf("after %d statements the cache holds %d, bound 2", i+1, n)
		}
	}
	if got := ids(t, open, nil); !slices.Equal(got, []int64{2, 4}) {
		t.Fatalf("rows of the evicted statement: %v", got)
	}
	r, err := c.Query(ctx, byTenant, "acme") // prepared again
	if got := ids(t, r, err); !slices.Equal(got, []int64{1, 3}) {
		t.Fatalf("after eviction: %v", got)
	}
}

// Inside a transaction on a one-connection pool (the SQLite writer), an
// uncached statement runs on the transaction instead of waiting for a
// second connection, and a cached one is reused; both see the
// transaction's own writes.
func TestStmtCacheInTransaction(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	p := engine.CachedStdPool(openFile(t, 1), true, 8)
	defer p.Close()
	r, err := p.Query(ctx, byTenant, "acme") // cached outside the tx
	ids(t, r, err)
	tx, err := p.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `INSERT INTO t VALUES (5, ?, 'x')`, "acme"); err != nil {
		t.Fatal(err)
	}
	r, err = tx.Query(ctx, byTenant, "acme")
	if got := ids(t, r, err); !slices.Equal(got, []int64{1, 3, 5}) {
		t.Fatalf("cached statement in tx: %v", got)
	}
	r, err = tx.Query(ctx, `SELECT id FROM t WHERE tenant = ? AND id > ?`, "acme", 2)
	if got := ids(t, r, err); !slices.Equal(got, []int64{3, 5}) {
		t.Fatalf("uncached statement in tx: %v", got)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	r, err = p.Query(ctx, byTenant, "acme")
	if got := ids(t, r, err); !slices.Equal(got, []int64{1, 3}) {
		t.Fatalf("after rollback: %v", got)
	}
}

// A schema change under a cached statement is picked up (SQLite
// recompiles it); after Close the pool's statements run unprepared.
func TestStmtCacheSchemaChangeAndClose(t *testing.T) {
	ctx := context.Background()
	db := openFile(t, 1)
	c := engine.NewStmtCache(db, 4)
	q := `SELECT id FROM t WHERE v = ?`
	r, err := c.Query(ctx, q, "a1")
	if got := ids(t, r, err); !slices.Equal(got, []int64{1}) {
		t.Fatalf("before: %v", got)
	}
	for _, s := range []string{
		`CREATE TABLE t2 (id INTEGER PRIMARY KEY, tenant TEXT NOT NULL, v TEXT)`,
		`INSERT INTO t2 VALUES (7,'acme','a1')`,
		`DROP TABLE t`,
		`ALTER TABLE t2 RENAME TO t`,
	} {
		if _, err := db.Exec(s); err != nil {
			t.Fatal(err)
		}
	}
	r, err = c.Query(ctx, q, "a1")
	if got := ids(t, r, err); !slices.Equal(got, []int64{7}) {
		t.Fatalf("after the table was replaced: %v", got)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if n := c.Len(); n != 0 {
		t.Fatalf("closed cache holds %d statements", n)
	}
	r, err = c.Query(ctx, q, "a1")
	if got := ids(t, r, err); !slices.Equal(got, []int64{7}) {
		t.Fatalf("after Close: %v", got)
	}
}

// Concurrent calls over more shapes than the cache holds: evictions race
// with uses, and no call sees a closed statement or another call's rows.
func TestStmtCacheConcurrentEviction(t *testing.T) {
	ctx := context.Background()
	c := engine.NewStmtCache(openFile(t, 4), 2)
	defer c.Close()
	shapes := []string{byTenant, byTenant + ` LIMIT 10`, byTenant + ` LIMIT 20`, byTenant + ` LIMIT 30`}
	errs := make(chan error, 8)
	for g := range 8 {
		go func() {
			tenant, want := "acme", []int64{1, 3}
			if g%2 == 1 {
				tenant, want = "globex", []int64{2, 4}
			}
			for i := range 50 {
				r, err := c.Query(ctx, shapes[(g+i)%len(shapes)], tenant)
				if err != nil {
					errs <- err
					return
				}
				var got []int64
				for r.Next() {
					var id int64
					if err := r.Scan(&id); err != nil {
						errs <- err
						return
					}
					got = append(got, id)
				}
				r.Close()
				if !slices.Equal(got, want) {
					t.Errorf("%s: got %v, want %v", tenant, got, want)
				}
			}
			errs <- nil
		}()
	}
	for range 8 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}
