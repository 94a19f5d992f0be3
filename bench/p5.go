package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tenantmcp/tenantmcp/examples/hotel/hotel"
	"github.com/tenantmcp/tenantmcp/guardedsql/postgres"
)

// P5 and P4 in one run: per database engine, the bare server, the hotel
// server and (for P4) the hotel server under the egress guard run as
// children, and the same clients drive them in turn, in rotating order,
// for equal time windows. P5 is hotel against bare, P4 hotel+egress
// against hotel, both from the same rounds.

// hotelPGDB is the PostgreSQL database of the hotel servers: created
// fresh every run, dropped at the end.
const hotelPGDB = "tenantmcp_bench_hotel"

// server is one contender of P5/P4 from the parent's side.
type server struct {
	name    string
	child   *child
	hc      *http.Client
	clients []*mcpClient
	// cpu and calls tally, per client count, the child's CPU seconds
	// (user+system, /proc) and the calls completed over its timed windows:
	// CPU per call is steadier than wall time on a shared machine.
	cpu   map[int]float64
	calls map[int]int64
	noCPU bool // /proc could not be read: no CPU figures
	// PostgreSQL only: pgAdmin reads pg_stat_activity to find the
	// backends serving the child's connections to dbPort (dbcpu.go);
	// dbCPU and dbCalls tally their CPU seconds and the calls over the
	// timed windows in which every one of them could be read.
	pgAdmin *pgxpool.Pool
	dbPort  int
	dbCPU   map[int]float64
	dbCalls map[int]int64
}

func (s *server) close() {
	for _, c := range s.clients {
		c.close()
	}
	if s.hc != nil {
		s.hc.CloseIdleConnections()
	}
	if s.child != nil {
		s.child.stop()
	}
}

// connect opens n sessions and checks one full answer on each.
func (s *server) connect(ctx context.Context, n int) error {
	s.hc = newHTTPClient()
	for i := range n {
		c, err := newMCPClient(ctx, s.hc, s.child.hello.URL, s.child.hello.Token)
		if err != nil {
			return fmt.Errorf("%s: %w", s.name, err)
		}
		s.clients = append(s.clients, c)
		if err := c.listBookings(ctx, i, true); err != nil {
			return fmt.Errorf("%s: %w", s.name, err)
		}
	}
	return nil
}

// timedWindow is window, with the child's CPU time and the calls tallied
// for n clients.
func (s *server) timedWindow(ctx context.Context, n int, d time.Duration) (float64, error) {
	pid := s.child.cmd.Process.Pid
	// The backends are looked up before the window, outside its time: a
	// pool may have opened or closed connections since the last one.
	var backends []int
	var db0 float64
	dbOK := false
	if s.pgAdmin != nil {
		if bs, err := pgBackends(ctx, s.pgAdmin, pid, s.dbPort); err == nil && len(bs) > 0 {
			backends = bs
			db0, dbOK = backendsCPU(backends)
		}
	}
	c0, err := procCPU(pid)
	s.noCPU = s.noCPU || err != nil
	ns, calls, err := s.window(ctx, n, d)
	if err != nil {
		return 0, err
	}
	c1, err := procCPU(pid)
	s.noCPU = s.noCPU || err != nil
	if s.cpu == nil {
		s.cpu, s.calls = map[int]float64{}, map[int]int64{}
		s.dbCPU, s.dbCalls = map[int]float64{}, map[int]int64{}
	}
	s.cpu[n] += c1 - c0
	s.calls[n] += calls
	if dbOK {
		if db1, ok := backendsCPU(backends); ok {
			s.dbCPU[n] += db1 - db0
			s.dbCalls[n] += calls
		}
	}
	return ns, nil
}

// cpuPerCall is the child's CPU microseconds per call at n clients, or
// false if it was not measured.
func (s *server) cpuPerCall(n int) (float64, bool) {
	if s.noCPU || s.calls[n] == 0 {
		return 0, false
	}
	return s.cpu[n] / float64(s.calls[n]) * 1e6, true
}

