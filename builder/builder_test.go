package builder_test

import (
	"errors"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tenantmcp/tenantmcp/builder"
)

var levels = []builder.Level{{Name: "chain", Key: builder.TextKey}, {Name: "hotel", Key: builder.IntKey}}

func hotelDef() builder.SchemaDef {
	return builder.SchemaDef{
		Levels: levels,
		Tables: []builder.TableDef{
			{Name: "countries", Columns: []string{"code", "name"}, PrimaryKey: []string{"code"}, Global: true},
			{Name: "chains", Columns: []string{"id", "name"}, PrimaryKey: []string{"id"}, Levels: map[string]string{"id": "chain"}},
			{Name: "hotels", Columns: []string{"id", "chain_id", "name", "country"}, PrimaryKey: []string{"id"},
				ForeignKeys: []builder.ForeignKey{{Columns: []string{"chain_id"}, RefTable: "chains"}, {Columns: []string{"country"}, RefTable: "countries"}},
				Levels:      map[string]string{"id": "hotel", "chain_id": "chain"}},
			{Name: "rooms", Columns: []string{"id", "hotel_id", "number"}, PrimaryKey: []string{"id"},
				ForeignKeys: []builder.ForeignKey{{Columns: []string{"hotel_id"}, RefTable: "hotels"}}},
			{Name: "guests", Columns: []string{"id", "chain_id", "name"}, PrimaryKey: []string{"id"},
				Levels: map[string]string{"chain_id": "chain"}},
			{Name: "bookings", Columns: []string{"id", "room_id", "guest_id", "check_in"}, PrimaryKey: []string{"id"},
				ForeignKeys: []builder.ForeignKey{{Columns: []string{"room_id"}, RefTable: "rooms"}, {Columns: []string{"guest_id"}, RefTable: "guests"}},
				Parent:      "room_id"},
			{Name: "payments", Columns: []string{"id", "booking_id", "amount"}, PrimaryKey: []string{"id"},
				ForeignKeys: []builder.ForeignKey{{Columns: []string{"booking_id"}, RefTable: "bookings"}}},
		},
	}
}

func TestScopePaths(t *testing.T) {
	sch := builder.MustSchema(hotelDef())
	for table, want := range map[string]string{
		"countries": "global",
		"chains":    "chain: chains.id",
		"hotels":    "chain: hotels.chain_id\nhotel: hotels.id",
		// The hotel level is read from rooms.hotel_id itself (it is the
		// foreign key to hotels.id): no join for hotel grants.
		"rooms":    "chain: rooms.hotel_id -> hotels.chain_id\nhotel: rooms.hotel_id",
		"guests":   "chain: guests.chain_id",
		"bookings": "chain: bookings.room_id -> rooms.hotel_id -> hotels.chain_id\nhotel: bookings.room_id -> rooms.hotel_id",
		"payments": "chain: payments.booking_id -> bookings.room_id -> rooms.hotel_id -> hotels.chain_id\nhotel: payments.booking_id -> bookings.room_id -> rooms.hotel_id",
	} {
		if got := sch.ScopePath(table); got != want {
			t.Errorf("%s:\n got %q\nwant %q", table, got, want)
		}
	}
	if !sch.IsGlobal("countries") || sch.IsGlobal("rooms") {
		t.Error("IsGlobal")
	}
	if got := sch.Levels(); !slices.Equal(got, levels) {
		t.Errorf("levels %v", got)
	}
}

