// Command tenantmcp-gen writes typed Go accessors for the tables of a
// live database: one type per table with a method per column returning a
// builder.Expr, and a constructor from a *builder.Schema and an alias, so
// that tool code naming a misspelt column does not compile.
//
//	go run github.com/tenantmcp/tenantmcp/cmd/tenantmcp-gen -dsn sqlite:app.db -pkg app -out tables_gen.go
//
// or, in a file of the package:
//
//	//go:generate go run github.com/tenantmcp/tenantmcp/cmd/tenantmcp-gen -dsn sqlite:app.db -out tables_gen.go
//
// The DSN is any that guardedsql.Open accepts (sqlite:PATH, postgres://…,
// mysql://…); it is read only (the catalog: tables, columns). With no -dsn
// the environment variable TENANTMCP_GEN_DSN is used, which keeps a
// password off the command line. -pkg defaults to $GOPACKAGE, which go
// generate sets. The output is deterministic and gofmt'ed and starts with
// the "Code generated … DO NOT EDIT." header; regenerate it after every
// migration (a test that regenerates into memory and compares catches a
// stale file, as the hotel example's does).
//
// The accessors only name tables and columns; the tenancy (levels, scope
// paths, global tables) stays in the builder.Schema they are given.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/tenantmcp/tenantmcp/guardedsql"
	"github.com/tenantmcp/tenantmcp/internal/tablegen"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "tenantmcp-gen:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("tenantmcp-gen", flag.ContinueOnError)
	dsn := fs.String("dsn", os.Getenv("TENANTMCP_GEN_DSN"), "database to read the catalog of (default $TENANTMCP_GEN_DSN)")
	pkg := fs.String("pkg", os.Getenv("GOPACKAGE"), "package name of the generated file (default $GOPACKAGE)")
	out := fs.String("out", "", "file to write (default: standard output)")
	tables := fs.String("tables", "", "comma-separated tables to generate (default: all)")
	timeout := fs.Duration("timeout", 30*time.Second, "bound on reading the catalog")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if *dsn == "" {
		return fmt.Errorf("no database: give -dsn or set TENANTMCP_GEN_DSN")
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	cat, err := guardedsql.IntrospectCatalog(ctx, *dsn)
	if err != nil {
		return err
	}
	opts := tablegen.Options{Package: *pkg, Source: tablegen.SourceFor(*dsn)}
	if *tables != "" {
		opts.Tables = strings.Split(*tables, ",")
	}
	src, err := tablegen.Generate(opts, cat)
	if err != nil {
		return err
	}
	if *out == "" {
		_, err = os.Stdout.Write(src)
		return err
	}
	return os.WriteFile(*out, src, 0o644)
}
