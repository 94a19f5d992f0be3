package builder_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/tenantmcp/tenantmcp/builder"
	"github.com/tenantmcp/tenantmcp/internal/sqlast"
)

// TestFKTargetMustBeKey: a foreign key into a tenant-bound table must
// reference the primary key, a unique key, or a superset of one; foreign
// keys into global tables are not concerned.
func TestFKTargetMustBeKey(t *testing.T) {
	def := func(unique [][]string, ref []string, global bool) builder.SchemaDef {
		return builder.SchemaDef{
			Levels: []builder.Level{{Name: "chain", Key: builder.TextKey}},
			Tables: []builder.TableDef{
				{Name: "hotels", Columns: []string{"id", "chain_id", "code"}, PrimaryKey: []string{"id"}, Unique: unique,
					Levels: map[string]string{"chain_id": "chain"}},
				{Name: "codes", Columns: []string{"code"}, PrimaryKey: []string{"code"}, Global: global},
				{Name: "rooms", Columns: []string{"id", "hotel_ref", "chain_ref"}, PrimaryKey: []string{"id"},
					ForeignKeys: []builder.ForeignKey{{Columns: ref, RefTable: "hotels", RefColumns: map[int][]string{1: {"code"}, 2: {"chain_id", "id"}}[len(ref)]}},
					Parent:      ref[0]},
			},
		}
	}
	for _, c := range []struct {
		name   string
		unique [][]string
		ref    []string
		ok     bool
	}{
		{"plain column", nil, []string{"hotel_ref"}, false},
		{"unique column", [][]string{{"code"}}, []string{"hotel_ref"}, true},
		{"superset of the primary key", nil, []string{"chain_ref", "hotel_ref"}, true},
		{"unique key of other columns", [][]string{{"chain_id", "code"}}, []string{"hotel_ref"}, false},
	} {
		_, err := builder.NewSchema(def(c.unique, c.ref, true))
		switch {
		case c.ok && err != nil:
			t.Errorf("%s: %v", c.name, err)
		case !c.ok && (!errors.Is(err, builder.ErrFKTarget) || !errors.Is(err, builder.ErrSchema) || !strings.Contains(err.Error(), "rooms(hotel_ref) -> hotels(code)")):
			t.Errorf("%s: err = %v, want ErrFKTarget naming the key", c.name, err)
		}
	}
	if _, err := builder.NewSchema(builder.SchemaDef{Tables: []builder.TableDef{
		{Name: "a", Columns: []string{"x"}, Global: true, Unique: [][]string{{"y"}}}}}); !errors.Is(err, builder.ErrSchema) {
		t.Errorf("unique key on an unknown column: %v", err)
	}
	if _, err := builder.NewSchema(builder.SchemaDef{Tables: []builder.TableDef{
		{Name: "a", Columns: []string{"x"}, GlobalReason: "why"}}}); !errors.Is(err, builder.ErrSchema) {
		t.Errorf("GlobalReason on a tenant-bound table: %v", err)
	}
	if _, err := (builder.Tenancy{GlobalReasons: map[string]string{"a": "why"}}).Apply([]builder.TableDef{{Name: "a", Columns: []string{"x"}}}); !errors.Is(err, builder.ErrSchema) {
		t.Errorf("tenancy reason for a table not listed Global: %v", err)
	}
}

// TestValuesTypedByColumn: values are converted to their column's kind
// (level key type, declared type, or the referenced column's) or refused
// at Build naming the column; columns of unknown kind take them as given.
func TestValuesTypedByColumn(t *testing.T) {
	sch := builder.MustSchema(builder.SchemaDef{
		Levels: []builder.Level{{Name: "chain", Key: builder.TextKey}, {Name: "hotel", Key: builder.IntKey}},
		Tables: []builder.TableDef{
			{Name: "hotels", Columns: []string{"id", "chain_id", "email", "note"}, PrimaryKey: []string{"id"},
				Types: map[string]string{"email": "VARCHAR(200)"}, Levels: map[string]string{"id": "hotel", "chain_id": "chain"}},
			{Name: "rooms", Columns: []string{"id", "hotel_id"}, PrimaryKey: []string{"id"},
				ForeignKeys: []builder.ForeignKey{{Columns: []string{"hotel_id"}, RefTable: "hotels"}}},
		},
	})
	h, r := sch.Table("hotels"), sch.Table("rooms")
	value := func(p builder.Pred) any {
		t.Helper()
		q, err := builder.Select(h.Col("id")).From(h).Where(p).Build()
		if err != nil {
			t.Fatalf("Build: %v", err)
		}
		st, _ := sqlast.Unseal(q)
		return st.(*sqlast.Select).Where.(*sqlast.CmpVal).V.V
	}
	if v := value(h.Col("email").Eq(0)); v != "0" {
		t.Errorf("text column = 0: bound %#v, want \"0\"", v)
	}
	if v := value(h.Col("chain_id").Eq(7)); v != "7" {
		t.Errorf("text level column = 7: bound %#v, want \"7\"", v)
	}
	if v := value(h.Col("id").Eq("12")); v != int64(12) {
		t.Errorf("integer level column = \"12\": bound %#v, want 12", v)
	}
	if v := value(h.Col("note").Eq(1.5)); v != 1.5 {
		t.Errorf("untyped column: bound %#v, want 1.5 as given", v)
	}
	for name, p := range map[string]builder.Pred{
		"7eleven for an integer key": h.Col("id").Eq("7eleven"),
		"bool for text":              h.Col("email").Eq(false),
		"float for an integer key":   h.Col("id").In(1, 2.5),
		"leading zero":               h.Col("id").Between("012", 20),
	} {
		if _, err := builder.Select(h.Col("id")).From(h).Where(p).Build(); !errors.Is(err, builder.ErrType) || !errors.Is(err, builder.ErrInvalid) ||
			!strings.Contains(err.Error(), "hotels.") {
			t.Errorf("%s: err = %v, want ErrType naming the column", name, err)
		}
	}
	// The referenced column's kind types a foreign key column.
	if _, err := builder.InsertInto(r).Columns("id", "hotel_id").Values(1, "2abc").Build(); !errors.Is(err, builder.ErrType) ||
		!strings.Contains(err.Error(), "rooms.hotel_id") {
		t.Errorf("insert: err = %v, want ErrType naming rooms.hotel_id", err)
	}
	ins, err := builder.InsertInto(r).Columns("id", "hotel_id").Values(1, "2").Build()
	if err != nil {
		t.Fatal(err)
	}
	st, _ := sqlast.Unseal(ins)
	if v := st.(*sqlast.Insert).Rows[0][1].V; v != int64(2) {
		t.Errorf("insert hotel_id \"2\": bound %#v, want 2", v)
	}
	if _, err := builder.UpdateTable(h).Set("chain_id", true).Where(h.Col("id").Eq(1)).Build(); !errors.Is(err, builder.ErrType) {
		t.Errorf("update: err = %v, want ErrType", err)
	}
}