func TestSchemaErrors(t *testing.T) {
	mod := func(f func(*builder.SchemaDef)) builder.SchemaDef {
		d := hotelDef()
		d.Tables = slices.Clone(d.Tables)
		f(&d)
		return d
	}
	table := func(d *builder.SchemaDef, name string) *builder.TableDef {
		for i := range d.Tables {
			if d.Tables[i].Name == name {
				return &d.Tables[i]
			}
		}
		panic(name)
	}
	for name, tc := range map[string]struct {
		def  builder.SchemaDef
		frag string
	}{
		"no path": {mod(func(d *builder.SchemaDef) {
			d.Tables = append(d.Tables, builder.TableDef{Name: "notes", Columns: []string{"id", "text"}})
		}), "no level columns and no foreign key"},
		"path to global only": {mod(func(d *builder.SchemaDef) {
			d.Tables = append(d.Tables, builder.TableDef{Name: "notes", Columns: []string{"id", "country"},
				ForeignKeys: []builder.ForeignKey{{Columns: []string{"country"}, RefTable: "countries"}}})
		}), "no level columns and no foreign key"},
		"parent on global": {mod(func(d *builder.SchemaDef) {
			d.Tables = append(d.Tables, builder.TableDef{Name: "notes", Columns: []string{"id", "country"},
				ForeignKeys: []builder.ForeignKey{{Columns: []string{"country"}, RefTable: "countries"}}, Parent: "country"})
		}), "references global table"},
		"cycle": {mod(func(d *builder.SchemaDef) {
			d.Tables = append(d.Tables,
				builder.TableDef{Name: "a", Columns: []string{"id", "b_id"}, PrimaryKey: []string{"id"}, ForeignKeys: []builder.ForeignKey{{Columns: []string{"b_id"}, RefTable: "b"}}},
				builder.TableDef{Name: "b", Columns: []string{"id", "a_id"}, PrimaryKey: []string{"id"}, ForeignKeys: []builder.ForeignKey{{Columns: []string{"a_id"}, RefTable: "a"}}})
		}), "cycle"},
		"self cycle": {mod(func(d *builder.SchemaDef) {
			d.Tables = append(d.Tables,
				builder.TableDef{Name: "a", Columns: []string{"id", "up"}, PrimaryKey: []string{"id"}, ForeignKeys: []builder.ForeignKey{{Columns: []string{"up"}, RefTable: "a"}}, Parent: "up"})
		}), "cycle"},
		"ambiguous parent": {mod(func(d *builder.SchemaDef) { table(d, "bookings").Parent = "" }), "ambiguous"},
		"unknown parent":   {mod(func(d *builder.SchemaDef) { table(d, "bookings").Parent = "check_in" }), "not a foreign key"},
		"unknown level":    {mod(func(d *builder.SchemaDef) { table(d, "guests").Levels = map[string]string{"chain_id": "brand"} }), "undeclared level"},
		"unknown level column": {mod(func(d *builder.SchemaDef) {
			table(d, "guests").Levels = map[string]string{"chain": "chain"}
		}), "not a column"},
		"unknown fk table": {mod(func(d *builder.SchemaDef) {
			table(d, "rooms").ForeignKeys = []builder.ForeignKey{{Columns: []string{"hotel_id"}, RefTable: "hotel"}}
		}), "unknown table"},
		"fk arity": {mod(func(d *builder.SchemaDef) {
			table(d, "rooms").ForeignKeys = []builder.ForeignKey{{Columns: []string{"hotel_id", "number"}, RefTable: "hotels"}}
		}), "column counts"},
		"global with levels": {mod(func(d *builder.SchemaDef) { table(d, "countries").Levels = map[string]string{"code": "chain"} }), "global table"},
		"reserved name": {mod(func(d *builder.SchemaDef) {
			d.Tables = append(d.Tables, builder.TableDef{Name: "_tm_scope", Columns: []string{"x"}, Global: true})
		}), "reserved"},
		"bad identifier": {mod(func(d *builder.SchemaDef) {
			d.Tables = append(d.Tables, builder.TableDef{Name: "a; DROP TABLE x", Columns: []string{"x"}, Global: true})
		}), "not a valid identifier"},
		"schema-qualified table": {mod(func(d *builder.SchemaDef) {
			d.Tables = append(d.Tables, builder.TableDef{Name: "sales.customer", Columns: []string{"x"}, Global: true})
		}), "search_path=sales"},
		"bad column": {mod(func(d *builder.SchemaDef) {
			d.Tables = append(d.Tables, builder.TableDef{Name: "a", Columns: []string{`x"y`}, Global: true})
		}), "not a valid identifier"},
		"duplicate table": {mod(func(d *builder.SchemaDef) {
			d.Tables = append(d.Tables, builder.TableDef{Name: "Rooms", Columns: []string{"x"}, Global: true})
		}), "declared twice"},
		"type mismatch": {mod(func(d *builder.SchemaDef) {
			table(d, "hotels").Types = map[string]string{"id": "TEXT"}
		}), "integer keys"},
		"bad level name": {builder.SchemaDef{Levels: []builder.Level{{Name: "Chain", Key: builder.TextKey}}}, "lower-case"},
		"level no key":   {builder.SchemaDef{Levels: []builder.Level{{Name: "chain"}}}, "key type"},
		"level twice":    {builder.SchemaDef{Levels: []builder.Level{{Name: "chain", Key: builder.TextKey}, {Name: "chain", Key: builder.IntKey}}}, "twice"},
	} {
		_, err := builder.NewSchema(tc.def)
		if !errors.Is(err, builder.ErrSchema) || !strings.Contains(err.Error(), tc.frag) {
			t.Errorf("%s: err = %v, want ErrSchema mentioning %q", name, err, tc.frag)
		}
	}
}

