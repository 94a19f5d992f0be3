package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/tenantmcp/tenantmcp/claims/devtoken"
	"github.com/tenantmcp/tenantmcp/examples/hotel/hotel"
	"github.com/tenantmcp/tenantmcp/guardedsql"
	"github.com/tenantmcp/tenantmcp/guardedsql/postgres"
	tmserver "github.com/tenantmcp/tenantmcp/server"
	"github.com/tenantmcp/tenantmcp/server/redisstore"
)

// The soak (-soak DURATION): the hotel server as a child process on
// PostgreSQL, with the hotel command's default limits (and its rate
// buckets in Redis when -soak-redis names one), driven by one client per
// tenant at a steady rate of mixed reads and writes, while the parent
// samples what leaks show in: the child's resident memory, open file
// descriptors, goroutines (go_goroutines from its /metrics), its
// connections in pg_stat_activity, its CPU, and the calls answered in each
// interval. It measures the server over time; nothing is judged on a
// figure. The exit status is 1 only when the soak could not run to its end
// (set-up failed, the child died) or no call at all succeeded.

const (
	// soakDB is the soak's own database, created fresh and dropped at the
	// end; soakRole its application role (NOSUPERUSER, NOBYPASSRLS), apart
	// from the bench's so that a bench run beside a soak leaves it alone.
	soakDB   = "tenantmcp_bench_soak"
	soakRole = "tenantmcp_benchsoak_app"
	// soakAppName is the application_name of the child's connections.
	soakAppName = "tenantmcp-soak"
)

// soakConfig is what the -soak* flags say.
type soakConfig struct {
	duration, interval time.Duration
	rate               float64 // calls per second per tenant
	tenants            int
	redis              string
	out                string
}

// soakLimits are the hotel command's default limits (examples/hotel
// flags.go): a soak runs the server as it is deployed.
func soakLimits() hotel.Limits {
	return hotel.Limits{
		PoolWait:         2 * time.Second,
		StatementTimeout: 10 * time.Second,
		LockTimeout:      500 * time.Millisecond,
		PerTenant:        tmserver.Limit{Concurrent: 1, Rate: 50, Burst: 100},
		QueueWait:        time.Second,
		TimeoutPenalty:   2 * time.Second,
	}
}

// soakSize is the demo data's shape with one chain per tenant.
func soakSize(tenants int) hotel.Size {
	s := hotel.DemoSize
	s.Chains = tenants
	return s
}

// serveSoakHotel is the soak's child: the hotel server with metrics, the
// default limits, optional Redis rate buckets, and a token per chain.
func serveSoakHotel(ctx context.Context, spec childSpec) (childHello, func(), error) {
	key, err := postgres.ParseKey(spec.RLSKey)
	if err != nil {
		return childHello{}, nil, err
	}
	lim := soakLimits()
	closeRedis := func() {}
	if spec.SoakRedis != "" {
		rc := redis.NewClient(&redis.Options{Addr: spec.SoakRedis})
		closeRedis = func() { rc.Close() }
		if lim.Rates, err = redisstore.NewRates(rc, redisstore.Options{Prefix: "tenantmcp:soak:rate:"}); err != nil {
			rc.Close()
			return childHello{}, nil, err
		}
	}
	app, err := hotel.New(ctx, hotel.Options{
		Addr:        "127.0.0.1:0",
		DB:          spec.DSN,
		RLSKey:      key,
		Metrics:     true,
		Logger:      slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
		AuditLogger: slog.New(slog.NewJSONHandler(io.Discard, nil)),
		Limits:      lim,
	})
	if err != nil {
		closeRedis()
		return childHello{}, nil, err
	}
	h := childHello{URL: app.HTTP.ResourceURL, Tokens: map[string]string{},
		Metrics: strings.TrimSuffix(app.HTTP.ResourceURL, "/mcp") + "/metrics"}
	for _, chain := range spec.SoakChains {
		tok, err := app.Issuer.Mint(devtoken.Token{Subject: "soak-" + chain, Groups: []string{"/tenants/" + chain},
			Roles: []string{"manager"}, TTL: spec.SoakTTL})
		if err != nil {
			app.Close()
			closeRedis()
			return childHello{}, nil, err
		}
		h.Tokens[chain] = tok
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := app.Serve(ctx); err != nil {
			fmt.Fprintln(os.Stderr, "hotel serve:", err)
		}
	}()
	return h, func() { <-done; app.Close(); closeRedis() }, nil
}

