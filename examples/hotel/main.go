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
// (package claims/devtoken) and writes ready tokens for three demo users to
// a file it names. Point -jwks-url, -issuer and -audience at your identity
// provider for anything else. -h lists the common flags; the limits,
// fairness and HTTP knobs are grouped, one flag per concern taking
// KEY=VALUE lists (-limits call-timeout=1m,pool-size=8).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tenantmcp/tenantmcp/egress"
	"github.com/tenantmcp/tenantmcp/examples/hotel/hotel"
	"github.com/tenantmcp/tenantmcp/internal/devserver"
	"github.com/tenantmcp/tenantmcp/server"
	"github.com/tenantmcp/tenantmcp/server/redisrate"
)

func main() {
	if err := run(os.Args[1:], os.Stderr); err != nil && !errors.Is(err, flag.ErrHelp) {
		slog.New(slog.NewTextHandler(os.Stderr, nil)).Error("hotel: exiting", "err", err)
		os.Exit(1)
	}
}

// options are the command's flags beyond hotel.Options.
type options struct {
	dev             devserver.Flags
	stdio           bool
	tokenFile, as   string
	sandbox, egress toggle
	redis           string
	redisList       *[]string
}

// flags defines the command's flags on fs into cfg and o: the common ones,
// then -limits, -fairness and -http, each a KEY=VALUE list of one concern.
func flags(fs *flag.FlagSet, cfg *hotel.Options, o *options) {
	o.dev.Register(fs, "HOTEL", "127.0.0.1:8080", "hotel")
	fs.StringVar(&cfg.PublicURL, "public-url", os.Getenv("HOTEL_PUBLIC_URL"), "the MCP endpoint URL clients use (default http://ADDR/mcp)")
	fs.BoolVar(&cfg.Stateless, "stateless", false, "serve streamable HTTP in stateless mode")
	fs.StringVar(&cfg.FlowPolicy, "flow-policy", os.Getenv("HOTEL_FLOW_POLICY"), "information-flow policy file (JSON, see package flow; default: the example's embedded flow-policy.json)")
	fs.BoolVar(&o.stdio, "stdio", false, "serve one client over stdin/stdout instead of HTTP")
	fs.StringVar(&o.tokenFile, "token-file", "", "with -stdio: file holding the bearer token (default: $TENANTMCP_TOKEN)")
	fs.StringVar(&o.as, "as", "", "with -stdio and the development issuer: act as this demo user (alice, bob, carol)")
	fs.BoolVar(&cfg.Metrics, "metrics", false, "serve OpenTelemetry metrics of the tool calls (Prometheus format, no authentication) at /metrics on the HTTP address")
	fs.Var(&o.sandbox, "sandbox", "confine the server with Landlock before serving: files, TCP ports and IPC limited to what it needs (Linux 5.13+, no privilege needed; combines with -egress); -sandbox=best-effort serves with what the kernel enforces (with a warning) instead of refusing to start")
	o.egress.allowOK = true
	fs.Var(&o.egress, "egress", "install the eBPF egress guard before serving: the process may reach only its database and JWKS endpoints (Linux, root, cgroup v2); -egress=best-effort,allow=DEST,... serves unguarded (with a warning) if it cannot be installed, and allows each DEST too (ADDR:PORT, PREFIX or [V6]:PORT-PORT)")
	lim := &cfg.Limits
	lim.PoolWait, lim.CallTimeout, lim.StatementTimeout, lim.LockTimeout = 2*time.Second, server.DefaultCallTimeout, 10*time.Second, 500*time.Millisecond
	lim.MaxBodyBytes = server.DefaultMaxRequestBytes
	group{
		{"pool-size", &lim.PoolSize, "database connections (PostgreSQL, MySQL; 0: the driver's, 4 on small machines)"},
		{"pool-wait", &lim.PoolWait, "longest wait for a free database connection before a call is answered busy (retryable); keep it under call-timeout"},
		{"call-timeout", &lim.CallTimeout, "bound on one tool call"},
		{"statement-timeout", &lim.StatementTimeout, "bound on one statement in the database, set with the call's scope"},
		{"lock-timeout", &lim.LockTimeout, "bound on one statement's wait for a row lock"},
		{"max-body-bytes", &lim.MaxBodyBytes, "largest HTTP request body"},
		{"max-token-lifetime", &lim.MaxTokenLifetime, "refuse tokens whose exp is further away than this (0: any)"},
		{"jwks-refresh", &lim.JWKSRefresh, "JWKS refresh interval (0: claims.DefaultRefreshInterval)"},
		{"jwks-unknown-kid-interval", &lim.JWKSUnknownKIDMin, "least time between JWKS refreshes caused by unknown key ids (0: the claims package's)"},
	}.define(fs, "limits", "database, call and token limits")
	lim.PerTenant = server.Limit{Concurrent: 1, Rate: 50, Burst: 100}
	lim.QueueWait, lim.TimeoutPenalty = time.Second, 2*time.Second
	o.redis = os.Getenv("HOTEL_REDIS")
	group{
		{"tenant-concurrency", &lim.PerTenant.Concurrent, "tool calls in flight per tenant (top-level grant); 0: no bound. Keep tenants x this well under pool-size's share a noisy tenant may take"},
		{"tenant-rate", &lim.PerTenant.Rate, "tool calls per second per tenant (token bucket); 0: no bound"},
		{"tenant-burst", &lim.PerTenant.Burst, "token-bucket size per tenant"},
		{"subject-concurrency", &lim.PerSubject.Concurrent, "tool calls in flight per token subject; 0: no bound"},
		{"subject-rate", &lim.PerSubject.Rate, "tool calls per second per token subject; 0: no bound"},
		{"subject-burst", &lim.PerSubject.Burst, "token-bucket size per subject (0: the rate, at least 1)"},
		{"queue-wait", &lim.QueueWait, "how long a call may wait for its tenant's (or subject's) concurrency slot before a 429"},
		{"timeout-penalty", &lim.TimeoutPenalty, "keep a timed-out call's concurrency slots taken this much longer, so a tenant stuck on locks holds the pool only part of the time"},
		{"redis", &o.redis, "share the rate limits' token buckets between replicas through Redis at this address (default: in process, or $HOTEL_REDIS)"},
	}.define(fs, "fairness", "per-tenant and per-subject fairness")
	lim.SessionTimeout, lim.MaxSessionsPerSubject = server.DefaultSessionTimeout, server.DefaultSessionsPerSubject
	lim.ReadTimeout, lim.IdleTimeout, lim.DrainTimeout = server.DefaultReadTimeout, server.DefaultIdleTimeout, server.DefaultDrainTimeout
	group{
		{"session-timeout", &lim.SessionTimeout, "close stateful sessions idle this long (negative: never)"},
		{"max-sessions", &lim.MaxSessionsPerSubject, "open stateful sessions per token subject (negative: no cap)"},
		{"read-timeout", &lim.ReadTimeout, "bound on reading a request body"},
		{"write-timeout", &lim.WriteTimeout, "bound on writing a non-streaming response (0: call timeout + 10s)"},
		{"idle-timeout", &lim.IdleTimeout, "close keep-alive connections idle this long"},
		{"drain-timeout", &lim.DrainTimeout, "at shutdown, how long calls in flight may finish before sessions are closed"},
		{"allow-origin", &lim.AllowedOrigins, "a browser origin (scheme://host[:port]) allowed besides the endpoint's own; repeatable"},
	}.define(fs, "http", "HTTP sessions, timeouts and origins")
}

