package hr

import (
	"context"
	"database/sql"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/tenantmcp/tenantmcp/guardedsql"
	"github.com/tenantmcp/tenantmcp/internal/tablegen"
)

var update = flag.Bool("update", false, "rewrite tables_gen.go (go generate)")

// TestTablesGenCurrent regenerates the typed table accessors from a fresh
// SQLite database made by DDL(SQLite), as tenantmcp-gen would, and fails if
// tables_gen.go differs: a migration that adds or renames a column must
// regenerate them (go generate ./examples/hr/hr).
func TestTablesGenCurrent(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "gen.db")
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=foreign_keys(1)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := Create(ctx, db, SQLite, &Data{}); err != nil {
		t.Fatal(err)
	}
	dsn := "sqlite:" + path
	cat, err := guardedsql.IntrospectCatalog(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	want, err := tablegen.Generate(tablegen.Options{Package: "hr", Source: tablegen.SourceFor(dsn)}, cat)
	if err != nil {
		t.Fatal(err)
	}
	if *update {
		if err := os.WriteFile("tables_gen.go", want, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile("tables_gen.go")
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(want) {
		t.Fatalf("tables_gen.go is stale: run go generate ./examples/hr/hr")
	}
}
