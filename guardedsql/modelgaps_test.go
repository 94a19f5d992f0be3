package guardedsql_test

// Tests for the modelling gaps of issue 13 §3–7: what the guard used to
// assume about the schema and the engine without checking it. Each runs on
// SQLite and, when their DSNs are set, on PostgreSQL and MariaDB/MySQL.

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/tenantmcp/tenantmcp/builder"
	"github.com/tenantmcp/tenantmcp/guardedsql"
	"github.com/tenantmcp/tenantmcp/guardedsql/sqlite"
	"github.com/tenantmcp/tenantmcp/internal/guardfault"
)

// notesDDL: notes reach their scope through room_id (rooms -> hotels), and
// carry a chain_id level column that the composite foreign key
// (chain_id, hotel_id) -> hotels(chain_id, id) covers, with hotel_id
// nullable. Ids interleave between the chains.
var notesDDL = []string{
	`CREATE TABLE chains (id KEY_T PRIMARY KEY)`,
	`CREATE TABLE hotels (id INT_T PRIMARY KEY, chain_id KEY_T NOT NULL REFERENCES chains(id), UNIQUE (chain_id, id))`,
	`CREATE TABLE rooms (id INT_T PRIMARY KEY, hotel_id INT_T NOT NULL REFERENCES hotels(id))`,
	`CREATE TABLE notes (id INT_T PRIMARY KEY, room_id INT_T NOT NULL REFERENCES rooms(id), chain_id KEY_T NOT NULL, hotel_id INT_T NULL, body KEY_T NOT NULL,
	   FOREIGN KEY (chain_id, hotel_id) REFERENCES hotels(chain_id, id))`,
	`CREATE TABLE memos (id INT_T PRIMARY KEY, room_id INT_T NOT NULL REFERENCES rooms(id), chain_id KEY_T NOT NULL)`,
	`INSERT INTO chains VALUES ('acme'), ('globex')`,
	`INSERT INTO hotels VALUES (1, 'acme'), (2, 'globex'), (3, 'acme'), (4, 'globex')`,
	`INSERT INTO rooms VALUES (10, 1), (11, 2), (12, 3), (13, 4)`,
	`INSERT INTO notes VALUES (100, 10, 'acme', 1, 'acme-secret'), (101, 11, 'globex', 2, 'globex-secret')`,
}

var notesDef = builder.SchemaDef{
	Levels: []builder.Level{{Name: "chain", Key: builder.TextKey}, {Name: "hotel", Key: builder.IntKey}},
	Tables: []builder.TableDef{
		{Name: "chains", Columns: []string{"id"}, PrimaryKey: []string{"id"}, Levels: map[string]string{"id": "chain"}},
		{Name: "hotels", Columns: []string{"id", "chain_id"}, PrimaryKey: []string{"id"}, Unique: [][]string{{"chain_id", "id"}},
			ForeignKeys: []builder.ForeignKey{{Columns: []string{"chain_id"}, RefTable: "chains"}},
			Levels:      map[string]string{"id": "hotel", "chain_id": "chain"}},
		{Name: "rooms", Columns: []string{"id", "hotel_id"}, PrimaryKey: []string{"id"},
			ForeignKeys: []builder.ForeignKey{{Columns: []string{"hotel_id"}, RefTable: "hotels"}}},
		{Name: "notes", Columns: []string{"id", "room_id", "chain_id", "hotel_id", "body"}, PrimaryKey: []string{"id"},
			ForeignKeys: []builder.ForeignKey{
				{Columns: []string{"room_id"}, RefTable: "rooms"},
				{Columns: []string{"chain_id", "hotel_id"}, RefTable: "hotels", RefColumns: []string{"chain_id", "id"}},
			},
			Levels: map[string]string{"chain_id": "chain"}, Parent: "room_id"},
		// memos: a level column no foreign key covers, and a scope path.
		{Name: "memos", Columns: []string{"id", "room_id", "chain_id"}, PrimaryKey: []string{"id"},
			ForeignKeys: []builder.ForeignKey{{Columns: []string{"room_id"}, RefTable: "rooms"}},
			Levels:      map[string]string{"chain_id": "chain"}, Parent: "room_id"},
	},
}

