package builder_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/tenantmcp/tenantmcp/builder"
)

// storesDef is a franchise of stores: customers and staff carry the store,
// addresses are owned by reference (from stores, customers and staff), and
// rentals reach the store through their customer (the owner path) and
// through their clerk (a consistency path).
func storesDef() builder.SchemaDef {
	return builder.SchemaDef{
		Levels: []builder.Level{{Name: "store", Key: builder.IntKey}},
		Tables: []builder.TableDef{
			{Name: "addresses", Columns: []string{"id", "line"}, PrimaryKey: []string{"id"}, OwnedByReference: true},
			{Name: "stores", Columns: []string{"id", "address_id"}, PrimaryKey: []string{"id"}, Levels: map[string]string{"id": "store"},
				ForeignKeys: []builder.ForeignKey{{Columns: []string{"address_id"}, RefTable: "addresses"}}},
			{Name: "customers", Columns: []string{"id", "store_id", "address_id"}, PrimaryKey: []string{"id"}, Levels: map[string]string{"store_id": "store"},
				ForeignKeys: []builder.ForeignKey{{Columns: []string{"store_id"}, RefTable: "stores"}, {Columns: []string{"address_id"}, RefTable: "addresses"}}},
			{Name: "staff", Columns: []string{"id", "store_id", "address_id"}, PrimaryKey: []string{"id"}, Levels: map[string]string{"store_id": "store"},
				ForeignKeys: []builder.ForeignKey{{Columns: []string{"store_id"}, RefTable: "stores"}, {Columns: []string{"address_id"}, RefTable: "addresses"}}},
			{Name: "rentals", Columns: []string{"id", "customer_id", "staff_id"}, PrimaryKey: []string{"id"}, Parent: "customer_id",
				ForeignKeys: []builder.ForeignKey{{Columns: []string{"customer_id"}, RefTable: "customers"}, {Columns: []string{"staff_id"}, RefTable: "staff"}}},
		},
	}
}

func TestOwnedByReferenceSchema(t *testing.T) {
	s, err := builder.NewSchema(storesDef())
	if err != nil {
		t.Fatal(err)
	}
	if !s.IsOwnedByReference("addresses") || s.IsOwnedByReference("customers") || s.IsGlobal("addresses") {
		t.Errorf("IsOwnedByReference/IsGlobal wrong for addresses/customers")
	}
	if got, want := s.ScopePath("addresses"), "owned by reference: customers.address_id, staff.address_id, stores.address_id"; got != want {
		t.Errorf("ScopePath = %q, want %q", got, want)
	}
	// The parent of rentals is not inferred among two tenant keys, and a
	// key into addresses is never a parent candidate.
	def := storesDef()
	def.Tables[4].Parent = ""
	if _, err := builder.NewSchema(def); err == nil || !strings.Contains(err.Error(), "ambiguous") {
		t.Errorf("rentals without Parent: %v, want ambiguous", err)
	}
	def.Tables[4].ForeignKeys[1].Unchecked = "clerks may serve any store"
	if _, err := builder.NewSchema(def); err != nil {
		t.Errorf("rentals with its clerk key unchecked infers the customer parent: %v", err)
	}
}

func TestOwnedByReferenceRefused(t *testing.T) {
	cases := map[string]func(d *builder.SchemaDef){
		"global and by reference": func(d *builder.SchemaDef) { d.Tables[0].Global = true },
		"level column":            func(d *builder.SchemaDef) { d.Tables[0].Levels = map[string]string{"id": "store"} },
		"composite key": func(d *builder.SchemaDef) {
			d.Tables[0].PrimaryKey = []string{"id", "line"}
			for i := range d.Tables {
				for k := range d.Tables[i].ForeignKeys {
					if d.Tables[i].ForeignKeys[k].RefTable == "addresses" {
						d.Tables[i].ForeignKeys[k].Columns = []string{"address_id", "id"}
					}
				}
			}
		},
		"parent into it": func(d *builder.SchemaDef) { d.Tables[2].Parent = "address_id"; d.Tables[2].Levels = nil },
		"unreferenced": func(d *builder.SchemaDef) {
			for i := range d.Tables {
				for k := range d.Tables[i].ForeignKeys {
					if d.Tables[i].ForeignKeys[k].RefTable == "addresses" {
						d.Tables[i].ForeignKeys[k].Unchecked = "not an owner"
					}
				}
			}
		},
		"unchecked parent": func(d *builder.SchemaDef) { d.Tables[4].ForeignKeys[0].Unchecked = "why not" },
		"unchecked into global": func(d *builder.SchemaDef) {
			d.Tables = append(d.Tables, builder.TableDef{Name: "films", Columns: []string{"id"}, PrimaryKey: []string{"id"}, Global: true})
			d.Tables[4].Columns = append(d.Tables[4].Columns, "film_id")
			d.Tables[4].ForeignKeys = append(d.Tables[4].ForeignKeys, builder.ForeignKey{Columns: []string{"film_id"}, RefTable: "films", Unchecked: "global"})
		},
	}
	for name, mutate := range cases {
		def := storesDef()
		mutate(&def)
		if _, err := builder.NewSchema(def); !errors.Is(err, builder.ErrSchema) {
			t.Errorf("%s: err = %v, want ErrSchema", name, err)
		}
	}
}

