package hotel

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tenantmcp/tenantmcp/claims"
	"github.com/tenantmcp/tenantmcp/flow"
	"github.com/tenantmcp/tenantmcp/flow/pgtaint"
	"github.com/tenantmcp/tenantmcp/guardedsql"
	"github.com/tenantmcp/tenantmcp/guardedsql/postgres"
	"github.com/tenantmcp/tenantmcp/internal/devserver"
	"github.com/tenantmcp/tenantmcp/redact"
	"github.com/tenantmcp/tenantmcp/server"
	"github.com/tenantmcp/tenantmcp/server/otelserver"
)

// Options configures the hotel server (hotel.New takes it by value).
type Options struct {
	// Addr is the TCP address to listen on for streamable HTTP.
	Addr string
	// PublicURL is the MCP endpoint as clients address it; default
	// http://<listen address>/mcp. It is the token audience unless Audience
	// says otherwise.
	PublicURL string
	// Sessions adds 2025-era stateful sessions to the stateless
	// (2026-07-28) endpoint: see server.HTTPOptions.Sessions.
	Sessions bool

	// DB is "" for a fresh embedded SQLite file with demo data, or a DSN
	// understood by guardedsql.Open (sqlite:…, postgres://…, mysql://…),
	// whose schema and data the caller has already created.
	DB string
	// RLSKey signs the PostgreSQL scope context (postgres.Options.Key);
	// required for postgres:// DSNs, ignored otherwise. SetupDemo
	// installs it.
	RLSKey postgres.Key

	// JWKSURL, Issuer and Audience point at a real identity provider. With
	// JWKSURL empty a development issuer runs on loopback and mints the
	// demo tokens: never use that outside a laptop.
	JWKSURL  string
	Issuer   string
	Audience string

	// Seed and Size shape the demo data.
	Seed uint64
	Size Size

	Logger      *slog.Logger
	AuditLogger *slog.Logger

	// FlowPolicy is the path of the information-flow policy file; "" uses
	// the example's FlowPolicy.
	FlowPolicy string

	// Metrics records OpenTelemetry metrics of every tool call and serves
	// them, in the Prometheus format, at /metrics on the MCP listener.
	Metrics bool
	// MetricsTenants, with Metrics, labels the metrics with the busiest
	// tenants, at most this many plus "other" (otelserver's TenantTopN,
	// pseudonyms). Zero: no tenant label.
	MetricsTenants int
	// NoListen builds the server without opening Addr (for -stdio): no
	// port is bound, so any number of stdio instances run side by side.
	NoListen bool
	// Limits are the deployment's limits and timeouts (hotel flags).
	Limits Limits
	// Input signs and spends the states of consent questions (multi
	// round-trip requests); replicas share it. Zero: this process only.
	Input server.InputOptions
	// TaintDSN, if set, is where the PostgreSQL flow taint store connects
	// instead of DB (the same database through another route: tests cut
	// it to fail the taint store alone).
	TaintDSN string
	// Taints is the flow taint store on a database that is not
	// PostgreSQL (MariaDB, SQLite), for replicas to share (e.g.
	// redisstore.NewTaints; main.go's -fairness redis=ADDR sets it). Nil:
	// in this process. On PostgreSQL it is ignored: the taints live in the
	// database (flow/pgtaint), out of the application role's reach.
	Taints flow.Store
}

// Limits are the limits and timeouts a deployment sets, each a hotel flag
// (see main.go); zero fields take the library's defaults, negative ones
// (where the field says so) turn a bound off.
type Limits struct {
	PoolSize         int           // database connections (PostgreSQL, MySQL)
	PoolWait         time.Duration // longest wait for a connection: then "busy"
	CallTimeout      time.Duration
	StatementTimeout time.Duration
	LockTimeout      time.Duration
	MaxBodyBytes     int64

	SessionTimeout        time.Duration
	MaxSessionsPerSubject int
	ReadTimeout           time.Duration
	WriteTimeout          time.Duration
	IdleTimeout           time.Duration
	DrainTimeout          time.Duration
	AllowedOrigins        []string
	MaxTokenLifetime      time.Duration

	JWKSRefresh       time.Duration
	JWKSUnknownKIDMin time.Duration // least time between refreshes for unknown kids

	PerTenant  server.Limit
	PerSubject server.Limit
	QueueWait  time.Duration // wait for a tenant's or subject's concurrency slot
	// TimeoutPenalty keeps a timed-out call's slots taken this much longer.
	TimeoutPenalty time.Duration
	// PoolShare and PoolFIFO are guardedsql.Options' (the tenant-fair
	// connection queue's budget, or arrival order instead).
	PoolShare float64
	PoolFIFO  bool
	// Rates is the shared token-bucket store (nil: in process).
	Rates server.RateStore
}