func TestTenancyApply(t *testing.T) {
	cat := hotelDef().Tables
	for i := range cat {
		cat[i].Levels, cat[i].Parent, cat[i].Global = nil, "", false
	}
	cat = append(cat, builder.TableDef{Name: "schema_migrations", Columns: []string{"version"}})
	ten := builder.Tenancy{
		Levels:       levels,
		LevelColumns: map[string]string{"chains.id": "chain", "hotels.id": "hotel", "hotels.chain_id": "chain", "guests.chain_id": "chain"},
		Global:       []string{"countries"},
		Parents:      map[string]string{"bookings": "room_id"},
		Ignore:       []string{"schema_migrations"},
	}
	def, err := ten.Apply(cat)
	if err != nil {
		t.Fatal(err)
	}
	sch, err := builder.NewSchema(def)
	if err != nil {
		t.Fatal(err)
	}
	want := builder.MustSchema(hotelDef())
	if sch.String() != want.String() {
		t.Fatalf("introspected+tenancy:\n%s\ndeclared:\n%s", sch, want)
	}
	if _, err := (builder.Tenancy{LevelColumns: map[string]string{"nope.id": "chain"}}).Apply(cat); !errors.Is(err, builder.ErrSchema) {
		t.Fatalf("unknown table: %v", err)
	}
	if _, err := (builder.Tenancy{Global: []string{"nope"}}).Apply(cat); !errors.Is(err, builder.ErrSchema) {
		t.Fatalf("unknown global: %v", err)
	}
}