// dbCPUPerCall is the CPU microseconds per call of the PostgreSQL backends
// serving the child at n clients, or false if they were not measured.
func (s *server) dbCPUPerCall(n int) (float64, bool) {
	if s.dbCalls[n] == 0 {
		return 0, false
	}
	return s.dbCPU[n] / float64(s.dbCalls[n]) * 1e6, true
}

// window drives the server with its first n clients for d and returns the
// wall time per completed call and the calls completed.
func (s *server) window(ctx context.Context, n int, d time.Duration) (float64, int64, error) {
	var calls atomic.Int64
	var wg sync.WaitGroup
	var firstErr error
	var mu sync.Mutex
	start := time.Now()
	deadline := start.Add(d)
	for k, c := range s.clients[:n] {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := k; time.Now().Before(deadline); i++ {
				if err := c.listBookings(ctx, i, false); err != nil {
					mu.Lock()
					firstErr = orErr(firstErr, err)
					mu.Unlock()
					return
				}
				calls.Add(1)
			}
		}()
	}
	wg.Wait()
	if firstErr != nil {
		return 0, 0, fmt.Errorf("%s: %w", s.name, firstErr)
	}
	if calls.Load() == 0 {
		return 0, 0, fmt.Errorf("%s: no call completed in %s", s.name, d)
	}
	return float64(time.Since(start).Nanoseconds()) / float64(calls.Load()), calls.Load(), nil
}

func orErr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

// egressUnavailable says why the egress guard cannot run here, or "".
func egressUnavailable() string {
	if runtime.GOOS != "linux" {
		return "the egress guard needs Linux (cgroup v2 and eBPF); this is " + runtime.GOOS
	}
	if os.Geteuid() != 0 {
		return fmt.Sprintf("the egress guard needs root to load BPF programs and create a cgroup (running as uid %d)", os.Geteuid())
	}
	mi, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil || !strings.Contains(string(mi), " - cgroup2 ") {
		return "no cgroup v2 hierarchy is mounted (the egress guard attaches to a cgroup v2 directory)"
	}
	return ""
}

// p5Engine is one database engine of P5/P4 with the DSNs of its servers.
type p5Engine struct {
	label, engine string
	hotelDSN      string   // guardedsql.Open DSN
	rlsKey        string   // PostgreSQL: the scope-signing key (postgres.Key.Text)
	bareDSN       string   // database/sql DSN
	allow         []string // egress rules the hotel server needs
	skip, fail    string   // why its rows are skipped, or failed
	cleanup       func()
}

func (e *env) p5Engines(ctx context.Context) []p5Engine {
	var out []p5Engine
	sq := p5Engine{label: "SQLite", engine: "sqlite"}
	if h, err := e.hotelDB(ctx); err != nil {
		sq.fail = err.Error()
	} else {
		sq.hotelDSN, sq.bareDSN = h.guardedDSN(), h.rawDSN()
	}
	out = append(out, sq)
	pg := p5Engine{label: "PostgreSQL", engine: "postgres"}
	if e.cfg.pgDSN == "" {
		pg.skip = "no DSN: set TENANTMCP_BENCH_POSTGRES_DSN (or TENANTMCP_TEST_POSTGRES_DSN) to an admin connection"
	} else if err := e.preparePGHotel(ctx, &pg); err != nil {
		pg.fail = "preparing the hotel database on PostgreSQL: " + err.Error()
	} else {
		e.note("P5/P4 PostgreSQL: the demo hotel data in database %s, set up by hotel.SetupDemo (row-level security applied); the hotel server connects as the application role %s, the bare server as the admin.", hotelPGDB, appRole)
	}
	return append(out, pg)
}

