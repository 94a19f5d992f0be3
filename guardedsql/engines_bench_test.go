package guardedsql_test

// The live-engine benchmark: guarded queries against an expert's
// hand-written tenant-filtered SQL, on the generated dataset of
// internal/benchdata (1M bookings over 1,000 chains), per engine, in one
// run. It needs TENANTMCP_BENCH_DATASET=1 and the admin DSNs of the live
// tests; the first run generates the dataset into the persistent database
// tenantmcp_bench (about a minute per engine), later runs reuse it.
//
//	TENANTMCP_BENCH_DATASET=1 TENANTMCP_TEST_POSTGRES_DSN=... TENANTMCP_TEST_MYSQL_DSN=... \
//	    go test ./guardedsql -run '^$' -bench BenchmarkEngines -benchtime 400x
//
// Each iteration runs the guarded query and the expert query for the same
// tenant and date range, alternating which goes first; the reported ratio
// is guarded/expert of the medians (ratio-median) and of the means
// (ratio-mean). The expert runs on the same server through the same
// driver: on PostgreSQL as the admin (a superuser, so no row-level
// security applies to it), on MySQL on the same connection pool. The
// EXPLAIN shapes of both are logged once per query.

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/tenantmcp/tenantmcp/builder"
	"github.com/tenantmcp/tenantmcp/guardedsql"
	gmysql "github.com/tenantmcp/tenantmcp/guardedsql/mysql"
	"github.com/tenantmcp/tenantmcp/guardedsql/postgres"
	"github.com/tenantmcp/tenantmcp/internal/benchdata"
	"github.com/tenantmcp/tenantmcp/scope"
)

const benchDB = "tenantmcp_bench"

// benchTarget is one engine with the dataset loaded.
type benchTarget struct {
	engine  string
	sch     *builder.Schema
	guarded map[string]*guardedsql.DB // variant name -> guarded DB
	// expert runs hand-written SQL ('?' placeholders are rebound for
	// PostgreSQL) and returns the rows.
	expert func(ctx context.Context, query string, args ...any) ([][]any, error)
	// explainGuarded / explainExpert return the plan text.
	explainGuarded func(ctx context.Context, db *guardedsql.DB, q builder.Query) (string, error)
	explainExpert  func(ctx context.Context, query string, args ...any) (string, error)
	size           benchdata.Size
}

func BenchmarkEngines(b *testing.B) {
	if os.Getenv("TENANTMCP_BENCH_DATASET") == "" {
		b.Skip("set TENANTMCP_BENCH_DATASET=1 (and TENANTMCP_TEST_POSTGRES_DSN / TENANTMCP_TEST_MYSQL_DSN) to run; the first run generates 1M bookings per engine into the database " + benchDB)
	}
	for _, e := range []engine{enginePostgres, engineMySQL} {
		b.Run(e.name, func(b *testing.B) {
			var tg *benchTarget
			switch e.name {
			case "postgres":
				tg = postgresBench(b, e.dsn(b))
			case "mysql":
				tg = mysqlBench(b, e.dsn(b))
			}
			runBenchQueries(b, tg)
		})
	}
}

type benchQuery struct {
	name    string
	chains  int // tenants in the scope
	guarded func(sch *builder.Schema, from, to string) builder.Query
	expert  func(engine string, nChains int) string
}

func inList(engine string, n int) string {
	if engine == "postgres" {
		return "= ANY (?::text[])"
	}
	return "IN (" + strings.TrimSuffix(strings.Repeat("?, ", n), ", ") + ")"
}