// soakTenant is one tenant's client and the rows it uses.
type soakTenant struct {
	chain    string
	c        *mcpClient
	room     int64   // a room of the chain only this client books
	guest    int64   // a guest of that room's hotel
	bookings []int64 // some of the chain's bookings, for get_booking
	created  []int64 // bookings it created and has not cancelled yet
	writes   int
}

// soakStats are the calls of the current interval.
type soakStats struct {
	mu                  sync.Mutex
	ok, limited, failed int
	lat                 []time.Duration
	totalOK, totalLim   int
	totalFailed         int
	errs                map[string]int // failure messages (first 200 bytes), counted
}

func (s *soakStats) record(d time.Duration, outcome string, msg string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch outcome {
	case "ok":
		s.ok++
		s.totalOK++
		s.lat = append(s.lat, d)
	case "limited":
		s.limited++
		s.totalLim++
	default:
		s.failed++
		s.totalFailed++
		if len(s.errs) < 20 || s.errs[msg] > 0 {
			s.errs[msg]++
		}
	}
}

// take returns and resets the interval's counts and latencies.
func (s *soakStats) take() (ok, limited, failed int, lat []time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ok, limited, failed, lat = s.ok, s.limited, s.failed, s.lat
	s.ok, s.limited, s.failed, s.lat = 0, 0, 0, nil
	return
}

// soakSample is one row of the soak's table.
type soakSample struct {
	At                  time.Duration
	RSSKiB              int64
	FDs                 int
	Sockets             int     // of FDs, sockets (TCP: HTTP clients, database, Redis, listeners)
	Goroutines          int     // -1: not read
	HeapMiB             float64 // go_memstats_heap_inuse_bytes; -1: not read
	DBConns             int     // -1: not read
	CPU                 float64
	OK, Limited, Failed int
	Rate                float64 // calls answered per second (ok+limited+failed)
	P50, P99            float64 // ms, ok calls
}