// TestNullableCompositeFK: a level column covered by a composite tenant
// foreign key with a NULL part is checked on its own, on every statement
// kind and (PostgreSQL) by the row-level security WITH CHECK as well. Before
// the fix acme moved its note into globex with hotel_id NULL, and planted
// one there, and a hotel-1 writer did the same through RLS.
func TestNullableCompositeFK(t *testing.T) {
	forEachEngine(t, func(t *testing.T, e engine) {
		s := newScratch(t, e, notesDDL)
		sch := builder.MustSchema(notesDef)
		db, err := s.open(sch)
		if err != nil {
			t.Fatal(err)
		}
		notes := sch.Table("notes")
		acme, hotel1 := grantCtx(chainG("acme")), grantCtx(hotelG(1))
		globexRows := func() int { return s.count(`SELECT COUNT(*) FROM notes WHERE chain_id = 'globex'`) }

		move, err := builder.UpdateTable(notes).Set("chain_id", "globex").Set("hotel_id", nil).
			Where(notes.Col("id").Eq(100)).ExpectOne().Build()
		if err != nil {
			t.Fatal(err)
		}
		plant := func(id int64, chain string, hotel any) builder.Insert {
			ins, err := builder.InsertInto(notes).Columns("id", "room_id", "chain_id", "hotel_id", "body").
				Values(id, 10, chain, hotel, "planted").Build()
			if err != nil {
				t.Fatal(err)
			}
			return ins
		}
		attacks := []struct {
			name string
			ctx  context.Context
			m    builder.Mutation
		}{
			{"update by chain writer", acme, move},
			{"insert by chain writer", acme, plant(102, "globex", nil)},
			{"insert by hotel writer", hotel1, plant(103, "globex", nil)},
		}
		for _, a := range attacks {
			_, err := db.Exec(a.ctx, a.m)
			if !errors.Is(err, guardedsql.ErrNotFound) && !errors.Is(err, guardedsql.ErrOutOfScope) {
				t.Errorf("%s: err = %v, want ErrNotFound or ErrOutOfScope", a.name, err)
			}
			if n := globexRows(); n != 1 {
				t.Fatalf("%s: globex now has %d notes, want its own 1", a.name, n)
			}
		}
		// Controls: the same shapes inside the writer's own tenant pass.
		if _, err := db.Exec(acme, plant(104, "acme", nil)); err != nil {
			t.Errorf("acme note with hotel_id NULL: %v", err)
		}
		if _, err := db.Exec(hotel1, plant(105, "acme", int64(1))); err != nil {
			t.Errorf("hotel-1 note with its full key: %v", err)
		}
		globex := grantCtx(chainG("globex"))
		ids, err := guardedsql.All(globex, db, mustQuery(t, builder.Select(notes.Col("id")).From(notes).OrderBy(notes.Col("id").Asc())),
			func(r *guardedsql.Rows) (id int64, err error) { err = r.Scan(&id); return })
		if err != nil || len(ids) != 1 || ids[0] != 101 {
			t.Errorf("globex reads notes %v (%v), want [101]", ids, err)
		}

		if e.name == "postgres" {
			// The second boundary on its own: raw SQL as the application
			// role under a hotel-1 scope, which reaches the note's room.
			err := s.appExec(`{"hotel":[1]}`, `INSERT INTO notes VALUES (106, 10, 'globex', NULL, 'raw')`)
			if err == nil {
				t.Errorf("RLS WITH CHECK admitted a hotel-1 note claiming chain globex")
			}
			if err := s.appExec(`{"hotel":[1]}`, `INSERT INTO notes VALUES (107, 10, 'acme', 1, 'raw')`); err != nil {
				t.Errorf("RLS control (full key): %v", err)
			}
			if n := globexRows(); n != 1 {
				t.Fatalf("globex has %d notes after raw inserts, want 1", n)
			}
			// The same for a level column no foreign key covers.
			if err := s.appExec(`{"hotel":[1]}`, `INSERT INTO memos VALUES (200, 10, 'globex')`); err == nil {
				t.Errorf("RLS WITH CHECK admitted a hotel-1 memo claiming chain globex")
			}
			if err := s.appExec(`{"chain":["acme"]}`, `INSERT INTO memos VALUES (201, 10, 'acme')`); err != nil {
				t.Errorf("RLS control (acme memo): %v", err)
			}
		}

		// The test can fail: with the fix switched off the guard lets the
		// update through (on PostgreSQL the regenerated policy would too,
		// but the installed one still holds, so only SQLite and MySQL).
		if e.name != "postgres" && guardfault.Enabled {
			restore := guardfault.Disable(guardfault.NullableFK)
			_, err := db.Exec(acme, move)
			restore()
			if err != nil || globexRows() != 2 {
				t.Errorf("with the fix off the move should leak (the test would be blind): err %v, globex rows %d", err, globexRows())
			}
		}
	})
}

