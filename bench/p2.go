package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/tenantmcp/tenantmcp/builder"
	"github.com/tenantmcp/tenantmcp/guardedsql"
	"github.com/tenantmcp/tenantmcp/guardedsql/mysql"
	"github.com/tenantmcp/tenantmcp/guardedsql/postgres"
	"github.com/tenantmcp/tenantmcp/internal/benchdata"
	"github.com/tenantmcp/tenantmcp/internal/mint"
	"github.com/tenantmcp/tenantmcp/scope"
)

// P2 runs, on the dataset of internal/benchdata (the generator of the
// guardedsql engine benchmark: 1M bookings over 1,000 chains, cached in a
// persistent database), the two query shapes of that benchmark for a
// scope of one chain: guarded through guardedsql, and hand-written by an
// expert with the tenant predicate spelled out, on the same server.

// smokeSize is the P2 dataset of -smoke: enough rows for every query to
// return some, generated in a second.
var smokeSize = benchdata.Size{Chains: 20, HotelsPerChain: 2, RoomsPerHotel: 5, BookingsPerRoom: 40, GuestsPerChain: 10}

type p2Shape struct {
	name    string
	guarded func(sch *builder.Schema, from, to string) builder.Query
	// expert is the hand-written SQL with '?' placeholders; in is the
	// tenant predicate on h.chain_id for the engine.
	expert  func(in string) string
	quarter bool // a three-month window instead of one month
}

var p2Shapes = []p2Shape{
	{
		name: "bookings by date (1 chain, first 50 of a month)",
		guarded: func(sch *builder.Schema, from, to string) builder.Query {
			b := sch.Table("bookings").As("b")
			return builder.Must(builder.Select(b.Col("id"), b.Col("room_id"), b.Col("check_in"), b.Col("nights"), b.Col("status")).
				From(b).Where(b.Col("check_in").Ge(from), b.Col("check_in").Lt(to)).
				OrderBy(b.Col("check_in").Asc(), b.Col("id").Asc()).Limit(50).Build())
		},
		expert: func(in string) string {
			return `SELECT b.id, b.room_id, b.check_in, b.nights, b.status FROM bookings b
JOIN rooms r ON r.id = b.room_id JOIN hotels h ON h.id = r.hotel_id
WHERE h.chain_id ` + in + ` AND b.check_in >= ? AND b.check_in < ?
ORDER BY b.check_in, b.id LIMIT 50`
		},
	},
	{
		name: "revenue by hotel (1 chain, a quarter, aggregate)",
		guarded: func(sch *builder.Schema, from, to string) builder.Query {
			b, r := sch.Table("bookings").As("b"), sch.Table("rooms").As("r")
			return builder.Must(builder.Select(r.Col("hotel_id"), builder.Sum(b.Col("total_cents")).As("revenue"), builder.CountAll().As("n")).
				From(b).Join(r, r.Col("id").EqCol(b.Col("room_id"))).
				Where(b.Col("check_in").Ge(from), b.Col("check_in").Lt(to), b.Col("status").Ne("cancelled")).
				GroupBy(r.Col("hotel_id")).OrderBy(r.Col("hotel_id").Asc()).Build())
		},
		expert: func(in string) string {
			return `SELECT r.hotel_id, SUM(b.total_cents) AS revenue, COUNT(*) AS n FROM bookings b
JOIN rooms r ON r.id = b.room_id JOIN hotels h ON h.id = r.hotel_id
WHERE h.chain_id ` + in + ` AND b.check_in >= ? AND b.check_in < ? AND b.status <> 'cancelled'
GROUP BY r.hotel_id ORDER BY r.hotel_id`
		},
		quarter: true,
	},
}

// p2Input is the chain and date window of iteration i: chains spread
// over the dataset, months over 2024–2025.
func p2Input(s benchdata.Size, sh p2Shape, i int) (chain, from, to string) {
	chain = benchdata.ChainID(1 + (i*7919)%s.Chains)
	m := i % 21
	y, mo := 2024+m/12, 1+m%12
	from = fmt.Sprintf("%04d-%02d-01", y, mo)
	n := 1
	if sh.quarter {
		n = 3
	}
	mo += n
	if mo > 12 {
		y, mo = y+1, mo-12
	}
	return chain, from, fmt.Sprintf("%04d-%02d-01", y, mo)
}

