// Command minimal is the smallest tenantmcp server on PostgreSQL: one
// schema, one guarded pool opened by DSN, a token verifier, a server with
// no tools serving one client over stdin/stdout. It
// exists to be measured: it imports package server and the one engine it
// uses, guardedsql/postgres, so its binary links pgx but neither SQLite,
// the MySQL driver nor the eBPF egress guard (TestMinimalLinksOneEngine
// in this directory asserts it; docs/engines.md#binary-size gives its
// size).
//
//	TENANTMCP_DSN=postgres://app@localhost/db TENANTMCP_RLS_KEY=id:hex go run ./examples/minimal
//
// Tokens: with TENANTMCP_JWKS_URL unset, a development issuer (package
// claims/devtoken: loopback only, and it logs that it is for development)
// runs in the process, and the stdio client acts as a member of the org
// TENANTMCP_DEV_ORG (default "demo"). With TENANTMCP_JWKS_URL set, the
// verifier trusts that identity provider (TENANTMCP_ISSUER,
// TENANTMCP_AUDIENCE) and the client's token is $TENANTMCP_TOKEN. Groups
// map to orgs as org:{org}.
package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/tenantmcp/tenantmcp/builder"
	"github.com/tenantmcp/tenantmcp/claims"
	"github.com/tenantmcp/tenantmcp/claims/devtoken"
	"github.com/tenantmcp/tenantmcp/guardedsql"
	"github.com/tenantmcp/tenantmcp/guardedsql/postgres"
	"github.com/tenantmcp/tenantmcp/server"
)

var schema = builder.MustSchema(builder.SchemaDef{
	Levels: []builder.Level{{Name: "org", Key: builder.TextKey}},
	Tables: []builder.TableDef{{Name: "notes", Columns: []string{"id", "org_id", "body"},
		PrimaryKey: []string{"id"}, Levels: map[string]string{"org_id": "org"}}},
})

func main() {
	if err := run(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, "minimal:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context) error {
	key, err := postgres.ParseKey(os.Getenv("TENANTMCP_RLS_KEY"))
	if err != nil {
		return err
	}
	db, err := guardedsql.Open(ctx, os.Getenv("TENANTMCP_DSN"), schema, guardedsql.Options{Engine: postgres.Options{Key: key}})
	if err != nil {
		return err
	}
	defer db.Close()
	v, token, err := verifier(ctx)
	if err != nil {
		return err
	}
	defer v.Close()
	srv, err := server.New(server.Options{Name: "minimal", DB: db, Verifier: v})
	if err != nil {
		return err
	}
	return srv.RunStdio(ctx, token)
}

var mapping = claims.Mapping{Patterns: []string{"org:{org}"}}

// verifier returns the token verifier and the stdio client's token source
// (see the command's doc).
func verifier(ctx context.Context) (*claims.Verifier, server.TokenSource, error) {
	opts := claims.Options{Issuer: os.Getenv("TENANTMCP_ISSUER"), Audience: []string{os.Getenv("TENANTMCP_AUDIENCE")},
		JWKSURL: os.Getenv("TENANTMCP_JWKS_URL"), Mapping: mapping}
	token := server.TokenFromEnv("TENANTMCP_TOKEN")
	if opts.JWKSURL == "" {
		dev, err := devtoken.Start(devtoken.Options{Audience: "urn:tenantmcp:minimal"})
		if err != nil {
			return nil, nil, err
		}
		org := os.Getenv("TENANTMCP_DEV_ORG")
		if org == "" {
			org = "demo"
		}
		tok, err := dev.Mint(devtoken.Token{Subject: "dev", Groups: []string{"org:" + org}, TTL: 12 * time.Hour})
		if err != nil {
			return nil, nil, err
		}
		opts = dev.ClaimsOptions(mapping)
		token = func(context.Context) (string, error) { return tok, nil }
	}
	v, err := claims.New(opts)
	if err != nil {
		return nil, nil, err
	}
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := v.WaitReady(wctx); err != nil {
		v.Close()
		return nil, nil, err
	}
	return v, token, nil
}