func mustQuery(t *testing.T, b builder.SelectBuilder) builder.Query {
	t.Helper()
	q, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return q
}

// codesDDL: rooms reach hotels through hotel_code -> hotels(code). pathKey
// says whether code is a unique key; the foreign key exists where the
// engine accepts it (SQLite and InnoDB take one onto a plain index,
// PostgreSQL requires a unique key).
func codesDDL(engine string, unique bool) []string {
	idx := `CREATE INDEX hotels_code ON hotels(code)`
	if unique {
		idx = `CREATE UNIQUE INDEX hotels_code ON hotels(code)`
	}
	fk := ` REFERENCES hotels(code)`
	if engine == "postgres" && !unique {
		fk = ""
	}
	ddl := []string{
		`CREATE TABLE hotels (id INT_T PRIMARY KEY, chain_id KEY_T NOT NULL, code KEY_T NOT NULL)`,
		idx,
		`CREATE TABLE rooms (id INT_T PRIMARY KEY, hotel_code KEY_T NOT NULL` + fk + `, secret KEY_T NOT NULL)`,
	}
	if engine == "sqlite" && !unique {
		return ddl // SQLite refuses every write near such a key ("foreign key mismatch")
	}
	return append(ddl,
		`INSERT INTO hotels VALUES (1, 'acme', 'acme-p'), (2, 'globex', 'globex-p')`,
		`INSERT INTO rooms VALUES (10, 'acme-p', 'acme room'), (11, 'globex-p', 'globex room'), (12, 'acme-p', 'acme room 2')`)
}

// codeShared acknowledges the hotel codes' unique key, which has no
// tenant column.
var codeShared = map[string]string{"code": "a hotel code is public; a conflict reveals that some chain uses it"}

func codesDef(unique bool) builder.SchemaDef {
	hotels := builder.TableDef{Name: "hotels", Columns: []string{"id", "chain_id", "code"}, PrimaryKey: []string{"id"}, Levels: map[string]string{"chain_id": "chain"}}
	if unique {
		hotels.Unique = [][]string{{"code"}}
		hotels.SharedUnique = codeShared
	}
	return builder.SchemaDef{
		Levels: []builder.Level{{Name: "chain", Key: builder.TextKey}},
		Tables: []builder.TableDef{hotels,
			{Name: "rooms", Columns: []string{"id", "hotel_code", "secret"}, PrimaryKey: []string{"id"},
				ForeignKeys: []builder.ForeignKey{{Columns: []string{"hotel_code"}, RefTable: "hotels", RefColumns: []string{"code"}}}},
		},
	}
}

