// Command bench measures what tenantmcp costs against hand-written
// baselines, side by side in one run, and prints a Markdown table of
// ratios (and writes them as JSON with -json).
//
//	go run ./bench                      # every figure, about two minutes
//	go run ./bench -figures P1,P3       # some figures
//	go run ./bench -scale 5             # five times longer runs
//	go run ./bench -smoke               # a fraction of a second per figure (CI)
//	go run ./bench -json bench.json     # also write the results as JSON
//	go run ./bench -repeat 3 -png docs/perf.png  # three runs, each row's range, a plot
//	go run ./bench -figures P2 -p2-sizes 10k,100k,1M  # P2 on three dataset sizes
//	go run ./bench -replot a.json,b.json -png p.png  # summarise earlier runs' JSON
//	go run ./bench -soak 30m -out /tmp/soak.md  # the hotel server over time (see soak.go)
//
// Every figure alternates baseline and candidate in rounds (the order
// rotates each round) and compares medians, so both see the same machine
// load: on a shared machine the absolute numbers drift, the ratios much
// less. The figures:
//
//	P1  the in-process guard path of one tool call against database/sql + encoding/json
//	P2  guarded / hand-written tenant-filtered queries on ≥ 1M bookings (PostgreSQL with RLS, MariaDB/MySQL)
//	P3  redact against encoding/json on the same values; the detectors' MB/s on mixed text
//	P5  the hotel server's tools/call per second over streamable HTTP against a bare go-sdk server
//	P4  P5's hotel server with the egress guard installed / without (root and cgroup v2)
//
// P2 and the PostgreSQL rows of P5 and P4 need admin DSNs in
// TENANTMCP_BENCH_POSTGRES_DSN / TENANTMCP_BENCH_MYSQL_DSN, or the
// TENANTMCP_TEST_* variables the live tests and .ci/databases.sh use;
// without them those rows say why they were skipped. See bench/README.md.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"
)

// figures in the order they run and print.
var allFigures = []string{"P1", "P3", "P2", "P5", "P4"}

type config struct {
	figures  []string
	scale    float64
	smoke    bool
	jsonPath string
	pgDSN    string
	myDSN    string
	p2DB     string
	clients  []int
	bare     string
	verbose  bool
	repeat   int      // runs of the selected figures (-repeat)
	pngPath  string   // plot of the summary (-png)
	replot   []string // JSON files to summarise instead of measuring (-replot)
	p2Sizes  []p2Size // P2 dataset sizes (-p2-sizes)
	childCPU string   // directory for the server children's CPU profiles (-child-cpuprofile)
	// wireRelay routes the timed P5 servers' PostgreSQL connections
	// through a counting relay too (-wire-relay), to measure what it costs.
	wireRelay bool
	soak      soakConfig
}

// env is what the figures share: the configuration, the log and lazily
// built fixtures.
type env struct {
	cfg   config
	log   *log.Logger
	hotel *hotelSQLite
	notes []string
	p2cur p2Size // the P2 dataset being measured
}

func (e *env) hotelDB(ctx context.Context) (*hotelSQLite, error) {
	if e.hotel == nil {
		h, err := newHotelSQLite(ctx)
		if err != nil {
			return nil, fmt.Errorf("creating the demo hotel SQLite database: %w", err)
		}
		e.hotel = h
	}
	return e.hotel, nil
}

// budget is a figure's default run time under -scale (and -smoke).
func (e *env) budget(d time.Duration) time.Duration {
	return time.Duration(float64(d) * e.cfg.scale)
}

// batch is the target duration of one timed repetition of a short
// operation.
func (e *env) batch() time.Duration {
	if e.cfg.smoke {
		return 2 * time.Millisecond
	}
	return 20 * time.Millisecond
}

func (e *env) minRounds() int {
	if e.cfg.smoke {
		return 3
	}
	return 7
}

func (e *env) note(format string, args ...any) {
	e.notes = append(e.notes, fmt.Sprintf(format, args...))
}

func main() {
	if isChild() {
		os.Exit(childMain())
	}
	os.Exit(run())
}

