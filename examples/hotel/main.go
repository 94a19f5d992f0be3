// Command hotel is the tenantmcp example: a hotel-chain MCP tool server
// whose every call sees only the chains and hotels of the caller's token.
//
//	go run ./examples/hotel                  # embedded SQLite + dev issuer on loopback
//	go run ./examples/hotel -db postgres://hotel_app@127.0.0.1/hoteldemo \
//	    -setup-demo postgres://postgres@127.0.0.1/hoteldemo     # PostgreSQL with RLS
//	go run ./examples/hotel -db 'mysql://root@tcp(127.0.0.1:3306)/hoteldemo' \
//	    -setup-demo 'mysql://root@tcp(127.0.0.1:3306)/hoteldemo' # MariaDB/MySQL
//	go run ./examples/hotel -stdio -as alice # one client over stdin/stdout
//	go run ./examples/hotel -sandbox         # under Landlock (files, TCP ports, IPC); no root needed
//
// With no -jwks-url it starts a DEVELOPMENT-ONLY token issuer on loopback
// and prints ready tokens for three demo users. Point -jwks-url, -issuer
// and -audience at your identity provider for anything else.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tenantmcp/tenantmcp/egress"
	"github.com/tenantmcp/tenantmcp/examples/hotel/hotel"
	"github.com/tenantmcp/tenantmcp/guardedsql/postgres"
	"github.com/tenantmcp/tenantmcp/server"
	"github.com/tenantmcp/tenantmcp/server/redisrate"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "hotel:", err)
		os.Exit(1)
	}
}