var benchQueries = []benchQuery{
	{
		name: "bookings-by-date", chains: 1,
		guarded: func(sch *builder.Schema, from, to string) builder.Query {
			b := sch.Table("bookings").As("b")
			return builder.Must(builder.Select(b.Col("id"), b.Col("room_id"), b.Col("check_in"), b.Col("nights"), b.Col("status")).
				From(b).Where(b.Col("check_in").Ge(from), b.Col("check_in").Lt(to)).
				OrderBy(b.Col("check_in").Asc(), b.Col("id").Asc()).Limit(50).Build())
		},
		expert: func(engine string, n int) string {
			return `SELECT b.id, b.room_id, b.check_in, b.nights, b.status FROM bookings b
JOIN rooms r ON r.id = b.room_id JOIN hotels h ON h.id = r.hotel_id
WHERE h.chain_id ` + inList(engine, n) + ` AND b.check_in >= ? AND b.check_in < ?
ORDER BY b.check_in, b.id LIMIT 50`
		},
	},
	{
		name: "revenue-by-hotel", chains: 1,
		guarded: func(sch *builder.Schema, from, to string) builder.Query {
			b := sch.Table("bookings").As("b")
			r := sch.Table("rooms").As("r")
			return builder.Must(builder.Select(r.Col("hotel_id"), builder.Sum(b.Col("total_cents")).As("revenue"), builder.CountAll().As("n")).
				From(b).Join(r, r.Col("id").EqCol(b.Col("room_id"))).
				Where(b.Col("check_in").Ge(from), b.Col("check_in").Lt(to), b.Col("status").Ne("cancelled")).
				GroupBy(r.Col("hotel_id")).OrderBy(r.Col("hotel_id").Asc()).Build())
		},
		expert: func(engine string, n int) string {
			return `SELECT r.hotel_id, SUM(b.total_cents) AS revenue, COUNT(*) AS n FROM bookings b
JOIN rooms r ON r.id = b.room_id JOIN hotels h ON h.id = r.hotel_id
WHERE h.chain_id ` + inList(engine, n) + ` AND b.check_in >= ? AND b.check_in < ? AND b.status <> 'cancelled'
GROUP BY r.hotel_id ORDER BY r.hotel_id`
		},
	},
}

func init() {
	// The same two queries for a scope of ten chains.
	for _, q := range benchQueries[:2] {
		q.name += "/10-chains"
		q.chains = 10
		benchQueries = append(benchQueries, q)
	}
	for i := range benchQueries[:2] {
		benchQueries[i].name += "/1-chain"
	}
}

// benchInput is the tenant and date range of iteration i.
func benchInput(s benchdata.Size, q benchQuery, i int) (chains []string, from, to string) {
	for k := range q.chains {
		chains = append(chains, benchdata.ChainID(1+(i*7919+k*97)%s.Chains))
	}
	month := i % 22
	y, m := 2024+month/12, 1+month%12
	from = fmt.Sprintf("%04d-%02d-01", y, m)
	if q.name[:7] == "revenue" { // a quarter
		m += 3
	} else {
		m++
	}
	if m > 12 {
		y, m = y+1, m-12
	}
	to = fmt.Sprintf("%04d-%02d-01", y, m)
	return chains, from, to
}

func expertArgs(engine string, chains []string, from, to string) []any {
	var args []any
	if engine == "postgres" {
		args = append(args, chains)
	} else {
		for _, c := range chains {
			args = append(args, c)
		}
	}
	return append(args, from, to)
}

func collect(rows *guardedsql.Rows) ([][]any, error) {
	cols, err := rows.Columns()
	if err != nil {
		return nil, err
	}
	return guardedsql.CollectRows(rows, func(r *guardedsql.Rows) ([]any, error) {
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := r.Scan(ptrs...); err != nil {
			return nil, err
		}
		for i, v := range vals {
			if bs, ok := v.([]byte); ok {
				vals[i] = string(bs)
			}
		}
		return vals, nil
	})
}