// preparePGHotel creates a fresh database for the demo hotel on
// PostgreSQL and runs the example's own migration in it (hotel.SetupDemo:
// tables owned by the admin, data, row-level security, grants to the
// application role), then fills in the DSNs: the hotel server connects as
// the application role, the bare server as the admin (a superuser, to whom
// no policy applies) with its own tenant filter.
func (e *env) preparePGHotel(ctx context.Context, pg *p5Engine) error {
	pw, err := pgEnsureDatabase(ctx, e.cfg.pgDSN, hotelPGDB, true)
	if err != nil {
		return err
	}
	pg.cleanup = func() { pgDropDatabase(context.Background(), e.cfg.pgDSN, hotelPGDB) }
	adminDSN, err := pgWithDB(e.cfg.pgDSN, hotelPGDB)
	if err != nil {
		return err
	}
	key, err := postgres.NewKey("bench")
	if err != nil {
		return err
	}
	pg.rlsKey = key.Text()
	if err := hotel.SetupDemo(ctx, adminDSN, appRole, key, hotel.Generate(1, hotel.DemoSize)); err != nil {
		return err
	}
	admin, _, err := pgConnect(ctx, adminDSN, "")
	if err != nil {
		return err
	}
	_, err = admin.Exec(ctx, `ANALYZE`)
	admin.Close()
	if err != nil {
		return err
	}
	pg.bareDSN = adminDSN
	if pg.hotelDSN, err = pgAppDSN(e.cfg.pgDSN, hotelPGDB, pw); err != nil {
		return err
	}
	addrs, err := pgAddrs(ctx, e.cfg.pgDSN)
	if err != nil {
		return err
	}
	for _, a := range addrs {
		pg.allow = append(pg.allow, a.String())
	}
	return nil
}

func runP5P4(ctx context.Context, e *env) []Row {
	wantP5, wantP4 := slices.Contains(e.cfg.figures, "P5"), slices.Contains(e.cfg.figures, "P4")
	noEgress := egressUnavailable()
	e.note("P5/P4: every server is a child process (this binary re-executed with %s); the clients are goroutines of the bench process speaking streamable HTTP over loopback (one session each, initialized before timing), so clients and servers share the machine's cores. Each round gives every server a %s window, in rotating order.", childFlag, e.budget(400*time.Millisecond).Round(time.Millisecond))
	var out []Row
	for _, eng := range e.p5Engines(ctx) {
		out = append(out, e.p5Engine(ctx, eng, wantP5, wantP4, noEgress)...)
		if eng.cleanup != nil {
			eng.cleanup()
		}
	}
	return out
}