// p2Target is one engine with the dataset loaded.
type p2Target struct {
	label   string // "PostgreSQL (RLS)"
	size    benchdata.Size
	sch     *builder.Schema
	guarded *guardedsql.DB
	in      string // the expert's tenant predicate
	expert  expertFunc
	close   func()
	// wire is the same two arms connected through counting relays, for
	// the round trips (nil when they could not be set up: wireErr says
	// why).
	wire    *p2Wire
	wireErr error
}

// expertFunc runs the expert's SQL q (with '?' placeholders).
type expertFunc func(ctx context.Context, q string, chain, from, to string) ([][]any, error)

// p2Wire is a P2 target's guarded DB and expert on their own connections,
// each through its own relay (relay.go), used only to count round trips.
type p2Wire struct {
	guarded      *guardedsql.DB
	expert       expertFunc
	relG, relE   *wireRelay
	closeClients func()
}

func (w *p2Wire) close() {
	w.closeClients()
	w.relG.close()
	w.relE.close()
}

// newP2Wire starts the two relays to target and calls open with their
// addresses; it closes them again when open fails.
func newP2Wire(target string, open func(gAddr, eAddr string) (*p2Wire, error)) (*p2Wire, error) {
	relG, err := startRelay(target)
	if err != nil {
		return nil, err
	}
	relE, err := startRelay(target)
	if err != nil {
		relG.close()
		return nil, err
	}
	w, err := open(relG.addr(), relE.addr())
	if err != nil {
		relG.close()
		relE.close()
		return nil, err
	}
	w.relG, w.relE = relG, relE
	return w, nil
}

func scopeCtx(ctx context.Context, chain string) (context.Context, error) {
	sc, err := mint.Scope("bench", []scope.Grant{{Level: "chain", ID: chain}}, nil)
	if err != nil {
		return nil, err
	}
	return mint.NewContext(ctx, sc), nil
}

func collectAny(rows *guardedsql.Rows) ([][]any, error) {
	cols, err := rows.Columns()
	if err != nil {
		rows.Close()
		return nil, err
	}
	return guardedsql.CollectRows(rows, func(r *guardedsql.Rows) ([]any, error) {
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		return vals, r.Scan(ptrs...)
	})
}

func sqlCollectAny(rows *sql.Rows) ([][]any, error) {
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return nil, err
	}
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
		out = append(out, vals)
	}
	return out, rows.Err()
}

// printable renders rows for comparison: bytes as text.
func printable(rows [][]any) string {
	for _, r := range rows {
		for i, v := range r {
			if b, ok := v.([]byte); ok {
				r[i] = string(b)
			}
		}
	}
	return fmt.Sprint(rows)
}

func (e *env) p2Size() benchdata.Size {
	if e.cfg.smoke {
		return smokeSize
	}
	return e.p2cur.size
}

// ensureDataset loads the dataset (unless bench_meta says it is there) and
// notes how long a generation took: it is not part of the run's budget.
func (e *env) ensureDataset(ctx context.Context, db *sql.DB, engine benchdata.Engine, label string) error {
	start := time.Now()
	gen, err := benchdata.Ensure(ctx, db, engine, e.p2Size(), e.log.Printf)
	if err != nil {
		return err
	}
	if gen {
		e.note("P2 %s: the dataset (%s) was generated into database %s this run, in %.0f s; later runs reuse it.", label, e.p2Size(), e.p2DB(), time.Since(start).Seconds())
	}
	return nil
}

