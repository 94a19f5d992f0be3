package conformance_test

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"testing"

	"github.com/tenantmcp/tenantmcp/builder"
	"github.com/tenantmcp/tenantmcp/conformance"
	"github.com/tenantmcp/tenantmcp/scope"
)

// notesGraph is an application's schema graph: workspaces (the tenants)
// own notebooks, which hold notes.
var notesGraph = builder.SchemaDef{
	Levels: []builder.Level{{Name: "workspace", Key: builder.TextKey}},
	Tables: []builder.TableDef{
		{Name: "notebooks", Columns: []string{"id", "workspace_id", "title"}, PrimaryKey: []string{"id"},
			Levels: map[string]string{"workspace_id": "workspace"}},
		{Name: "notes", Columns: []string{"id", "notebook_id", "body"}, PrimaryKey: []string{"id"},
			ForeignKeys: []builder.ForeignKey{{Columns: []string{"notebook_id"}, RefTable: "notebooks"}}, Parent: "notebook_id"},
	},
}

// seedNotes creates the tables in the scratch database and inserts three
// workspaces' rows, returning exactly what it inserted.
func seedNotes(ctx context.Context, db *sql.DB, engine conformance.Engine) (*conformance.Dataset, error) {
	text, ph := "TEXT", func(i int) string { return "?" }
	switch engine {
	case conformance.MySQL:
		text = "VARCHAR(191)"
	case conformance.Postgres:
		ph = func(i int) string { return fmt.Sprintf("$%d", i) }
	}
	for _, ddl := range []string{
		`CREATE TABLE notebooks (id BIGINT PRIMARY KEY, workspace_id ` + text + ` NOT NULL, title ` + text + ` NOT NULL)`,
		`CREATE TABLE notes (id BIGINT PRIMARY KEY, notebook_id BIGINT NOT NULL REFERENCES notebooks(id), body ` + text + ` NOT NULL)`,
	} {
		if _, err := db.ExecContext(ctx, ddl); err != nil {
			return nil, err
		}
	}
	d := &conformance.Dataset{}
	id := int64(0)
	for n := 0; n < 2; n++ {
		for _, ws := range []string{"red", "green", "blue"} { // interleaved ids
			id++
			nb := conformance.Row{"id": id, "workspace_id": ws, "title": fmt.Sprintf("Notebook %d", n)}
			if _, err := db.ExecContext(ctx, `INSERT INTO notebooks (id, workspace_id, title) VALUES (`+ph(1)+`, `+ph(2)+`, `+ph(3)+`)`, nb["id"], nb["workspace_id"], nb["title"]); err != nil {
				return nil, err
			}
			d.Add("notebooks", nb)
			for k := int64(0); k < 2; k++ {
				note := conformance.Row{"id": 100*id + k, "notebook_id": id, "body": "same text in every workspace"}
				if _, err := db.ExecContext(ctx, `INSERT INTO notes (id, notebook_id, body) VALUES (`+ph(1)+`, `+ph(2)+`, `+ph(3)+`)`, note["id"], note["notebook_id"], note["body"]); err != nil {
					return nil, err
				}
				d.Add("notes", note)
			}
		}
	}
	return d, nil
}

// TestNotesConformance is what an application adds to its own tests: the
// property table on its own graph and data (here on the embedded SQLite
// database).
func TestNotesConformance(t *testing.T) {
	ws := func(id string) []scope.Grant { return []scope.Grant{{Level: "workspace", ID: id}} }
	rep := conformance.Run(t, conformance.Target{
		Name:  "notes",
		Graph: notesGraph,
		Seed:  seedNotes,
		Tenants: []conformance.Tenant{
			{Name: "red", Grants: ws("red")},
			{Name: "green", Grants: ws("green")},
			{Name: "blue", Grants: ws("blue")},
		},
	})
	if !rep.Passed() {
		_ = conformance.WriteTable(os.Stderr, rep)
	}
}