func (e *env) p5Engine(ctx context.Context, eng p5Engine, wantP5, wantP4 bool, noEgress string) []Row {
	var rows []Row
	for _, c := range e.cfg.clients {
		if wantP5 {
			rows = append(rows, Row{Figure: "P5", Case: fmt.Sprintf("tools/call list_bookings, %s, %d client%s", eng.label, c, plural(c)), Unit: unitCalls,
				Baseline:  bareDesc[e.cfg.bare],
				Candidate: "the examples/hotel server (hotel.New, serving the client's session as the bare server does): bearer-token verification, scope, input validation, guardedsql, redaction, flow labels, audit record (JSON, discarded)"})
		}
		if wantP4 {
			rows = append(rows, Row{Figure: "P4", Case: fmt.Sprintf("hotel server with / without egress guard, %s, %d client%s", eng.label, c, plural(c)), Unit: unitCalls,
				Baseline:  "the hotel server child without the egress guard",
				Candidate: "the same child after egress.Install (cgroup v2 + eBPF connect/sendmsg/skb/sockops hooks; allowlist: the database only)"})
		}
	}
	if eng.skip != "" {
		return skipAll(rows, eng.skip)
	}
	if eng.fail != "" {
		return failAll(rows, errors.New(eng.fail))
	}
	if !wantP5 && noEgress != "" {
		return skipAll(rows, noEgress)
	}
	var servers []*server
	var relays []*wireRelay // -wire-relay: the timed servers' relays
	defer func() {
		for _, s := range servers {
			s.close()
		}
		for _, r := range relays {
			r.close()
		}
	}()
	maxC := slices.Max(e.cfg.clients)
	// PostgreSQL: an admin connection to find each child's backends, whose
	// CPU the timed windows add up (dbcpu.go). Without it the rows are
	// measured all the same, without that note.
	var pgAdmin *pgxpool.Pool
	var dbPort int
	if eng.engine == "postgres" {
		if p, cfg, err := pgConnect(ctx, e.cfg.pgDSN, ""); err != nil {
			e.note("P5/P4 %s: the database's CPU per call is not measured: %v.", eng.label, err)
		} else {
			pgAdmin, dbPort = p, int(cfg.ConnConfig.Port)
			defer p.Close()
		}
	}
	start := func(name string, spec childSpec) (*server, error) {
		e.log.Printf("P5/P4 %s: starting %s", eng.label, name)
		spec.CPUProfileDir = e.cfg.childCPU
		if e.cfg.wireRelay && eng.engine == "postgres" && !spec.Egress {
			dsn, rel, err := relayPG(spec.DSN)
			if err != nil {
				return nil, err
			}
			relays = append(relays, rel)
			spec.DSN = dsn
		}
		ch, err := startChild(ctx, spec)
		if err != nil {
			return nil, err
		}
		s := &server{name: name, child: ch, pgAdmin: pgAdmin, dbPort: dbPort}
		servers = append(servers, s)
		if err := s.connect(ctx, maxC); err != nil {
			time.Sleep(300 * time.Millisecond) // let the child's stderr arrive
			return nil, fmt.Errorf("%w; server stderr: %s", err, ch.stderr)
		}
		return s, nil
	}
	bareIdx, hotelIdx, egressIdx := -1, -1, -1
	var arms []*server
	if wantP5 {
		s, err := start("bare", childSpec{Kind: "bare", Engine: eng.engine, DSN: eng.bareDSN, Bare: e.cfg.bare})
		if err != nil {
			return failAll(rows, err)
		}
		bareIdx = len(arms)
		arms = append(arms, s)
	}
	s, err := start("hotel", childSpec{Kind: "hotel", Engine: eng.engine, DSN: eng.hotelDSN, RLSKey: eng.rlsKey})
	if err != nil {
		return failAll(rows, err)
	}
	hotelIdx = len(arms)
	arms = append(arms, s)
	egressSkip := noEgress
	if wantP4 && egressSkip == "" {
		s, err := start("hotel+egress", childSpec{Kind: "hotel", Engine: eng.engine, DSN: eng.hotelDSN, RLSKey: eng.rlsKey, Egress: true, Allow: eng.allow})
		var ce *childError
		switch {
		case errors.As(err, &ce):
			egressSkip = "the child could not install the guard: " + ce.msg
		case err != nil:
			return failAll(rows, err)
		default:
			egressIdx = len(arms)
			arms = append(arms, s)
			e.log.Printf("P4 %s: guarded child in cgroup %s", eng.label, s.child.hello.Cgroup)
		}
	}
	// Warm up every server at full concurrency (not recorded).
	for _, s := range arms {
		if _, _, err := s.window(ctx, maxC, e.budget(400*time.Millisecond)); err != nil {
			return failAll(rows, err)
		}
	}
	win := e.budget(400 * time.Millisecond)
	i := 0
	for _, c := range e.cfg.clients {
		as := make([]arm, len(arms))
		for k, s := range arms {
			as[k] = arm{name: s.name, run: func(ctx context.Context) (float64, error) { return s.timedWindow(ctx, c, win) }}
		}
		e.log.Printf("P5/P4 %s: %d clients", eng.label, c)
		smp, err := rounds(ctx, as, e.budget(9*time.Second), e.minRounds(), 1000)
		if wantP5 {
			if err != nil {
				rows[i].Failed = err.Error()
			} else {
				rows[i] = rows[i].measured(compare(smp, bareIdx, hotelIdx), 0)
			}
			i++
		}
		if wantP4 {
			switch {
			case egressSkip != "":
				rows[i].Skipped = egressSkip
			case err != nil:
				rows[i].Failed = err.Error()
			default:
				rows[i] = rows[i].measured(compare(smp, hotelIdx, egressIdx), 0)
			}
			i++
		}
	}
	e.cpuNote(eng.label, arms)
	if wantP5 && eng.engine == "postgres" {
		e.p5RoundTrips(ctx, eng, rows)
	}
	return rows
}

