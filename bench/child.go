package main

import (
	"bufio"
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/pprof"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tenantmcp/tenantmcp/egress"
	"github.com/tenantmcp/tenantmcp/examples/hotel/hotel"
	"github.com/tenantmcp/tenantmcp/guardedsql/postgres"
)

// The servers of P5 and P4 run in child processes: the bench binary
// re-executed with -child, its specification in the environment (it may
// hold a password). Every server, guarded or not, is a child, so they all
// pay the same process boundary; and the egress guard, which moves its
// whole process into a cgroup, confines only the child it was installed
// in.

const (
	childFlag    = "-child"
	childSpecEnv = "TENANTMCP_BENCH_CHILD_SPEC"
)

// childSpec says what server a child runs.
type childSpec struct {
	// Kind is "hotel" (examples/hotel: auth, guard, redaction, audit)
	// or "bare" (a go-sdk server with the hand-written query, nothing of
	// tenantmcp).
	Kind string `json:"kind"`
	// Engine is "sqlite" or "postgres".
	Engine string `json:"engine"`
	// DSN: for hotel a guardedsql.Open DSN; for bare a database/sql DSN of
	// the engine's driver.
	DSN string `json:"dsn"`
	// TaintDSN, for hotel on postgres, is where its flow taint store
	// connects instead of DSN (hotel.Options.TaintDSN): the round-trip
	// count gives it its own relay.
	TaintDSN string `json:"taint_dsn,omitempty"`
	// RLSKey is the PostgreSQL scope-signing key in its text form
	// (postgres.Key.Text), for hotel on postgres.
	RLSKey string `json:"rls_key,omitempty"`
	// Bare is "raw" (a plain mcp.ToolHandler) or "typed" (mcp.AddTool
	// with inferred schemas, whose output the go-sdk validates).
	Bare string `json:"bare,omitempty"`
	// Egress installs the egress guard, allowing only Allow, before the
	// child opens anything.
	Egress bool     `json:"egress,omitempty"`
	Allow  []string `json:"allow,omitempty"`
	// CPUProfileDir, when set, makes the child write a CPU profile of its
	// whole life to <dir>/<kind>-<engine>-<pid>.pprof (-child-cpuprofile).
	CPUProfileDir string `json:"cpu_profile_dir,omitempty"`
	// Soak, for the soak (-soak): the hotel with its metrics at /metrics,
	// the hotel command's default limits (soakLimits), the rate buckets in
	// Redis at SoakRedis when set, and a token per chain of SoakChains in
	// the hello.
	Soak       bool          `json:"soak,omitempty"`
	SoakRedis  string        `json:"soak_redis,omitempty"`
	SoakChains []string      `json:"soak_chains,omitempty"`
	SoakTTL    time.Duration `json:"soak_ttl,omitempty"`
}

// childHello is the one line a child prints on stdout when it serves, or
// when it cannot.
type childHello struct {
	URL    string `json:"url,omitempty"`
	Token  string `json:"token,omitempty"`
	Cgroup string `json:"cgroup,omitempty"`
	// Metrics is the child's /metrics URL and Tokens a token per chain
	// (soak children only).
	Metrics string            `json:"metrics,omitempty"`
	Tokens  map[string]string `json:"tokens,omitempty"`
	Error   string            `json:"error,omitempty"`
}

func isChild() bool { return len(os.Args) > 1 && os.Args[1] == childFlag }