// App is a running hotel server with its listener, database and verifier
// (devserver.Base: Server, Verifier, the development Issuer, Listener,
// HTTP, and Serve, Token and Close).
type App struct {
	devserver.Base
	DB *guardedsql.DB
	// Data is the demo data loaded into the embedded database (nil when
	// DB named an existing database).
	Data *Data
	// Flow enforces the flow policy; Outbox records what the sink tools
	// would have sent.
	Flow   *flow.Checker
	Outbox *Outbox

	// taints is the flow taint store: nil (in memory) but on PostgreSQL.
	taints flow.Store
}

// Redaction is the example's policy: front-desk staff see the contact
// details of the guests of their hotel (the only guests their scope
// reaches), managers see names, everyone else sees masks. Card numbers are
// never revealed.
var Redaction = redact.Options{
	Reveal: map[string][]redact.Category{
		"front_desk": {redact.Name, redact.Email, redact.Phone},
		"manager":    {redact.Name},
	},
}

// Mapping is how the example maps token groups to grants: Keycloak-style
// group paths. A hotel group grants the hotel within its chain
// (/tenants/initech/hotels/acme-paris reaches nothing, since acme-paris is
// acme's); a role-suffixed group binds the role to that grant
// (/tenants/acme/hotels/acme-paris/front_desk), and the roles claim binds
// only when the token has a single grant (see claims.Mapping).
var Mapping = claims.Mapping{
	Patterns: []string{
		"/tenants/{chain}", "/tenants/{chain}/hotels/{hotel}", "tenant:{chain}",
		"/tenants/{chain}/roles/" + claims.RolePlaceholder,
		"/tenants/{chain}/hotels/{hotel}/" + claims.RolePlaceholder,
	},
	Levels: []string{LevelChain, LevelHotel},
}

// New builds the server: database, verifier, tools, and the listener
// (opened last, after everything that could fail closed).
func New(ctx context.Context, cfg Options) (app *App, err error) {
	app = &App{}
	defer app.CloseOnError(&err) // a `return nil, err` below has already set app to nil
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Size == (Size{}) {
		cfg.Size = DemoSize
	}
	if cfg.Addr == "" {
		cfg.Addr = "127.0.0.1:8080"
	}
	var tel *otelserver.Telemetry // nil: no metrics, and no Tracer below
	if cfg.Metrics {
		if tel, err = otelserver.New(otelserver.Options{TenantTopN: cfg.MetricsTenants}); err != nil {
			return nil, err
		}
	}
	if err := app.openDB(ctx, cfg, tel); err != nil {
		return nil, err
	}
	addr, err := app.Listen(cfg.Addr, cfg.NoListen)
	if err != nil {
		return nil, err
	}
	public := cfg.PublicURL
	if public == "" {
		public = "http://" + addr + "/mcp"
	}
	if err := app.Verify(ctx, public, devserver.Auth{JWKSURL: cfg.JWKSURL, Issuer: cfg.Issuer, Audience: cfg.Audience,
		Mapping: Mapping, Logger: cfg.Logger, Refresh: cfg.Limits.JWKSRefresh, UnknownKIDInterval: cfg.Limits.JWKSUnknownKIDMin}); err != nil {
		return nil, err
	}
	red, err := redact.New(Redaction)
	if err != nil {
		return nil, err
	}
	if app.taints == nil && cfg.Taints != nil {
		app.taints = cfg.Taints
	}
	if app.Flow, err = newFlow(cfg.FlowPolicy, app.taints); err != nil {
		return nil, err
	}
	app.Outbox = &Outbox{}
	var tracer server.Tracer // a nil *otelserver.Telemetry must not become a non-nil Tracer
	if tel != nil {
		tracer = tel
	}
	limits := server.Limits{PerTenant: cfg.Limits.PerTenant, PerSubject: cfg.Limits.PerSubject, QueueWait: cfg.Limits.QueueWait,
		TimeoutPenalty: cfg.Limits.TimeoutPenalty, Rates: cfg.Limits.Rates}
	if tel != nil {
		limits.OnDegraded = tel.LimitDegraded // tenantmcp_limit_degraded: 1 while the shared rate store is down
	}
	srv, err := server.New(server.Options{
		Name: "tenantmcp-hotel", Version: "0.1.0",
		Instructions: "Hotel-chain tools. Every call sees only the chains and hotels of your token.",
		Verifier:     app.Verifier, DB: app.DB, Redactor: red,
		Levels: []string{LevelChain, LevelHotel},
		Logger: cfg.Logger, AuditLogger: cfg.AuditLogger,
		Flow: app.Flow, Tracer: tracer,
		CallTimeout: cfg.Limits.CallTimeout, MaxRequestBytes: cfg.Limits.MaxBodyBytes,
		Limits:           limits,
		MaxTokenLifetime: cfg.Limits.MaxTokenLifetime,
		Input:            cfg.Input,
	})
	if err != nil {
		return nil, err
	}
	if err := srv.EnableIdempotencyKeys(ctx); err != nil {
		// A database migrated before the idempotency table: calls with
		// a key are refused (invalid params), never run unprotected.
		cfg.Logger.Warn("hotel: idempotency keys disabled: the migration's table is missing (-setup-demo creates it)")
	}
	if err := Register(srv); err != nil {
		return nil, err
	}
	if err := RegisterSurface(srv); err != nil {
		return nil, err
	}
	app.Server = srv
	if err := registerFlowTools(app); err != nil {
		return nil, err
	}
	l := cfg.Limits
	app.HTTP = server.HTTPOptions{ResourceURL: app.HTTP.ResourceURL, AuthorizationServers: app.HTTP.AuthorizationServers, Sessions: cfg.Sessions,
		SessionTimeout: l.SessionTimeout, MaxSessionsPerSubject: l.MaxSessionsPerSubject,
		ReadTimeout: l.ReadTimeout, WriteTimeout: l.WriteTimeout, IdleTimeout: l.IdleTimeout, DrainTimeout: l.DrainTimeout,
		AllowedOrigins: l.AllowedOrigins}
	if cfg.Metrics {
		app.HTTP.MetricsPath, app.HTTP.Metrics = "/metrics", tel.Handler()
	}
	return app, nil
}