// TestPathKeyMustBeUnique: a scope-path foreign key onto columns that are
// no key is refused in the declared graph, in the introspected one, and
// (when the declaration claims a key the database lacks) at Open. Before
// the fix all three were accepted, and on InnoDB acme then created a hotel
// with globex's code and read globex's rooms.
func TestPathKeyMustBeUnique(t *testing.T) {
	if _, err := builder.NewSchema(codesDef(false)); !errors.Is(err, builder.ErrFKTarget) || !errors.Is(err, builder.ErrSchema) ||
		!strings.Contains(err.Error(), "rooms(hotel_code) -> hotels(code)") {
		t.Fatalf("declared graph: err = %v, want ErrFKTarget naming rooms(hotel_code) -> hotels(code)", err)
	}
	forEachEngine(t, func(t *testing.T, e engine) {
		s := newScratch(t, e, codesDDL(e.name, false))
		// The declaration claims a unique key the database lacks.
		_, err := s.open(builder.MustSchema(codesDef(true)))
		if !errors.Is(err, guardedsql.ErrPathKey) || !errors.Is(err, guardedsql.ErrCatalog) || !strings.Contains(err.Error(), "hotels(code)") {
			t.Fatalf("Open: err = %v, want ErrPathKey naming hotels(code)", err)
		}
		if e.name != "postgres" {
			// Introspected: the catalog's foreign key onto a plain index.
			_, err := s.introspect(builder.Tenancy{Levels: codesDef(false).Levels, LevelColumns: map[string]string{"hotels.chain_id": "chain"}})
			if !errors.Is(err, builder.ErrFKTarget) {
				t.Errorf("introspected graph: err = %v, want ErrFKTarget", err)
			}
		}
		if e.name == "mysql" && guardfault.Enabled {
			// What the refusal prevents, shown with the fix switched off.
			restore := guardfault.Disable(guardfault.PathKey)
			sch := builder.MustSchema(codesDef(false))
			db, err := s.open(sch)
			restore()
			if err != nil {
				t.Fatal(err)
			}
			acme := grantCtx(chainG("acme"))
			hotels, rooms := sch.Table("hotels"), sch.Table("rooms")
			if _, err := db.Exec(acme, builder.Must(builder.InsertInto(hotels).Columns("id", "chain_id", "code").Values(3, "acme", "globex-p").Build())); err != nil {
				t.Fatal(err)
			}
			secrets, err := guardedsql.All(acme, db, builder.Must(builder.Select(rooms.Col("secret")).From(rooms).Build()),
				func(r *guardedsql.Rows) (s string, err error) { err = r.Scan(&s); return })
			if err != nil || !slices.Contains(secrets, "globex room") {
				t.Errorf("with the fix off acme should reach globex's room through its copied code (else the test is blind): %v %v", secrets, err)
			}
		}
		// Control: with a real unique key the same graph opens.
		s2 := newScratch(t, e, codesDDL(e.name, true))
		if _, err := s2.open(builder.MustSchema(codesDef(true))); err != nil {
			t.Errorf("unique code: %v", err)
		}
	})
}

// driftDDL: rooms belong to hotels through hotel_id; rate_cards is
// reference data; audit is a tenant table the graphs below leave out.
var driftDDL = []string{
	`CREATE TABLE hotels (id INT_T PRIMARY KEY, chain_id KEY_T NOT NULL)`,
	`CREATE TABLE rooms (id INT_T PRIMARY KEY, hotel_id INT_T NOT NULL REFERENCES hotels(id), secret KEY_T NOT NULL)`,
	`CREATE TABLE rate_cards (id INT_T PRIMARY KEY, label KEY_T NOT NULL)`,
	`CREATE TABLE audit (id INT_T PRIMARY KEY, hotel_id INT_T NOT NULL REFERENCES hotels(id))`,
	`INSERT INTO hotels VALUES (1, 'acme'), (2, 'globex'), (3, 'acme')`,
	`INSERT INTO rooms VALUES (10, 1, 'acme room'), (11, 2, 'globex room'), (12, 3, 'acme room 2')`,
}

// driftDef declares hotels, rooms and rate_cards; mutate edits rooms' and
// rate_cards' declarations.
func driftDef(mutate func(rooms, rates *builder.TableDef)) *builder.Schema {
	rooms := builder.TableDef{Name: "rooms", Columns: []string{"id", "hotel_id", "secret"}, PrimaryKey: []string{"id"},
		ForeignKeys: []builder.ForeignKey{{Columns: []string{"hotel_id"}, RefTable: "hotels"}}}
	rates := builder.TableDef{Name: "rate_cards", Columns: []string{"id", "label"}, PrimaryKey: []string{"id"}, Global: true}
	if mutate != nil {
		mutate(&rooms, &rates)
	}
	return builder.MustSchema(builder.SchemaDef{
		Levels: []builder.Level{{Name: "chain", Key: builder.TextKey}},
		Tables: []builder.TableDef{
			{Name: "hotels", Columns: []string{"id", "chain_id"}, PrimaryKey: []string{"id"}, Levels: map[string]string{"chain_id": "chain"}},
			rooms, rates,
		},
	})
}