// childMain serves until its stdin closes (the parent is done or gone).
func childMain() int {
	var spec childSpec
	hello := func(h childHello) {
		b, _ := json.Marshal(h)
		fmt.Println(string(b))
	}
	if err := json.Unmarshal([]byte(os.Getenv(childSpecEnv)), &spec); err != nil {
		hello(childHello{Error: "bad child spec: " + err.Error()})
		return 2
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var guard *egress.Guard
	if spec.Egress {
		// First thing, before any socket exists.
		var p egress.Policy
		for _, a := range spec.Allow {
			r, err := egress.ParseRule(a)
			if err != nil {
				hello(childHello{Error: err.Error()})
				return 1
			}
			p.Allow = append(p.Allow, r)
		}
		g, err := egress.Install(ctx, p, egress.Options{Logger: slog.New(slog.NewTextHandler(os.Stderr, nil))})
		if err != nil {
			hello(childHello{Error: "egress.Install: " + err.Error()})
			return 1
		}
		guard = g
		defer g.Close()
		go func() {
			for d := range g.Denials() {
				fmt.Fprintf(os.Stderr, "egress denied: %v\n", d)
			}
		}()
	}
	if spec.CPUProfileDir != "" {
		stop, err := startCPUProfile(spec)
		if err != nil {
			hello(childHello{Error: err.Error()})
			return 1
		}
		defer stop()
	}
	var h childHello
	var serveErr error
	var stop func()
	switch spec.Kind {
	case "hotel":
		if spec.Soak {
			h, stop, serveErr = serveSoakHotel(ctx, spec)
		} else {
			h, stop, serveErr = serveHotel(ctx, spec)
		}
	case "bare":
		h, stop, serveErr = serveBare(ctx, spec)
	default:
		serveErr = fmt.Errorf("unknown child kind %q", spec.Kind)
	}
	if serveErr != nil {
		hello(childHello{Error: serveErr.Error()})
		return 1
	}
	if guard != nil {
		h.Cgroup = guard.Cgroup()
	}
	hello(h)
	_, _ = io.Copy(io.Discard, os.Stdin)
	cancel()
	stop()
	return 0
}

// startCPUProfile starts the child's CPU profile (see childSpec.CPUProfileDir)
// and returns what stops and writes it.
func startCPUProfile(spec childSpec) (func(), error) {
	name := fmt.Sprintf("%s-%s-%d.pprof", spec.Kind, spec.Engine, os.Getpid())
	if spec.Egress {
		name = "egress-" + name
	}
	f, err := os.Create(filepath.Join(spec.CPUProfileDir, name))
	if err != nil {
		return nil, fmt.Errorf("cpu profile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("cpu profile: %w", err)
	}
	return func() { pprof.StopCPUProfile(); f.Close() }, nil
}

func serveHotel(ctx context.Context, spec childSpec) (childHello, func(), error) {
	// Operational messages to stderr (the parent shows them on failure);
	// the audit log is formatted as JSON, as a deployment would, and
	// thrown away rather than written to a terminal.
	var key postgres.Key
	if spec.RLSKey != "" {
		var err error
		if key, err = postgres.ParseKey(spec.RLSKey); err != nil {
			return childHello{}, nil, err
		}
	}
	app, err := hotel.New(ctx, hotel.Options{
		Addr:        "127.0.0.1:0",
		DB:          spec.DSN,
		TaintDSN:    spec.TaintDSN,
		RLSKey:      key,
		Logger:      slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
		AuditLogger: slog.New(slog.NewJSONHandler(io.Discard, nil)),
		// The bench's client speaks MCP 2025-06-18 and opens a session
		// (initialize, then Mcp-Session-Id on every call), as it does on
		// the bare server, which serves the go-sdk's stateful sessions:
		// both servers serve it in the same mode. Without Sessions the
		// hotel would answer each call statelessly, in a session the
		// go-sdk builds per request (the body parsed once more, a
		// connection set up and torn down), a cost of the transport mode
		// the bare server does not pay, not of tenantmcp.
		Sessions: true,
		// Every client of every round opens its own session as the one
		// demo subject, so the default cap on a subject's open sessions
		// (server.DefaultSessionsPerSubject) would refuse the bench's
		// later rounds with 429: the bench measures calls, not that cap.
		Limits: hotel.Limits{MaxSessionsPerSubject: -1},
	})
	if err != nil {
		return childHello{}, nil, err
	}
	var alice hotel.DemoUser
	for _, u := range hotel.DemoUsers {
		if u.Subject == benchSubject {
			alice = u
		}
	}
	tok, err := app.Token(alice, 2*time.Hour)
	if err != nil {
		app.Close()
		return childHello{}, nil, err
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := app.Serve(ctx); err != nil {
			fmt.Fprintln(os.Stderr, "hotel serve:", err)
		}
	}()
	return childHello{URL: app.HTTP.ResourceURL, Token: tok}, func() { <-done; app.Close() }, nil
}

// bareIn is the input of the bare list_bookings: the hotel tool's, less
// what the benchmark does not use.
type bareIn struct {
	From  string `json:"from" jsonschema:"earliest check-in, YYYY-MM-DD"`
	To    string `json:"to" jsonschema:"check-in before this day, YYYY-MM-DD"`
	Limit int    `json:"limit,omitempty"`
}

// serveBare serves list_bookings on a plain go-sdk server: no token, the
// tenant hard-wired into the hand-written query, encoding/json results.
func serveBare(ctx context.Context, spec childSpec) (childHello, func(), error) {
	var db *sql.DB
	query := handListBookings
	var closeDB func()
	if spec.Engine == "postgres" {
		// database/sql over a pgx pool with pgxpool's defaults: the pool
		// the hotel server's guardedsql gets from the same DSN.
		pool, err := pgxpool.New(ctx, spec.DSN)
		if err != nil {
			return childHello{}, nil, err
		}
		db, query = stdlib.OpenDBFromPool(pool), dollarize(handListBookings)
		closeDB = func() { db.Close(); pool.Close() }
	} else {
		// database/sql's defaults, as guardedsql.Open uses them.
		var err error
		if db, err = sql.Open("sqlite", spec.DSN); err != nil {
			return childHello{}, nil, err
		}
		closeDB = func() { db.Close() }
	}
	if err := db.PingContext(ctx); err != nil {
		closeDB()
		return childHello{}, nil, err
	}
	srv := mcp.NewServer(&mcp.Implementation{Name: "bare-hotel", Version: "0"}, nil)
	tool := &mcp.Tool{Name: "list_bookings", Description: "Bookings whose check-in falls in a date range."}
	if spec.Bare == "typed" {
		// The go-sdk's typed tool: schemas inferred, input and output
		// validated by the SDK.
		mcp.AddTool(srv, tool, func(ctx context.Context, _ *mcp.CallToolRequest, in bareIn) (*mcp.CallToolResult, hotel.BookingsOut, error) {
			bs, err := queryBookings(ctx, db, query, benchChain, in.From, in.To)
			return nil, hotel.BookingsOut{Bookings: bs}, err
		})
	} else {
		// A plain handler doing what the tenantmcp server does on the
		// wire (structured content and the same bytes as text), and
		// nothing else.
		tool.InputSchema = json.RawMessage(`{"type":"object","properties":{"from":{"type":"string"},"to":{"type":"string"},"limit":{"type":"integer"}},"required":["from","to"]}`)
		srv.AddTool(tool, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			var in bareIn
			if err := json.Unmarshal(req.Params.Arguments, &in); err != nil {
				return nil, err
			}
			bs, err := queryBookings(ctx, db, query, benchChain, in.From, in.To)
			if err != nil {
				return nil, err
			}
			js, err := json.Marshal(hotel.BookingsOut{Bookings: bs})
			if err != nil {
				return nil, err
			}
			return &mcp.CallToolResult{StructuredContent: json.RawMessage(js), Content: []mcp.Content{&mcp.TextContent{Text: string(js)}}}, nil
		})
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		closeDB()
		return childHello{}, nil, err
	}
	mux := http.NewServeMux()
	mux.Handle("/mcp", mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = hs.Serve(ln) }()
	stop := func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = hs.Shutdown(sctx)
		closeDB()
	}
	return childHello{URL: "http://" + ln.Addr().String() + "/mcp"}, stop, nil
}

