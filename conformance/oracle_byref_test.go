package conformance

import (
	"slices"
	"testing"

	"github.com/tenantmcp/tenantmcp/builder"
	"github.com/tenantmcp/tenantmcp/scope"
)

// TestOracleOwnedByReference (h4-ref): the oracle's rows of a table owned
// by reference are those its visible referencing rows reference, through
// checked foreign keys only; an unreferenced row is no one's.
func TestOracleOwnedByReference(t *testing.T) {
	fk := func(col, ref string) builder.ForeignKey {
		return builder.ForeignKey{Columns: []string{col}, RefTable: ref}
	}
	def := builder.SchemaDef{
		Levels: []builder.Level{{Name: "store", Key: builder.IntKey}},
		Tables: []builder.TableDef{
			{Name: "addresses", Columns: []string{"id"}, PrimaryKey: []string{"id"}, OwnedByReference: true},
			{Name: "stores", Columns: []string{"id"}, PrimaryKey: []string{"id"}, Levels: map[string]string{"id": "store"}},
			{Name: "customers", Columns: []string{"id", "store_id", "address_id", "alt_id"}, PrimaryKey: []string{"id"}, Levels: map[string]string{"store_id": "store"},
				ForeignKeys: []builder.ForeignKey{fk("store_id", "stores"), fk("address_id", "addresses"),
					{Columns: []string{"alt_id"}, RefTable: "addresses", Unchecked: "a hint, not ownership"}}},
		},
	}
	g, err := newGraph(def)
	if err != nil {
		t.Fatal(err)
	}
	d := &Dataset{Tables: map[string][]Row{
		"addresses": {{"id": int64(1)}, {"id": int64(2)}, {"id": int64(3)}, {"id": int64(4)}},
		"stores":    {{"id": int64(1)}, {"id": int64(2)}},
		"customers": {{"id": int64(10), "store_id": int64(1), "address_id": int64(1), "alt_id": int64(2)},
			{"id": int64(11), "store_id": int64(2), "address_id": int64(2), "alt_id": nil},
			{"id": int64(12), "store_id": int64(2), "address_id": int64(1), "alt_id": int64(4)}},
	}}
	o, err := newOracle(g, d)
	if err != nil {
		t.Fatal(err)
	}
	for store, want := range map[string][]string{"1": {"1"}, "2": {"1", "2"}} {
		got := sortedKeys(o.visible("addresses", []scope.Grant{{Level: "store", ID: store}}))
		if !slices.Equal(got, want) {
			t.Errorf("store %s: oracle sees addresses %v, want %v", store, got, want)
		}
	}
	if slices.Contains(g.bound, "addresses") || len(g.tenantFKs(g.tables["customers"])) != 2 {
		t.Errorf("bound %v; customers' checked tenant keys %v", g.bound, g.tenantFKs(g.tables["customers"]))
	}
}
