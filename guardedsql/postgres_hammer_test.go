package guardedsql_test

import (
	"context"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/tenantmcp/tenantmcp/builder"
	"github.com/tenantmcp/tenantmcp/guardedsql"
	sqlengine "github.com/tenantmcp/tenantmcp/guardedsql/internal/engine"
	"github.com/tenantmcp/tenantmcp/guardedsql/internal/engine/postgres"
	"github.com/tenantmcp/tenantmcp/guardedsql/internal/engine/postgres/pgxdriver"
	gpostgres "github.com/tenantmcp/tenantmcp/guardedsql/postgres"
	"github.com/tenantmcp/tenantmcp/scope"
)

// TestPostgresPooledHammer interleaves 1,200 calls of 8 goroutines for 30
// tenants (24 chains and 6 hotels) over a pool of 4 connections, so every
// connection serves one tenant right after another. The calls go through
// an RLS-only DB (the policies and the transaction-local setting are the
// only boundary, so a setting that outlived its transaction would show),
// through the default DB, and as raw SQL on the same pool with no scope at
// all. Every row returned must be the caller's; the count of foreign rows
// must be zero.
func TestPostgresPooledHammer(t *testing.T) {
	h := newPostgresHotel(t, enginePostgres.dsn(t), seedModel(24, 2, 3, 2))
	ctx := context.Background()
	cfg := h.appCfg.Copy()
	cfg.MaxConns = 4
	cfg.ConnConfig.Tracer = nil
	pool := pgConnect(t, cfg)
	defer pool.Close()
	rlsOnly, err := gpostgres.New(ctx, pool, h.sch, guardedsql.Options{Engine: gpostgres.Options{RLSOnly: true, Key: h.key}})
	if err != nil {
		t.Fatal(err)
	}
	both, err := gpostgres.New(ctx, pool, h.sch, guardedsql.Options{Engine: gpostgres.Options{Key: h.key}})
	if err != nil {
		t.Fatal(err)
	}
	b := h.sch.Table("bookings").As("b")
	r := h.sch.Table("rooms").As("r")
	q := builder.Must(builder.Select(b.Col("id"), r.Col("hotel_id")).From(b).
		Join(r, r.Col("id").EqCol(b.Col("room_id"))).Build())
	// RLS-only really leaves the reads to the policies.
	if text, _, err := rlsOnly.Render(grantCtx(chainG("acme")), q); err != nil || strings.Contains(text, "ANY") {
		t.Fatalf("RLS-only statement carries guard predicates: %s %v", text, err)
	}

	var tenants [][]scope.Grant
	for _, c := range h.m.chains {
		tenants = append(tenants, []scope.Grant{chainG(c.ID)})
	}
	for _, ho := range h.m.hotels[:6] {
		tenants = append(tenants, []scope.Grant{hotelG(ho.ID)})
	}
	if len(tenants) < 20 {
		t.Fatalf("only %d tenants", len(tenants))
	}
	want := make([]map[any]bool, len(tenants))
	for i, g := range tenants {
		want[i] = h.m.visible(g).bookings
		if len(want[i]) == 0 {
			t.Fatalf("tenant %v sees nothing in the model", g)
		}
	}

	const workers, perWorker = 8, 150
	var calls, foreign, missing, rawRows atomic.Int64
	seen := make([]atomic.Bool, len(tenants))
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 42))
			for i := range perWorker {
				k := rng.IntN(len(tenants))
				ctx := grantCtx(tenants[k]...)
				switch i % 3 {
				case 0, 1:
					db := rlsOnly
					if i%3 == 1 {
						db = both
					}
					rows, err := guardedsql.All(ctx, db, q, func(r *guardedsql.Rows) (int64, error) {
						var id, hotel int64
						err := r.Scan(&id, &hotel)
						return id, err
					})
					if err != nil {
						errs <- err
						return
					}
					for _, id := range rows {
						if !want[k][id] {
							foreign.Add(1)
						}
					}
					if len(rows) != len(want[k]) {
						missing.Add(1)
					}
					seen[k].Store(true)
				case 2:
					var n int64
					if err := pool.QueryRow(context.Background(), `SELECT count(*) FROM bookings`).Scan(&n); err != nil {
						errs <- err
						return
					}
					rawRows.Add(n)
				}
				calls.Add(1)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	distinct := 0
	for i := range seen {
		if seen[i].Load() {
			distinct++
		}
	}
	t.Logf("%d calls, %d tenants served, %d connections, %d acquisitions", calls.Load(), distinct, pool.Stat().TotalConns(), pool.Stat().AcquireCount())
	if calls.Load() < 1000 || distinct < 20 {
		t.Fatalf("hammer too small: %d calls, %d tenants", calls.Load(), distinct)
	}
	if n := foreign.Load(); n != 0 {
		t.Fatalf("%d foreign rows returned", n)
	}
	if n := rawRows.Load(); n != 0 {
		t.Fatalf("raw SQL without context saw %d rows", n)
	}
	if n := missing.Load(); n != 0 {
		t.Fatalf("%d calls returned fewer rows than the tenant owns", n)
	}
}