func TestBuildErrors(t *testing.T) {
	sch := builder.MustSchema(hotelDef())
	b := sch.Table("bookings").As("b")
	r := sch.Table("rooms").As("r")
	p := sch.Table("payments").As("p")
	type weird struct{ X int }
	ch := make(chan int)
	for name, build := range map[string]func() error{
		"unknown table": func() error {
			_, err := builder.Select(sch.Table("bokings").Col("id")).From(sch.Table("bokings")).Build()
			return err
		},
		"unknown column": func() error { _, err := builder.Select(b.Col("nope")).From(b).Build(); return err },
		"no from":        func() error { _, err := builder.Select(b.Col("id")).Build(); return err },
		"no items":       func() error { _, err := builder.Select().From(b).Build(); return err },
		"bad alias": func() error {
			_, err := builder.Select(b.Col("id")).From(sch.Table("bookings").As("_tm1")).Build()
			return err
		},
		"sql alias": func() error {
			_, err := builder.Select(b.Col("id")).From(sch.Table("bookings").As("b; --")).Build()
			return err
		},
		"result name": func() error { _, err := builder.Select(b.Col("id").As("x y")).From(b).Build(); return err },
		"duplicate alias": func() error {
			_, err := builder.Select(b.Col("id")).From(b).Join(sch.Table("rooms").As("b"), builder.And()).Build()
			return err
		},
		"same ref twice": func() error { _, err := builder.Select(b.Col("id")).From(b).Join(b, builder.And()).Build(); return err },
		"unjoined column": func() error {
			// Legal as a correlated subquery, which is what Build makes of
			// it; guardedsql refuses to run it as a statement.
			q, err := builder.Select(b.Col("id"), r.Col("number")).From(b).Build()
			if err != nil || !q.Correlated() {
				return errors.New("unexpected")
			}
			return builder.ErrInvalid
		},
		"join order": func() error {
			_, err := builder.Select(b.Col("id")).From(b).Join(p, p.Col("booking_id").EqCol(b.Col("id"))).Build()
			if err != nil {
				return errors.New("unexpected")
			}
			_, err = builder.Select(b.Col("id")).From(b).Join(r, r.Col("id").EqCol(p.Col("booking_id"))).Join(p, p.Col("booking_id").EqCol(b.Col("id"))).Build()
			return err
		},
		"aggregate in where": func() error {
			_, err := builder.Select(b.Col("id")).From(b).Where(builder.Count(b.Col("id")).Gt(1)).Build()
			return err
		},
		"nested aggregate": func() error {
			_, err := builder.Select(builder.Sum(builder.Count(b.Col("id")))).From(b).Build()
			return err
		},
		"offset no limit": func() error { _, err := builder.Select(b.Col("id")).From(b).Offset(5).Build(); return err },
		"negative limit":  func() error { _, err := builder.Select(b.Col("id")).From(b).Limit(-1).Build(); return err },
		"struct value": func() error {
			_, err := builder.Select(b.Col("id")).From(b).Where(b.Col("id").Eq(weird{})).Build()
			return err
		},
		"chan value": func() error {
			_, err := builder.Select(b.Col("id")).From(b).Where(b.Col("id").In(ch)).Build()
			return err
		},
		"expr value": func() error {
			_, err := builder.Select(b.Col("id")).From(b).Where(b.Col("id").Eq(b.Col("room_id"))).Build()
			return err
		},
		"pointer value": func() error {
			v := 1
			_, err := builder.Select(b.Col("id")).From(b).Where(b.Col("id").Eq(&v)).Build()
			return err
		},
		"uint overflow": func() error {
			_, err := builder.Select(b.Col("id")).From(b).Where(b.Col("id").Eq(uint64(math.MaxUint64))).Build()
			return err
		},
		"zero pred":  func() error { _, err := builder.Select(b.Col("id")).From(b).Where(builder.Pred{}).Build(); return err },
		"zero expr":  func() error { _, err := builder.Select(builder.Expr{}).From(b).Build(); return err },
		"zero table": func() error { _, err := builder.Select(b.Col("id")).From(builder.TableRef{}).Build(); return err },
		"subquery columns": func() error {
			sub := builder.Must(builder.Select(p.Col("id"), p.Col("booking_id")).From(p).Build())
			_, err := builder.Select(b.Col("id")).From(b).Where(b.Col("id").InQuery(sub)).Build()
			return err
		},
		"subquery alias clash": func() error {
			b2 := sch.Table("bookings").As("b")
			sub := builder.Must(builder.Select(b2.Col("id")).From(b2).Build())
			_, err := builder.Select(b.Col("id")).From(b).Where(b.Col("id").InQuery(sub)).Build()
			return err
		},
		"subquery table used outside": func() error {
			sub := builder.Must(builder.Select(p.Col("booking_id")).From(p).Build())
			_, err := builder.Select(b.Col("id"), p.Col("amount")).From(b).Where(b.Col("id").InQuery(sub)).Build()
			return err
		},
		"insert alias":   func() error { _, err := builder.InsertInto(r).Columns("number").Values("1").Build(); return err },
		"insert no cols": func() error { _, err := builder.InsertInto(sch.Table("rooms")).Values("1").Build(); return err },
		"insert arity": func() error {
			_, err := builder.InsertInto(sch.Table("rooms")).Columns("number").Values("1", 2).Build()
			return err
		},
		"insert dup col": func() error {
			_, err := builder.InsertInto(sch.Table("rooms")).Columns("number", "number").Values("1", "2").Build()
			return err
		},
		"insert bad col": func() error {
			_, err := builder.InsertInto(sch.Table("rooms")).Columns("nope").Values("1").Build()
			return err
		},
		"update no where": func() error { _, err := builder.UpdateTable(sch.Table("rooms")).Set("number", "1").Build(); return err },
		"update no set": func() error {
			rm := sch.Table("rooms")
			_, err := builder.UpdateTable(rm).Where(rm.Col("id").Eq(1)).Build()
			return err
		},
		"update other ref": func() error {
			rm := sch.Table("rooms")
			_, err := builder.UpdateTable(rm).Set("number", "1").Where(r.Col("id").Eq(1)).Build()
			return err
		},
		"delete no where": func() error { _, err := builder.DeleteFrom(sch.Table("rooms")).Build(); return err },
	} {
		if err := build(); !errors.Is(err, builder.ErrInvalid) {
			t.Errorf("%s: err = %v, want ErrInvalid", name, err)
		}
	}
}

