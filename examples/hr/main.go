// Command hr is tenantmcp's second example: HR tools on the Oracle HR
// sample schema (regions, countries, locations, departments, jobs,
// employees, job_history), made multi-tenant by company, where every call
// sees only the companies of the caller's token.
//
//	go run ./examples/hr                     # embedded SQLite + dev issuer on loopback
//	go run ./examples/hr -db postgres://hr_app@127.0.0.1/hrdemo \
//	    -setup-demo postgres://postgres@127.0.0.1/hrdemo     # PostgreSQL with RLS
//	go run ./examples/hr -db 'mysql://root@tcp(127.0.0.1:3306)/hrdemo' \
//	    -setup-demo 'mysql://root@tcp(127.0.0.1:3306)/hrdemo' # MariaDB/MySQL
//
// With no -jwks-url it starts a DEVELOPMENT-ONLY token issuer on loopback
// and prints ready tokens for three demo users (alice: HR of acme, bob:
// HR of globex, carol: staff of acme). Point -jwks-url, -issuer and
// -audience at your identity provider for anything else.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/tenantmcp/tenantmcp/examples/hr/hr"
	"github.com/tenantmcp/tenantmcp/guardedsql/postgres"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "hr:", err)
		os.Exit(1)
	}
}

// run is the command with its arguments, printing to stderr, serving until
// ctx is done.
func run(ctx context.Context, args []string, stderr io.Writer) error {
	var cfg hr.Options
	fs := flag.NewFlagSet("hr", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&cfg.Addr, "addr", "127.0.0.1:8081", "listen address for streamable HTTP")
	fs.StringVar(&cfg.DB, "db", os.Getenv("HR_DB"), "database DSN: sqlite:PATH, postgres://…, mysql://… (default: fresh embedded SQLite with demo data)")
	fs.StringVar(&cfg.JWKSURL, "jwks-url", "", "identity provider JWKS URL (default: development issuer on loopback)")
	fs.StringVar(&cfg.Issuer, "issuer", "", "expected token issuer (with -jwks-url)")
	fs.StringVar(&cfg.Audience, "audience", "", "expected token audience (default: the endpoint URL)")
	fs.IntVar(&cfg.Companies, "companies", 3, fmt.Sprintf("demo companies (2 to %d)", hr.MaxCompanies))
	rlsKey := fs.String("rls-key-file", "", "PostgreSQL: file holding the scope-signing key as <id>:<hex secret>; with -setup-demo and no file, an ephemeral key is generated for this run")
	setupDemo := fs.String("setup-demo", "", "before serving, (re)create the HR tables and demo data in this database as its administrator (postgres:// or mysql:// DSN; on PostgreSQL also install row-level security and grant -db's user); DESTROYS the HR tables there")
	if err := fs.Parse(args); err != nil {
		return err
	}
	logger := slog.New(slog.NewTextHandler(stderr, nil))
	cfg.Logger, cfg.AuditLogger = logger, logger.With("log", "audit")
	if *rlsKey != "" {
		text, err := os.ReadFile(*rlsKey)
		if err != nil {
			return err
		}
		if cfg.RLSKey, err = postgres.ParseKey(strings.TrimSpace(string(text))); err != nil {
			return fmt.Errorf("-rls-key-file: %w", err)
		}
	}
	if *setupDemo != "" {
		if cfg.DB == "" {
			return fmt.Errorf("-setup-demo needs -db: the application's own connection")
		}
		if cfg.RLSKey.ID == "" {
			k, err := postgres.NewKey("hr-demo")
			if err != nil {
				return err
			}
			cfg.RLSKey = k
		}
		if err := hr.SetupDemo(ctx, *setupDemo, userOf(cfg.DB), cfg.RLSKey, hr.Generate(cfg.Companies)); err != nil {
			return fmt.Errorf("setting up the demo database: %w", err)
		}
	}
	app, err := hr.New(ctx, cfg)
	if err != nil {
		return err
	}
	defer app.Close()
	fmt.Fprintf(stderr, "MCP endpoint: %s\n", app.HTTP.ResourceURL)
	if app.Issuer != nil {
		fmt.Fprintln(stderr, "DEVELOPMENT issuer on loopback; demo tokens (12 h):")
		for _, u := range hr.DemoUsers {
			tok, err := app.Token(u, 12*time.Hour)
			if err != nil {
				return err
			}
			fmt.Fprintf(stderr, "%s (%s):\n  export TOKEN_%s=%s\n", u.Subject, u.Description, u.Subject, tok)
		}
	}
	return app.Serve(ctx)
}

// userOf is the user of a postgres:// DSN: the application role SetupDemo
// grants.
func userOf(dsn string) string {
	u, err := url.Parse(dsn)
	if err != nil || u.User == nil {
		return ""
	}
	return u.User.Username()
}