// run is the command with its arguments, logging to stderr.
func run(args []string, stderr io.Writer) error {
	var cfg hotel.Options
	var o options
	fs := flag.NewFlagSet("hotel", flag.ContinueOnError)
	fs.SetOutput(stderr)
	flags(fs, &cfg, &o)
	if err := fs.Parse(args); err != nil {
		return err
	}
	cfg.Addr, cfg.DB, cfg.JWKSURL, cfg.Issuer, cfg.Audience = o.dev.Addr, o.dev.DB, o.dev.JWKSURL, o.dev.Issuer, o.dev.Audience
	lim := &cfg.Limits
	if o.redis != "" {
		rc := redis.NewClient(&redis.Options{Addr: o.redis})
		defer rc.Close()
		rates, err := redisrate.New(rc, redisrate.Options{})
		if err != nil {
			return err
		}
		lim.Rates = rates
	}

	cfg.Logger = o.dev.Logger(stderr)
	cfg.AuditLogger = cfg.Logger.With("log", "audit")

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	// The scope-signing key is read before the egress guard and the
	// sandbox go in: the sandbox judges files when they are opened.
	var err error
	if cfg.RLSKey, err = o.dev.Key(); err != nil {
		return err
	}

	// The egress guard goes in first, before the database pool, the JWKS
	// client and the listener exist: sockets belong to the cgroup they were
	// created in, and nothing may be served before the guard is in place.
	var guard *egress.Guard
	if o.egress.on {
		g, err := installEgress(ctx, cfg, o.egress.allow, o.egress.bestEffort, cfg.Logger)
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
	if o.sandbox.on {
		// Package sandbox logs what it enforces.
		_, cleanup, err := installSandbox(ctx, cfg, sandboxSetup{setupDemo: o.dev.SetupDemo, tokenFile: o.tokenFile, bestEffort: o.sandbox.bestEffort}, cfg.Logger)
		if err != nil {
			return fmt.Errorf("sandbox requested but not installed, refusing to serve: %w", err)
		}
		defer cleanup()
	}

	if err := o.dev.Setup(ctx, &cfg.RLSKey, "hotel-demo", hotel.Demo(hotel.Generate(cfg.Seed, hotel.DemoSize))); err != nil {
		return err
	}

	cfg.NoListen = o.stdio // a stdio server binds no port
	app, err := hotel.New(ctx, cfg)
	if err != nil {
		return err
	}
	defer app.Close()
	// Readiness (/readyz) requires the guard when it was asked for and
	// not allowed to be skipped.
	app.HTTP.Health.RequireEgress = o.egress.on && !o.egress.bestEffort
	app.HTTP.Health.Egress = guard
	if guard != nil {
		go guard.Audit(ctx, app.Server.AuditLogger())
		if guard.Active() {
			cfg.Logger.Info("egress guard active", "cgroup", guard.Cgroup(), "allowed", fmt.Sprint(guard.Policy().Allow))
		}
	}

	if o.stdio {
		src := server.TokenFromEnv("TENANTMCP_TOKEN")
		switch {
		case o.tokenFile != "":
			src = server.TokenFromFile(o.tokenFile)
		case o.as != "":
			tok, err := app.TokenOf(hotel.DemoUsers, o.as, devserver.TokenTTL)
			if err != nil {
				return err
			}
			src = func(context.Context) (string, error) { return tok, nil }
		}
		return app.Server.RunStdio(ctx, src)
	}

	if app.Data != nil {
		cfg.Logger.Info("database: embedded SQLite with demo data", "chains", len(app.Data.Chains), "hotels", len(app.Data.Hotels), "bookings", len(app.Data.Bookings))
	}
	if err := app.Announce(cfg.Logger, "hotel", hotel.DemoUsers, tryIt(app.HTTP.ResourceURL)); err != nil {
		return err
	}
	return app.Serve(ctx)
}

// tryIt is the start-up hint (written after the demo tokens): a client the repository pins (the TypeScript
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
