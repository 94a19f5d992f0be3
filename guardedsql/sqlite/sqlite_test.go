package sqlite_test

import (
	"context"
	"database/sql"
	"errors"
	"slices"
	"testing"

	"github.com/tenantmcp/tenantmcp/builder"
	"github.com/tenantmcp/tenantmcp/guardedsql"
	"github.com/tenantmcp/tenantmcp/guardedsql/sqlite"
	"github.com/tenantmcp/tenantmcp/scope"
	"github.com/tenantmcp/tenantmcp/scope/scopetest"
)

var def = builder.SchemaDef{
	Levels: []builder.Level{{Name: "org", Key: builder.TextKey}},
	Tables: []builder.TableDef{{Name: "notes", Columns: []string{"id", "org_id", "body"},
		PrimaryKey: []string{"id"}, Levels: map[string]string{"org_id": "org"}}},
}

func orgCtx(org string) context.Context {
	return scopetest.NewContext(context.Background(),
		scopetest.New("tester", []scope.Grant{{Level: "org", ID: org}}))
}

// TestNewGuardsCallersDB: importing the package registers the "sqlite"
// driver; New guards a *sql.DB opened with it, and Open accepts SQLite
// DSNs. Both see only the caller's tenant's rows of an interleaved seed,
// compared with the rows a plain query of the same database finds for
// that tenant.
func TestNewGuardsCallersDB(t *testing.T) {
	ctx := context.Background()
	path := t.TempDir() + "/notes.db"
	raw, err := sql.Open("sqlite", "file:"+path+"?_pragma=foreign_keys(1)")
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	if _, err := raw.ExecContext(ctx, `CREATE TABLE notes (id INTEGER PRIMARY KEY, org_id TEXT NOT NULL, body TEXT)`); err != nil {
		t.Fatal(err)
	}
	orgs := []string{"a", "b", "c"}
	for id := 1; id <= 30; id++ { // interleaved: 1 a, 2 b, 3 c, 4 a, ...
		if _, err := raw.ExecContext(ctx, `INSERT INTO notes VALUES (?, ?, ?)`, id, orgs[id%3], "n"); err != nil {
			t.Fatal(err)
		}
	}
	sch := builder.MustSchema(def)
	byNew, err := sqlite.New(ctx, raw, sch, guardedsql.Options{})
	if err != nil {
		t.Fatal(err)
	}
	byOpen, err := guardedsql.Open(ctx, "sqlite:"+path, sch, guardedsql.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer byOpen.Close()
	n := sch.Table("notes")
	q := builder.Must(builder.Select(n.Col("id")).From(n).Build())
	for _, org := range orgs {
		var want []int64
		rows, err := raw.QueryContext(ctx, `SELECT id FROM notes WHERE org_id = ? ORDER BY id`, org)
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var id int64
			if err := rows.Scan(&id); err != nil {
				t.Fatal(err)
			}
			want = append(want, id)
		}
		rows.Close()
		if len(want) != 10 {
			t.Fatalf("seed: org %s has %d rows, want 10", org, len(want))
		}
		for name, db := range map[string]*guardedsql.DB{"New": byNew, "Open": byOpen} {
			got, err := guardedsql.All(orgCtx(org), db, q, guardedsql.Scalar[int64])
			if err != nil {
				t.Fatal(err)
			}
			slices.Sort(got)
			if !slices.Equal(got, want) {
				t.Errorf("%s, org %s: ids %v, want %v", name, org, got, want)
			}
		}
	}
	if _, err := guardedsql.All(context.Background(), byNew, q, guardedsql.Scalar[int64]); !errors.Is(err, guardedsql.ErrNoScope) {
		t.Errorf("no scope: %v, want ErrNoScope", err)
	}
}
