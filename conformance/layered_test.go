package conformance

// Formbricks' shape, from a new-user probe: the second level sits below a
// table that carries only the first (organization → project →
// environment → survey, levels organization and environment). On
// PostgreSQL an environment grant does not see its project (row-level
// security shows projects to organization grants), so a scope uniting one
// organization with another organization's environment lost that
// environment's surveys: the guard joined the project, which the engine
// hid, to test the organization beside the environment.

import (
	"fmt"
	"testing"

	"github.com/tenantmcp/tenantmcp/builder"
)

func layeredTarget(dsn string) Target {
	ddl := func(Engine) []string {
		return []string{
			`CREATE TABLE organizations (id INTEGER PRIMARY KEY, name VARCHAR(40) NOT NULL)`,
			`CREATE TABLE projects (id INTEGER PRIMARY KEY, organization_id INTEGER NOT NULL REFERENCES organizations(id), name VARCHAR(40) NOT NULL)`,
			`CREATE TABLE environments (id INTEGER PRIMARY KEY, project_id INTEGER NOT NULL REFERENCES projects(id), kind VARCHAR(20) NOT NULL)`,
			`CREATE TABLE surveys (id INTEGER PRIMARY KEY, environment_id INTEGER NOT NULL REFERENCES environments(id), title VARCHAR(60) NOT NULL)`,
		}
	}
	d := map[string][]Row{}
	for o := int64(1); o <= 3; o++ { // organization o holds project o, environments o and o+3, surveys o, o+3
		d["organizations"] = append(d["organizations"], Row{"id": o, "name": fmt.Sprintf("org %d", o)})
		d["projects"] = append(d["projects"], Row{"id": o, "organization_id": o, "name": fmt.Sprintf("project of org %d", o)})
		for k, kind := range []string{"production", "development"} {
			e := o + 3*int64(k)
			d["environments"] = append(d["environments"], Row{"id": e, "project_id": o, "kind": kind})
			d["surveys"] = append(d["surveys"], Row{"id": e, "environment_id": e, "title": fmt.Sprintf("survey of org %d, %s", o, kind)})
		}
	}
	fk := func(col, ref string) []builder.ForeignKey {
		return []builder.ForeignKey{{Columns: []string{col}, RefTable: ref}}
	}
	def := builder.SchemaDef{
		Levels: []builder.Level{{Name: "organization", Key: builder.IntKey}, {Name: "environment", Key: builder.IntKey}},
		Tables: []builder.TableDef{
			{Name: "organizations", Columns: []string{"id", "name"}, PrimaryKey: []string{"id"}, Levels: map[string]string{"id": "organization"}},
			{Name: "projects", Columns: []string{"id", "organization_id", "name"}, PrimaryKey: []string{"id"}, Levels: map[string]string{"organization_id": "organization"},
				ForeignKeys: fk("organization_id", "organizations")},
			{Name: "environments", Columns: []string{"id", "project_id", "kind"}, PrimaryKey: []string{"id"}, Levels: map[string]string{"id": "environment"},
				Parent: "project_id", ForeignKeys: fk("project_id", "projects")},
			{Name: "surveys", Columns: []string{"id", "environment_id", "title"}, PrimaryKey: []string{"id"}, Parent: "environment_id",
				ForeignKeys: fk("environment_id", "environments")},
		},
	}
	return Target{Name: "layered", DSN: dsn, Graph: def, Seed: seedShape(ddl, d, []string{"organizations", "projects", "environments", "surveys"})}
}

// TestLayeredLevels: the reads, joins and aggregates of every derived
// scope (the united one included) return exactly the rows the oracle
// gives them, on every engine.
func TestLayeredLevels(t *testing.T) {
	expectGreen(t, layeredTarget, 1, 2, 3, 7, 14, 58)
}