func soakMain(ctx context.Context, cfg config, sc soakConfig) int {
	fail := func(format string, args ...any) int {
		fmt.Fprintf(os.Stderr, "bench -soak: "+format+"\n", args...)
		return 1
	}
	if cfg.pgDSN == "" {
		return fail("no PostgreSQL: set TENANTMCP_BENCH_POSTGRES_DSN or TENANTMCP_TEST_POSTGRES_DSN (or -postgres) to an admin DSN")
	}
	started := time.Now()
	logf := func(format string, args ...any) {
		fmt.Fprintf(os.Stderr, "%s soak: %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
	}

	// The database: fresh, the demo hotel with one chain per tenant, row
	// security for the soak's application role.
	logf("creating database %s (hotel demo data, %d chains)", soakDB, sc.tenants)
	pw, err := pgEnsureDatabaseRole(ctx, cfg.pgDSN, soakDB, soakRole, true)
	if err != nil {
		return fail("preparing PostgreSQL: %v", guardedsql.RedactDSNError(err, cfg.pgDSN))
	}
	defer pgDropDatabase(context.Background(), cfg.pgDSN, soakDB)
	adminDSN, err := pgWithDB(cfg.pgDSN, soakDB)
	if err != nil {
		return fail("%v", err)
	}
	key, err := postgres.NewKey("soak")
	if err != nil {
		return fail("%v", err)
	}
	data := hotel.Generate(1, soakSize(sc.tenants))
	if err := hotel.SetupDemo(ctx, adminDSN, soakRole, key, data); err != nil {
		return fail("hotel.SetupDemo: %v", guardedsql.RedactDSNError(err, adminDSN))
	}
	appDSN, err := pgRoleDSN(cfg.pgDSN, soakRole, soakDB, pw)
	if err != nil {
		return fail("%v", err)
	}
	appDSN += sep(appDSN) + "application_name=" + soakAppName
	admin, _, err := pgConnect(ctx, cfg.pgDSN, "")
	if err != nil {
		return fail("admin connection: %v", err)
	}
	defer admin.Close()
	if sc.redis != "" {
		rc := redis.NewClient(&redis.Options{Addr: sc.redis})
		pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err := rc.Ping(pctx).Err()
		cancel()
		rc.Close()
		if err != nil {
			return fail("Redis at %s does not answer (%v); -soak-redis '' keeps the rate buckets in the server process", sc.redis, err)
		}
	}

	var chains []string
	for _, c := range data.Chains {
		chains = append(chains, c.ID)
	}
	ttl := max(time.Hour, sc.duration+30*time.Minute)
	logf("starting the hotel server child")
	ch, err := startChild(ctx, childSpec{Kind: "hotel", Engine: "postgres", DSN: appDSN, RLSKey: key.Text(),
		Soak: true, SoakRedis: sc.redis, SoakChains: chains, SoakTTL: ttl})
	if err != nil {
		return fail("hotel child: %v", err)
	}
	defer ch.stop()
	pid := ch.cmd.Process.Pid

	hc := newHTTPClient()
	defer hc.CloseIdleConnections()
	tenants, err := soakTenants(ctx, hc, ch.hello, data, chains)
	for _, t := range tenants {
		defer t.c.close()
	}
	if err != nil {
		time.Sleep(300 * time.Millisecond)
		return fail("connecting the tenants' clients: %v; server stderr: %s", err, ch.stderr)
	}

	redisNote := "in the server process"
	if sc.redis != "" {
		redisNote = "in Redis at " + sc.redis
	}
	header := []string{
		fmt.Sprintf("# Soak: the hotel server on PostgreSQL, %d tenants, %s", sc.tenants, sc.duration),
		"",
		"- Command: `" + strings.Join(append([]string{"go run ./bench"}, os.Args[1:]...), " ") + "`",
		"- Started: " + started.UTC().Format(time.RFC3339) + fmt.Sprintf(", child pid %d", pid),
		fmt.Sprintf("- Load: %d tenants, one client each, %.3g calls/s per tenant (%.3g calls/s in all), each cycle of 10 calls: 6 list_bookings, 1 get_booking, 1 revenue_report, 1 create_booking, 1 cancel_booking (of the booking it created)",
			sc.tenants, sc.rate, sc.rate*float64(sc.tenants)),
		fmt.Sprintf("- Server: examples/hotel (hotel.New) as a child process, metrics on, the hotel command's default limits (per tenant 1 call in flight, 50 calls/s, burst 100; pool wait 2 s; statement timeout 10 s); rate buckets %s; database %s (%d bookings) as role %s, application_name %s", redisNote, soakDB, len(data.Bookings), soakRole, soakAppName),
		fmt.Sprintf("- Every %s: RSS (VmRSS), Go heap in use (go_memstats_heap_inuse_bytes at /metrics), open fds (/proc/PID/fd) and how many of them are sockets, goroutines (go_goroutines at /metrics), DB conns (pg_stat_activity rows of the role in %s), child CPU %% of one core, calls in the interval (ok, limited = 429 or busy, failed), latency of the ok calls", sc.interval, soakDB),
		fmt.Sprintf("- Machine: %s", machineLine(ctx, cfg)),
		"",
	}
	for _, l := range header {
		fmt.Println(l)
	}
	fmt.Println(soakTableHeader)
	fmt.Println(soakTableRule)

	stats := &soakStats{errs: map[string]int{}}
	lctx, stopLoad := context.WithTimeout(ctx, sc.duration)
	defer stopLoad()
	var wg sync.WaitGroup
	period := time.Duration(float64(time.Second) / sc.rate)
	t0 := time.Now()
	var samples []soakSample
	sampler := &soakSampler{pid: pid, metrics: ch.hello.Metrics, hc: &http.Client{Timeout: 5 * time.Second}, admin: admin}
	sampler.cpu0, _ = procCPU(pid)
	sampler.last = t0
	s0, err := sampler.sample(ctx, 0, stats)
	if err != nil {
		return fail("%v; server stderr: %s", err, ch.stderr)
	}
	samples = append(samples, s0)
	fmt.Println(s0.row())
	for k, t := range tenants {
		wg.Go(func() {
			// Spread the tenants' calls over the period.
			select {
			case <-lctx.Done():
				return
			case <-time.After(period * time.Duration(k) / time.Duration(len(tenants))):
			}
			tick := time.NewTicker(period)
			defer tick.Stop()
			for i := 0; ; i++ {
				// The call runs to its answer even if the soak's time is up
				// meanwhile (only Ctrl-C cancels it): a write cut off by the
				// client would show as a server error that the load caused.
				soakCall(ctx, t, i, stats)
				if lctx.Err() != nil {
					return
				}
				select {
				case <-lctx.Done():
					return
				case <-tick.C:
				}
			}
		})
	}
	code := 0
	tick := time.NewTicker(sc.interval)
loop:
	for {
		select {
		case <-lctx.Done():
			break loop
		case <-tick.C:
		}
		s, err := sampler.sample(ctx, time.Since(t0), stats)
		if err != nil {
			fmt.Fprintf(os.Stderr, "bench -soak: %v; server stderr: %s\n", err, ch.stderr)
			code = 1
			stopLoad()
			break
		}
		samples = append(samples, s)
		fmt.Println(s.row())
	}
	tick.Stop()
	wg.Wait()
	if code == 0 && time.Since(t0)-samples[len(samples)-1].At > sc.interval/10 {
		if s, err := sampler.sample(ctx, time.Since(t0), stats); err == nil {
			samples = append(samples, s)
			fmt.Println(s.row())
		} else {
			code = 1
		}
	}
	stats.mu.Lock()
	totOK, totLim, totFail, errs := stats.totalOK, stats.totalLim, stats.totalFailed, stats.errs
	stats.mu.Unlock()
	if totOK == 0 {
		code = 1
	}

	var md bytes.Buffer
	for _, l := range header {
		md.WriteString(l + "\n")
	}
	md.WriteString(soakTableHeader + "\n" + soakTableRule + "\n")
	for _, s := range samples {
		md.WriteString(s.row() + "\n")
	}
	tail := soakSummary(samples, totOK, totLim, totFail, errs, ch.stderr.String())
	md.WriteString(tail)
	fmt.Print(tail)
	if sc.out != "" {
		csvPath := strings.TrimSuffix(sc.out, filepath.Ext(sc.out)) + ".csv"
		if csvPath == sc.out {
			csvPath += ".csv"
		}
		if err := os.WriteFile(sc.out, md.Bytes(), 0o644); err != nil {
			return fail("%v", err)
		}
		if err := os.WriteFile(csvPath, soakCSV(samples), 0o644); err != nil {
			return fail("%v", err)
		}
		logf("wrote %s and %s", sc.out, csvPath)
	}
	return code
}

func sep(dsn string) string {
	if strings.Contains(dsn, "?") {
		return "&"
	}
	return "?"
}

// soakTenants connects one client per chain and picks its rows: a room of
// the chain's first hotel, a guest of that hotel, some bookings.
func soakTenants(ctx context.Context, hc *http.Client, h childHello, d *hotel.Data, chains []string) ([]*soakTenant, error) {
	var out []*soakTenant
	for _, chain := range chains {
		t := &soakTenant{chain: chain}
		first := d.HotelsOf(chain)[0]
		for _, r := range d.Rooms {
			if r.HotelID == first {
				t.room = r.ID
				break
			}
		}
		for _, g := range d.Guests {
			if g.HotelID == first {
				t.guest = g.ID
				break
			}
		}
		for _, b := range d.Bookings {
			if len(t.bookings) < 50 && d.ChainOfHotel(d.HotelOfBooking(b.ID)) == chain {
				t.bookings = append(t.bookings, b.ID)
			}
		}
		if t.room == 0 || t.guest == 0 || len(t.bookings) == 0 {
			return out, fmt.Errorf("chain %s: no room, guest or booking in the demo data", chain)
		}
		c, err := newMCPClient(ctx, hc, h.URL, h.Tokens[chain])
		if err != nil {
			return out, fmt.Errorf("%s: %w", chain, err)
		}
		t.c = c
		out = append(out, t)
	}
	return out, nil
}

// soakCall makes call i of tenant t (a cycle of ten: six list_bookings, a
// get_booking, a revenue_report, a create_booking and a cancel_booking of
// a booking it created) and records its outcome.
func soakCall(ctx context.Context, t *soakTenant, i int, stats *soakStats) {
	var tool string
	var args map[string]any
	switch i % 10 {
	case 3:
		tool, args = "get_booking", map[string]any{"id": t.bookings[(i/10)%len(t.bookings)]}
	case 6:
		// A quarter of 2026, in turn.
		from := time.Date(2026, time.Month(1+3*((i/10)%4)), 1, 0, 0, 0, 0, time.UTC)
		tool, args = "revenue_report", map[string]any{"from": from.Format(time.DateOnly), "to": from.AddDate(0, 3, 0).Format(time.DateOnly)}
	case 8:
		// Fresh dates on its own room: never a conflict.
		in := time.Date(2032, 1, 1, 0, 0, 0, 0, time.UTC).AddDate(0, 0, 2*t.writes)
		t.writes++
		tool, args = "create_booking", map[string]any{"room_id": t.room, "guest_id": t.guest,
			"check_in": in.Format(time.DateOnly), "check_out": in.AddDate(0, 0, 1).Format(time.DateOnly)}
	case 9:
		if len(t.created) > 0 {
			tool, args = "cancel_booking", map[string]any{"id": t.created[0]}
			break
		}
		fallthrough
	default:
		from, to := window(i)
		tool, args = "list_bookings", map[string]any{"from": from, "to": to, "limit": 50, "offset": (i / 10) % 3 * 10}
	}
	start := time.Now()
	msg, _, err := t.c.post(ctx, map[string]any{"jsonrpc": "2.0", "id": t.c.next(), "method": "tools/call",
		"params": map[string]any{"name": tool, "arguments": args}})
	took := time.Since(start)
	if ctx.Err() != nil {
		return // interrupted mid-call: not counted
	}
	var he *httpStatusError
	switch {
	case errors.As(err, &he) && he.code == http.StatusTooManyRequests:
		stats.record(took, "limited", "")
		return
	case err != nil:
		stats.record(took, "failed", tool+": "+trim(err.Error()))
		return
	}
	var m struct {
		Error *struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
		Result *struct {
			IsError           bool            `json:"isError"`
			StructuredContent json.RawMessage `json:"structuredContent"`
			Content           []struct {
				Text string `json:"text"`
			} `json:"content"`
		} `json:"result"`
	}
	if err := json.Unmarshal(msg, &m); err != nil {
		stats.record(took, "failed", tool+": undecodable answer")
		return
	}
	switch {
	case m.Error != nil && m.Error.Code == tmserver.CodeLimited:
		stats.record(took, "limited", "")
	case m.Error != nil:
		stats.record(took, "failed", fmt.Sprintf("%s: JSON-RPC error %d: %s", tool, m.Error.Code, trim(m.Error.Message)))
	case m.Result == nil:
		stats.record(took, "failed", tool+": no result")
	case m.Result.IsError:
		text := ""
		if len(m.Result.Content) > 0 {
			text = m.Result.Content[0].Text
		}
		stats.record(took, "failed", tool+": tool error: "+trim(text))
	default:
		switch tool {
		case "create_booking":
			var out hotel.CreatedOut
			if json.Unmarshal(m.Result.StructuredContent, &out) == nil && out.ID != 0 {
				t.created = append(t.created, out.ID)
			}
		case "cancel_booking":
			t.created = t.created[1:]
		}
		stats.record(took, "ok", "")
	}
}

func trim(s string) string {
	s = strings.TrimSpace(s)
	if len(s) > 200 {
		return s[:200] + "…"
	}
	return s
}

// soakSampler reads the child's figures.
type soakSampler struct {
	pid     int
	metrics string
	hc      *http.Client
	admin   *pgxpool.Pool
	cpu0    float64 // CPU seconds at the last sample
	last    time.Time
}

func (s *soakSampler) sample(ctx context.Context, at time.Duration, stats *soakStats) (soakSample, error) {
	out := soakSample{At: at.Round(time.Second), Goroutines: -1, HeapMiB: -1, DBConns: -1}
	rss, err := procRSS(s.pid)
	if err != nil {
		return out, fmt.Errorf("the server child (pid %d) is gone: %w", s.pid, err)
	}
	out.RSSKiB = rss
	dir := fmt.Sprintf("/proc/%d/fd", s.pid)
	if ents, err := os.ReadDir(dir); err == nil {
		out.FDs = len(ents)
		for _, e := range ents {
			if l, err := os.Readlink(filepath.Join(dir, e.Name())); err == nil && strings.HasPrefix(l, "socket:") {
				out.Sockets++
			}
		}
	}
	if g, heap, err := s.runtime(ctx); err == nil {
		out.Goroutines, out.HeapMiB = g, heap
	}
	qctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	var n int
	if err := s.admin.QueryRow(qctx, `SELECT count(*) FROM pg_stat_activity WHERE datname = $1 AND usename = $2`, soakDB, soakRole).Scan(&n); err == nil {
		out.DBConns = n
	}
	cancel()
	now := time.Now()
	if cpu, err := procCPU(s.pid); err == nil {
		if d := now.Sub(s.last).Seconds(); d > 0 && at > 0 {
			out.CPU = 100 * (cpu - s.cpu0) / d
		}
		s.cpu0 = cpu
	}
	ok, lim, failed, lat := stats.take()
	if d := now.Sub(s.last).Seconds(); d > 0 {
		out.Rate = float64(ok+lim+failed) / d
	}
	s.last = now
	out.OK, out.Limited, out.Failed = ok, lim, failed
	if len(lat) > 0 {
		slices.Sort(lat)
		q := func(p float64) float64 {
			return float64(lat[min(len(lat)-1, int(p*float64(len(lat))))].Microseconds()) / 1000
		}
		out.P50, out.P99 = q(0.50), q(0.99)
	}
	return out, nil
}

// runtime reads go_goroutines and go_memstats_heap_inuse_bytes (in MiB)
// from the child's /metrics.
func (s *soakSampler) runtime(ctx context.Context) (goroutines int, heapMiB float64, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.metrics, nil)
	if err != nil {
		return 0, 0, err
	}
	resp, err := s.hc.Do(req)
	if err != nil {
		return 0, 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, 0, fmt.Errorf("GET /metrics: %d", resp.StatusCode)
	}
	g, heap := -1.0, -1.0
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "go_goroutines "); ok {
			g, _ = strconv.ParseFloat(strings.TrimSpace(v), 64)
		}
		if v, ok := strings.CutPrefix(sc.Text(), "go_memstats_heap_inuse_bytes "); ok {
			if f, err := strconv.ParseFloat(strings.TrimSpace(v), 64); err == nil {
				heap = f / (1 << 20)
			}
		}
	}
	if g < 0 {
		return 0, 0, errors.New("no go_goroutines at /metrics (a server built before otelserver served runtime metrics)")
	}
	return int(g), heap, nil
}

