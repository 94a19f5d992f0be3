package hr

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/tenantmcp/tenantmcp/claims"
	"github.com/tenantmcp/tenantmcp/guardedsql"
	"github.com/tenantmcp/tenantmcp/guardedsql/postgres"
	"github.com/tenantmcp/tenantmcp/internal/devissuer"
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

// App is a running HR server.
type App struct {
	Server   *server.Server
	DB       *guardedsql.DB
	Verifier *claims.Verifier
	// Issuer is the development issuer, nil with a real identity provider.
	Issuer *devissuer.Issuer
	// Data is what the embedded database was loaded with (nil when DB
	// named an existing database).
	Data     *Data
	Listener net.Listener
	HTTP     server.HTTPOptions

	closers []func() error
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
type DemoUser struct {
	Subject, Description string
	Groups, Roles        []string
}

// DemoUsers are the users the example prints tokens for.
var DemoUsers = []DemoUser{
	{Subject: "alice", Description: "HR of acme", Groups: []string{"/companies/acme/hr"}},
	{Subject: "bob", Description: "HR of globex", Groups: []string{"/companies/globex/hr"}},
	{Subject: "carol", Description: "staff of acme", Groups: []string{"/companies/acme/staff"}},
}

// New builds the server: database, verifier, tools, then the listener.
func New(ctx context.Context, cfg Options) (app *App, err error) {
	app = &App{}
	built := app
	defer func() {
		if err != nil {
			built.Close()
			app = nil
		}
	}()
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Addr == "" {
		cfg.Addr = "127.0.0.1:8081"
	}
	if cfg.Companies == 0 {
		cfg.Companies = 3
	}
	if err := app.openDB(ctx, cfg); err != nil {
		return nil, err
	}
	addr := cfg.Addr
	if !cfg.NoListen {
		ln, err := net.Listen("tcp", cfg.Addr)
		if err != nil {
			return nil, err
		}
		app.Listener = ln
		app.closers = append(app.closers, func() error { ln.Close(); return nil })
		addr = ln.Addr().String()
	}
	public := "http://" + addr + "/mcp"
	audience := cfg.Audience
	if audience == "" {
		audience = public
	}
	ccfg := claims.Options{Audience: []string{audience}, Mapping: Mapping, Logger: cfg.Logger}
	if cfg.JWKSURL == "" {
		is, err := devissuer.Start("127.0.0.1:0", audience)
		if err != nil {
			return nil, err
		}
		app.Issuer = is
		app.closers = append(app.closers, is.Close)
		ccfg.Issuer, ccfg.JWKS = is.URL, is.JWKS()
	} else {
		if cfg.Issuer == "" {
			return nil, errors.New("hr: -issuer is required with -jwks-url")
		}
		ccfg.Issuer, ccfg.JWKSURL = cfg.Issuer, cfg.JWKSURL
	}
	v, err := claims.New(ccfg)
	if err != nil {
		return nil, err
	}
	app.Verifier = v
	app.closers = append(app.closers, v.Close)
	waitCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := v.WaitReady(waitCtx); err != nil {
		return nil, err
	}
	red, err := redact.New(Redaction)
	if err != nil {
		return nil, err
	}
	srv, err := server.New(server.Options{
		Name: "tenantmcp-hr", Version: "0.1.0",
		Instructions: "HR tools on the Oracle HR sample schema. Every call sees only the companies of your token.",
		Verifier:     v, DB: app.DB, Redactor: red, Levels: []string{LevelCompany},
		Logger: cfg.Logger, AuditLogger: cfg.AuditLogger,
	})
	if err != nil {
		return nil, err
	}
	if err := Register(srv); err != nil {
		return nil, err
	}
	app.Server = srv
	app.HTTP = server.HTTPOptions{ResourceURL: public, AuthorizationServers: []string{ccfg.Issuer}}
	return app, nil
}

func (app *App) openDB(ctx context.Context, cfg Options) error {
	dsn := cfg.DB
	if dsn == "" {
		dir, err := os.MkdirTemp("", "tenantmcp-hr-")
		if err != nil {
			return err
		}
		app.closers = append(app.closers, func() error { return os.RemoveAll(dir) })
		path := filepath.Join(dir, "hr.db")
		raw, err := sql.Open("sqlite", "file:"+path+"?_pragma=foreign_keys(1)")
		if err != nil {
			return err
		}
		app.Data = Generate(cfg.Companies)
		err = Create(ctx, raw, SQLite, app.Data)
		raw.Close()
		if err != nil {
			return err
		}
		dsn = "sqlite:" + path
	}
	opts := guardedsql.Options{Logger: cfg.Logger}
	if strings.HasPrefix(dsn, "postgres") { // the scope-signing key is PostgreSQL's
		opts.Engine = postgres.Options{Key: cfg.RLSKey}
	}
	db, err := guardedsql.Open(ctx, dsn, Schema, opts)
	if err != nil {
		return fmt.Errorf("hr: opening %s: %w", guardedsql.RedactDSN(dsn), err)
	}
	app.DB = db
	app.closers = append(app.closers, db.Close)
	return nil
}

// Serve serves HTTP on the app's listener until ctx is done.
func (app *App) Serve(ctx context.Context) error {
	if app.Listener == nil {
		return errors.New("hr: built with NoListen: serve stdio instead")
	}
	return app.Server.Serve(ctx, app.Listener, app.HTTP)
}

// Token mints a development token for u (only with the dev issuer).
func (app *App) Token(u DemoUser, ttl time.Duration) (string, error) {
	if app.Issuer == nil {
		return "", errors.New("hr: no development issuer: tokens come from your identity provider")
	}
	return app.Issuer.Mint(devissuer.Token{Subject: u.Subject, Groups: u.Groups, Roles: u.Roles, TTL: ttl})
}

// Close releases everything New acquired, in reverse order.
func (app *App) Close() {
	for i := len(app.closers) - 1; i >= 0; i-- {
		_ = app.closers[i]()
	}
	app.closers = nil
}
