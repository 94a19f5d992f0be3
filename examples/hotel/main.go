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
	"encoding/base64"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tenantmcp/tenantmcp/egress"
	"github.com/tenantmcp/tenantmcp/examples/hotel/hotel"
	"github.com/tenantmcp/tenantmcp/internal/devserver"
	"github.com/tenantmcp/tenantmcp/server"
	"github.com/tenantmcp/tenantmcp/server/redisstore"
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
	sandbox, egress confine
	redis           string
	failedTokens    server.FailedTokenLimit
}

// flags defines the command's flags on fs into cfg and o: the common ones,
// then -limits, -fairness and -http, each a KEY=VALUE list of one concern.
func flags(fs *flag.FlagSet, cfg *hotel.Options, o *options) {
	o.dev.Register(fs, "HOTEL", "127.0.0.1:8080", "hotel")
	fs.StringVar(&cfg.PublicURL, "public-url", os.Getenv("HOTEL_PUBLIC_URL"), "the MCP endpoint URL clients use (default http://ADDR/mcp)")
	fs.BoolVar(&cfg.Sessions, "sessions", false, "also serve 2025-era stateful sessions (Mcp-Session-Id: consent by elicitation, subscriptions) beside the stateless MCP 2026-07-28 endpoint")
	fs.StringVar(&cfg.FlowPolicy, "flow-policy", os.Getenv("HOTEL_FLOW_POLICY"), "information-flow policy file (JSON, see package flow; default: the example's embedded flow-policy.json)")
	fs.BoolVar(&o.stdio, "stdio", false, "serve one client over stdin/stdout instead of HTTP")
	fs.StringVar(&o.tokenFile, "token-file", "", "with -stdio: file holding the bearer token (default: $TENANTMCP_TOKEN)")
	fs.StringVar(&o.as, "as", "", "with -stdio and the development issuer: act as this demo user (alice, bob, carol)")
	fs.BoolFunc("metrics", "serve OpenTelemetry metrics of the tool calls (Prometheus format, no authentication) at /metrics on the HTTP address; -metrics=tenants=N also labels them with the busiest N tenants (pseudonyms) plus \"other\"", func(v string) error {
		cfg.Metrics = true
		if n, ok := strings.CutPrefix(v, "tenants="); ok {
			var err error
			if cfg.MetricsTenants, err = strconv.Atoi(n); err != nil || cfg.MetricsTenants < 0 {
				return fmt.Errorf("-metrics=tenants=N: N must be a number of tenants, not %q", n)
			}
		} else if v != "true" {
			return fmt.Errorf("-metrics takes no value or tenants=N, not %q", v)
		}
		return nil
	})
	fs.BoolFunc("sandbox", "confine the server with Landlock before serving: files, TCP ports and IPC limited to what it needs (Linux 5.13+, no privilege needed; combines with -egress); -sandbox=best-effort serves with what the kernel enforces (with a warning) instead of refusing to start", o.sandbox.set(false))
	fs.BoolFunc("egress", "install the eBPF egress guard before serving: the process may reach only its database and JWKS endpoints (Linux, root, cgroup v2); -egress=best-effort,allow=DEST,... serves unguarded (with a warning) if it cannot be installed, and allows each DEST too (ADDR:PORT, PREFIX or [V6]:PORT-PORT)", o.egress.set(true))
	lim := &cfg.Limits
	g := newGroup(fs, "limits", "database, call and token limits")
	g.IntVar(&lim.PoolSize, "pool-size", 0, "database connections (PostgreSQL, MySQL; default: the driver's, 4 on small machines)")
	g.DurationVar(&lim.PoolWait, "pool-wait", 2*time.Second, "longest wait for a free database connection before a call is answered busy (retryable); keep it under call-timeout")
	g.DurationVar(&lim.CallTimeout, "call-timeout", server.DefaultCallTimeout, "bound on one tool call")
	g.DurationVar(&lim.StatementTimeout, "statement-timeout", 10*time.Second, "bound on one statement in the database, set with the call's scope")
	g.DurationVar(&lim.LockTimeout, "lock-timeout", 500*time.Millisecond, "bound on one statement's wait for a row lock")
	g.Int64Var(&lim.MaxBodyBytes, "max-body-bytes", server.DefaultMaxRequestBytes, "largest HTTP request body")
	g.DurationVar(&lim.MaxTokenLifetime, "max-token-lifetime", 0, "refuse tokens whose exp is further away than this (0: the verifier's own bound, claims.DefaultMaxTokenLifetime = 24h)")
	g.DurationVar(&lim.JWKSRefresh, "jwks-refresh", 0, "longest time between JWKS refreshes, so a retired key verifies at most this long; the JWKS's Cache-Control max-age is honoured below it (default: claims.DefaultRefreshInterval = 1m)")
	g.DurationVar(&lim.JWKSUnknownKIDMin, "jwks-unknown-kid-interval", 0, "least time between JWKS refreshes caused by unknown key ids; a token with a newly published key waits at most this long (default: claims.DefaultUnknownKIDInterval = 2s)")
	g = newGroup(fs, "fairness", "per-tenant and per-subject fairness")
	g.IntVar(&lim.PerTenant.Concurrent, "tenant-concurrency", 1, "tool calls in flight per tenant (top-level grant); 0: no bound. Keep tenants x this well under pool-size's share a noisy tenant may take")
	g.DurationVar(&lim.QueueWait, "queue-wait", time.Second, "how long a call may wait for its tenant's (or subject's) concurrency slot before a 429")
	g.DurationVar(&lim.TimeoutPenalty, "timeout-penalty", 2*time.Second, "keep a timed-out call's concurrency slots taken this much longer, so a tenant stuck on locks holds the pool only part of the time")
	g.Float64Var(&lim.PerTenant.Rate, "tenant-rate", 50, "tool calls per second per tenant (token bucket); 0: no bound")
	g.IntVar(&lim.PerTenant.Burst, "tenant-burst", 100, "token-bucket size per tenant")
	g.IntVar(&lim.PerSubject.Concurrent, "subject-concurrency", 0, "tool calls in flight per token subject; 0: no bound")
	g.Float64Var(&lim.PerSubject.Rate, "subject-rate", 0, "tool calls per second per token subject; 0: no bound")
	g.IntVar(&lim.PerSubject.Burst, "subject-burst", 0, "token-bucket size per subject (default: the rate, at least 1)")
	g.Float64Var(&lim.PoolShare, "pool-share", 0, "the tenant-fair connection queue's budget in connections, split equally between the active tenants: an outlier over its split waits (default: half the pool size)")
	g.BoolVar(&lim.PoolFIFO, "pool-fifo", false, "serve connection waiters in arrival order instead of the tenant-fair queue")
	g.StringVar(&o.redis, "redis", os.Getenv("HOTEL_REDIS"), "share the rate limits' token buckets and spent consent states between replicas through Redis at this address (default: in process; replicas also share $HOTEL_INPUT_KEYS, base64 keys of 32+ bytes, comma-separated)")
	g = newGroup(fs, "http", "HTTP sessions, timeouts and origins")
	g.DurationVar(&lim.SessionTimeout, "session-timeout", server.DefaultSessionTimeout, "close stateful sessions idle this long (negative: never)")
	g.IntVar(&lim.MaxSessionsPerSubject, "max-sessions", server.DefaultSessionsPerSubject, "open stateful sessions per token subject (negative: no cap)")
	g.DurationVar(&lim.ReadTimeout, "read-timeout", server.DefaultReadTimeout, "bound on reading a request body")
	g.DurationVar(&lim.WriteTimeout, "write-timeout", 0, "bound on writing a non-streaming response (default: call timeout + 10s)")
	g.DurationVar(&lim.IdleTimeout, "idle-timeout", server.DefaultIdleTimeout, "close keep-alive connections idle this long")
	g.DurationVar(&lim.DrainTimeout, "drain-timeout", server.DefaultDrainTimeout, "at shutdown, how long calls in flight may finish before sessions are closed")
	g.IntVar(&o.failedTokens.Burst, "failed-token-burst", server.DefaultFailedTokenBurst, "failed bearer tokens one client address may present in a row before it is answered 429")
	g.Float64Var(&o.failedTokens.Rate, "failed-token-rate", server.DefaultFailedTokenRate, "failed-token attempts per second a client address regains; negative: no limit")
	g.StringVar(&o.failedTokens.ClientIPHeader, "client-ip-header", "", "header naming the client address (X-Forwarded-For, X-Real-IP), believed only from -http trusted-proxy addresses")
	g.Func("trusted-proxy", "address or CIDR prefix of a reverse proxy whose client-ip-header is believed; repeatable", func(v string) error {
		o.failedTokens.TrustedProxies = append(o.failedTokens.TrustedProxies, v)
		return nil
	})
	g.Func("allow-origin", "a browser origin (scheme://host[:port]) allowed besides the endpoint's own; repeatable", func(v string) error {
		lim.AllowedOrigins = append(lim.AllowedOrigins, v)
		return nil
	})
	for _, name := range []string{"limits", "fairness", "http"} {
		fs.Lookup(name).Value.(group).document(fs.Lookup(name))
	}
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
		rates, err := redisstore.NewRates(rc, redisstore.Options{})
		if err != nil {
			return err
		}
		lim.Rates = rates
		if cfg.Input.Replays, err = redisstore.NewReplays(rc, redisstore.Options{}); err != nil {
			return err
		}
		// Off PostgreSQL (where the taints live in the database), replicas
		// share their flow taints on the same Redis.
		if cfg.Taints, err = redisstore.NewTaints(rc, redisstore.Options{}); err != nil {
			return err
		}
	}
	// Replicas verify each other's consent states only with shared keys.
	if keys := os.Getenv("HOTEL_INPUT_KEYS"); keys != "" {
		for _, k := range strings.Split(keys, ",") {
			b, err := base64.StdEncoding.DecodeString(strings.TrimSpace(k))
			if err != nil {
				return errors.New("HOTEL_INPUT_KEYS: each key must be standard base64 (the value is not shown)")
			}
			cfg.Input.Keys = append(cfg.Input.Keys, b)
		}
	}

	cfg.Logger = o.dev.Logger(stderr)
	cfg.AuditLogger = cfg.Logger.With("log", "audit")
	slog.SetDefault(cfg.Logger) // what logs to the default logger (guardedsql's start-up report) logs in the same format

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
	app.HTTP.FailedTokens = o.failedTokens
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
