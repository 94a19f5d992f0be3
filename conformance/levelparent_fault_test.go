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
	p16FaultCaught(t, func(dsn string) Target { return chatTarget(dsn, def) }, guardfault.LevelParentCheck, "raw INSERT into attachments under a foreign users")
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
	p16FaultCaught(t, shapeTarget(def, seedShape(ddl, d, []string{"orgs", "projects", "members", "tasks"})), guardfault.UpKeyCheck, "a row its scope does not see (up the hierarchy")
}

// TestCompositeLevelCheckCaught: Citus's shape, every table carrying the
// org and referencing its parent by a composite key ((org_id,
// workspace_id) onto workspaces (org_id, id)). With the WITH CHECK term
// that wants a visible row holding the tuple replaced by the old trust in
// a fully non-NULL key (guardfault.CompositeLevelCheck), property 16 must
// fail: raw SQL as the application role moves an own project, with both
// columns at once, into another org's workspace. With it, P16 passes.
func TestCompositeLevelCheckCaught(t *testing.T) {
	ddl := func(Engine) []string {
		return []string{
			`CREATE TABLE orgs (id INTEGER PRIMARY KEY, name VARCHAR(20) NOT NULL)`,
			`CREATE TABLE workspaces (id INTEGER PRIMARY KEY, org_id INTEGER NOT NULL REFERENCES orgs(id), name VARCHAR(20) NOT NULL, UNIQUE (org_id, id))`,
			`CREATE TABLE projects (id INTEGER PRIMARY KEY, org_id INTEGER NOT NULL, workspace_id INTEGER NOT NULL, name VARCHAR(20) NOT NULL,
				FOREIGN KEY (org_id, workspace_id) REFERENCES workspaces(org_id, id))`,
		}
	}
	d := map[string][]Row{}
	i := func(v int) any { return int64(v) }
	for o := 1; o <= 3; o++ {
		d["orgs"] = append(d["orgs"], Row{"id": i(o), "name": fmt.Sprintf("org%d", o)})
		for k := 0; k < 2; k++ {
			w := 10 + o + 3*k // interleaved across orgs
			d["workspaces"] = append(d["workspaces"], Row{"id": i(w), "org_id": i(o), "name": fmt.Sprintf("w%d", w)})
			for j := 0; j < 2; j++ { // two projects a workspace: P16 runs as a project's member too
				p := 20 + o + 3*k + 6*j
				d["projects"] = append(d["projects"], Row{"id": i(p), "org_id": i(o), "workspace_id": i(w), "name": fmt.Sprintf("p%d", p)})
			}
		}
	}
	def := builder.SchemaDef{
		Levels: []builder.Level{{Name: "org", Key: builder.IntKey}, {Name: "workspace", Key: builder.IntKey}, {Name: "project", Key: builder.IntKey}},
		Tables: []builder.TableDef{
			{Name: "orgs", Columns: []string{"id", "name"}, PrimaryKey: []string{"id"}, Levels: map[string]string{"id": "org"}},
			{Name: "workspaces", Columns: []string{"id", "org_id", "name"}, PrimaryKey: []string{"id"},
				Levels: map[string]string{"id": "workspace", "org_id": "org"}, ForeignKeys: []builder.ForeignKey{{Columns: []string{"org_id"}, RefTable: "orgs"}}},
			{Name: "projects", Columns: []string{"id", "org_id", "workspace_id", "name"}, PrimaryKey: []string{"id"},
				Levels:      map[string]string{"id": "project", "org_id": "org", "workspace_id": "workspace"},
				ForeignKeys: []builder.ForeignKey{{Columns: []string{"org_id", "workspace_id"}, RefTable: "workspaces", RefColumns: []string{"org_id", "id"}}}},
		},
	}
	p16FaultCaught(t, shapeTarget(def, seedShape(ddl, d, []string{"orgs", "workspaces", "projects"})), guardfault.CompositeLevelCheck, "raw UPDATE of own projects")
}

// TestSelfKeyCheckCaught: documents nested under documents (Outline's
// parentDocumentId). With the WITH CHECK term for a key of a table into
// itself removed (guardfault.SelfKeyCheck), property 16 must fail: raw SQL
// as the application role points an own document at another org's. With
// it, P16 passes on the same schema.
func TestSelfKeyCheckCaught(t *testing.T) {
	p16FaultCaught(t, shapeTarget(nestedDocs(""), nestedDocsSeed()), guardfault.SelfKeyCheck, "pointing [parent_id] at docs")
}

// shapeTarget is the Target of def seeded by seed, on a DSN.
func shapeTarget(def builder.SchemaDef, seed func(context.Context, *sql.DB, Engine) (*Dataset, error)) func(dsn string) Target {
	return func(dsn string) Target { return Target{DSN: dsn, Graph: def, Seed: seed} }
}

// p16FaultCaught runs property 16 on the target on each PostgreSQL DSN,
// with fix in place (P16 must pass) and switched off (P16 must fail with a
// message containing want).
func p16FaultCaught(t *testing.T, target func(dsn string) Target, fix guardfault.Fix, want string) {
	t.Helper()
	forEachDSN(t, func(t *testing.T, dsn string) {
		if e, _ := EngineOf(dsn); e != Postgres {
			t.Skipf("%s: only PostgreSQL's row-level security confines raw SQL (property 16 runs there alone); the guard's own checks are tested on every engine elsewhere", e)
		}
		for _, faulty := range []bool{false, true} {
			t.Run(fmt.Sprintf("fault=%v", faulty), func(t *testing.T) {
				if faulty {
					defer guardfault.Disable(fix)()
				}
				tg := target(dsn)
				if tg.Name == "" {
					tg.Name = string(fix)
				}
				out, err := runSome(t, tg, 16)
				if err != nil {
					t.Fatalf("setup: %v", err)
				}
				o := out[16]
				all := strings.Join(o.msgs, "\n")
				switch {
				case o.skip != "":
					t.Fatalf("P16 skipped: %s", o.skip)
				case faulty && (!o.failed || !strings.Contains(all, want)):
					t.Fatalf("fault %s: P16 failed=%v %q; want a failure containing %q", fix, o.failed, o.msgs, want)
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