// TestCatalogDrift: Open compares the graph with the live catalog. Before
// the fix a table wrongly declared global opened fine and was read without
// a predicate (acme saw globex's rooms), and a declared foreign key the
// database does not have, or a SQLite connection without foreign keys,
// went unnoticed.
func TestCatalogDrift(t *testing.T) {
	forEachEngine(t, func(t *testing.T, e engine) {
		ctx := context.Background()
		s := newScratch(t, e, driftDDL)
		// rooms declared global: it references tenant-bound hotels.
		wrong := driftDef(func(rooms, _ *builder.TableDef) { rooms.Global = true })
		_, err := s.open(wrong)
		if !errors.Is(err, guardedsql.ErrGlobalDrift) || !strings.Contains(err.Error(), "rooms(hotel_id) references tenant-bound hotels") {
			t.Fatalf("rooms declared global: err = %v, want ErrGlobalDrift naming rooms", err)
		}
		// A global table with a level-named column.
		s.mustExec(t, `ALTER TABLE rate_cards ADD COLUMN chain_id KEY_T NULL`)
		if _, err := s.open(driftDef(func(_, rates *builder.TableDef) { rates.Columns = append(rates.Columns, "chain_id") })); !errors.Is(err, guardedsql.ErrGlobalDrift) ||
			!strings.Contains(err.Error(), "rate_cards.chain_id") {
			t.Errorf("level-named column in a global table: err = %v, want ErrGlobalDrift naming rate_cards.chain_id", err)
		}
		// With a stated reason the same declaration is accepted.
		db, err := s.open(driftDef(func(_, rates *builder.TableDef) {
			rates.Columns = append(rates.Columns, "chain_id")
			rates.GlobalReason = "chain_id is the chain that published the card; cards are public"
		}))
		if err != nil {
			t.Fatalf("global with a reason: %v", err)
		}
		rep, err := guardedsql.CheckCatalog(ctx, db)
		if err != nil || !slices.Equal(rep.Unlisted, []string{"audit"}) {
			t.Errorf("report: %+v, %v; want audit unlisted", rep, err)
		}
		// A declared type of the other kind than the database's.
		if _, err := s.open(driftDef(func(_, rates *builder.TableDef) { rates.Types = map[string]string{"label": "BIGINT"} })); !errors.Is(err, guardedsql.ErrTypeDrift) ||
			!strings.Contains(err.Error(), "rate_cards.label") {
			t.Errorf("declared BIGINT for a text column: err = %v, want ErrTypeDrift naming rate_cards.label", err)
		}
		// A misspelt foreign-key column (the table exists, the column does
		// not): refused, not merely reported missing.
		// (PostgreSQL refuses it earlier, applying the policies.)
		_, err = s.open(driftDef(func(rooms, _ *builder.TableDef) {
			rooms.Columns = []string{"id", "hotelid", "secret"}
			rooms.ForeignKeys = []builder.ForeignKey{{Columns: []string{"hotelid"}, RefTable: "hotels", RefColumns: []string{"id"}}}
		}))
		if e.name == "postgres" && (err == nil || !strings.Contains(err.Error(), `"hotelid" does not exist`)) ||
			e.name != "postgres" && (!errors.Is(err, guardedsql.ErrScopeColumnMissing) || !strings.Contains(err.Error(), "rooms.hotelid")) {
			t.Errorf("misspelt path column: err = %v, want ErrScopeColumnMissing naming rooms.hotelid", err)
		}
		// A declared foreign key the database lacks.
		s.mustExec(t, `CREATE TABLE extras (id INT_T PRIMARY KEY, room_id INT_T NOT NULL)`)
		extras := builder.MustSchema(builder.SchemaDef{
			Levels: []builder.Level{{Name: "chain", Key: builder.TextKey}},
			Tables: []builder.TableDef{
				{Name: "hotels", Columns: []string{"id", "chain_id"}, PrimaryKey: []string{"id"}, Levels: map[string]string{"chain_id": "chain"}},
				{Name: "extras", Columns: []string{"id", "room_id"}, PrimaryKey: []string{"id"},
					ForeignKeys: []builder.ForeignKey{{Columns: []string{"room_id"}, RefTable: "hotels"}}},
			},
		})
		if _, err := s.open(extras); !errors.Is(err, guardedsql.ErrFKNotEnforced) || !strings.Contains(err.Error(), "extras(room_id) -> hotels(id)") {
			t.Errorf("undeclared constraint: err = %v, want ErrFKNotEnforced naming extras(room_id)", err)
		}
		if e.name != "postgres" && guardfault.Enabled {
			// What the check prevents, with it switched off.
			restore := guardfault.Disable(guardfault.Catalog)
			db, err := s.open(wrong)
			restore()
			if err != nil {
				t.Fatal(err)
			}
			rooms := wrong.Table("rooms")
			secrets, err := guardedsql.All(grantCtx(chainG("acme")), db, builder.Must(builder.Select(rooms.Col("secret")).From(rooms).Build()),
				func(r *guardedsql.Rows) (s string, err error) { err = r.Scan(&s); return })
			if err != nil || !slices.Contains(secrets, "globex room") {
				t.Errorf("with the check off acme should read globex's room (else the test is blind): %v %v", secrets, err)
			}
		}
	})
	t.Run("sqlite_foreign_keys_off", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "nofk.db")
		raw, err := sql.Open("sqlite", path)
		if err != nil {
			t.Fatal(err)
		}
		defer raw.Close()
		for _, q := range driftDDL {
			if _, err := raw.Exec(ddlTypes("sqlite", q)); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := sqlite.New(context.Background(), raw, driftDef(nil), guardedsql.Options{}); !errors.Is(err, guardedsql.ErrFKNotEnforced) ||
			!strings.Contains(err.Error(), "foreign_keys") {
			t.Errorf("NewSQLite without foreign keys: err = %v, want ErrFKNotEnforced", err)
		}
	})
}