// procRSS is VmRSS of pid in KiB.
func procRSS(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			f := strings.Fields(v)
			if len(f) > 0 {
				return strconv.ParseInt(f[0], 10, 64)
			}
		}
	}
	return 0, errors.New("no VmRSS (a zombie?)")
}

// procCPU is the user+system CPU seconds of pid (clock ticks at the usual
// USER_HZ of 100).
func procCPU(pid int) (float64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command name, in parentheses, may hold spaces: count fields after it.
	_, rest, ok := strings.Cut(string(b), ") ")
	if !ok {
		return 0, errors.New("unexpected /proc/PID/stat")
	}
	f := strings.Fields(rest)
	if len(f) < 13 {
		return 0, errors.New("unexpected /proc/PID/stat")
	}
	u, err1 := strconv.ParseFloat(f[11], 64)  // utime, field 14
	st, err2 := strconv.ParseFloat(f[12], 64) // stime, field 15
	if err1 != nil || err2 != nil {
		return 0, errors.New("unexpected /proc/PID/stat")
	}
	return (u + st) / 100, nil
}

const (
	soakTableHeader = "| t | RSS MiB | heap MiB | fds | sockets | goroutines | DB conns | CPU % | calls ok | limited | failed | calls/s | p50 ms | p99 ms |"
	soakTableRule   = "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
)

