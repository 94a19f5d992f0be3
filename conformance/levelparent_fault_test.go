//go:build tenantmcp_faults

package conformance

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"testing"

	"github.com/tenantmcp/tenantmcp/builder"
	"github.com/tenantmcp/tenantmcp/internal/guardfault"
)

// TestLevelParentCheckCaught: a table with a level column of its own and
// a scope parent that does not carry it (chat's attachments: realm_id, and
// Parent owner_id). A row is in scope by its realm_id, so row-level
// security's USING never looks at the owner; WITH CHECK must, or raw SQL
// as the application role files a realm's attachment under another realm's
// user. With that check removed from the generated policies
// (guardfault.LevelParentCheck) property 16 must fail on exactly that
// insert; with it, property 16 passes on the same declaration.
func TestLevelParentCheckCaught(t *testing.T) {
	def := chatEdit("attachments", func(td *builder.TableDef) { td.Parent = "owner_id" })
	forEachDSN(t, func(t *testing.T, dsn string) {
		if e, _ := EngineOf(dsn); e != Postgres {
			t.Skipf("%s: only PostgreSQL's row-level security confines raw SQL (property 16 runs there alone); the guard's own parent check is TestChatCorrect's", e)
		}
		for _, faulty := range []bool{false, true} {
			name := "fixed"
			if faulty {
				name = string(guardfault.LevelParentCheck) + "_off"
			}
			t.Run(name, func(t *testing.T) {
				if faulty {
					defer guardfault.Disable(guardfault.LevelParentCheck)()
				}
				out, err := runSome(t, chatTarget(dsn, def), 16)
				if err != nil {
					t.Fatalf("setup: %v", err)
				}
				o := out[16]
				if o.skip != "" {
					t.Fatalf("P16 skipped: %s", o.skip)
				}
				const want = "raw INSERT into attachments under a foreign users"
				all := strings.Join(o.msgs, "\n")
				switch {
				case faulty && (!o.failed || !strings.Contains(all, want)):
					t.Fatalf("fault %s: P16 failed=%v %q; want a failure containing %q", guardfault.LevelParentCheck, o.failed, o.msgs, want)
				case !faulty && o.failed:
					t.Fatalf("P16 failed on the correct policies: %q", o.msgs)
				}
				if faulty {
					t.Logf("caught: %s", o.msgs[0])
				}
			})
		}
	})
}

// TestUpKeyCheckCaught: a project's task and its org-level assignee, a key
// up the hierarchy. With the WITH CHECK term for such keys removed from
// the generated policies (guardfault.UpKeyCheck), property 16 must fail:
// raw SQL as the application role points an own task at an assignee its
// scope does not see. With it, property 16 passes on the same schema.
func TestUpKeyCheckCaught(t *testing.T) {
	ddl := func(Engine) []string {
		return []string{
			`CREATE TABLE orgs (id INTEGER PRIMARY KEY, name VARCHAR(20) NOT NULL)`,
			`CREATE TABLE projects (id INTEGER PRIMARY KEY, org_id INTEGER NOT NULL REFERENCES orgs(id), name VARCHAR(20) NOT NULL)`,
			`CREATE TABLE members (id INTEGER PRIMARY KEY, org_id INTEGER NOT NULL REFERENCES orgs(id), name VARCHAR(20) NOT NULL)`,
			`CREATE TABLE tasks (id INTEGER PRIMARY KEY, project_id INTEGER NOT NULL REFERENCES projects(id), assignee_id INTEGER NULL REFERENCES members(id), title VARCHAR(20) NOT NULL)`,
		}
	}
	d := map[string][]Row{}
	i := func(v int) any { return int64(v) }
	for o := 1; o <= 3; o++ {
		d["orgs"] = append(d["orgs"], Row{"id": i(o), "name": fmt.Sprintf("org%d", o)})
		for k := 0; k < 2; k++ {
			p, m := 10+o+3*k, 20+o+3*k // interleaved across orgs
			d["projects"] = append(d["projects"], Row{"id": i(p), "org_id": i(o), "name": fmt.Sprintf("p%d", p)})
			d["members"] = append(d["members"], Row{"id": i(m), "org_id": i(o), "name": fmt.Sprintf("m%d", m)})
			d["tasks"] = append(d["tasks"], Row{"id": i(30 + o + 3*k), "project_id": i(p), "assignee_id": i(m), "title": fmt.Sprintf("t%d", p)})
		}
	}
	fk := func(col, ref string) builder.ForeignKey {
		return builder.ForeignKey{Columns: []string{col}, RefTable: ref}
	}
	def := builder.SchemaDef{
		Levels: []builder.Level{{Name: "org", Key: builder.IntKey}, {Name: "project", Key: builder.IntKey}},
		Tables: []builder.TableDef{
			{Name: "orgs", Columns: []string{"id", "name"}, PrimaryKey: []string{"id"}, Levels: map[string]string{"id": "org"}},
			{Name: "projects", Columns: []string{"id", "org_id", "name"}, PrimaryKey: []string{"id"},
				Levels: map[string]string{"org_id": "org", "id": "project"}, ForeignKeys: []builder.ForeignKey{fk("org_id", "orgs")}},
			{Name: "members", Columns: []string{"id", "org_id", "name"}, PrimaryKey: []string{"id"},
				Levels: map[string]string{"org_id": "org"}, ForeignKeys: []builder.ForeignKey{fk("org_id", "orgs")}},
			{Name: "tasks", Columns: []string{"id", "project_id", "assignee_id", "title"}, PrimaryKey: []string{"id"}, Parent: "project_id",
				ForeignKeys: []builder.ForeignKey{fk("project_id", "projects"), fk("assignee_id", "members")}},
		},
	}
	seed := seedShape(ddl, d, []string{"orgs", "projects", "members", "tasks"})
	forEachDSN(t, func(t *testing.T, dsn string) {
		if e, _ := EngineOf(dsn); e != Postgres {
			t.Skipf("%s: only PostgreSQL's row-level security confines raw SQL (property 16 runs there alone)", e)
		}
		for _, faulty := range []bool{false, true} {
			t.Run(fmt.Sprintf("fault=%v", faulty), func(t *testing.T) {
				if faulty {
					defer guardfault.Disable(guardfault.UpKeyCheck)()
				}
				tg := Target{Name: "tasks", DSN: dsn, Graph: def, Seed: func(ctx context.Context, db *sql.DB, e Engine) (*Dataset, error) { return seed(ctx, db, e) }}
				out, err := runSome(t, tg, 16)
				if err != nil {
					t.Fatalf("setup: %v", err)
				}
				o := out[16]
				all := strings.Join(o.msgs, "\n")
				switch {
				case o.skip != "":
					t.Fatalf("P16 skipped: %s", o.skip)
				case faulty && (!o.failed || !strings.Contains(all, "a row up the hierarchy its scope does not see")):
					t.Fatalf("fault %s: P16 failed=%v %q", guardfault.UpKeyCheck, o.failed, o.msgs)
				case !faulty && o.failed:
					t.Fatalf("P16 failed on the correct policies: %q", o.msgs)
				}
			})
		}
	})
}