// cpuNote notes each server child's CPU time per call over its timed
// windows, per client count (user+system from /proc, 10 ms ticks summed
// over the rounds).
func (e *env) cpuNote(label string, arms []*server) {
	var parts []string
	for _, c := range e.cfg.clients {
		var ps []string
		for _, s := range arms {
			if us, ok := s.cpuPerCall(c); ok {
				ps = append(ps, fmt.Sprintf("%s %.0f µs", s.name, us))
			}
		}
		for _, s := range arms {
			e.log.Printf("P5/P4 %s: %s (pid %d) answered %d calls in its timed windows at %d client%s", label, s.name, s.child.cmd.Process.Pid, s.calls[c], c, plural(c))
		}
		if len(ps) > 0 {
			parts = append(parts, fmt.Sprintf("%d client%s: %s", c, plural(c), strings.Join(ps, ", ")))
		}
	}
	if len(parts) > 0 {
		e.note("P5/P4 %s: server CPU per call (each child's user+system time over its timed windows, divided by the calls it answered in them): %s.", label, strings.Join(parts, "; "))
	}
	parts = parts[:0]
	for _, c := range e.cfg.clients {
		var ps []string
		for _, s := range arms {
			if us, ok := s.dbCPUPerCall(c); ok {
				ps = append(ps, fmt.Sprintf("%s %.0f µs", s.name, us))
			}
		}
		if len(ps) > 0 {
			parts = append(parts, fmt.Sprintf("%d client%s: %s", c, plural(c), strings.Join(ps, ", ")))
		}
	}
	if len(parts) > 0 {
		e.note("P5/P4 %s: database CPU per call (user+system of the PostgreSQL backends serving each child's connections, found through pg_stat_activity, over the timed windows in which all of them could be read): %s.", label, strings.Join(parts, "; "))
	}
}

// p5RoundTrips counts the database round trips per tools/call of the bare
// and the hotel server at the wire and records them on the measured P5
// rows: each server a fresh child whose DSN points at its own relay, one
// client, a few calls to warm up, then e.roundTripOps() calls counted.
// They are separate from the timed children, so the relay's extra hop
// does not weigh on the ratios (-wire-relay puts it under those too, to
// check what it costs). A count of zero fails the rows.
func (e *env) p5RoundTrips(ctx context.Context, eng p5Engine, rows []Row) {
	n := e.roundTripOps()
	maxC := slices.Max(e.cfg.clients)
	// conc holds, per server, the round trips per call at maxC clients
	// (all, then the taint store's), when maxC > 1.
	conc := map[string]concCount{}
	// count returns the round trips per call in all and, for the hotel,
	// those of its flow taint store (given its own relay) among them.
	count := func(name string, spec childSpec) (all, taint float64, err error) {
		dsn, rel, err := relayPG(spec.DSN)
		if err != nil {
			return 0, 0, err
		}
		defer rel.close()
		var trel *wireRelay
		if spec.Kind == "hotel" {
			var tdsn string
			if tdsn, trel, err = relayPG(spec.DSN); err != nil {
				return 0, 0, err
			}
			defer trel.close()
			spec.TaintDSN = tdsn
		}
		spec.DSN = dsn
		ch, err := startChild(ctx, spec)
		if err != nil {
			return 0, 0, err
		}
		s := &server{name: name, child: ch}
		defer s.close() // before the relays close: the child closes its connections first
		if err := s.connect(ctx, 1); err != nil {
			return 0, 0, fmt.Errorf("%w; server stderr: %s", err, ch.stderr)
		}
		c := s.clients[0]
		for i := range 5 { // the pool's connections and the plans, not counted
			if err := c.listBookings(ctx, i, false); err != nil {
				return 0, 0, err
			}
		}
		var taint0 int64
		if trel != nil {
			taint0 = trel.roundTrips()
		}
		db, err := countRoundTrips(ctx, rel, n, func(ctx context.Context, i int) error { return c.listBookings(ctx, i, i == 0) })
		if err != nil {
			return 0, 0, err
		}
		if trel != nil {
			taint = float64(trel.roundTrips()-taint0) / float64(n)
		}
		if maxC > 1 {
			// The same server at the largest concurrency, for a window
			// rather than a count: what a server sends per call may depend
			// on time as well as on calls (the flow taint store re-marks
			// each session's taint at most every 250 ms, flow/held.go), and
			// the sequential count above runs one session.
			cc, err := s.concurrentRoundTrips(ctx, maxC, rel, trel, e.budget(time.Second))
			if err != nil {
				return 0, 0, err
			}
			conc[name] = cc
		}
		return db + taint, taint, nil
	}
	e.log.Printf("P5 %s: counting round trips at the wire", eng.label)
	bare, _, err := count("bare (relayed)", childSpec{Kind: "bare", Engine: eng.engine, DSN: eng.bareDSN, Bare: e.cfg.bare})
	var hotel, taint float64
	if err == nil {
		hotel, taint, err = count("hotel (relayed)", childSpec{Kind: "hotel", Engine: eng.engine, DSN: eng.hotelDSN, RLSKey: eng.rlsKey})
	}
	if err == nil {
		e.note("P5 %s: of the hotel server's %.2f round trips per call, %.2f went to its flow taint store (flow/pgtaint, its own pool on the same database) and %.2f to its guarded DB.", eng.label, hotel, taint, hotel-taint)
		if b, h := conc["bare (relayed)"], conc["hotel (relayed)"]; h.all > 0 {
			e.note("P5 %s: at %d clients (a %s window through the same relays, which slow every call; the counts above are sequential, one session): bare %.2f round trips per call, hotel %.2f, of which %.2f to its flow taint store.", eng.label, maxC, e.budget(time.Second).Round(time.Millisecond), b.all, h.all, h.taint)
		}
	}
	if errors.Is(err, errNoTCP) {
		e.note("P5 %s: round trips not counted: %v.", eng.label, err)
		return
	}
	for i := range rows {
		r := &rows[i]
		if r.Figure != "P5" || r.Failed != "" || r.Skipped != "" {
			continue
		}
		if err != nil {
			r.Failed = "counting round trips at the wire: " + err.Error()
			continue
		}
		r.BaselineRoundTrips, r.CandidateRoundTrips, r.RoundTripOps = bare, hotel, n
	}
}

