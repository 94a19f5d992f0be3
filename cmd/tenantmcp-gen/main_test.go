package main

import (
	"database/sql"
	"flag"
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"os"
	"path/filepath"
	"strings"
	"testing"

	_ "github.com/tenantmcp/tenantmcp/guardedsql" // the sqlite driver
)

var update = flag.Bool("update", false, "rewrite testdata/golden.go.txt")

// scratchDDL is a small catalog with names that need mapping: a keyword
// ("type"), a column colliding with a fixed method ("ref"), a leading
// digit, punctuation, two columns that map to one identifier, and an
// initialism.
var scratchDDL = []string{
	`CREATE TABLE shops (id TEXT PRIMARY KEY, name TEXT NOT NULL)`,
	`CREATE TABLE orders (id INTEGER PRIMARY KEY, shop_id TEXT NOT NULL REFERENCES shops(id), placed_at TEXT NOT NULL,
	  "type" TEXT, ref TEXT, "2fa" TEXT, "a-b" TEXT, a_b TEXT, api_url TEXT)`,
}

func scratchDB(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "gen.db")
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, s := range scratchDDL {
		if _, err := db.Exec(s); err != nil {
			t.Fatal(err)
		}
	}
	return "sqlite:" + path
}

// TestGenerateGoldenAndCompiles runs the command against a scratch SQLite
// database, compares its output with the golden file, and type-checks it
// together with tool code that uses it: the accessors compile, build a
// statement that Build accepts against a schema of the same catalog, and a
// misspelt column is a type error.
func TestGenerateGoldenAndCompiles(t *testing.T) {
	dsn := scratchDB(t)
	out := filepath.Join(t.TempDir(), "tables_gen.go")
	if err := run([]string{"-dsn", dsn, "-pkg", "shop", "-out", out}); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	golden := filepath.Join("testdata", "golden.go.txt")
	if *update {
		if err := os.WriteFile(golden, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(want) {
		t.Fatalf("output differs from %s (run with -update after checking it):\n%s", golden, got)
	}
	// Deterministic: a second run writes the same bytes.
	if err := run([]string{"-dsn", dsn, "-pkg", "shop", "-out", out}); err != nil {
		t.Fatal(err)
	}
	if again, _ := os.ReadFile(out); string(again) != string(got) {
		t.Fatal("a second run produced different output")
	}

	use := `package shop

import "github.com/tenantmcp/tenantmcp/builder"

func use(s *builder.Schema) (builder.Query, error) {
	o := NewOrdersTable(s, "o")
	sh := NewShopsTable(s, "")
	return builder.Select(o.ID(), o.Type(), o.RefCol(), o.C2fa(), o.AB(), o.ABCol(), o.APIURL(), sh.Name()).
		From(o.Ref()).Join(sh.Ref(), o.ShopID().EqCol(sh.ID())).
		Where(o.PlacedAt().Ge("2030-01-01")).Build()
}
`
	if err := typeCheck(t, string(got), use); err != nil {
		t.Fatalf("generated code with its use does not type-check: %v", err)
	}
	misspelt := strings.Replace(use, "o.PlacedAt()", "o.PlaceAt()", 1)
	err = typeCheck(t, string(got), misspelt)
	if err == nil || !strings.Contains(err.Error(), "PlaceAt") {
		t.Fatalf("a misspelt column type-checked: %v", err)
	}

}

// typeCheck type-checks the generated file and a file using it as one
// package, importing builder from source.
func typeCheck(t *testing.T, files ...string) error {
	t.Helper()
	fset := token.NewFileSet()
	var parsed []*ast.File
	for i, src := range files {
		f, err := parser.ParseFile(fset, filepath.Join("shop", string(rune('a'+i))+".go"), src, 0)
		if err != nil {
			return err
		}
		parsed = append(parsed, f)
	}
	conf := types.Config{Importer: importer.ForCompiler(fset, "source", nil)}
	_, err := conf.Check("example.com/shop", fset, parsed, nil)
	return err
}

// TestRunErrors: the command fails with a clear error, and never echoes a
// DSN's password.
func TestRunErrors(t *testing.T) {
	t.Setenv("TENANTMCP_GEN_DSN", "")
	t.Setenv("GOPACKAGE", "")
	if err := run(nil); err == nil || !strings.Contains(err.Error(), "-dsn") {
		t.Fatalf("no DSN: %v", err)
	}
	if err := run([]string{"-dsn", scratchDB(t)}); err == nil || !strings.Contains(err.Error(), "package name") {
		t.Fatalf("no package: %v", err)
	}
	if err := run([]string{"-dsn", scratchDB(t), "-pkg", "x", "-tables", "nope"}); err == nil || !strings.Contains(err.Error(), `"nope"`) {
		t.Fatalf("unknown table: %v", err)
	}
	err := run([]string{"-dsn", "postgres://u:hunter2secret@127.0.0.1:1/db?connect_timeout=1", "-pkg", "x", "-timeout", "2s"})
	if err == nil || strings.Contains(err.Error(), "hunter2secret") {
		t.Fatalf("unreachable database: %v", err)
	}
}