// TestCollationExact: level and path-key columns must compare byte for
// byte. Before the fix SQLite's COLLATE NOCASE (and RTRIM) and a
// PostgreSQL nondeterministic ICU collation on a level column let a grant
// for tenant "ACME" read tenant "acme"; they are now refused at Open,
// naming the column. MariaDB/MySQL's case-insensitive collations are
// accepted: the guard matches text level ids a second time as binary
// strings, which this test confirms.
func TestCollationExact(t *testing.T) {
	forEachEngine(t, func(t *testing.T, e engine) {
		coll := map[string]string{"sqlite": "COLLATE NOCASE", "mysql": "COLLATE utf8mb4_general_ci", "postgres": `COLLATE tm_ci`}[e.name]
		var ddl []string
		if e.name == "postgres" {
			ddl = append(ddl, `CREATE COLLATION tm_ci (provider = icu, locale = 'und-u-ks-level2', deterministic = false)`)
		}
		ddl = append(ddl,
			`CREATE TABLE hotels (id INT_T PRIMARY KEY, chain_id KEY_T `+coll+` NOT NULL, secret KEY_T NOT NULL)`,
			`INSERT INTO hotels VALUES (1, 'acme', 'acme secret'), (2, 'globex', 'globex secret')`)
		s := newScratch(t, e, ddl)
		sch := builder.MustSchema(builder.SchemaDef{
			Levels: []builder.Level{{Name: "chain", Key: builder.TextKey}},
			Tables: []builder.TableDef{{Name: "hotels", Columns: []string{"id", "chain_id", "secret"}, PrimaryKey: []string{"id"},
				Levels: map[string]string{"chain_id": "chain"}}},
		})
		hotels := sch.Table("hotels")
		read := func(db *guardedsql.DB) []string {
			out, err := guardedsql.All(grantCtx(chainG("ACME")), db, builder.Must(builder.Select(hotels.Col("secret")).From(hotels).Build()),
				func(r *guardedsql.Rows) (s string, err error) { err = r.Scan(&s); return })
			if err != nil {
				t.Fatal(err)
			}
			return out
		}
		db, err := s.open(sch)
		if e.name == "mysql" {
			if err != nil {
				t.Fatal(err)
			}
			if got := read(db); len(got) != 0 {
				t.Errorf("grant ACME read %v on MySQL, want nothing", got)
			}
			return
		}
		if !errors.Is(err, guardedsql.ErrCollation) || !strings.Contains(err.Error(), "hotels.chain_id") {
			t.Fatalf("Open: err = %v, want ErrCollation naming hotels.chain_id", err)
		}
		// With the check off, grant ACME reads acme's row through the
		// guard and, on PostgreSQL, through row-level security as well.
		if guardfault.Enabled {
			restore := guardfault.Disable(guardfault.Collation)
			db, err = s.open(sch)
			restore()
			if err != nil {
				t.Fatal(err)
			}
			if got := read(db); !slices.Contains(got, "acme secret") {
				t.Errorf("with the check off grant ACME should read acme's row (else the test is blind): %v", got)
			}
		}
		if e.name == "sqlite" {
			// RTRIM: 'acme ' = 'acme'.
			s.mustExec(t, `CREATE TABLE rooms (id INTEGER PRIMARY KEY, chain_id TEXT COLLATE "RTRIM" NOT NULL)`)
			sch2 := builder.MustSchema(builder.SchemaDef{
				Levels: []builder.Level{{Name: "chain", Key: builder.TextKey}},
				Tables: []builder.TableDef{{Name: "rooms", Columns: []string{"id", "chain_id"}, PrimaryKey: []string{"id"}, Levels: map[string]string{"chain_id": "chain"}}},
			})
			if _, err := s.open(sch2); !errors.Is(err, guardedsql.ErrCollation) || !strings.Contains(err.Error(), "rooms.chain_id (COLLATE RTRIM)") {
				t.Errorf("RTRIM: err = %v, want ErrCollation naming rooms.chain_id", err)
			}
		}
	})
}