// explainOut collects the EXPLAIN shapes of a run; they go to the file
// named by TENANTMCP_BENCH_EXPLAIN (default: tenantmcp-bench-explain.txt
// in the temporary directory), since benchmark logs are truncated.
func explainOut(b *testing.B, title, plan string) {
	path := os.Getenv("TENANTMCP_BENCH_EXPLAIN")
	if path == "" {
		path = filepath.Join(os.TempDir(), "tenantmcp-bench-explain.txt")
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	fmt.Fprintf(f, "==== %s (%s)\n%s\n\n", title, time.Now().Format(time.RFC3339), plan)
	b.Logf("EXPLAIN %s: see %s", title, path)
}

func runBenchQueries(b *testing.B, tg *benchTarget) {
	ctx := context.Background()
	variants := slices.Sorted(func(yield func(string) bool) {
		for k := range tg.guarded {
			if !yield(k) {
				return
			}
		}
	})
	for _, q := range benchQueries {
		for _, variant := range variants {
			db := tg.guarded[variant]
			b.Run(q.name+"/"+variant, func(b *testing.B) {
				expertSQL := q.expert(tg.engine, q.chains)
				grants := func(chains []string) context.Context {
					var gs []scope.Grant
					for _, c := range chains {
						gs = append(gs, chainG(c))
					}
					return grantCtx(gs...)
				}
				// Correctness first: guarded and expert agree, and the plans.
				for i := range 5 {
					chains, from, to := benchInput(tg.size, q, i)
					rows, err := db.Query(grants(chains), q.guarded(tg.sch, from, to))
					if err != nil {
						b.Fatal(err)
					}
					got, err := collect(rows)
					if err != nil {
						b.Fatal(err)
					}
					want, err := tg.expert(ctx, expertSQL, expertArgs(tg.engine, chains, from, to)...)
					if err != nil {
						b.Fatal(err)
					}
					if len(want) == 0 || fmt.Sprint(got) != fmt.Sprint(want) {
						b.Fatalf("guarded and expert disagree for %v %s..%s:\n got %v\nwant %v", chains, from, to, got, want)
					}
				}
				if b.N == 1 {
					chains, from, to := benchInput(tg.size, q, 0)
					plan, err := tg.explainGuarded(grants(chains), db, q.guarded(tg.sch, from, to))
					if err != nil {
						b.Fatal(err)
					}
					explainOut(b, tg.engine+" "+q.name+" "+variant, plan)
					plan, err = tg.explainExpert(ctx, expertSQL, expertArgs(tg.engine, chains, from, to)...)
					if err != nil {
						b.Fatal(err)
					}
					explainOut(b, tg.engine+" "+q.name+" expert", plan)
				}
				dg := make([]time.Duration, 0, b.N)
				de := make([]time.Duration, 0, b.N)
				b.ResetTimer()
				for i := range b.N {
					chains, from, to := benchInput(tg.size, q, i)
					gctx := grants(chains)
					args := expertArgs(tg.engine, chains, from, to)
					runG := func() {
						start := time.Now()
						rows, err := db.Query(gctx, q.guarded(tg.sch, from, to))
						if err == nil {
							_, err = collect(rows)
						}
						if err != nil {
							b.Fatal(err)
						}
						dg = append(dg, time.Since(start))
					}
					runE := func() {
						start := time.Now()
						if _, err := tg.expert(ctx, expertSQL, args...); err != nil {
							b.Fatal(err)
						}
						de = append(de, time.Since(start))
					}
					if i%2 == 0 {
						runG()
						runE()
					} else {
						runE()
						runG()
					}
				}
				b.StopTimer()
				mg, me := median(dg), median(de)
				b.ReportMetric(float64(mg.Nanoseconds()), "guarded-ns/op")
				b.ReportMetric(float64(me.Nanoseconds()), "expert-ns/op")
				b.ReportMetric(float64(mg)/float64(me), "ratio-median")
				b.ReportMetric(float64(sum(dg))/float64(sum(de)), "ratio-mean")
				b.ReportMetric(0, "ns/op")
			})
		}
	}
}

func median(d []time.Duration) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2]
}

func sum(d []time.Duration) time.Duration {
	var t time.Duration
	for _, x := range d {
		t += x
	}
	return t
}

