package conformance

import (
	"context"
	"database/sql"
	"strings"
	"testing"

	"github.com/tenantmcp/tenantmcp/builder"
)

// A new user's shape (AdventureWorks' address and stateprovince): an
// address table owned by reference that points at a lookup of states,
// each state carrying the territory that covers it. Addresses belong to
// the territories whose orders ship there, not to their state's. With the
// states acknowledged as shared, property 58 passes the correct
// declaration and fails the one that parents addresses through their state
// (territory 1 would read territory 4's ship-to address in its state).
func TestP58AddressThroughSharedLookup(t *testing.T) {
	fk := func(col, ref string) builder.ForeignKey {
		return builder.ForeignKey{Columns: []string{col}, RefTable: ref}
	}
	territories := builder.TableDef{Name: "territories", Columns: []string{"id"}, PrimaryKey: []string{"id"}, Levels: map[string]string{"id": "territory"}}
	orders := builder.TableDef{Name: "orders", Columns: []string{"id", "territory_id", "ship_to"}, PrimaryKey: []string{"id"},
		Levels: map[string]string{"territory_id": "territory"}, ForeignKeys: []builder.ForeignKey{fk("territory_id", "territories"), fk("ship_to", "addresses")}}
	correct := builder.SchemaDef{
		Levels: []builder.Level{{Name: "territory", Key: builder.IntKey}},
		Tables: []builder.TableDef{territories, orders,
			{Name: "states", Columns: []string{"id", "territory_id"}, PrimaryKey: []string{"id"}, Global: true,
				GlobalReason: "a public list of states; territory_id says which territory covers it"},
			{Name: "addresses", Columns: []string{"id", "state_id", "line"}, PrimaryKey: []string{"id"}, OwnedByReference: true,
				ForeignKeys: []builder.ForeignKey{fk("state_id", "states")}},
		},
	}
	parented := builder.SchemaDef{
		Levels: correct.Levels,
		Tables: []builder.TableDef{territories, orders,
			{Name: "states", Columns: []string{"id", "territory_id"}, PrimaryKey: []string{"id"},
				Levels: map[string]string{"territory_id": "territory"}, ForeignKeys: []builder.ForeignKey{fk("territory_id", "territories")}},
			{Name: "addresses", Columns: []string{"id", "state_id", "line"}, PrimaryKey: []string{"id"}, Parent: "state_id",
				ForeignKeys: []builder.ForeignKey{fk("state_id", "states")}},
		},
	}
	seed := func(ctx context.Context, db *sql.DB, e Engine) (*Dataset, error) {
		d := &Dataset{Tables: map[string][]Row{
			"territories": {{"id": int64(1)}, {"id": int64(4)}, {"id": int64(6)}},
			"states":      {{"id": int64(10), "territory_id": int64(1)}, {"id": int64(11), "territory_id": int64(4)}, {"id": int64(12), "territory_id": int64(6)}},
			// 100 is in territory 1's state, shipped to by territory 4 only;
			// 101 and 102 by their own state's territory; 103 by 1 and 6.
			"addresses": {{"id": int64(100), "state_id": int64(10), "line": "t4 ship-to in t1's state"}, {"id": int64(101), "state_id": int64(10), "line": "t1"},
				{"id": int64(102), "state_id": int64(11), "line": "t4"}, {"id": int64(103), "state_id": int64(12), "line": "t1 and t6"}},
			"orders": {{"id": int64(1), "territory_id": int64(4), "ship_to": int64(100)}, {"id": int64(2), "territory_id": int64(1), "ship_to": int64(101)},
				{"id": int64(3), "territory_id": int64(4), "ship_to": int64(102)}, {"id": int64(4), "territory_id": int64(1), "ship_to": int64(103)},
				{"id": int64(5), "territory_id": int64(6), "ship_to": int64(103)}},
		}}
		for _, q := range []string{
			`CREATE TABLE territories (id INTEGER PRIMARY KEY)`,
			`CREATE TABLE states (id INTEGER PRIMARY KEY, territory_id INTEGER NOT NULL REFERENCES territories(id))`,
			`CREATE TABLE addresses (id INTEGER PRIMARY KEY, state_id INTEGER NOT NULL REFERENCES states(id), line TEXT NOT NULL)`,
			`CREATE TABLE orders (id INTEGER PRIMARY KEY, territory_id INTEGER NOT NULL REFERENCES territories(id), ship_to INTEGER REFERENCES addresses(id))`,
		} {
			if _, err := db.ExecContext(ctx, q); err != nil {
				return nil, err
			}
		}
		for _, table := range []string{"territories", "states", "addresses", "orders"} {
			for _, r := range d.Tables[table] {
				var cols, phs []string
				var vals []any
				for c, v := range r {
					cols, phs, vals = append(cols, c), append(phs, "?"), append(vals, v)
				}
				if _, err := db.ExecContext(ctx, "INSERT INTO "+table+" ("+strings.Join(cols, ", ")+") VALUES ("+strings.Join(phs, ", ")+")", vals...); err != nil {
					return nil, err
				}
			}
		}
		return d, nil
	}
	shared := map[string]string{"states": "a public list of states"}
	for _, c := range []struct {
		name string
		def  builder.SchemaDef
		fail bool
	}{{"owned by reference", correct, false}, {"parented through the state", parented, true}} {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			r, err := newRunner(Target{Name: "addresses", Graph: c.def, Seed: seed, Shared: shared})
			if err != nil {
				t.Fatal(err)
			}
			if err := r.setup(ctx); err != nil {
				t.Fatal(err)
			}
			defer func() {
				if err := r.teardown(); err != nil {
					t.Error(err)
				}
			}()
			o := r.runProperty(ctx, propertyByID(58), nil, 1)
			if o.failed != c.fail {
				t.Fatalf("P58 failed = %v, want %v: %v", o.failed, c.fail, o.msgs)
			}
			if c.fail && !strings.Contains(strings.Join(o.msgs, "\n"), "addresses") {
				t.Errorf("P58 failed, but not on addresses: %v", o.msgs)
			}
			t.Logf("P58: %v", o.msgs)
		})
	}
}