func (s soakSample) row() string {
	heap := "–"
	if s.HeapMiB >= 0 {
		heap = fmt.Sprintf("%.1f", s.HeapMiB)
	}
	return fmt.Sprintf("| %s | %.1f | %s | %d | %d | %s | %s | %.0f | %d | %d | %d | %.1f | %.1f | %.1f |",
		s.At, float64(s.RSSKiB)/1024, heap, s.FDs, s.Sockets, orDash(s.Goroutines), orDash(s.DBConns), s.CPU, s.OK, s.Limited, s.Failed, s.Rate, s.P50, s.P99)
}

func orDash(n int) string {
	if n < 0 {
		return "–"
	}
	return strconv.Itoa(n)
}

// soakSummary is the end of the report: first, last and max of each
// series, the totals, the failures by message, the child's stderr tail.
func soakSummary(samples []soakSample, ok, lim, failed int, errs map[string]int, stderr string) string {
	var b strings.Builder
	b.WriteString("\n## Summary\n\n| series | first | last | max | last − first |\n| --- | ---: | ---: | ---: | ---: |\n")
	// The first sample is before any load; CPU, rate and latency start at
	// the first loaded interval.
	series := []struct {
		name   string
		f      func(soakSample) float64
		loaded bool
		prec   int
	}{
		{"RSS MiB", func(s soakSample) float64 { return float64(s.RSSKiB) / 1024 }, false, 1},
		{"heap in use MiB", func(s soakSample) float64 { return s.HeapMiB }, false, 1},
		{"open fds", func(s soakSample) float64 { return float64(s.FDs) }, false, 0},
		{"sockets", func(s soakSample) float64 { return float64(s.Sockets) }, false, 0},
		{"goroutines", func(s soakSample) float64 { return float64(s.Goroutines) }, false, 0},
		{"DB conns", func(s soakSample) float64 { return float64(s.DBConns) }, false, 0},
		{"CPU % (one core)", func(s soakSample) float64 { return s.CPU }, true, 0},
		{"calls/s", func(s soakSample) float64 { return s.Rate }, true, 1},
		{"p99 ms", func(s soakSample) float64 { return s.P99 }, true, 1},
	}
	for _, se := range series {
		ss := samples
		if se.loaded && len(ss) > 1 {
			ss = ss[1:]
		}
		if len(ss) == 0 {
			continue
		}
		first, last, mx := se.f(ss[0]), se.f(ss[len(ss)-1]), se.f(ss[0])
		for _, s := range ss {
			mx = max(mx, se.f(s))
		}
		fmt.Fprintf(&b, "| %s | %.*f | %.*f | %.*f | %+.*f |\n", se.name, se.prec, first, se.prec, last, se.prec, mx, se.prec, last-first)
	}
	fmt.Fprintf(&b, "\nCalls: %d ok, %d limited (429 or busy), %d failed.\n", ok, lim, failed)
	if len(errs) > 0 {
		b.WriteString("\nFailures by message (at most 20 distinct):\n\n")
		keys := make([]string, 0, len(errs))
		for k := range errs {
			keys = append(keys, k)
		}
		slices.SortFunc(keys, func(a, c string) int { return errs[c] - errs[a] })
		for _, k := range keys {
			fmt.Fprintf(&b, "- %d × %s\n", errs[k], k)
		}
	}
	if s := strings.TrimSpace(stderr); s != "" {
		fmt.Fprintf(&b, "\nServer stderr (last 8 KiB, warnings and errors):\n\n```\n%s\n```\n", s)
	}
	return b.String()
}