func (app *App) openDB(ctx context.Context, cfg Options, tel *otelserver.Telemetry) error {
	l := cfg.Limits
	opts := guardedsql.Options{MaxConns: l.PoolSize, PoolWait: l.PoolWait,
		StatementTimeout: l.StatementTimeout, LockTimeout: l.LockTimeout,
		PoolShare: l.PoolShare, PoolFIFO: l.PoolFIFO,
	}
	if tel != nil {
		opts.PoolWaitObserver = tel.PoolWaitObserver()
	}
	db, dsn, err := app.OpenDB(ctx, "hotel", cfg.DB, Schema, cfg.RLSKey, opts, func(ctx context.Context, raw *sql.DB) error {
		app.Data = Generate(cfg.Seed, cfg.Size)
		if err := Create(ctx, raw, SQLite, app.Data); err != nil {
			return err
		}
		return installIdempotency(ctx, raw, SQLite) // idempotency.go
	})
	if err != nil {
		return err
	}
	app.DB = db
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		// On PostgreSQL the flow taints live in the same database, so
		// replicas share them and a restart keeps them.
		tdsn := dsn
		if cfg.TaintDSN != "" {
			tdsn = cfg.TaintDSN
		}
		pool, err := pgxpool.New(ctx, tdsn)
		if err != nil {
			return guardedsql.RedactDSNError(fmt.Errorf("hotel: taint store on %s: %w", guardedsql.RedactDSN(tdsn), err), tdsn)
		}
		app.OnClose(func() error { pool.Close(); return nil })
		if app.taints, err = pgtaint.New(ctx, pool, pgtaint.Options{}); err != nil {
			return fmt.Errorf("hotel: %w (-setup-demo creates it)", err)
		}
	}
	return nil
}

// DemoUser is a user of the development issuer.
type DemoUser = devserver.DemoUser

// DemoUsers are the users the example prints tokens for: two managers of
// different chains and the front desk of one hotel.
var DemoUsers = []DemoUser{
	{Subject: "alice", Description: "manager of chain acme", Groups: []string{"/tenants/acme"}, Roles: []string{"manager"}},
	{Subject: "bob", Description: "manager of chain globex", Groups: []string{"/tenants/globex"}, Roles: []string{"manager"}},
	{Subject: "carol", Description: "front desk of hotel acme-paris", Groups: []string{"/tenants/acme/hotels/acme-paris"}, Roles: []string{"front_desk"}},
}