var bareDesc = map[string]string{
	"raw":   "a bare go-sdk server on streamable HTTP, no auth, whose plain ToolHandler runs the same hand-written query (database/sql, tenant filter by hand) and returns its encoding/json bytes as structured and text content",
	"typed": "a bare go-sdk server on streamable HTTP, no auth, whose mcp.AddTool typed tool runs the same hand-written query (database/sql, tenant filter by hand); the go-sdk validates its output against the inferred schema",
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// concCount is what concurrentRoundTrips counted: round trips per call in
// all and, of them, the flow taint store's.
type concCount struct{ all, taint float64 }

// concurrentRoundTrips opens sessions up to n, warms them up, then drives
// all n for d and returns the round trips per completed call counted by
// rel and trel (the taint store's relay, nil for the bare server).
func (s *server) concurrentRoundTrips(ctx context.Context, n int, rel, trel *wireRelay, d time.Duration) (concCount, error) {
	if more := n - len(s.clients); more > 0 {
		// connect opens sessions on the server's HTTP client, as many as
		// asked, after those it has.
		have := s.clients
		s.clients = nil
		if err := s.connect(ctx, more); err != nil {
			s.clients = append(have, s.clients...)
			return concCount{}, err
		}
		s.clients = append(have, s.clients...)
	}
	// Every pool's connections and every session's first calls, not counted.
	if _, _, err := s.window(ctx, n, d/4); err != nil {
		return concCount{}, err
	}
	all0 := rel.roundTrips()
	var taint0 int64
	if trel != nil {
		taint0 = trel.roundTrips()
	}
	_, calls, err := s.window(ctx, n, d)
	if err != nil {
		return concCount{}, err
	}
	var c concCount
	if trel != nil {
		c.taint = float64(trel.roundTrips()-taint0) / float64(calls)
	}
	c.all = float64(rel.roundTrips()-all0)/float64(calls) + c.taint
	return c, nil
}
