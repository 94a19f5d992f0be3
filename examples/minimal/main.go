// Command minimal is the smallest tenantmcp server on PostgreSQL: one
// schema, one guarded pool opened by DSN, a server with no tools. It
// exists to be measured: it imports package server and the one engine it
// uses, guardedsql/postgres, so its binary links pgx but neither SQLite,
// the MySQL driver nor the eBPF egress guard (TestMinimalLinksOneEngine
// in this directory asserts it; the README's Packaging section gives its
// size).
//
//	TENANTMCP_DSN=postgres://app@localhost/db TENANTMCP_RLS_KEY=id:hex go run ./examples/minimal
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/tenantmcp/tenantmcp/builder"
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
	srv, err := server.New(server.Options{Name: "minimal", DB: db})
	if err != nil {
		return err
	}
	return srv.RunStdio(ctx, nil)
}