// child is a running server child, from the parent's side.
type child struct {
	spec   childSpec
	hello  childHello
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stderr *tailBuffer
	once   sync.Once
}

// startChild starts the bench binary as a server child and waits for its
// hello line.
func startChild(ctx context.Context, spec childSpec) (*child, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	b, err := json.Marshal(spec)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(exe, childFlag)
	cmd.Env = append(os.Environ(), childSpecEnv+"="+string(b))
	c := &child{spec: spec, cmd: cmd, stderr: &tailBuffer{max: 8 << 10}}
	cmd.Stderr = c.stderr
	if c.stdin, err = cmd.StdinPipe(); err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	line := make(chan string, 1)
	go func() {
		r := bufio.NewReader(stdout)
		s, _ := r.ReadString('\n')
		line <- s
		_, _ = io.Copy(io.Discard, r)
	}()
	var s string
	select {
	case s = <-line:
	case <-time.After(90 * time.Second):
		c.stop()
		return nil, fmt.Errorf("%s child: no answer within 90 s; stderr: %s", spec.Kind, c.stderr)
	case <-ctx.Done():
		c.stop()
		return nil, ctx.Err()
	}
	if err := json.Unmarshal([]byte(s), &c.hello); err != nil || (c.hello.URL == "" && c.hello.Error == "") {
		c.stop()
		return nil, fmt.Errorf("%s child: unexpected answer %q; stderr: %s", spec.Kind, s, c.stderr)
	}
	if c.hello.Error != "" {
		c.stop()
		return nil, &childError{msg: c.hello.Error}
	}
	return c, nil
}

// childError is a child's own account of why it could not serve.
type childError struct{ msg string }

func (e *childError) Error() string { return e.msg }

// stop closes the child's stdin, which ends it, and waits; a child that
// does not end within ten seconds is killed.
func (c *child) stop() {
	c.once.Do(func() {
		c.stdin.Close()
		done := make(chan struct{})
		go func() { _ = c.cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = c.cmd.Process.Kill()
			<-done
		}
	})
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
	max int
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf.Write(p)
	if over := t.buf.Len() - t.max; over > 0 {
		t.buf.Next(over)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.buf.String()
}

var errNoResult = errors.New("no JSON-RPC result in the response")