func run() int {
	var cfg config
	figures := flag.String("figures", strings.Join(allFigures, ","), "comma-separated figures to run, among "+strings.Join(allFigures, ","))
	flag.Float64Var(&cfg.scale, "scale", 1, "multiply every figure's run time by this (e.g. 5 for steadier numbers)")
	flag.BoolVar(&cfg.smoke, "smoke", false, "run every figure for a fraction of a second, on a tiny P2 dataset: proves the bench still runs, measures nothing")
	flag.StringVar(&cfg.jsonPath, "json", "", "also write the results to this JSON file")
	flag.StringVar(&cfg.pgDSN, "postgres", envFirst("TENANTMCP_BENCH_POSTGRES_DSN", "TENANTMCP_TEST_POSTGRES_DSN"), "PostgreSQL admin DSN (default $TENANTMCP_BENCH_POSTGRES_DSN, else $TENANTMCP_TEST_POSTGRES_DSN)")
	flag.StringVar(&cfg.myDSN, "mysql", envFirst("TENANTMCP_BENCH_MYSQL_DSN", "TENANTMCP_TEST_MYSQL_DSN"), "MySQL/MariaDB admin DSN, mysql://… (default $TENANTMCP_BENCH_MYSQL_DSN, else $TENANTMCP_TEST_MYSQL_DSN)")
	flag.StringVar(&cfg.p2DB, "p2-db", "", "database holding the P2 dataset, kept between runs (default tenantmcp_bench, shared with the guardedsql engine benchmark; tenantmcp_bench_smoke with -smoke)")
	clients := flag.String("clients", "1,32", "P5/P4 client concurrencies")
	flag.StringVar(&cfg.bare, "bare", "raw", "P5 baseline tool: raw (a plain go-sdk ToolHandler) or typed (mcp.AddTool, whose output the go-sdk validates against the inferred schema)")
	flag.BoolVar(&cfg.verbose, "v", false, "log progress to stderr")
	flag.StringVar(&cfg.childCPU, "child-cpuprofile", "", "write a CPU profile of each P5/P4 server child to this directory (<kind>-<engine>-<pid>.pprof), for go tool pprof")
	flag.BoolVar(&cfg.wireRelay, "wire-relay", false, "also route the timed P5 servers' PostgreSQL connections through the round-trip counting relay (round trips are always counted in a separate untimed pass; this measures what the relay's hop does to the ratios)")
	flag.IntVar(&cfg.repeat, "repeat", 1, "run the selected figures this many times and end with a summary of each row's range")
	flag.StringVar(&cfg.pngPath, "png", "", "write a plot of the cost ratios (min–max over the runs, median, goal) to this PNG file")
	replot := flag.String("replot", "", "comma-separated JSON files of earlier runs (-json): print their summary (and -png) without measuring")
	p2Sizes := flag.String("p2-sizes", "1M", "P2 dataset sizes in bookings, among "+p2SizeNames()+" (chains grow with the size; each chain keeps 1,000 bookings)")
	flag.DurationVar(&cfg.soak.duration, "soak", 0, "instead of the figures, soak the hotel server on PostgreSQL for this long (e.g. 30m): steady mixed load of -soak-tenants tenants, the server's RSS, fds, goroutines, DB connections and calls sampled every -soak-interval (see soak.go)")
	flag.DurationVar(&cfg.soak.interval, "soak-interval", 30*time.Second, "soak: time between samples")
	flag.Float64Var(&cfg.soak.rate, "soak-rate", 4, "soak: calls per second per tenant (one client per tenant)")
	flag.IntVar(&cfg.soak.tenants, "soak-tenants", 12, "soak: tenants (chains of the demo data), 1 to 12")
	flag.StringVar(&cfg.soak.redis, "soak-redis", envFirst("TENANTMCP_BENCH_REDIS_ADDR", "TENANTMCP_TEST_REDIS_ADDR"), "soak: keep the server's rate-limit buckets in Redis at this address ('': in the server process; default $TENANTMCP_BENCH_REDIS_ADDR, else $TENANTMCP_TEST_REDIS_ADDR)")
	flag.StringVar(&cfg.soak.out, "out", "", "soak: write the report as Markdown to this file, and its samples as CSV beside it (same name, .csv)")
	flag.Parse()
	if flag.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "bench: unexpected arguments %q\n", flag.Args())
		return 2
	}
	for f := range strings.SplitSeq(*figures, ",") {
		f = strings.ToUpper(strings.TrimSpace(f))
		if !slices.Contains(allFigures, f) {
			fmt.Fprintf(os.Stderr, "bench: unknown figure %q (want some of %s)\n", f, strings.Join(allFigures, ","))
			return 2
		}
		cfg.figures = append(cfg.figures, f)
	}
	for c := range strings.SplitSeq(*clients, ",") {
		var n int
		if _, err := fmt.Sscan(strings.TrimSpace(c), &n); err != nil || n < 1 {
			fmt.Fprintf(os.Stderr, "bench: bad -clients entry %q\n", c)
			return 2
		}
		cfg.clients = append(cfg.clients, n)
	}
	if cfg.bare != "raw" && cfg.bare != "typed" {
		fmt.Fprintln(os.Stderr, "bench: -bare must be raw or typed")
		return 2
	}
	if cfg.scale <= 0 {
		fmt.Fprintln(os.Stderr, "bench: -scale must be positive")
		return 2
	}
	if cfg.smoke {
		cfg.scale = 0.02
	}
	if cfg.repeat < 1 {
		fmt.Fprintln(os.Stderr, "bench: -repeat must be at least 1")
		return 2
	}
	var err error
	if cfg.p2Sizes, err = parseP2Sizes(*p2Sizes); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		return 2
	}
	if cfg.soak.duration > 0 {
		sc := cfg.soak
		if sc.interval <= 0 || sc.rate <= 0 || sc.tenants < 1 || sc.tenants > 12 {
			fmt.Fprintln(os.Stderr, "bench: -soak-interval and -soak-rate must be positive, -soak-tenants 1 to 12")
			return 2
		}
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		return soakMain(ctx, cfg, sc)
	}
	if *replot != "" {
		cfg.replot = strings.Split(*replot, ",")
		return replotMain(cfg)
	}
	if cfg.p2DB == "" {
		cfg.p2DB = "tenantmcp_bench"
		if cfg.smoke {
			cfg.p2DB = "tenantmcp_bench_smoke"
		}
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var runs []*Report
	code := 0
	for i := range cfg.repeat {
		if cfg.repeat > 1 {
			fmt.Printf("# Run %d of %d\n\n", i+1, cfg.repeat)
		}
		rep, c := runOnce(ctx, cfg)
		runs = append(runs, rep)
		code = max(code, c)
		if ctx.Err() != nil {
			break
		}
	}
	return max(code, finish(cfg, runs))
}

