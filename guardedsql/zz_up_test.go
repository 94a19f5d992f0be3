package guardedsql_test

import (
	"testing"

	"github.com/tenantmcp/tenantmcp/builder"
)

func TestZZUpHierarchyRaw(t *testing.T) {
	s := newScratch(t, enginePostgres, []string{
		`CREATE TABLE orgs (id INT_T PRIMARY KEY)`,
		`CREATE TABLE projects (id INT_T PRIMARY KEY, org_id INT_T NOT NULL REFERENCES orgs(id), name KEY_T NULL)`,
		`CREATE TABLE issues (id INT_T PRIMARY KEY, org_id INT_T NOT NULL REFERENCES orgs(id), project_id INT_T NOT NULL REFERENCES projects(id), name KEY_T NULL)`,
		`INSERT INTO orgs VALUES (1), (2)`,
		`INSERT INTO projects VALUES (10, 1, 'a'), (11, 2, 'b')`,
		`INSERT INTO issues VALUES (30, 1, 10, 'x'), (31, 2, 11, 'y')`,
	})
	fk := func(col, ref string) builder.ForeignKey { return builder.ForeignKey{Columns: []string{col}, RefTable: ref} }
	sch := builder.MustSchema(builder.SchemaDef{
		Levels: []builder.Level{{Name: "org", Key: builder.IntKey}, {Name: "project", Key: builder.IntKey}},
		Tables: []builder.TableDef{
			{Name: "orgs", Columns: []string{"id"}, PrimaryKey: []string{"id"}, Levels: map[string]string{"id": "org"}},
			{Name: "projects", Columns: []string{"id", "org_id", "name"}, PrimaryKey: []string{"id"}, Levels: map[string]string{"org_id": "org", "id": "project"}, ForeignKeys: []builder.ForeignKey{fk("org_id", "orgs")}},
			{Name: "issues", Columns: []string{"id", "org_id", "project_id", "name"}, PrimaryKey: []string{"id"}, Levels: map[string]string{"org_id": "org", "project_id": "project"}, ForeignKeys: []builder.ForeignKey{fk("org_id", "orgs"), fk("project_id", "projects")}},
		},
	})
	if _, err := s.open(sch); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ doc, q string }{
		{`{"project":[10]}`, `UPDATE projects SET name = 'own' WHERE id = 10`},
		{`{"project":[10]}`, `UPDATE issues SET name = 'own' WHERE id = 30`},
		{`{"project":[10]}`, `UPDATE projects SET org_id = 2 WHERE id = 10`},
		{`{"project":[10]}`, `UPDATE issues SET org_id = 2 WHERE id = 30`},
		{`{"org":[1]}`, `INSERT INTO issues VALUES (40, 1, 11, 'planted')`},
		{`{"org":[1]}`, `UPDATE issues SET project_id = 11 WHERE id = 30`},
	} {
		err := s.appExec(c.doc, c.q)
		t.Logf("%s %s: %v", c.doc, c.q, err)
	}
	t.Logf("org 2 now sees: projects %d, issues %d", s.count(`SELECT COUNT(*) FROM projects WHERE org_id = 2`), s.count(`SELECT COUNT(*) FROM issues WHERE org_id = 2 OR project_id = 11`))
}