// postgresBench prepares the PostgreSQL target: database tenantmcp_bench
// (created once, kept), the dataset, the application role
// tenantmcp_bench_app, the row-level security policies, and guarded pools.
func postgresBench(b *testing.B, dsn string) *benchTarget {
	ctx := context.Background()
	adminCfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		b.Fatal(err)
	}
	root := pgConnect(b, adminCfg)
	var exists bool
	if err := root.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)`, benchDB).Scan(&exists); err != nil {
		b.Fatal(err)
	}
	if !exists {
		if _, err := root.Exec(ctx, `CREATE DATABASE `+benchDB); err != nil {
			b.Fatal(err)
		}
	}
	appPW := uniqueSuffix(b)
	for _, s := range []string{
		`DO $$ BEGIN IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'tenantmcp_bench_app') THEN CREATE ROLE tenantmcp_bench_app LOGIN NOSUPERUSER NOBYPASSRLS; END IF; END $$`,
		`ALTER ROLE tenantmcp_bench_app PASSWORD '` + appPW + `'`,
	} {
		if _, err := root.Exec(ctx, s); err != nil {
			b.Fatal(err)
		}
	}
	root.Close()
	acfg := adminCfg.Copy()
	acfg.ConnConfig.Database = benchDB
	admin := pgConnect(b, acfg)
	b.Cleanup(admin.Close)
	sqlDB := stdlib.OpenDBFromPool(admin)
	defer sqlDB.Close()
	size := benchdata.Default
	if _, err := benchdata.Ensure(ctx, sqlDB, benchdata.Postgres, size, b.Logf); err != nil {
		b.Fatal(err)
	}
	sch := builder.MustSchema(benchdata.SchemaDef())
	for _, s := range []string{
		`GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO tenantmcp_bench_app`,
	} {
		if _, err := admin.Exec(ctx, s); err != nil {
			b.Fatal(err)
		}
	}
	key, err := postgres.NewKey("bench")
	if err != nil {
		b.Fatal(err)
	}
	if err := postgres.ApplyRLS(ctx, admin, sch, postgres.Options{Key: key}); err != nil {
		b.Fatal(err)
	}
	ucfg := acfg.Copy()
	ucfg.ConnConfig.User, ucfg.ConnConfig.Password = "tenantmcp_bench_app", appPW
	app := pgConnect(b, ucfg)
	b.Cleanup(app.Close)
	db, err := postgres.New(ctx, app, sch, guardedsql.Options{Engine: postgres.Options{Key: key}})
	if err != nil {
		b.Fatal(err)
	}
	tg := &benchTarget{engine: "postgres", sch: sch, size: size, guarded: map[string]*guardedsql.DB{"guarded": db}}
	for name, d := range postgresBenchVariants(b, ctx, app, sch, key) {
		tg.guarded[name] = d
	}
	tg.expert = func(ctx context.Context, query string, args ...any) ([][]any, error) {
		rows, err := admin.Query(ctx, rebind(query), args...)
		if err != nil {
			return nil, err
		}
		defer rows.Close()
		var out [][]any
		for rows.Next() {
			v, err := rows.Values()
			if err != nil {
				return nil, err
			}
			out = append(out, v)
		}
		return out, rows.Err()
	}
	explain := func(ctx context.Context, pool *pgxpool.Pool, setDoc bool, doc, query string, args ...any) (string, error) {
		tx, err := pool.Begin(ctx)
		if err != nil {
			return "", err
		}
		defer tx.Rollback(ctx)
		if setDoc {
			var nonce string
			if err := tx.QueryRow(ctx, postgres.ScopeNonceSQL).Scan(&nonce); err != nil {
				return "", err
			}
			if _, err := tx.Exec(ctx, `SELECT set_config('tenantmcp.scope', $1, true)`, signedScope(key, nonce, doc)); err != nil {
				return "", err
			}
		}
		rows, err := tx.Query(ctx, "EXPLAIN (ANALYZE, COSTS OFF, SUMMARY ON) "+query, args...)
		if err != nil {
			return "", err
		}
		defer rows.Close()
		var lines []string
		for rows.Next() {
			var l string
			if err := rows.Scan(&l); err != nil {
				return "", err
			}
			lines = append(lines, l)
		}
		return strings.Join(lines, "\n"), rows.Err()
	}
	tg.explainGuarded = func(ctx context.Context, db *guardedsql.DB, q builder.Query) (string, error) {
		text, args, err := db.Render(ctx, q)
		if err != nil {
			return "", err
		}
		sc, _ := scope.FromContext(ctx)
		return explain(ctx, app, true, encodeDoc(guardedsql.SchemaLevelsForTest(sch), sc.Grants()), text, args...)
	}
	tg.explainExpert = func(ctx context.Context, query string, args ...any) (string, error) {
		return explain(ctx, admin, false, "", rebind(query), args...)
	}
	return tg
}

// mysqlBench prepares the MySQL target: database tenantmcp_bench (created
// once, kept) with the dataset, guarded through the admin connection.
func mysqlBench(b *testing.B, dsn string) *benchTarget {
	ctx := context.Background()
	cfg, err := gmysql.Config(dsn)
	if err != nil {
		b.Fatal(err)
	}
	rootConn, err := mysql.NewConnector(cfg)
	if err != nil {
		b.Fatal(err)
	}
	root := sql.OpenDB(rootConn)
	if _, err := root.ExecContext(ctx, `CREATE DATABASE IF NOT EXISTS `+benchDB+` CHARACTER SET utf8mb4`); err != nil {
		b.Fatal(err)
	}
	root.Close()
	cfg = cfg.Clone()
	cfg.DBName = benchDB
	conn, err := mysql.NewConnector(cfg)
	if err != nil {
		b.Fatal(err)
	}
	sqlDB := sql.OpenDB(conn)
	b.Cleanup(func() { sqlDB.Close() })
	size := benchdata.Default
	if _, err := benchdata.Ensure(ctx, sqlDB, benchdata.MySQL, size, b.Logf); err != nil {
		b.Fatal(err)
	}
	sch := builder.MustSchema(benchdata.SchemaDef())
	db, err := gmysql.New(ctx, sqlDB, sch, guardedsql.Options{})
	if err != nil {
		b.Fatal(err)
	}
	query := func(ctx context.Context, q string, args ...any) ([][]any, error) {
		rows, err := sqlDB.QueryContext(ctx, q, args...)
		if err != nil {
			return nil, err
		}
		defer rows.Close()
		cols, _ := rows.Columns()
		var out [][]any
		for rows.Next() {
			vals := make([]any, len(cols))
			ptrs := make([]any, len(cols))
			for i := range vals {
				ptrs[i] = &vals[i]
			}
			if err := rows.Scan(ptrs...); err != nil {
				return nil, err
			}
			for i, v := range vals {
				if bs, ok := v.([]byte); ok {
					vals[i] = string(bs)
				}
			}
			out = append(out, vals)
		}
		return out, rows.Err()
	}
	explain := func(ctx context.Context, q string, args ...any) (string, error) {
		rows, err := query(ctx, "EXPLAIN "+q, args...)
		if err != nil {
			return "", err
		}
		var lines []string
		for _, r := range rows {
			lines = append(lines, strings.TrimSuffix(strings.TrimPrefix(fmt.Sprint(r), "["), "]"))
		}
		return "id select_type table type possible_keys key key_len ref rows Extra\n" + strings.Join(lines, "\n"), nil
	}
	tg := &benchTarget{engine: "mysql", sch: sch, size: size, guarded: map[string]*guardedsql.DB{"guarded": db}}
	tg.expert = query
	tg.explainExpert = explain
	tg.explainGuarded = func(ctx context.Context, db *guardedsql.DB, q builder.Query) (string, error) {
		text, args, err := db.Render(ctx, q)
		if err != nil {
			return "", err
		}
		plan, err := explain(ctx, text, args...)
		if err != nil {
			return "", err
		}
		// The plan must drive the index lookups from the scope: from
		// JSON_TABLE for a level of several ids, from the chain index
		// (a one-value range) for one. A shape check, not a timing.
		if !strings.Contains(plan, "bookings_room") || !strings.Contains(plan, "json_table") && !strings.Contains(plan, "hotels_chain") {
			return plan, fmt.Errorf("guarded plan does not drive the indexes from the scope:\n%s", plan)
		}
		return plan, nil
	}
	return tg
}

// postgresBenchVariants returns guarded DBs in further configurations to
// compare with the default one.
func postgresBenchVariants(b *testing.B, ctx context.Context, app *pgxpool.Pool, sch *builder.Schema, key postgres.Key) map[string]*guardedsql.DB {
	rlsOnly, err := postgres.New(ctx, app, sch, guardedsql.Options{Engine: postgres.Options{RLSOnly: true, Key: key}})
	if err != nil {
		b.Fatal(err)
	}
	out := map[string]*guardedsql.DB{"rls-only": rlsOnly}
	// The cost of the periodic row-level security re-check: the default
	// (30 s) against one that never comes due during the run.
	for name, po := range map[string]postgres.Options{
		"guarded-recheck-1h":  {Recheck: time.Hour},
		"rls-only-recheck-1h": {RLSOnly: true, Recheck: time.Hour},
	} {
		po.Key = key
		db, err := postgres.New(ctx, app, sch, guardedsql.Options{Engine: po})
		if err != nil {
			b.Fatal(err)
		}
		out[name] = db
	}
	return out
}