// typedDDL: hotel codes are text; acme's hotel is "7eleven", globex's is
// "7". MySQL compares '7eleven' = 7 as true (with a warning, or in strict
// mode an error quoting '7eleven').
var typedDDL = []string{
	`CREATE TABLE hotels (id INT_T PRIMARY KEY, chain_id KEY_T NOT NULL, code KEY_T NOT NULL UNIQUE)`,
	`CREATE TABLE rooms (id INT_T PRIMARY KEY, hotel_code KEY_T NOT NULL REFERENCES hotels(code))`,
	`INSERT INTO hotels VALUES (1, 'acme', '7eleven'), (2, 'globex', '7'), (3, 'acme', 'x1')`,
	`INSERT INTO rooms VALUES (10, '7eleven'), (11, '7'), (12, 'x1')`,
}

// typedDef declares the hotels' column types, and the rooms' when
// roomTypes: without them the builder cannot type rooms.hotel_code and the
// guard's parent check must.
func typedDef(roomTypes bool) *builder.Schema {
	rooms := builder.TableDef{Name: "rooms", Columns: []string{"id", "hotel_code"}, PrimaryKey: []string{"id"},
		ForeignKeys: []builder.ForeignKey{{Columns: []string{"hotel_code"}, RefTable: "hotels", RefColumns: []string{"code"}}}}
	if roomTypes {
		rooms.Types = map[string]string{"id": "BIGINT", "hotel_code": "TEXT"}
	}
	return builder.MustSchema(builder.SchemaDef{
		Levels: []builder.Level{{Name: "chain", Key: builder.TextKey}},
		Tables: []builder.TableDef{
			{Name: "hotels", Columns: []string{"id", "chain_id", "code"}, PrimaryKey: []string{"id"}, Unique: [][]string{{"code"}}, SharedUnique: codeShared,
				Types: map[string]string{"id": "BIGINT", "chain_id": "TEXT", "code": "TEXT"}, Levels: map[string]string{"chain_id": "chain"}},
			rooms,
		},
	})
}