func run() error {
	var cfg hotel.Options
	flag.StringVar(&cfg.Addr, "addr", envOr("HOTEL_ADDR", "127.0.0.1:8080"), "listen address for streamable HTTP")
	flag.StringVar(&cfg.PublicURL, "public-url", os.Getenv("HOTEL_PUBLIC_URL"), "the MCP endpoint URL clients use (default http://ADDR/mcp)")
	flag.BoolVar(&cfg.Stateless, "stateless", false, "serve streamable HTTP in stateless mode")
	flag.StringVar(&cfg.DB, "db", os.Getenv("HOTEL_DB"), "database DSN: sqlite:PATH, postgres://…, mysql://… (default: fresh embedded SQLite with demo data)")
	flag.StringVar(&cfg.JWKSURL, "jwks-url", os.Getenv("HOTEL_JWKS_URL"), "identity provider JWKS URL (default: development issuer on loopback)")
	flag.StringVar(&cfg.Issuer, "issuer", os.Getenv("HOTEL_ISSUER"), "expected token issuer (with -jwks-url)")
	flag.StringVar(&cfg.Audience, "audience", os.Getenv("HOTEL_AUDIENCE"), "expected token audience (default: the public URL)")
	flag.StringVar(&cfg.FlowPolicy, "flow-policy", os.Getenv("HOTEL_FLOW_POLICY"), "information-flow policy file (JSON, see package flow; default: the example's embedded flow-policy.json)")
	rlsKey := flag.String("rls-key-file", os.Getenv("HOTEL_RLS_KEY_FILE"), "PostgreSQL: file holding the scope-signing key as <id>:<hex secret> (postgres.Key.Text); with -setup-demo and no file, an ephemeral key is generated for this run")
	setupDemo := flag.String("setup-demo", "", "before serving, (re)create the hotel tables and demo data in this database as its administrator (postgres:// or mysql:// DSN; on PostgreSQL also install row-level security and grant -db's user); DESTROYS the hotel tables there")
	stdio := flag.Bool("stdio", false, "serve one client over stdin/stdout instead of HTTP")
	tokenFile := flag.String("token-file", "", "with -stdio: file holding the bearer token (default: $TENANTMCP_TOKEN)")
	as := flag.String("as", "", "with -stdio and the development issuer: act as this demo user (alice, bob, carol)")
	jsonLogs := flag.Bool("json-logs", false, "write logs (and the audit log) as JSON")
	flag.BoolVar(&cfg.Metrics, "metrics", false, "serve OpenTelemetry metrics of the tool calls (Prometheus format, no authentication) at /metrics on the HTTP address")
	egressOn := flag.Bool("egress", false, "install the eBPF egress guard before serving: the process may reach only its database and JWKS endpoints (Linux, root, cgroup v2)")
	egressBestEffort := flag.Bool("egress-best-effort", false, "with -egress: serve unguarded (with a warning) if the guard cannot be installed, instead of refusing to start")
	var egressExtra []string
	sandboxOn := flag.Bool("sandbox", false, "confine the server with Landlock before serving: files, TCP ports and IPC limited to what it needs (Linux 5.13+, no privilege needed; combines with -egress)")
	sandboxBestEffort := flag.Bool("sandbox-best-effort", false, "with -sandbox: serve with what the kernel enforces (with a warning) instead of refusing to start")
	flag.Func("egress-allow", "with -egress: also allow this destination (ADDR:PORT, PREFIX or [V6]:PORT-PORT); repeatable", func(v string) error {
		egressExtra = append(egressExtra, v)
		return nil
	})
	lim := &cfg.Limits
	flag.IntVar(&lim.PoolSize, "pool-size", 0, "database connections (PostgreSQL, MySQL; default: the driver's, 4 on small machines)")
	flag.DurationVar(&lim.PoolWait, "pool-wait", 2*time.Second, "longest wait for a free database connection before a call is answered busy (retryable); keep it under -call-timeout")
	flag.DurationVar(&lim.CallTimeout, "call-timeout", server.DefaultCallTimeout, "bound on one tool call")
	flag.DurationVar(&lim.StatementTimeout, "statement-timeout", 10*time.Second, "bound on one statement in the database, set with the call's scope")
	flag.DurationVar(&lim.LockTimeout, "lock-timeout", 500*time.Millisecond, "bound on one statement's wait for a row lock")
	flag.Int64Var(&lim.MaxBodyBytes, "max-body-bytes", server.DefaultMaxRequestBytes, "largest HTTP request body")
	flag.DurationVar(&lim.SessionTimeout, "session-timeout", server.DefaultSessionTimeout, "close stateful sessions idle this long (negative: never)")
	flag.IntVar(&lim.MaxSessionsPerSubject, "max-sessions", server.DefaultSessionsPerSubject, "open stateful sessions per token subject (negative: no cap)")
	flag.DurationVar(&lim.ReadTimeout, "read-timeout", server.DefaultReadTimeout, "bound on reading a request body")
	flag.DurationVar(&lim.WriteTimeout, "write-timeout", 0, "bound on writing a non-streaming response (default: call timeout + 10s)")
	flag.DurationVar(&lim.IdleTimeout, "idle-timeout", server.DefaultIdleTimeout, "close keep-alive connections idle this long")
	flag.DurationVar(&lim.DrainTimeout, "drain-timeout", server.DefaultDrainTimeout, "at shutdown, how long calls in flight may finish before sessions are closed")
	flag.DurationVar(&lim.MaxTokenLifetime, "max-token-lifetime", 0, "refuse tokens whose exp is further away than this (0: any)")
	flag.Func("allow-origin", "a browser origin (scheme://host[:port]) allowed besides the endpoint's own; repeatable", func(v string) error {
		lim.AllowedOrigins = append(lim.AllowedOrigins, v)
		return nil
	})
	flag.DurationVar(&lim.JWKSRefresh, "jwks-refresh", 0, "JWKS refresh interval (default: claims.DefaultRefreshInterval)")
	flag.DurationVar(&lim.JWKSUnknownKIDMin, "jwks-unknown-kid-interval", 0, "least time between JWKS refreshes caused by unknown key ids (default: the claims package's)")
	flag.IntVar(&lim.PerTenant.Concurrent, "tenant-concurrency", 1, "tool calls in flight per tenant (top-level grant); 0: no bound. Keep tenants x this well under -pool-size's share a noisy tenant may take")
	flag.DurationVar(&lim.QueueWait, "queue-wait", time.Second, "how long a call may wait for its tenant's (or subject's) concurrency slot before a 429")
	flag.DurationVar(&lim.TimeoutPenalty, "timeout-penalty", 2*time.Second, "keep a timed-out call's concurrency slots taken this much longer, so a tenant stuck on locks holds the pool only part of the time")
	flag.Float64Var(&lim.PerTenant.Rate, "tenant-rate", 50, "tool calls per second per tenant (token bucket); 0: no bound")
	flag.IntVar(&lim.PerTenant.Burst, "tenant-burst", 100, "token-bucket size per tenant")
	flag.IntVar(&lim.PerSubject.Concurrent, "subject-concurrency", 0, "tool calls in flight per token subject; 0: no bound")
	flag.Float64Var(&lim.PerSubject.Rate, "subject-rate", 0, "tool calls per second per token subject; 0: no bound")
	flag.IntVar(&lim.PerSubject.Burst, "subject-burst", 0, "token-bucket size per subject (default: the rate, at least 1)")
	redisAddr := flag.String("redis", os.Getenv("HOTEL_REDIS"), "share the rate limits' token buckets between replicas through Redis at this address (default: in process)")
	flag.Parse()
	if *redisAddr != "" {
		rc := redis.NewClient(&redis.Options{Addr: *redisAddr})
		defer rc.Close()
		rates, err := redisrate.New(rc, redisrate.Options{})
		if err != nil {
			return err
		}
		lim.Rates = rates
	}

	var h slog.Handler = slog.NewTextHandler(os.Stderr, nil)
	if *jsonLogs {
		h = slog.NewJSONHandler(os.Stderr, nil)
	}
	cfg.Logger = slog.New(h)
	cfg.AuditLogger = cfg.Logger.With("log", "audit")

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	// The scope-signing key is read before the egress guard and the
	// sandbox go in: the sandbox judges files when they are opened.
	if *rlsKey != "" {
		text, err := os.ReadFile(*rlsKey)
		if err != nil {
			return err
		}
		if cfg.RLSKey, err = postgres.ParseKey(strings.TrimSpace(string(text))); err != nil {
			return fmt.Errorf("-rls-key-file: %w", err)
		}
	}

	// The egress guard goes in first, before the database pool, the JWKS
	// client and the listener exist: sockets belong to the cgroup they were
	// created in, and nothing may be served before the guard is in place.
	var guard *egress.Guard
	if *egressOn {
		g, err := installEgress(ctx, cfg, egressExtra, *egressBestEffort, cfg.Logger)
		if err != nil {
			return fmt.Errorf("egress guard requested but not installed, refusing to serve: %w", err)
		}
		guard = g
		defer g.Close()
	}

	// The Landlock sandbox goes in next, still before anything is opened:
	// Landlock judges files and sockets when they are opened, bound or
	// connected. With -egress both apply; the guard adds the address checks
	// Landlock (ports only) cannot make.
	if *sandboxOn {
		sb, cleanup, err := installSandbox(ctx, cfg, sandboxSetup{setupDemo: *setupDemo, tokenFile: *tokenFile, bestEffort: *sandboxBestEffort}, cfg.Logger)
		if err != nil {
			return fmt.Errorf("sandbox requested but not installed, refusing to serve: %w", err)
		}
		defer cleanup()
		if sb.Active() {
			fmt.Fprintf(os.Stderr, "sandbox active (%s)\n", sb.Enforced())
		}
	}

	if *setupDemo != "" {
		if cfg.DB == "" {
			return fmt.Errorf("-setup-demo needs -db: the application's own connection")
		}
		if cfg.RLSKey.ID == "" {
			// The demo's own key, for this run only: a restart without
			// -setup-demo needs -rls-key-file.
			k, err := postgres.NewKey("hotel-demo")
			if err != nil {
				return err
			}
			cfg.RLSKey = k
		}
		if err := hotel.SetupDemo(ctx, *setupDemo, hotel.UserOf(cfg.DB), cfg.RLSKey, hotel.Generate(cfg.Seed, hotel.DemoSize)); err != nil {
			return fmt.Errorf("setting up the demo database: %w", err)
		}
	}

	cfg.NoListen = *stdio // a stdio server binds no port
	app, err := hotel.New(ctx, cfg)
	if err != nil {
		return err
	}
	defer app.Close()
	// Readiness (/readyz) requires the guard when it was asked for and
	// not allowed to be skipped.
	app.HTTP.Health.RequireEgress = *egressOn && !*egressBestEffort
	app.HTTP.Health.Egress = guard
	if guard != nil {
		go guard.Audit(ctx, app.Server.AuditLogger())
		if guard.Active() {
			fmt.Fprintf(os.Stderr, "egress guard active (cgroup %s): allowed %v\n", guard.Cgroup(), guard.Policy().Allow)
		}
	}

	if *stdio {
		src := server.TokenFromEnv("TENANTMCP_TOKEN")
		switch {
		case *tokenFile != "":
			src = server.TokenFromFile(*tokenFile)
		case *as != "":
			tok, err := demoToken(app, *as)
			if err != nil {
				return err
			}
			src = func(context.Context) (string, error) { return tok, nil }
		}
		return app.Server.RunStdio(ctx, src)
	}

	fmt.Fprintf(os.Stderr, "\ntenantmcp hotel server: MCP endpoint %s (streamable HTTP, bearer token required)\n", app.HTTP.ResourceURL)
	if app.Data != nil {
		fmt.Fprintf(os.Stderr, "database: embedded SQLite with demo data (%d chains, %d hotels, %d bookings)\n",
			len(app.Data.Chains), len(app.Data.Hotels), len(app.Data.Bookings))
	}
	if app.Issuer != nil {
		fmt.Fprintf(os.Stderr, "\n*** DEVELOPMENT ISSUER on %s: anyone who can reach it could mint tokens; never use it in production ***\n\n", app.Issuer.URL)
		for _, u := range hotel.DemoUsers {
			tok, err := app.Token(u, 12*time.Hour)
			if err != nil {
				return err
			}
			fmt.Fprintf(os.Stderr, "%s (%s):\n  export TOKEN_%s=%s\n", u.Subject, u.Description, u.Subject, tok)
		}
		fmt.Fprint(os.Stderr, tryIt(app.HTTP.ResourceURL))
	}
	return app.Serve(ctx)
}

func demoToken(app *hotel.App, name string) (string, error) {
	for _, u := range hotel.DemoUsers {
		if u.Subject == name {
			return app.Token(u, 12*time.Hour)
		}
	}
	return "", fmt.Errorf("no demo user %q (alice, bob, carol)", name)
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

// tryIt is the start-up hint: a client the repository pins (the TypeScript
// SDK in interop/, any Node >= 18), which TestTryItHintWorks runs as
// printed, and the MCP Inspector CLI for those with Node >= 22.19 (its
// older releases refuse a URL with arguments).
func tryIt(url string) string {
	return fmt.Sprintf(`
Try it:
  # from the repository root, with the TypeScript SDK pinned in interop/ (Node >= 18; once: npm ci --prefix interop)
  node interop/mcp-call.mjs %[1]s "$TOKEN_alice" tools/list
  node interop/mcp-call.mjs %[1]s "$TOKEN_alice" tools/call list_bookings '{"from":"2020-01-01","to":"2030-01-01"}'
  # or with the MCP Inspector CLI (Node >= 22.19)
  npx @modelcontextprotocol/inspector@2.12.0 --cli %[1]s --transport http --header "Authorization: Bearer $TOKEN_alice" --method tools/list

`, url)
}
