package hr

import (
	"context"
	"database/sql"
	"log/slog"

	"github.com/tenantmcp/tenantmcp/claims"
	"github.com/tenantmcp/tenantmcp/guardedsql"
	"github.com/tenantmcp/tenantmcp/guardedsql/postgres"
	"github.com/tenantmcp/tenantmcp/internal/devserver"
	"github.com/tenantmcp/tenantmcp/redact"
	"github.com/tenantmcp/tenantmcp/server"
)

// Options configures the HR server (New takes it by value; the zero value
// serves three demo companies from a fresh embedded SQLite database on
// 127.0.0.1:8081 with the development issuer).
type Options struct {
	// Addr is the TCP address to listen on for streamable HTTP.
	Addr string
	// DB is "" for a fresh embedded SQLite file with demo data, or a DSN
	// understood by guardedsql.Open (sqlite:…, postgres://…, mysql://…)
	// whose tables and data already exist (SetupDemo makes them).
	DB string
	// RLSKey signs the PostgreSQL scope context; required for postgres://
	// DSNs, ignored otherwise.
	RLSKey postgres.Key
	// JWKSURL, Issuer and Audience point at a real identity provider. With
	// JWKSURL empty a development issuer runs on loopback and mints the
	// demo tokens: never use that outside a laptop.
	JWKSURL, Issuer, Audience string
	// Companies is the number of demo companies (default 3).
	Companies int
	// NoListen builds the server without opening Addr (for stdio).
	NoListen bool

	Logger, AuditLogger *slog.Logger
}

// App is a running HR server (devserver.Base: Server, Verifier, the
// development Issuer, Listener, HTTP, and Serve, Token and Close).
type App struct {
	devserver.Base
	DB *guardedsql.DB
	// Data is what the embedded database was loaded with (nil when DB
	// named an existing database).
	Data *Data
}

// Redaction is the example's policy: HR sees names, contact details,
// pay and addresses; other staff see names and office addresses; a caller
// with neither role sees masks.
var Redaction = redact.Options{
	Reveal: map[string][]redact.Category{
		RoleHR:    {redact.Name, redact.Email, redact.Phone, redact.SSN, redact.Address},
		RoleStaff: {redact.Name, redact.Address},
	},
}

// Mapping maps token groups to grants: /companies/acme grants company
// acme, /companies/acme/hr grants it with the role hr bound to it.
var Mapping = claims.Mapping{
	Patterns: []string{"/companies/{company}", "/companies/{company}/" + claims.RolePlaceholder},
	Levels:   []string{LevelCompany},
}

// DemoUser is a user of the development issuer.
type DemoUser = devserver.DemoUser

// DemoUsers are the users the example prints tokens for.
var DemoUsers = []DemoUser{
	{Subject: "alice", Description: "HR of acme", Groups: []string{"/companies/acme/hr"}},
	{Subject: "bob", Description: "HR of globex", Groups: []string{"/companies/globex/hr"}},
	{Subject: "carol", Description: "staff of acme", Groups: []string{"/companies/acme/staff"}},
}

// New builds the server: database, verifier, tools, then the listener.
func New(ctx context.Context, cfg Options) (app *App, err error) {
	app = &App{}
	defer app.CloseOnError(&err) // a `return nil, err` below has already set app to nil
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Addr == "" {
		cfg.Addr = "127.0.0.1:8081"
	}
	if cfg.Companies == 0 {
		cfg.Companies = 3
	}
	if app.DB, _, err = app.OpenDB(ctx, "hr", cfg.DB, Schema, cfg.RLSKey, guardedsql.Options{Logger: cfg.Logger},
		func(ctx context.Context, raw *sql.DB) error {
			app.Data = Generate(cfg.Companies)
			return Create(ctx, raw, SQLite, app.Data)
		}); err != nil {
		return nil, err
	}
	addr, err := app.Listen(cfg.Addr, cfg.NoListen)
	if err != nil {
		return nil, err
	}
	if err := app.Verify(ctx, "http://"+addr+"/mcp", devserver.Auth{JWKSURL: cfg.JWKSURL, Issuer: cfg.Issuer, Audience: cfg.Audience,
		Mapping: Mapping, Logger: cfg.Logger}); err != nil {
		return nil, err
	}
	red, err := redact.New(Redaction)
	if err != nil {
		return nil, err
	}
	srv, err := server.New(server.Options{
		Name: "tenantmcp-hr", Version: "0.1.0",
		Instructions: "HR tools on the Oracle HR sample schema. Every call sees only the companies of your token.",
		Verifier:     app.Verifier, DB: app.DB, Redactor: red, Levels: []string{LevelCompany},
		Logger: cfg.Logger, AuditLogger: cfg.AuditLogger,
	})
	if err != nil {
		return nil, err
	}
	if err := Register(srv); err != nil {
		return nil, err
	}
	app.Server = srv
	return app, nil
}