// leakyDialect sets the scope for the whole session instead of the
// transaction, unsigned: the bug the hammer exists to catch, which the
// signed context alone already stops (TestPostgresHammerCanFail puts back
// a verifying function that trusts the raw setting to show the hammer
// would see it).
type leakyDialect struct{ postgres.Dialect }

func (d leakyDialect) Session(ctx context.Context, tx sqlengine.Querier, _ scope.Scope, doc string) error {
	for q := tx; q != nil; {
		if t, ok := q.(interface{ Defer(string, ...any) }); ok {
			t.Defer(`SELECT set_config($1, $2, false)`, d.Setting(), doc)
			return nil
		}
		u, ok := q.(interface{ UnwrapTx() sqlengine.Tx })
		if !ok {
			break
		}
		q = u.UnwrapTx()
	}
	_, err := tx.Exec(ctx, `SELECT set_config($1, $2, false)`, d.Setting(), doc)
	return err
}

// TestPostgresHammerCanFail is the negative control of the hammer: with a
// session-level setting, the next raw use of the pooled connection sees
// the previous caller's rows, and the hammer's checks report it.
func TestPostgresHammerCanFail(t *testing.T) {
	h := newPostgresHotel(t, enginePostgres.dsn(t), seedModel(3, 2, 2, 1))
	cfg := h.appCfg.Copy()
	cfg.MaxConns = 1
	cfg.ConnConfig.Tracer = nil
	pool := pgConnect(t, cfg)
	defer pool.Close()
	db, err := guardedsql.NewForTest(pgxdriver.NewPool(pool, false), leakyDialect{postgres.Dialect{RLSOnly: true}}, h.sch, guardedsql.Options{})
	if err != nil {
		t.Fatal(err)
	}
	b := h.sch.Table("bookings").As("b")
	q := builder.Must(builder.Select(b.Col("id")).From(b).Build())
	count := func() int64 {
		var n int64
		if err := pool.QueryRow(context.Background(), `SELECT count(*) FROM bookings`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	// With the signed context, the leaked unsigned setting admits nothing.
	if _, err := guardedsql.All(grantCtx(chainG("globex")), db, q, guardedsql.Scalar[int64]); err != nil {
		t.Fatal(err)
	}
	if n := count(); n != 0 {
		t.Fatalf("a leaked unsigned session setting admitted %d rows", n)
	}
	// The pre-signing function, which trusted the setting as written.
	if _, err := h.owner.Exec(context.Background(), `CREATE OR REPLACE FUNCTION tenantmcp_scope_doc() RETURNS jsonb LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$ SELECT nullif(current_setting('tenantmcp.scope', true), '')::jsonb $$`); err != nil {
		t.Fatal(err)
	}
	if _, err := guardedsql.All(grantCtx(chainG("globex")), db, q, guardedsql.Scalar[int64]); err != nil {
		t.Fatal(err)
	}
	if count() == 0 {
		t.Fatal("a session-level scope did not outlive its statement: the hammer's raw check could not fail")
	}
}