// TestTypedValues: every bound value is converted to its column's kind or
// refused at Build naming the column, and the guard's parent check binds
// the referenced key's kind. Before the fix, on MySQL, acme's integer 7
// matched its own hotel "7eleven" in the parent check and planted a room
// under globex's hotel "7" (or, in strict mode, failed with an error
// quoting "7eleven"); on PostgreSQL the same insert failed with a type
// error instead of ErrNotFound.
func TestTypedValues(t *testing.T) {
	sch := typedDef(true)
	hotels, rooms := sch.Table("hotels"), sch.Table("rooms")
	for name, p := range map[string]builder.Pred{
		"bool for text":          rooms.Col("hotel_code").Eq(true),
		"float for text":         rooms.Col("hotel_code").In("x", 1.5),
		"non-integer for bigint": hotels.Col("id").Between("1", "7eleven"),
	} {
		_, err := builder.Select(rooms.Col("id")).From(rooms).Join(hotels, hotels.Col("code").EqCol(rooms.Col("hotel_code"))).Where(p).Build()
		if !errors.Is(err, builder.ErrType) || !errors.Is(err, builder.ErrInvalid) {
			t.Errorf("%s: err = %v, want ErrType", name, err)
		}
	}
	if _, err := builder.UpdateTable(rooms).Set("hotel_code", false).Where(rooms.Col("id").Eq(1)).Build(); !errors.Is(err, builder.ErrType) ||
		!strings.Contains(err.Error(), "rooms.hotel_code") {
		t.Errorf("update: err = %v, want ErrType naming rooms.hotel_code", err)
	}
	forEachEngine(t, func(t *testing.T, e engine) {
		s := newScratch(t, e, typedDDL)
		acme := grantCtx(chainG("acme"))
		for _, roomTypes := range []bool{true, false} {
			sch := typedDef(roomTypes)
			db, err := s.open(sch)
			if err != nil {
				t.Fatal(err)
			}
			hotels, rooms := sch.Table("hotels"), sch.Table("rooms")
			plant := builder.Must(builder.InsertInto(rooms).Columns("id", "hotel_code").Values(20, 7).Build())
			_, err = db.Exec(acme, plant)
			if !errors.Is(err, guardedsql.ErrNotFound) {
				t.Errorf("room types %v: insert under hotel 7: err = %v, want ErrNotFound", roomTypes, err)
			}
			if err != nil && strings.Contains(err.Error(), "7eleven") {
				t.Errorf("the error quotes a stored key: %v", err)
			}
			if n := s.count(`SELECT COUNT(*) FROM rooms WHERE hotel_code = '7'`); n != 1 {
				t.Fatalf("room types %v: globex's hotel 7 has %d rooms, want its own 1", roomTypes, n)
			}
			codes, err := guardedsql.All(acme, db, builder.Must(builder.Select(hotels.Col("code")).From(hotels).Where(hotels.Col("code").Eq(7)).Build()),
				func(r *guardedsql.Rows) (s string, err error) { err = r.Scan(&s); return })
			if roomTypes && (err != nil || len(codes) != 0) {
				t.Errorf("acme: code = 7 found %v (%v), want nothing", codes, err)
			}
		}
		if e.name == "mysql" && guardfault.Enabled {
			// With typing switched off the guard's parent check compares
			// '7eleven' = 7 and lets the plant through (or errors quoting
			// the stored key, in strict mode).
			restore := guardfault.Disable(guardfault.Typed)
			// The engine's own text is what would quote the key: let it
			// through for this control (the engine-error layer hides it).
			restoreRaw := guardfault.RawEngineErrors()
			sch := typedDef(true)
			db, err := s.open(sch)
			if err != nil {
				restore()
				restoreRaw()
				t.Fatal(err)
			}
			_, err = db.Exec(acme, builder.Must(builder.InsertInto(sch.Table("rooms")).Columns("id", "hotel_code").Values(21, 7).Build()))
			restore()
			restoreRaw()
			planted := s.count(`SELECT COUNT(*) FROM rooms WHERE id = 21`) == 1
			if !planted && (err == nil || !strings.Contains(err.Error(), "7eleven")) {
				t.Errorf("with typing off the insert should plant a room or quote '7eleven' (else the test is blind): %v", err)
			}
			t.Logf("typing off: planted=%v err=%v", planted, err)
		}
	})
}