func postgresP2(ctx context.Context, e *env) (*p2Target, error) {
	pw, err := pgEnsureDatabase(ctx, e.cfg.pgDSN, e.p2DB(), false)
	if err != nil {
		return nil, err
	}
	admin, acfg, err := pgConnect(ctx, e.cfg.pgDSN, e.p2DB())
	if err != nil {
		return nil, err
	}
	t := &p2Target{label: "PostgreSQL (RLS)", size: e.p2Size(), in: "= ANY (?::text[])"}
	var app *pgxpool.Pool
	t.close = func() {
		if t.wire != nil {
			t.wire.close()
		}
		if app != nil {
			app.Close()
		}
		admin.Close()
	}
	ok := false
	defer func() {
		if !ok {
			t.close()
		}
	}()
	sqlDB := stdlib.OpenDBFromPool(admin)
	err = e.ensureDataset(ctx, sqlDB, benchdata.Postgres, t.label)
	sqlDB.Close()
	if err != nil {
		return nil, err
	}
	t.sch = builder.MustSchema(benchdata.SchemaDef())
	if _, err := admin.Exec(ctx, `GRANT SELECT ON ALL TABLES IN SCHEMA public TO `+appRole); err != nil {
		return nil, err
	}
	key, err := postgres.NewKey("bench-p2")
	if err != nil {
		return nil, err
	}
	if err := postgres.ApplyRLS(ctx, admin, t.sch, postgres.Options{Key: key}); err != nil {
		return nil, err
	}
	ucfg := acfg.Copy()
	ucfg.ConnConfig.User, ucfg.ConnConfig.Password = appRole, pw
	if app, _, err = pgOpen(ctx, ucfg); err != nil {
		return nil, err
	}
	if t.guarded, err = postgres.New(ctx, app, t.sch, guardedsql.Options{Engine: postgres.Options{Key: key}}); err != nil {
		return nil, err
	}
	t.expert = pgExpert(admin)
	target := net.JoinHostPort(acfg.ConnConfig.Host, strconv.Itoa(int(acfg.ConnConfig.Port)))
	if strings.HasPrefix(acfg.ConnConfig.Host, "/") {
		t.wireErr = errNoTCP
	} else {
		t.wire, t.wireErr = newP2Wire(target, func(gAddr, eAddr string) (*p2Wire, error) {
			app, err := pgOpenVia(ctx, ucfg, gAddr)
			if err != nil {
				return nil, err
			}
			adm, err := pgOpenVia(ctx, acfg, eAddr)
			if err != nil {
				app.Close()
				return nil, err
			}
			w := &p2Wire{expert: pgExpert(adm), closeClients: func() { app.Close(); adm.Close() }}
			if w.guarded, err = postgres.New(ctx, app, t.sch, guardedsql.Options{Engine: postgres.Options{Key: key}}); err != nil {
				w.closeClients()
				return nil, err
			}
			return w, nil
		})
	}
	ok = true
	return t, nil
}

// pgOpenVia opens a pool of cfg connecting to addr (a relay) instead.
func pgOpenVia(ctx context.Context, cfg *pgxpool.Config, addr string) (*pgxpool.Pool, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	p, err := strconv.Atoi(port)
	if err != nil {
		return nil, err
	}
	c := cfg.Copy()
	// No fallbacks: they name the server itself, past the relay.
	c.ConnConfig.Host, c.ConnConfig.Port, c.ConnConfig.Fallbacks = host, uint16(p), nil
	pool, _, err := pgOpen(ctx, c)
	return pool, err
}