func TestTenancyOwnedByReference(t *testing.T) {
	catalog := storesDef().Tables
	for i := range catalog {
		catalog[i].Levels, catalog[i].Parent, catalog[i].OwnedByReference = nil, "", false
	}
	ten := builder.Tenancy{
		Levels:           []builder.Level{{Name: "store", Key: builder.IntKey}},
		LevelColumns:     map[string]string{"stores.id": "store", "customers.store_id": "store", "staff.store_id": "store"},
		OwnedByReference: []string{"addresses"},
		Unchecked:        map[string]string{"rentals.staff_id": "clerks serve any store"},
	}
	def, err := ten.Apply(catalog)
	if err != nil {
		t.Fatal(err)
	}
	s, err := builder.NewSchema(def)
	if err != nil {
		t.Fatal(err)
	}
	if !s.IsOwnedByReference("addresses") {
		t.Error("addresses not owned by reference after Apply")
	}
	ten.Unchecked = map[string]string{"rentals.nope": "x"}
	if _, err := ten.Apply(catalog); !errors.Is(err, builder.ErrSchema) {
		t.Errorf("unknown unchecked column: %v", err)
	}
}

// TestOwnedByReferenceUpsertRefused: an upsert into a table owned by
// reference is refused at Build, on every engine alike (PostgreSQL's
// policies refused every such upsert with an engine error, MariaDB failed
// a fresh key as not found, SQLite inserted it); an upsert into the
// tenant-bound table that references it still builds.
func TestOwnedByReferenceUpsertRefused(t *testing.T) {
	sch := builder.MustSchema(builder.SchemaDef{
		Levels: []builder.Level{{Name: "store", Key: builder.IntKey}},
		Tables: []builder.TableDef{
			{Name: "addresses", Columns: []string{"id", "line"}, PrimaryKey: []string{"id"}, OwnedByReference: true},
			{Name: "customers", Columns: []string{"id", "store_id", "address_id", "name"}, PrimaryKey: []string{"id"}, Levels: map[string]string{"store_id": "store"},
				ForeignKeys: []builder.ForeignKey{{Columns: []string{"address_id"}, RefTable: "addresses"}}},
		},
	})
	addr, cust := sch.Table("addresses"), sch.Table("customers")
	for _, b := range []builder.InsertBuilder{
		builder.InsertInto(addr).Columns("id", "line").Values(1, "x").OnConflict("id").DoUpdate("line"),
		builder.InsertInto(addr).Columns("id", "line").Values(1, "x").OnConflict("id").DoNothing(),
	} {
		if _, err := b.Build(); !errors.Is(err, builder.ErrInvalid) || !strings.Contains(err.Error(), "owned by reference") {
			t.Errorf("upsert into addresses: %v, want builder.ErrInvalid naming the table owned by reference", err)
		}
	}
	if _, err := builder.InsertInto(addr).Columns("id", "line").Values(1, "x").Build(); err != nil {
		t.Errorf("plain insert into addresses: %v", err)
	}
	if _, err := builder.InsertInto(cust).Columns("id", "store_id", "address_id", "name").Values(1, 1, 1, "n").OnConflict("id").DoUpdate("name").Build(); err != nil {
		t.Errorf("upsert into customers: %v", err)
	}
}
