package main

import (
	"context"
	"errors"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/tenantmcp/tenantmcp/builder"
	"github.com/tenantmcp/tenantmcp/guardedsql"
)

// Module paths of what an engine, the egress guard or the telemetry
// adapter links.
const (
	pgx        = "github.com/jackc/pgx/v5"
	sqliteDrv  = "modernc.org/sqlite"
	mysqlDrv   = "github.com/go-sql-driver/mysql"
	egressPkg  = "github.com/tenantmcp/tenantmcp/egress"
	ebpf       = "github.com/cilium/ebpf"
	otelPkg    = "go.opentelemetry.io/otel" // the API as well as the SDK
	prometheus = "github.com/prometheus"
	tenantmcp  = "github.com/tenantmcp/tenantmcp/"
	minimalPkg = tenantmcp + "examples/minimal"
)

// deps lists the packages pkg links (go list -deps), for the test's own
// platform.
func deps(t *testing.T, pkg string) []string {
	t.Helper()
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command on PATH:", err)
	}
	out, err := exec.Command(gobin, "list", "-deps", pkg).Output()
	if err != nil {
		t.Fatalf("go list -deps %s: %v", pkg, err)
	}
	return strings.Fields(string(out))
}

func links(ds []string, module string) bool {
	return slices.ContainsFunc(ds, func(d string) bool { return d == module || strings.HasPrefix(d, module+"/") })
}

// TestMinimalLinksOneEngine: a program importing package server and one
// engine package links that engine's driver and no other, nor the egress
// guard, nor OpenTelemetry or Prometheus; package server and package
// guardedsql link none at all; each engine package links exactly its own
// driver, and server/otelserver the telemetry.
func TestMinimalLinksOneEngine(t *testing.T) {
	all := []string{pgx, sqliteDrv, mysqlDrv, egressPkg, ebpf, otelPkg, prometheus}
	for _, tc := range []struct {
		pkg  string
		want []string // of all, the ones it must link
	}{
		{minimalPkg, []string{pgx}},
		{tenantmcp + "server", nil},
		{tenantmcp + "guardedsql", nil},
		{tenantmcp + "guardedsql/postgres", []string{pgx}},
		{tenantmcp + "guardedsql/mysql", []string{mysqlDrv}},
		{tenantmcp + "guardedsql/sqlite", []string{sqliteDrv}},
		{tenantmcp + "egress", []string{egressPkg, ebpf}},
		{tenantmcp + "server/otelserver", []string{otelPkg, prometheus}},
	} {
		ds := deps(t, tc.pkg)
		if !slices.Contains(ds, tc.pkg) {
			t.Fatalf("go list -deps %s does not list the package itself: %d lines", tc.pkg, len(ds))
		}
		for _, m := range all {
			if got, want := links(ds, m), slices.Contains(tc.want, m); got != want {
				t.Errorf("%s links %s: %v, want %v", tc.pkg, m, got, want)
			}
		}
	}
}

// TestOpenUnlinkedEngine: this program links only the PostgreSQL engine,
// so Open refuses SQLite and MySQL DSNs with ErrNoEngine, naming the
// package to import, before touching any file or network.
func TestOpenUnlinkedEngine(t *testing.T) {
	ctx := context.Background()
	for dsn, pkg := range map[string]string{
		"sqlite::memory:":                      "guardedsql/sqlite",
		"sqlite:" + t.TempDir() + "/x.db":      "guardedsql/sqlite",
		"file:" + t.TempDir() + "/y.db":        "guardedsql/sqlite",
		"mysql://u:secret@tcp(127.0.0.1:1)/db": "guardedsql/mysql",
	} {
		db, err := guardedsql.Open(ctx, dsn, schema, guardedsql.Options{})
		if db != nil || !errors.Is(err, guardedsql.ErrNoEngine) || !errors.Is(err, guardedsql.ErrInvalid) {
			t.Errorf("Open(%s): DB %v, error %v; want ErrNoEngine", guardedsql.RedactDSN(dsn), db != nil, err)
			continue
		}
		if !strings.Contains(err.Error(), pkg) || strings.Contains(err.Error(), "secret") {
			t.Errorf("Open(%s): %q should name %s and no password", guardedsql.RedactDSN(dsn), err, pkg)
		}
		if _, err := guardedsql.Introspect(ctx, dsn, builder.Tenancy{Levels: []builder.Level{{Name: "org", Key: builder.TextKey}}}); !errors.Is(err, guardedsql.ErrNoEngine) {
			t.Errorf("Introspect(%s): %v, want ErrNoEngine", guardedsql.RedactDSN(dsn), err)
		}
	}
}