// runOnce runs the selected figures once, prints their table and returns
// the report and whether a figure failed (1) or not (0).
func runOnce(ctx context.Context, cfg config) (*Report, int) {
	e := &env{cfg: cfg, log: log.New(io.Discard, "", 0)}
	if cfg.verbose {
		e.log = log.New(os.Stderr, "bench: ", log.Ltime)
	}
	defer func() {
		if e.hotel != nil {
			e.hotel.close()
		}
	}()

	rep := &Report{Started: time.Now(), Command: strings.Join(append([]string{"go run ./bench"}, os.Args[1:]...), " "),
		Smoke: cfg.smoke, Scale: cfg.scale, Machine: machine()}
	rep.Machine.Postgres, rep.Machine.MySQL = serverVersions(ctx, cfg)
	runners := map[string]func(context.Context, *env) []Row{"P1": runP1, "P2": runP2, "P3": runP3, "P5": runP5P4, "P4": runP5P4}
	done := map[string]bool{}
	for _, f := range allFigures {
		if !slices.Contains(cfg.figures, f) {
			continue
		}
		fn := runners[f]
		if f == "P4" || f == "P5" {
			// One run measures both: the servers alternate in the same rounds.
			if done["P5P4"] {
				continue
			}
			done["P5P4"] = true
		}
		start := time.Now()
		e.log.Printf("%s: start", f)
		rows := fn(ctx, e)
		e.log.Printf("%s: done in %.1fs", f, time.Since(start).Seconds())
		rep.Rows = append(rep.Rows, rows...)
		if ctx.Err() != nil {
			break
		}
	}
	rep.Seconds = time.Since(rep.Started).Seconds()
	rep.Machine.LoadEnd = loadAvg()
	rep.Notes = e.notes
	rep.writeMarkdown(os.Stdout)
	code := 0
	for _, r := range rep.Rows {
		if r.Failed != "" {
			code = 1
		}
	}
	return rep, code
}

func envFirst(names ...string) string {
	for _, n := range names {
		if v := os.Getenv(n); v != "" {
			return v
		}
	}
	return ""
}