// TestLevelCarriedByNoColumn: a level no table's column carries is a
// declaration mistake (Formbricks' environments.id left out of Levels):
// grants at it would silently read nothing, so NewSchema refuses it,
// naming the level; with the column declared it builds.
func TestLevelCarriedByNoColumn(t *testing.T) {
	def := func(envLevels map[string]string) builder.SchemaDef {
		fk := func(col, ref string) []builder.ForeignKey {
			return []builder.ForeignKey{{Columns: []string{col}, RefTable: ref}}
		}
		return builder.SchemaDef{
			Levels: []builder.Level{{Name: "organization", Key: builder.IntKey}, {Name: "environment", Key: builder.IntKey}},
			Tables: []builder.TableDef{
				{Name: "organizations", Columns: []string{"id"}, PrimaryKey: []string{"id"}, Levels: map[string]string{"id": "organization"}},
				{Name: "projects", Columns: []string{"id", "organization_id"}, PrimaryKey: []string{"id"},
					Levels: map[string]string{"organization_id": "organization"}, ForeignKeys: fk("organization_id", "organizations")},
				{Name: "environments", Columns: []string{"id", "project_id"}, PrimaryKey: []string{"id"}, Levels: envLevels,
					Parent: "project_id", ForeignKeys: fk("project_id", "projects")},
				{Name: "surveys", Columns: []string{"id", "environment_id"}, PrimaryKey: []string{"id"},
					Parent: "environment_id", ForeignKeys: fk("environment_id", "environments")},
			},
		}
	}
	_, err := builder.NewSchema(def(nil))
	if !errors.Is(err, builder.ErrSchema) || !strings.Contains(err.Error(), `level "environment" is carried by no table's column`) {
		t.Fatalf("environment level on no column: err = %v, want ErrSchema naming the level", err)
	}
	if _, err := builder.NewSchema(def(map[string]string{"id": "environment"})); err != nil {
		t.Fatalf("environments.id declared the environment level: %v", err)
	}
}

// TestByRefUnreferencedNamesReferrers: a table owned by reference that no
// tenant-bound table references is refused; when the tables referencing it
// are declared global (Lago's memberships beside users), the error names
// them, where the mistake usually is.
func TestByRefUnreferencedNamesReferrers(t *testing.T) {
	def := func(membershipsGlobal bool) builder.SchemaDef {
		m := builder.TableDef{Name: "memberships", Columns: []string{"id", "organization_id", "user_id"}, PrimaryKey: []string{"id"},
			ForeignKeys: []builder.ForeignKey{{Columns: []string{"organization_id"}, RefTable: "organizations"}, {Columns: []string{"user_id"}, RefTable: "users"}}}
		if membershipsGlobal {
			m.Global, m.GlobalReason, m.ForeignKeys = true, "test", m.ForeignKeys[1:]
		} else {
			m.Levels = map[string]string{"organization_id": "organization"}
		}
		return builder.SchemaDef{
			Levels: []builder.Level{{Name: "organization", Key: builder.IntKey}},
			Tables: []builder.TableDef{
				{Name: "organizations", Columns: []string{"id"}, PrimaryKey: []string{"id"}, Levels: map[string]string{"id": "organization"}},
				{Name: "users", Columns: []string{"id", "email"}, PrimaryKey: []string{"id"}, OwnedByReference: true},
				m,
			},
		}
	}
	_, err := builder.NewSchema(def(true))
	if !errors.Is(err, builder.ErrSchema) || !strings.Contains(err.Error(), `"users" is owned by reference`) || !strings.Contains(err.Error(), "referenced only by memberships") {
		t.Fatalf("memberships global: err = %v, want ErrSchema naming users and memberships", err)
	}
	if _, err := builder.NewSchema(def(false)); err != nil {
		t.Fatalf("memberships tenant-bound: %v", err)
	}
}