// Run checks an application's schema graph and seed with the property
// table, from one of the application's tests (TestNotesConformance in this
// file runs exactly this).
func ExampleRun() {
	testConformance := func(t *testing.T) {
		rep := conformance.Run(t, conformance.Target{
			Name:        "notes",
			DSN:         os.Getenv("TENANTMCP_DSN"), // one DSN; "" = embedded SQLite (a list: FromEnv().DSNs, one Target each)
			Graph:       notesGraph,
			Seed:        seedNotes,
			Repetitions: 5,
			// Tools: &conformance.Tools{Register: …} adds properties 19 and 20.
		})
		_ = conformance.WriteTable(os.Stdout, rep)
	}
	_ = testConformance
}

// The property table, in order.
func ExampleProperties() {
	for _, p := range conformance.Properties() {
		fmt.Printf("%-27s %s\n", p.Name, p.Title)
	}
	// Output:
	// P01_scoped_read             Scoped read returns only own rows
	// P02_cross_tenant_id         Cross-tenant id in WHERE finds nothing
	// P03_joins                   Joins across tenant-bound tables
	// P04_subqueries              Subqueries reach no other tenant
	// P05_aggregates              Aggregates leak nothing
	// P06_pagination              Pagination and ordering leak nothing
	// P07_update_foreign          UPDATE of a foreign row touches 0 rows
	// P08_delete_foreign          DELETE of a foreign row touches 0 rows
	// P09_insert_foreign_parent   INSERT under a foreign parent rejected
	// P10_insert_foreign_root     INSERT of a foreign root rejected
	// P11_hierarchy               Hierarchical grant (chain sees hotels)
	// P12_siblings                Sibling isolation (hotels of one chain)
	// P13_missing_scope           Missing scope sends no statement
	// P14_concurrent              Concurrent mixed-tenant load
	// P15_pooled_context          Pooled connection context never leaks
	// P16_rls_raw_sql             RLS enforced for raw SQL as app role
	// P17_startup_check           Start-up check refuses bypass/missing policy
	// P18_coverage                Every tenant-bound table is covered
	// P19_tool_inputs_tenant_free Tool input schemas are tenant-free
	// P20_pii_canaries            PII canaries never in tool output
	// P21_path_grants             Path-consistent hierarchical grants
	// P22_grant_roles             Per-grant reveal (roles belong to grants)
	// P25_nullable_composite_fk   Nullable composite FK cannot move a row
	// P26_path_key_unique         Scope paths reference keys only
	// P27_catalog_drift           Graph matches the live catalog
	// P28_collation_exact         Tenant keys compare byte-exactly
	// P29_typed_values            Values typed by their column
	// P35_rls_signed_context      RLS holds against raw SQL as the app role that sets its own context
	// P36_engine_errors           No engine error text reaches a client
	// P37_policy_drift            Policy drift is caught while serving
	// P38_unique_oracle           A unique key shared by tenants is reported and reveals no value
	// P42_union_branches          Every branch of a set operation is confined
	// P43_cte_bodies              CTE bodies and derived tables are confined
	// P44_window_partitions       Window functions and scalar subqueries count own rows only
	// P45_ambiguous_match         Ambiguous matches fail visibly and change nothing
	// P46_narrow_never_widens     A narrowing selector never widens
	// P47_upsert_foreign_conflict An upsert whose conflict lands on another tenant's row changes nothing
	// P48_abandoned_recheck       No abandoned call or busy pool stops other tenants
	// P49_foreign_lock            Another tenant's lock is no oracle and no lever
	// P50_error_kind_foreign_values An engine error never depends on another tenant's values
	// P51_migration_lock          A migration's lock neither hangs calls nor lets them through unverified
	// P52_owned_by_reference      Rows owned by reference: visible through own referencing rows, claimed and changed only by their tenant
	// P53_consistency_paths       Every foreign key between tenant rows is checked on every write kind
	// P54_undeclared_fk           Undeclared foreign key between tenant tables refused at Open
	// P55_global_read_only        Global tables are read-only unless declared writable
	// P56_shared_unique           Unique keys shared across tenants refused unless acknowledged
	// P57_triggers                Triggers, rules and FK actions on tenant tables refused at Open
	// P58_catalog_oracle          No row the live catalog gives another tenant is returned
	// P59_no_vacuous_pass         No property passes on calls that failed
	// P60_typed_seeds             Generated key values have their column's type
}