func TestTablesAndValues(t *testing.T) {
	sch := builder.MustSchema(hotelDef())
	b := sch.Table("bookings").As("b")
	r := sch.Table("rooms").As("r")
	p := sch.Table("payments").As("p")
	g := sch.Table("guests").As("g")
	ex := builder.Must(builder.Select(g.Col("id")).From(g).Where(g.Col("id").EqCol(b.Col("guest_id"))).Build())
	if !ex.Correlated() {
		t.Fatal("correlated subquery not flagged")
	}
	sub := builder.Must(builder.Select(p.Col("booking_id")).From(p).Where(p.Col("amount").Gt(10), builder.Exists(ex)).Build())
	q := builder.Must(builder.Select(b.Col("id")).From(b).Join(r, r.Col("id").EqCol(b.Col("room_id"))).
		Where(b.Col("id").InQuery(sub), b.Col("check_in").Between(time.Now(), time.Now()), b.Col("id").In([]int64{1, 2}), b.Col("id").In()).Build())
	if q.Correlated() {
		t.Fatal("top query flagged correlated")
	}
	var got []string
	for _, tr := range q.Tables() {
		got = append(got, tr.Name()+" "+tr.Alias())
	}
	if want := []string{"bookings b", "rooms r", "payments p", "guests g"}; !slices.Equal(got, want) {
		t.Fatalf("Tables() = %v, want %v", got, want)
	}
	bt := sch.Table("bookings")
	d := builder.Must(builder.DeleteFrom(bt).Where(bt.Col("id").InQuery(builder.Must(builder.Select(p.Col("booking_id")).From(p).Build()))).Build())
	if got := d.Tables(); len(got) != 2 || got[0].Name() != "bookings" || got[1].Alias() != "p" {
		t.Fatalf("delete Tables() = %v", got)
	}
}

func TestBuildersAreImmutable(t *testing.T) {
	sch := builder.MustSchema(hotelDef())
	b := sch.Table("bookings").As("b")
	base := builder.Select(b.Col("id")).From(b).Where(b.Col("id").Gt(1))
	one := base.Where(b.Col("id").Lt(10))
	two := base.Where(b.Col("id").Lt(20)).OrderBy(b.Col("id").Desc()).Limit(3)
	for _, sb := range []builder.SelectBuilder{base, one, two} {
		if _, err := sb.Build(); err != nil {
			t.Fatal(err)
		}
	}
	if builder.Must(one.Build()).Tables()[0].Alias() != "b" {
		t.Fatal("alias")
	}
	// An extended copy does not leak conditions into the base or siblings:
	// each still builds with exactly its own clauses (checked through
	// guardedsql's rendering in that package's tests); here the builders
	// must simply stay valid after siblings were extended.
	three := base.Where(builder.Count(b.Col("id")).Gt(1)) // invalid: aggregate in WHERE
	if _, err := three.Build(); err == nil {
		t.Fatal("aggregate in WHERE accepted")
	}
	if _, err := base.Build(); err != nil {
		t.Fatalf("base spoiled by a sibling: %v", err)
	}
}

func TestZeroValuesAreInvalid(t *testing.T) {
	var q builder.Query
	if !q.IsZero() || len(q.Tables()) != 0 {
		t.Fatal("zero Query")
	}
	for _, m := range []builder.Mutation{builder.Insert{}, builder.Update{}, builder.Delete{}} {
		if len(m.Tables()) != 0 {
			t.Fatalf("zero %T has tables", m)
		}
	}
}