// pgExpert is the expert on PostgreSQL: pgx directly, as the admin (a
// superuser: no row-level security), its predicate written by hand.
func pgExpert(admin *pgxpool.Pool) expertFunc {
	return func(ctx context.Context, q, chain, from, to string) ([][]any, error) {
		rows, err := admin.Query(ctx, dollarize(q), []string{chain}, from, to)
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
}

func mysqlP2(ctx context.Context, e *env) (*p2Target, error) {
	db, err := mysqlOpen(ctx, e.cfg.myDSN, e.p2DB(), true)
	if err != nil {
		return nil, err
	}
	var version string
	_ = db.QueryRowContext(ctx, `SELECT VERSION()`).Scan(&version)
	label := "MySQL (JSON_TABLE)"
	if strings.Contains(strings.ToLower(version), "mariadb") {
		label = "MariaDB (JSON_TABLE)"
	}
	t := &p2Target{label: label, size: e.p2Size(), in: "IN (?)"}
	t.close = func() {
		if t.wire != nil {
			t.wire.close()
		}
		db.Close()
	}
	if err := e.ensureDataset(ctx, db, benchdata.MySQL, label); err != nil {
		db.Close()
		return nil, err
	}
	t.sch = builder.MustSchema(benchdata.SchemaDef())
	if t.guarded, err = mysql.New(ctx, db, t.sch, guardedsql.Options{}); err != nil {
		db.Close()
		return nil, err
	}
	// MySQL has no row-level security: guarded and expert share the pool
	// (for the round trips, each its own, through its own relay).
	t.expert = mysqlExpert(db)
	cfg, err := mysqlConfig(e.cfg.myDSN)
	if err != nil {
		t.close()
		return nil, err
	}
	if cfg.Net != "tcp" {
		t.wireErr = errors.New("round trips are counted on a TCP address")
		return t, nil
	}
	t.wire, t.wireErr = newP2Wire(cfg.Addr, func(gAddr, eAddr string) (*p2Wire, error) {
		via := func(addr string) (*sql.DB, error) {
			c := cfg.Clone()
			c.Addr = addr
			return mysqlOpenConfig(ctx, c, e.p2DB())
		}
		gdb, err := via(gAddr)
		if err != nil {
			return nil, err
		}
		edb, err := via(eAddr)
		if err != nil {
			gdb.Close()
			return nil, err
		}
		w := &p2Wire{expert: mysqlExpert(edb), closeClients: func() { gdb.Close(); edb.Close() }}
		if w.guarded, err = mysql.New(ctx, gdb, t.sch, guardedsql.Options{}); err != nil {
			w.closeClients()
			return nil, err
		}
		return w, nil
	})
	return t, nil
}

// mysqlExpert is the expert on MySQL/MariaDB: database/sql on db.
func mysqlExpert(db *sql.DB) expertFunc {
	return func(ctx context.Context, q, chain, from, to string) ([][]any, error) {
		rows, err := db.QueryContext(ctx, q, chain, from, to)
		if err != nil {
			return nil, err
		}
		return sqlCollectAny(rows)
	}
}

func runP2(ctx context.Context, e *env) []Row {
	var out []Row
	for _, sz := range e.p2Sizes() {
		e.p2cur = sz
		out = append(out, runP2Size(ctx, e)...)
	}
	return out
}

// runP2Size measures every engine and shape on the dataset e.p2cur.
func runP2Size(ctx context.Context, e *env) []Row {
	var out []Row
	engines := []struct {
		name, dsn, env string
		open           func(context.Context, *env) (*p2Target, error)
	}{
		{"PostgreSQL (RLS)", e.cfg.pgDSN, "TENANTMCP_BENCH_POSTGRES_DSN (or TENANTMCP_TEST_POSTGRES_DSN)", postgresP2},
		{"MariaDB/MySQL (JSON_TABLE)", e.cfg.myDSN, "TENANTMCP_BENCH_MYSQL_DSN (or TENANTMCP_TEST_MYSQL_DSN)", mysqlP2},
	}
	for _, eng := range engines {
		rows := make([]Row, len(p2Shapes))
		for i, sh := range p2Shapes {
			rows[i] = Row{Figure: "P2", Case: eng.name + ", " + sh.name + e.p2CaseSuffix(), Unit: unitMicros}
		}
		if eng.dsn == "" {
			out = append(out, skipAll(rows, "no DSN: set "+eng.env+" to an admin connection")...)
			continue
		}
		e.log.Printf("P2: preparing %s", eng.name)
		t, err := eng.open(ctx, e)
		if err != nil {
			out = append(out, failAll(rows, err)...)
			continue
		}
		for i, sh := range p2Shapes {
			rows[i].Case = t.label + ", " + sh.name + e.p2CaseSuffix()
			rows[i].Baseline = "the expert's SQL with `h.chain_id " + t.in + "` on the same server (PostgreSQL: as the superuser, so no RLS; MySQL: the same pool)"
			rows[i].Candidate = "guardedsql on the builder query: tenant predicates added by the guard" + map[bool]string{true: ", RLS policies in force for the application role, one transaction with set_config per statement", false: ", scope expanded with JSON_TABLE"}[strings.HasPrefix(t.label, "PostgreSQL")]
			rows[i].Note = fmt.Sprintf("%s bookings", groupThousands(t.size.Bookings()))
			rows[i] = measureP2(ctx, e, t, sh, rows[i])
		}
		t.close()
		out = append(out, rows...)
	}
	return out
}

// p2Op is one operation of a P2 arm on input i.
type p2Op func(ctx context.Context, i int) ([][]any, error)

// p2Ops are shape sh's two arms on guarded DB g and expert ex.
func p2Ops(t *p2Target, sh p2Shape, g *guardedsql.DB, ex expertFunc) (guarded, expert p2Op) {
	expertSQL := sh.expert(t.in)
	guarded = func(ctx context.Context, i int) ([][]any, error) {
		chain, from, to := p2Input(t.size, sh, i)
		sctx, err := scopeCtx(ctx, chain)
		if err != nil {
			return nil, err
		}
		rows, err := g.Query(sctx, sh.guarded(t.sch, from, to))
		if err != nil {
			return nil, err
		}
		return collectAny(rows)
	}
	expert = func(ctx context.Context, i int) ([][]any, error) {
		chain, from, to := p2Input(t.size, sh, i)
		return ex(ctx, expertSQL, chain, from, to)
	}
	return guarded, expert
}

// p2RoundTrips counts the round trips per operation of each arm of shape
// sh at the wire (t.wire), after a few operations to warm the pools and
// the statement caches, and records them on r.
func p2RoundTrips(ctx context.Context, e *env, t *p2Target, sh p2Shape, r Row) Row {
	if t.wire == nil {
		e.note("P2 %s, %s: round trips not counted: %v.", t.label, sh.name, t.wireErr)
		return r
	}
	guarded, expert := p2Ops(t, sh, t.wire.guarded, t.wire.expert)
	n := e.roundTripOps()
	count := func(rel *wireRelay, op p2Op) (float64, error) {
		do := func(ctx context.Context, i int) error { _, err := op(ctx, i); return err }
		for i := range 3 {
			if err := do(ctx, i); err != nil {
				return 0, err
			}
		}
		return countRoundTrips(ctx, rel, n, do)
	}
	var err error
	if r.BaselineRoundTrips, err = count(t.wire.relE, expert); err != nil {
		r.Failed = "counting the expert's round trips at the wire: " + err.Error()
		return r
	}
	if r.CandidateRoundTrips, err = count(t.wire.relG, guarded); err != nil {
		r.Failed = "counting the guarded round trips at the wire: " + err.Error()
		return r
	}
	r.RoundTripOps = n
	return r
}

func measureP2(ctx context.Context, e *env, t *p2Target, sh p2Shape, r Row) Row {
	guarded, expert := p2Ops(t, sh, t.guarded, t.expert)
	// Correctness first: both return the same non-empty rows.
	for i := range 5 {
		got, err := guarded(ctx, i)
		if err != nil {
			r.Failed = "guarded: " + err.Error()
			return r
		}
		want, err := expert(ctx, i)
		if err != nil {
			r.Failed = "expert: " + err.Error()
			return r
		}
		if len(want) == 0 || printable(got) != printable(want) {
			r.Failed = fmt.Sprintf("guarded and expert disagree (or are empty) for input %d: %d vs %d rows", i, len(got), len(want))
			return r
		}
	}
	arms := sameInputs(e.batch(), []string{"expert", "guarded"},
		func(ctx context.Context, i int) error { _, err := expert(ctx, i); return err },
		func(ctx context.Context, i int) error { _, err := guarded(ctx, i); return err },
	)
	s, err := rounds(ctx, arms, e.budget(4*time.Second), e.minRounds(), 1000)
	if err != nil {
		r.Failed = err.Error()
		return r
	}
	return p2RoundTrips(ctx, e, t, sh, r.measured(compare(s, 0, 1), 0))
}

func groupThousands(n int) string {
	s := itoa(n)
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}
