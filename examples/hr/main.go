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
// (package claims/devtoken) and writes ready tokens for three demo users
// (alice: HR of acme, bob: HR of globex, carol: staff of acme) to a file it
// names. Point -jwks-url, -issuer and
// -audience at your identity provider for anything else.
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

	"github.com/tenantmcp/tenantmcp/examples/hr/hr"
	"github.com/tenantmcp/tenantmcp/internal/devserver"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stderr); err != nil && !errors.Is(err, flag.ErrHelp) {
		slog.New(slog.NewTextHandler(os.Stderr, nil)).Error("hr: exiting", "err", err)
		os.Exit(1)
	}
}

// run is the command with its arguments, logging to stderr, serving until
// ctx is done.
func run(ctx context.Context, args []string, stderr io.Writer) error {
	var cfg hr.Options
	var dev devserver.Flags
	fs := flag.NewFlagSet("hr", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dev.Register(fs, "HR", "127.0.0.1:8081", "HR")
	fs.IntVar(&cfg.Companies, "companies", 3, fmt.Sprintf("demo companies (2 to %d)", hr.MaxCompanies))
	if err := fs.Parse(args); err != nil {
		return err
	}
	cfg.Addr, cfg.DB, cfg.JWKSURL, cfg.Issuer, cfg.Audience = dev.Addr, dev.DB, dev.JWKSURL, dev.Issuer, dev.Audience
	cfg.Logger = dev.Logger(stderr)
	cfg.AuditLogger = cfg.Logger.With("log", "audit")
	slog.SetDefault(cfg.Logger) // what logs to the default logger (guardedsql's start-up report) logs in the same format
	var err error
	if cfg.RLSKey, err = dev.Key(); err != nil {
		return err
	}
	if err := dev.Setup(ctx, &cfg.RLSKey, "hr-demo", hr.Demo(hr.Generate(cfg.Companies))); err != nil {
		return err
	}
	app, err := hr.New(ctx, cfg)
	if err != nil {
		return err
	}
	defer app.Close()
	if err := app.Announce(cfg.Logger, "hr", hr.DemoUsers, ""); err != nil {
		return err
	}
	return app.Serve(ctx)
}
