// Command adanalytics serves the ad-analytics tools of package adanalytics
// over streamable HTTP, with tokens from your identity provider. Every
// call sees only the companies of the caller's token; a caller of several
// companies narrows get_campaign and update_campaign to one of them with
// "within" ("company:4").
//
//	go run ./cmd/adanalytics -jwks-url https://idp.example/jwks -issuer https://idp.example/ \
//	    -audience http://127.0.0.1:8090/mcp            # fresh embedded SQLite with demo data
//	go run ./cmd/adanalytics -db 'mysql://app@tcp(127.0.0.1:3306)/ads' -jwks-url …  # your database
//
// Group claims of the form /companies/<id> grant a company.
package main

import (
	"context"
	"database/sql"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"example.com/adanalytics/adanalytics"
	"github.com/tenantmcp/tenantmcp/claims"
	"github.com/tenantmcp/tenantmcp/guardedsql"
	"github.com/tenantmcp/tenantmcp/redact"
	"github.com/tenantmcp/tenantmcp/server"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "adanalytics:", err)
		os.Exit(1)
	}
}

func run() error {
	addr := flag.String("addr", "127.0.0.1:8090", "listen address for streamable HTTP")
	dsn := flag.String("db", "", "database DSN: sqlite:PATH, postgres://…, mysql://… (default: a fresh embedded SQLite database with four demo companies)")
	jwksURL := flag.String("jwks-url", "", "identity provider JWKS URL (required)")
	issuer := flag.String("issuer", "", "expected token issuer (required)")
	audience := flag.String("audience", "", "expected token audience (default: the endpoint URL)")
	flag.Parse()
	if *jwksURL == "" || *issuer == "" {
		return errors.New("-jwks-url and -issuer are required: scope comes only from verified tokens")
	}
	endpoint := "http://" + *addr + "/mcp"
	if *audience == "" {
		*audience = endpoint
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	if *dsn == "" {
		path := filepath.Join(os.TempDir(), fmt.Sprintf("adanalytics-%d.db", os.Getpid()))
		defer os.Remove(path)
		if err := seed(ctx, path); err != nil {
			return err
		}
		*dsn = "sqlite:" + path
	}
	db, err := guardedsql.Open(ctx, *dsn, adanalytics.Schema, guardedsql.Options{})
	if err != nil {
		return err
	}
	defer db.Close()
	verifier, err := claims.New(claims.Options{Issuer: *issuer, Audience: []string{*audience}, JWKSURL: *jwksURL,
		Mapping: claims.Mapping{Patterns: []string{"/companies/{company}"}, Levels: []string{adanalytics.LevelCompany}}})
	if err != nil {
		return err
	}
	red, err := redact.New(adanalytics.Redaction)
	if err != nil {
		return err
	}
	srv, err := server.New(server.Options{Name: "adanalytics", Version: "example", DB: db, Redactor: red,
		Verifier: verifier, Levels: []string{adanalytics.LevelCompany}, Logger: slog.Default()})
	if err != nil {
		return err
	}
	if err := adanalytics.Register(srv); err != nil {
		return err
	}
	slog.Info("serving", "endpoint", endpoint)
	return srv.ListenAndServe(ctx, *addr, server.HTTPOptions{ResourceURL: endpoint})
}

// seed creates the tables and four demo companies in a new SQLite file
// (the "sqlite" driver is the one guardedsql/sqlite registers).
func seed(ctx context.Context, path string) error {
	owner, err := sql.Open("sqlite", path)
	if err != nil {
		return err
	}
	defer owner.Close()
	if err := adanalytics.CreateTables(ctx, owner, "sqlite"); err != nil {
		return err
	}
	return adanalytics.Insert(ctx, owner, "sqlite", adanalytics.Generate(4, "demo"))
}
