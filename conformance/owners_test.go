package conformance

import (
	"context"
	"database/sql"
	"testing"

	"github.com/tenantmcp/tenantmcp/builder"
	"github.com/tenantmcp/tenantmcp/scope"
)

// The catalog oracle (P58) attributes a row owned by reference to the
// tenants whose rows point at it, not to the tenant of a shared lookup it
// points at: an address in a state that a territory column marks (the
// shape of AdventureWorks' stateprovince) belongs to the territories whose
// orders ship there once the run acknowledges the states as shared. Not
// acknowledged, the state's territory owns the address, as before.
func TestCatOracleSharedLookupGivesNoOwnership(t *testing.T) {
	ctx := context.Background()
	db, err := sql.Open("sqlite", "file:catoracle?mode=memory&cache=shared&_pragma=foreign_keys(1)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, q := range []string{
		`CREATE TABLE territory (territory_id INTEGER PRIMARY KEY)`,
		`CREATE TABLE state (id INTEGER PRIMARY KEY, territory_id INTEGER NOT NULL REFERENCES territory(territory_id))`,
		`CREATE TABLE address (id INTEGER PRIMARY KEY, state_id INTEGER NOT NULL REFERENCES state(id))`,
		`CREATE TABLE orders (id INTEGER PRIMARY KEY, territory_id INTEGER NOT NULL REFERENCES territory(territory_id), ship_to INTEGER REFERENCES address(id))`,
		`INSERT INTO territory VALUES (1), (4)`,
		`INSERT INTO state VALUES (10, 1)`,
		`INSERT INTO address VALUES (100, 10), (101, 10)`,
		`INSERT INTO orders VALUES (5, 4, 100), (6, 1, 101)`,
	} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	cat, err := readCatalog(ctx, db, SQLite)
	if err != nil {
		t.Fatal(err)
	}
	levels := map[string]string{"territory.territory_id": "territory", "state.territory_id": "territory", "orders.territory_id": "territory"}
	grants := func(id string) []scope.Grant { return []scope.Grant{{Level: "territory", ID: id}} }
	for _, c := range []struct {
		shared map[string]bool
		// whether address 100 (shipped to by territory 4's order, in
		// territory 1's state) is foreign to territory 1 and to 4
		foreignTo1, foreignTo4 bool
	}{
		{nil, false, true},
		{map[string]bool{"state": true}, true, false},
	} {
		o, err := newCatOracle(ctx, db, SQLite, cat, levels, c.shared, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		i := -1
		for k, row := range o.rows["address"] {
			if row["id"] == "100" {
				i = k
			}
		}
		if i < 0 {
			t.Fatal("address 100 not read")
		}
		g := &graph{levels: []builder.Level{{Name: "territory", Key: builder.IntKey}}}
		if got := o.foreignRow("address", i, g, grants("1")); got != c.foreignTo1 {
			t.Errorf("shared %v: address 100 foreign to territory 1 = %v, want %v (owners %v)", c.shared, got, c.foreignTo1, o.owners["address"][i])
		}
		if got := o.foreignRow("address", i, g, grants("4")); got != c.foreignTo4 {
			t.Errorf("shared %v: address 100 foreign to territory 4 = %v, want %v (owners %v)", c.shared, got, c.foreignTo4, o.owners["address"][i])
		}
		if n := o.owned("state"); n != 1 {
			t.Errorf("shared %v: %d states owned, want 1 (a shared table still receives its pairs)", c.shared, n)
		}
	}
}

// On a one-level schema the derived tenants include a scope of two tenants
// (properties 1–14 then run under a union too), with a third left out.
func TestDeriveTenantsOneLevelUnion(t *testing.T) {
	def := builder.SchemaDef{
		Levels: []builder.Level{{Name: "store", Key: builder.IntKey}},
		Tables: []builder.TableDef{
			{Name: "stores", Columns: []string{"id"}, PrimaryKey: []string{"id"}, Levels: map[string]string{"id": "store"}},
			{Name: "customers", Columns: []string{"id", "store_id"}, PrimaryKey: []string{"id"}, Levels: map[string]string{"store_id": "store"},
				ForeignKeys: []builder.ForeignKey{{Columns: []string{"store_id"}, RefTable: "stores"}}},
		},
	}
	g, err := newGraph(def)
	if err != nil {
		t.Fatal(err)
	}
	d := &Dataset{Tables: map[string][]Row{
		"stores":    {{"id": int64(1)}, {"id": int64(2)}, {"id": int64(3)}},
		"customers": {{"id": int64(10), "store_id": int64(1)}, {"id": int64(11), "store_id": int64(2)}, {"id": int64(12), "store_id": int64(3)}},
	}}
	o, err := newOracle(g, d)
	if err != nil {
		t.Fatal(err)
	}
	var unions [][]scope.Grant
	for _, tn := range deriveTenants(g, o) {
		if len(tn.Grants) > 1 {
			unions = append(unions, tn.Grants)
		}
	}
	if len(unions) != 1 || len(unions[0]) != 2 || unions[0][0].ID == unions[0][1].ID {
		t.Fatalf("derived unions %v, want one scope of two different stores", unions)
	}
	if v := o.visible("customers", unions[0]); len(v) != 2 {
		t.Errorf("the union sees %d customers, want 2 (a third store left out)", len(v))
	}
}

// pathsInScope: a row the tenant sees whose consistency path leads to
// another tenant's row (a salesperson's history row in the territory he
// left) is not one the tenant may update or delete, so the write
// properties do not pick it as their own-row control.
func TestOraclePathsInScope(t *testing.T) {
	def := builder.SchemaDef{
		Levels: []builder.Level{{Name: "territory", Key: builder.IntKey}},
		Tables: []builder.TableDef{
			{Name: "territories", Columns: []string{"id"}, PrimaryKey: []string{"id"}, Levels: map[string]string{"id": "territory"}},
			{Name: "salespeople", Columns: []string{"id", "territory_id"}, PrimaryKey: []string{"id"}, Levels: map[string]string{"territory_id": "territory"},
				ForeignKeys: []builder.ForeignKey{{Columns: []string{"territory_id"}, RefTable: "territories"}}},
			{Name: "history", Columns: []string{"id", "territory_id", "salesperson_id"}, PrimaryKey: []string{"id"}, Levels: map[string]string{"territory_id": "territory"},
				ForeignKeys: []builder.ForeignKey{{Columns: []string{"territory_id"}, RefTable: "territories"}, {Columns: []string{"salesperson_id"}, RefTable: "salespeople"}}},
		},
	}
	g, err := newGraph(def)
	if err != nil {
		t.Fatal(err)
	}
	d := &Dataset{Tables: map[string][]Row{
		"territories": {{"id": int64(1)}, {"id": int64(4)}},
		"salespeople": {{"id": int64(275), "territory_id": int64(4)}, {"id": int64(276), "territory_id": int64(1)}},
		"history": {{"id": int64(1), "territory_id": int64(1), "salesperson_id": int64(275)},
			{"id": int64(2), "territory_id": int64(1), "salesperson_id": int64(276)},
			{"id": int64(3), "territory_id": int64(1), "salesperson_id": nil}},
	}}
	o, err := newOracle(g, d)
	if err != nil {
		t.Fatal(err)
	}
	t1 := []scope.Grant{{Level: "territory", ID: "1"}}
	vis := map[string]map[string]bool{}
	for _, k := range sortedKeys(o.visible("history", t1)) {
		want := o.row("history", k)["salesperson_id"] != int64(275)
		if got := o.pathsInScope("history", k, t1, vis); got != want {
			t.Errorf("history %v: pathsInScope = %v, want %v", o.row("history", k), got, want)
		}
	}
	if n := len(o.visible("history", t1)); n != 3 {
		t.Fatalf("territory 1 sees %d history rows, want 3", n)
	}
}