// soakCSV is the samples as CSV.
func soakCSV(samples []soakSample) []byte {
	var b bytes.Buffer
	b.WriteString("t_seconds,rss_kib,heap_inuse_mib,fds,sockets,goroutines,db_conns,cpu_percent,calls_ok,calls_limited,calls_failed,calls_per_s,p50_ms,p99_ms\n")
	for _, s := range samples {
		fmt.Fprintf(&b, "%.0f,%d,%.1f,%d,%d,%d,%d,%.1f,%d,%d,%d,%.2f,%.2f,%.2f\n", s.At.Seconds(), s.RSSKiB, s.HeapMiB, s.FDs, s.Sockets, s.Goroutines, s.DBConns,
			s.CPU, s.OK, s.Limited, s.Failed, s.Rate, s.P50, s.P99)
	}
	return b.Bytes()
}

// machineLine is the machine and the PostgreSQL server in one line, with
// the load average at the start.
func machineLine(ctx context.Context, cfg config) string {
	m := machine()
	pg, _ := serverVersions(ctx, config{pgDSN: cfg.pgDSN})
	return fmt.Sprintf("%s, %d cores (GOMAXPROCS %d), Linux %s, %s, PostgreSQL %s; load average at the start %s",
		m.CPU, m.Cores, m.GOMAXPROCS, m.Kernel, m.Go, pg, m.LoadStart)
}
