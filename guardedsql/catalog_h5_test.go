package guardedsql_test

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/tenantmcp/tenantmcp/builder"
	"github.com/tenantmcp/tenantmcp/guardedsql"
	"github.com/tenantmcp/tenantmcp/guardedsql/postgres"
	"github.com/tenantmcp/tenantmcp/internal/guardfault"
)

// franchiseDDL: stores of chains; staff and customers belong to a store;
// a rental references a customer and a clerk, each with its own path to a
// store (issue 25 §2).
var franchiseDDL = []string{
	`CREATE TABLE stores (id INT_T PRIMARY KEY, chain_id KEY_T NOT NULL)`,
	`CREATE TABLE staff (id INT_T PRIMARY KEY, store_id INT_T NOT NULL, name KEY_T NOT NULL, FOREIGN KEY (store_id) REFERENCES stores(id))`,
	`CREATE TABLE customers (id INT_T PRIMARY KEY, store_id INT_T NOT NULL, name KEY_T NOT NULL, FOREIGN KEY (store_id) REFERENCES stores(id))`,
	`CREATE TABLE rentals (id INT_T PRIMARY KEY, customer_id INT_T NOT NULL, staff_id INT_T NOT NULL,
		FOREIGN KEY (customer_id) REFERENCES customers(id), FOREIGN KEY (staff_id) REFERENCES staff(id))`,
	`INSERT INTO stores VALUES (1, 'acme'), (2, 'globex')`,
	`INSERT INTO staff VALUES (10, 1, 'acme clerk'), (11, 2, 'globex clerk')`,
	`INSERT INTO customers VALUES (20, 1, 'acme customer'), (21, 2, 'globex customer')`,
}

// franchiseDef declares the franchise; withClerk adds rentals' staff_id
// foreign key, which the database has either way.
func franchiseDef(withClerk bool) *builder.Schema {
	fks := []builder.ForeignKey{{Columns: []string{"customer_id"}, RefTable: "customers"}}
	if withClerk {
		fks = append(fks, builder.ForeignKey{Columns: []string{"staff_id"}, RefTable: "staff"})
	}
	return builder.MustSchema(builder.SchemaDef{
		Levels: []builder.Level{{Name: "chain", Key: builder.TextKey}},
		Tables: []builder.TableDef{
			{Name: "stores", Columns: []string{"id", "chain_id"}, PrimaryKey: []string{"id"}, Levels: map[string]string{"chain_id": "chain"}},
			{Name: "staff", Columns: []string{"id", "store_id", "name"}, PrimaryKey: []string{"id"},
				ForeignKeys: []builder.ForeignKey{{Columns: []string{"store_id"}, RefTable: "stores"}}},
			{Name: "customers", Columns: []string{"id", "store_id", "name"}, PrimaryKey: []string{"id"},
				ForeignKeys: []builder.ForeignKey{{Columns: []string{"store_id"}, RefTable: "stores"}}},
			{Name: "rentals", Columns: []string{"id", "customer_id", "staff_id"}, PrimaryKey: []string{"id"},
				ForeignKeys: fks, Parent: "customer_id"},
		},
	})
}

// TestUndeclaredFKRefused (issue 25 §2): a rentals table whose clerk
// foreign key (staff_id -> staff) the declaration omits is refused at
// Open with ErrUndeclaredFK, naming the table, the columns and how to
// declare it. Before the fix it opened, and a store then wrote rentals
// pointing at another store's clerk (shown with the check switched off).
func TestUndeclaredFKRefused(t *testing.T) {
	forEachEngine(t, func(t *testing.T, e engine) {
		s := newScratch(t, e, franchiseDDL)
		_, err := s.open(franchiseDef(false))
		if !errors.Is(err, guardedsql.ErrUndeclaredFK) || !errors.Is(err, guardedsql.ErrCatalog) {
			t.Fatalf("rentals without its clerk path: err = %v, want ErrUndeclaredFK", err)
		}
		for _, want := range []string{"rentals(staff_id) -> staff(id)", "Parent", "consistency path", "Unchecked"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("error does not say %q: %v", want, err)
			}
		}
		if strings.Contains(err.Error(), "customer_id") {
			t.Errorf("the declared path reported as undeclared: %v", err)
		}
		if _, err := s.open(franchiseDef(true)); err != nil {
			t.Fatalf("both paths declared: %v", err)
		}
		if e.name == "postgres" {
			return // the demonstration below needs no second engine
		}
		if !guardfault.Enabled {
			t.Skip("mutation control: " + guardfault.NotBuilt)
		}
		sch := franchiseDef(false)
		restore := guardfault.Disable(guardfault.UndeclaredFK)
		db, err := s.open(sch)
		restore()
		if err != nil {
			t.Fatalf("with the check off: %v", err)
		}
		rentals := sch.Table("rentals")
		if _, err := db.Exec(grantCtx(chainG("acme")), builder.Must(builder.InsertInto(rentals).Columns("id", "customer_id", "staff_id").Values(30, 20, 11).Build())); err != nil {
			t.Errorf("with the check off acme should write a rental naming globex's clerk (else the test is blind): %v", err)
		}
	})
}

// TestGlobalWithTenantFKStillRefused: a tenant table declared Global whose
// catalog shows a foreign key into a tenant table is refused unless it
// gives a GlobalReason; declared Global, it is also not an undeclared
// foreign key of a tenant table (the global check reports it instead).
func TestGlobalWithTenantFKStillRefused(t *testing.T) {
	s := newScratch(t, engineSQLite, franchiseDDL)
	def := func(reason string) *builder.Schema {
		return builder.MustSchema(builder.SchemaDef{
			Levels: []builder.Level{{Name: "chain", Key: builder.TextKey}},
			Tables: []builder.TableDef{
				{Name: "stores", Columns: []string{"id", "chain_id"}, PrimaryKey: []string{"id"}, Levels: map[string]string{"chain_id": "chain"}},
				{Name: "staff", Columns: []string{"id", "store_id", "name"}, PrimaryKey: []string{"id"}, Global: true, GlobalReason: reason,
					ForeignKeys: []builder.ForeignKey{{Columns: []string{"store_id"}, RefTable: "stores"}}},
			},
		})
	}
	if _, err := s.open(def("")); !errors.Is(err, guardedsql.ErrGlobalDrift) || !strings.Contains(err.Error(), "staff(store_id) references tenant-bound stores") {
		t.Errorf("staff declared global: err = %v, want ErrGlobalDrift", err)
	}
	if _, err := s.open(def("the staff directory is public across the franchise")); err != nil {
		t.Errorf("with a GlobalReason: %v", err)
	}
}

// triggerDDL: notes and inbox belong to hotels; the triggers of
// triggerOn copy every note into hotel 2's inbox.
var triggerDDL = []string{
	`CREATE TABLE hotels (id INT_T PRIMARY KEY, chain_id KEY_T NOT NULL)`,
	`CREATE TABLE notes (id INT_T PRIMARY KEY, hotel_id INT_T NOT NULL, body KEY_T NOT NULL, FOREIGN KEY (hotel_id) REFERENCES hotels(id))`,
	`CREATE TABLE inbox (id INT_T PRIMARY KEY, hotel_id INT_T NOT NULL, body KEY_T NOT NULL, FOREIGN KEY (hotel_id) REFERENCES hotels(id))`,
	`INSERT INTO hotels VALUES (1, 'acme'), (2, 'globex')`,
}

// triggerOn returns, per engine, the statements creating the trigger
// "leak" on notes (and on PostgreSQL the rule "leak_rule"), and the names
// Open must refuse.
func triggerOn(engine string) (ddl []string, names []string) {
	switch engine {
	case "sqlite":
		return []string{`CREATE TRIGGER leak AFTER INSERT ON notes BEGIN INSERT INTO inbox (id, hotel_id, body) VALUES (NEW.id, 2, NEW.body); END`}, []string{"leak"}
	case "mysql":
		return []string{`CREATE TRIGGER leak AFTER INSERT ON notes FOR EACH ROW INSERT INTO inbox (id, hotel_id, body) VALUES (NEW.id, 2, NEW.body)`}, []string{"leak"}
	}
	return []string{
		`CREATE FUNCTION leak_fn() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN INSERT INTO inbox (id, hotel_id, body) VALUES (NEW.id, 2, NEW.body); RETURN NEW; END $$`,
		`CREATE TRIGGER leak AFTER INSERT ON notes FOR EACH ROW EXECUTE FUNCTION leak_fn()`,
		`CREATE RULE leak_rule AS ON UPDATE TO notes DO ALSO INSERT INTO inbox (id, hotel_id, body) VALUES (NEW.id + 1000, 2, NEW.body)`,
	}, []string{"leak", "leak_rule"}
}

func triggerDef(ack map[string]string) *builder.Schema {
	return builder.MustSchema(builder.SchemaDef{
		Levels: []builder.Level{{Name: "chain", Key: builder.TextKey}},
		Tables: []builder.TableDef{
			{Name: "hotels", Columns: []string{"id", "chain_id"}, PrimaryKey: []string{"id"}, Levels: map[string]string{"chain_id": "chain"}},
			{Name: "notes", Columns: []string{"id", "hotel_id", "body"}, PrimaryKey: []string{"id"}, Triggers: ack,
				ForeignKeys: []builder.ForeignKey{{Columns: []string{"hotel_id"}, RefTable: "hotels"}}},
			{Name: "inbox", Columns: []string{"id", "hotel_id", "body"}, PrimaryKey: []string{"id"},
				ForeignKeys: []builder.ForeignKey{{Columns: []string{"hotel_id"}, RefTable: "hotels"}}},
		},
	})
}

// TestTriggersRefused (issue 25 §6): a trigger (PostgreSQL: and a rule) on
// a tenant table is refused at Open with ErrTrigger naming it, unless the
// declaration acknowledges it. The acknowledged trigger shows what the
// check is about: on SQLite and MariaDB acme's note lands in globex's
// inbox, behind the guard.
func TestTriggersRefused(t *testing.T) {
	forEachEngine(t, func(t *testing.T, e engine) {
		s := newScratch(t, e, triggerDDL)
		if _, err := s.open(triggerDef(nil)); err != nil {
			t.Fatalf("no trigger yet: %v", err)
		}
		ddl, names := triggerOn(e.name)
		for _, q := range ddl {
			s.mustExec(t, q)
		}
		_, err := s.open(triggerDef(nil))
		if !errors.Is(err, guardedsql.ErrTrigger) || !errors.Is(err, guardedsql.ErrCatalog) {
			t.Fatalf("unacknowledged trigger: err = %v, want ErrTrigger", err)
		}
		for _, n := range names {
			if !strings.Contains(err.Error(), " "+n+" on notes") {
				t.Errorf("error does not name %s on notes: %v", n, err)
			}
		}
		ack := map[string]string{}
		for _, n := range names {
			ack[n] = "test: the copy is the point"
		}
		sch := triggerDef(ack)
		db, err := s.open(sch)
		if err != nil {
			t.Fatalf("acknowledged: %v", err)
		}
		if e.name == "postgres" {
			return
		}
		notes, inbox := sch.Table("notes"), sch.Table("inbox")
		if _, err := db.Exec(grantCtx(chainG("acme")), builder.Must(builder.InsertInto(notes).Columns("id", "hotel_id", "body").Values(1, 1, "acme secret").Build())); err != nil {
			t.Fatal(err)
		}
		got, err := guardedsql.All(grantCtx(chainG("globex")), db, builder.Must(builder.Select(inbox.Col("body")).From(inbox).Build()),
			func(r *guardedsql.Rows) (s string, err error) { err = r.Scan(&s); return })
		if err != nil || !slices.Contains(got, "acme secret") {
			t.Errorf("the trigger should have copied acme's note to globex (else the test is blind): %v %v", got, err)
		}
	})
}

// TestSharedUniqueOneErrorKind (issue 25 §5): an unacknowledged unique key
// without the tenant column is refused at Open; acknowledged, an insert
// colliding with another tenant's value fails with ErrConflict on every
// engine (no value of that row in the error), and an upsert on the key is
// refused at Build.
func TestSharedUniqueOneErrorKind(t *testing.T) {
	ddl := []string{
		`CREATE TABLE hotels (id INT_T PRIMARY KEY, chain_id KEY_T NOT NULL)`,
		`CREATE TABLE guests (id INT_T PRIMARY KEY, hotel_id INT_T NOT NULL, email KEY_T NOT NULL, name KEY_T NOT NULL, FOREIGN KEY (hotel_id) REFERENCES hotels(id))`,
		`CREATE UNIQUE INDEX guests_email ON guests (email)`,
		`INSERT INTO hotels VALUES (1, 'acme'), (2, 'globex')`,
		`INSERT INTO guests VALUES (10, 2, 'hank@globex.example', 'Hank Globex')`,
	}
	def := func(ack map[string]string) *builder.Schema {
		return builder.MustSchema(builder.SchemaDef{
			Levels: []builder.Level{{Name: "chain", Key: builder.TextKey}},
			Tables: []builder.TableDef{
				{Name: "hotels", Columns: []string{"id", "chain_id"}, PrimaryKey: []string{"id"}, Levels: map[string]string{"chain_id": "chain"}},
				{Name: "guests", Columns: []string{"id", "hotel_id", "email", "name"}, PrimaryKey: []string{"id"}, Unique: [][]string{{"email"}}, SharedUnique: ack,
					ForeignKeys: []builder.ForeignKey{{Columns: []string{"hotel_id"}, RefTable: "hotels"}}},
			},
		})
	}
	forEachEngine(t, func(t *testing.T, e engine) {
		s := newScratch(t, e, ddl)
		_, err := s.open(def(nil))
		if !errors.Is(err, guardedsql.ErrSharedUnique) || !strings.Contains(err.Error(), "guests unique key") || !strings.Contains(err.Error(), `SharedUnique["email"]`) {
			t.Fatalf("unacknowledged guests(email): err = %v, want ErrSharedUnique naming it", err)
		}
		sch := def(map[string]string{"email": "that some hotel registered a guest with this e-mail address"})
		db, err := s.open(sch)
		if err != nil {
			t.Fatalf("acknowledged: %v", err)
		}
		guests := sch.Table("guests")
		acme := grantCtx(chainG("acme"))
		_, err = db.Exec(acme, builder.Must(builder.InsertInto(guests).Columns("id", "hotel_id", "email", "name").Values(20, 1, "hank@globex.example", "Acme Hank").Build()))
		var ee *guardedsql.EngineError
		if !errors.Is(err, guardedsql.ErrConflict) || !errors.As(err, &ee) {
			t.Errorf("%s: insert colliding with globex's e-mail: err = %v, want ErrConflict (an EngineError)", e.name, err)
		} else if strings.Contains(err.Error(), "Hank Globex") || strings.Contains(err.Error(), "hank@") {
			t.Errorf("the conflict echoes a value: %v", err)
		}
		if _, err := db.Exec(acme, builder.Must(builder.InsertInto(guests).Columns("id", "hotel_id", "email", "name").Values(21, 1, "new@acme.example", "New").Build())); err != nil {
			t.Errorf("control: a fresh e-mail: %v", err)
		}
		_, err = builder.InsertInto(guests).Columns("id", "hotel_id", "email", "name").Values(22, 1, "hank@globex.example", "x").OnConflict("email").DoUpdate("name").Build()
		if !errors.Is(err, builder.ErrInvalid) || !strings.Contains(err.Error(), "shared across tenants") {
			t.Errorf("upsert on the shared key: err = %v, want ErrInvalid", err)
		}
	})
}

// TestGlobalReadOnly (issue 25 §3): the guard refuses writes to a global
// table unless it is declared GlobalWritable, and then writes it.
func TestGlobalReadOnly(t *testing.T) {
	ddl := []string{
		`CREATE TABLE hotels (id INT_T PRIMARY KEY, chain_id KEY_T NOT NULL)`,
		`CREATE TABLE rates (id INT_T PRIMARY KEY, label KEY_T NOT NULL)`,
		`INSERT INTO hotels VALUES (1, 'acme')`,
		`INSERT INTO rates VALUES (1, 'standard')`,
	}
	def := func(writable string) *builder.Schema {
		return builder.MustSchema(builder.SchemaDef{
			Levels: []builder.Level{{Name: "chain", Key: builder.TextKey}},
			Tables: []builder.TableDef{
				{Name: "hotels", Columns: []string{"id", "chain_id"}, PrimaryKey: []string{"id"}, Levels: map[string]string{"chain_id": "chain"}},
				{Name: "rates", Columns: []string{"id", "label"}, PrimaryKey: []string{"id"}, Global: true, GlobalWritable: writable},
			},
		})
	}
	if _, err := builder.NewSchema(builder.SchemaDef{Tables: []builder.TableDef{{Name: "x", Columns: []string{"id"}, GlobalWritable: "why"}}}); !errors.Is(err, builder.ErrSchema) {
		t.Errorf("GlobalWritable on a tenant table: %v, want ErrSchema", err)
	}
	forEachEngine(t, func(t *testing.T, e engine) {
		s := newScratch(t, e, ddl)
		acme := grantCtx(chainG("acme"))
		ro := def("")
		db, err := s.open(ro)
		if err != nil {
			t.Fatal(err)
		}
		r := ro.Table("rates")
		for name, st := range map[string]builder.Mutation{
			"insert": builder.Must(builder.InsertInto(r).Columns("id", "label").Values(2, "x").Build()),
			"update": builder.Must(builder.UpdateTable(r).Set("label", "x").Where(r.Col("id").Eq(1)).Build()),
			"delete": builder.Must(builder.DeleteFrom(r).Where(r.Col("id").Eq(1)).Build()),
		} {
			if _, err := db.Exec(acme, st); !errors.Is(err, guardedsql.ErrReadOnly) {
				t.Errorf("%s of read-only global rates: err = %v, want ErrReadOnly", name, err)
			}
		}
		if n := s.count(`SELECT COUNT(*) FROM rates WHERE label = 'standard'`); n != 1 {
			t.Fatalf("rates changed: %d", n)
		}
		rw := def("rates are maintained by every hotel's manager")
		db, err = s.open(rw)
		if err != nil {
			t.Fatal(err)
		}
		w := rw.Table("rates")
		if _, err := db.Exec(acme, builder.Must(builder.InsertInto(w).Columns("id", "label").Values(2, "weekend").Build())); err != nil {
			t.Errorf("insert into writable global: %v", err)
		}
		if res, err := db.Exec(acme, builder.Must(builder.UpdateTable(w).Set("label", "basic").Where(w.Col("id").Eq(1)).Build())); err != nil || res.RowsAffected != 1 {
			t.Errorf("update of writable global: %+v %v", res, err)
		}
		if res, err := db.Exec(acme, builder.Must(builder.DeleteFrom(w).Where(w.Col("id").Eq(2)).Build())); err != nil || res.RowsAffected != 1 {
			t.Errorf("delete from writable global: %+v %v", res, err)
		}
		if n := s.count(`SELECT COUNT(*) FROM rates WHERE label = 'basic'`); n != 1 {
			t.Errorf("writable global not updated: %d", n)
		}
	})
}

// TestSearchPathPinned (issue 25 §6, PostgreSQL): a temporary table that
// raw SQL created on the pooled connection, named like a tenant table and
// holding planted rows, neither serves guarded reads nor receives guarded
// inserts: every guarded transaction pins search_path with pg_temp last.
// With the pin switched off both happen (the test is not blind).
func TestSearchPathPinned(t *testing.T) {
	h := newPostgresHotel(t, enginePostgres.dsn(t), seedModel(2, 1, 1, 1))
	ctx := context.Background()
	cfg := h.appCfg.Copy()
	cfg.MaxConns = 1
	pool := pgConnect(t, cfg)
	defer pool.Close()
	db, err := postgres.New(ctx, pool, h.sch, guardedsql.Options{Engine: postgres.Options{Key: h.key}})
	if err != nil {
		t.Fatal(err)
	}
	var hotel int64
	if err := h.admin.QueryRow(ctx, `SELECT id FROM hotels WHERE chain_id = 'acme' ORDER BY id LIMIT 1`).Scan(&hotel); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		`CREATE TEMP TABLE rooms (id bigint PRIMARY KEY, hotel_id bigint NOT NULL, number text NOT NULL, rate bigint NOT NULL)`,
		`INSERT INTO rooms VALUES (9001, ` + itoa(hotel) + `, 'planted', 1)`,
	} {
		if _, err := pool.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	rooms := h.sch.Table("rooms")
	acme := grantCtx(chainG("acme"))
	read := func() []string {
		got, err := guardedsql.All(acme, db, builder.Must(builder.Select(rooms.Col("number")).From(rooms).Build()),
			func(r *guardedsql.Rows) (s string, err error) { err = r.Scan(&s); return })
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	insert := func(id int64) {
		if _, err := db.Exec(acme, builder.Must(builder.InsertInto(rooms).Columns("id", "hotel_id", "number", "rate").Values(id, hotel, "new", 5).Build())); err != nil {
			t.Fatalf("guarded insert: %v", err)
		}
	}
	temp := func(id int64) int {
		var n int
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM pg_temp.rooms WHERE id = $1`, id).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	real := func(id int64) int {
		var n int
		if err := h.admin.QueryRow(ctx, `SELECT count(*) FROM `+h.schema+`.rooms WHERE id = $1`, id).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if got := read(); slices.Contains(got, "planted") || len(got) == 0 {
		t.Errorf("guarded read served the temporary table's planted row, or nothing: %v", got)
	}
	insert(9101)
	if temp(9101) != 0 || real(9101) != 1 {
		t.Errorf("guarded insert went to the temporary table (temp %d, real %d)", temp(9101), real(9101))
	}
	if !guardfault.Enabled {
		t.Skip("mutation control: " + guardfault.NotBuilt)
	}
	restore := guardfault.Disable(guardfault.SearchPath)
	got := read()
	insert(9102)
	restore()
	if !slices.Contains(got, "planted") || temp(9102) != 1 {
		t.Errorf("with the pin off the temporary table should shadow rooms (else the test is blind): read %v, temp insert %d", got, temp(9102))
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// TestFKActionsRefused: a foreign key between tenant tables whose ON
// DELETE (or ON UPDATE) action writes the referencing rows is refused at
// Open with ErrTrigger naming it (engine-neutral: fk:<columns>-><table>),
// unless the declaration acknowledges it; the same action on a key into a
// read-only global table is not (no tenant's write fires it). An
// acknowledgement holds only for the key that decides the referencing
// row's tenant (a rental's customer): on any other key (its clerk) a row
// may reference another tenant's row, so the action crosses tenants — a
// legacy rental of acme's customer served by globex's clerk, acme's, was
// deleted when globex deleted its clerk (Cal.com: deleting a user of org 1
// deleted team 2's event types). Such an acknowledgement is refused.
func TestFKActionsRefused(t *testing.T) {
	ddl := []string{
		`CREATE TABLE regions (id INT_T PRIMARY KEY)`,
		`CREATE TABLE stores (id INT_T PRIMARY KEY, chain_id KEY_T NOT NULL, region_id INT_T, FOREIGN KEY (region_id) REFERENCES regions(id) ON UPDATE CASCADE ON DELETE SET NULL)`,
		`CREATE TABLE staff (id INT_T PRIMARY KEY, store_id INT_T NOT NULL, name KEY_T NOT NULL, FOREIGN KEY (store_id) REFERENCES stores(id))`,
		`CREATE TABLE customers (id INT_T PRIMARY KEY, store_id INT_T NOT NULL, name KEY_T NOT NULL, FOREIGN KEY (store_id) REFERENCES stores(id))`,
		`CREATE TABLE rentals (id INT_T PRIMARY KEY, customer_id INT_T NOT NULL, staff_id INT_T NOT NULL,
			FOREIGN KEY (customer_id) REFERENCES customers(id) ON DELETE CASCADE, FOREIGN KEY (staff_id) REFERENCES staff(id) ON DELETE CASCADE)`,
		`INSERT INTO regions VALUES (7)`,
		`INSERT INTO stores VALUES (1, 'acme', 7), (2, 'globex', 7)`,
		`INSERT INTO staff VALUES (10, 1, 'acme clerk'), (11, 2, 'globex clerk')`,
		`INSERT INTO customers VALUES (20, 1, 'acme customer'), (21, 2, 'globex customer')`,
		`INSERT INTO rentals VALUES (30, 20, 11)`,
	}
	def := func(ack map[string]string, chains ...builder.TableDef) *builder.Schema {
		stores := builder.TableDef{Name: "stores", Columns: []string{"id", "chain_id", "region_id"}, PrimaryKey: []string{"id"}, Levels: map[string]string{"chain_id": "chain"},
			ForeignKeys: []builder.ForeignKey{{Columns: []string{"region_id"}, RefTable: "regions"}}}
		if len(chains) > 0 {
			stores.ForeignKeys = append(stores.ForeignKeys, builder.ForeignKey{Columns: []string{"chain_id"}, RefTable: "chains"})
			stores.Triggers = map[string]string{"fk:chain_id->chains": "a chain's stores are the chain's"}
		}
		return builder.MustSchema(builder.SchemaDef{
			Levels: []builder.Level{{Name: "chain", Key: builder.TextKey}},
			Tables: append(chains, []builder.TableDef{
				{Name: "regions", Columns: []string{"id"}, PrimaryKey: []string{"id"}, Global: true, GlobalReason: "test: a public list"},
				stores,
				{Name: "staff", Columns: []string{"id", "store_id", "name"}, PrimaryKey: []string{"id"},
					ForeignKeys: []builder.ForeignKey{{Columns: []string{"store_id"}, RefTable: "stores"}}},
				{Name: "customers", Columns: []string{"id", "store_id", "name"}, PrimaryKey: []string{"id"},
					ForeignKeys: []builder.ForeignKey{{Columns: []string{"store_id"}, RefTable: "stores"}}},
				{Name: "rentals", Columns: []string{"id", "customer_id", "staff_id"}, PrimaryKey: []string{"id"}, Parent: "customer_id", Triggers: ack,
					ForeignKeys: []builder.ForeignKey{{Columns: []string{"customer_id"}, RefTable: "customers"}, {Columns: []string{"staff_id"}, RefTable: "staff"}}},
			}...),
		})
	}
	const byParent, byClerk = "fk:customer_id->customers", "fk:staff_id->staff"
	forEachEngine(t, func(t *testing.T, e engine) {
		s := newScratch(t, e, ddl)
		_, err := s.open(def(nil))
		if !errors.Is(err, guardedsql.ErrTrigger) || !strings.Contains(err.Error(), byClerk+" of rentals") || !strings.Contains(err.Error(), byParent+" of rentals") {
			t.Fatalf("unacknowledged ON DELETE CASCADE: err = %v, want ErrTrigger naming both keys of rentals", err)
		}
		if strings.Contains(err.Error(), "regions") {
			t.Errorf("the action on the key into the read-only global regions was refused too: %v", err)
		}
		// Only the Parent's action may be acknowledged: the clerk's message
		// must not offer what Open then refuses (Invoice Ninja probe).
		if !strings.Contains(err.Error(), `acknowledge it in rentals's Triggers["`+byParent) || strings.Contains(err.Error(), `Triggers["`+byClerk) {
			t.Errorf("unacknowledged ON DELETE CASCADE: err = %v, want the acknowledgement offered for %s alone", err, byParent)
		}
		_, err = s.open(def(map[string]string{byParent: "a customer's rentals are its store's", byClerk: "test: the cascade is the point"}))
		if !errors.Is(err, guardedsql.ErrTrigger) || !strings.Contains(err.Error(), byClerk+" of rentals") || !strings.Contains(err.Error(), "is not the key that decides") ||
			strings.Contains(err.Error(), byParent) {
			t.Fatalf("acknowledged cascade on the clerk: err = %v, want ErrTrigger refusing %s alone", err, byClerk)
		}
		if n := s.count(`SELECT COUNT(*) FROM rentals WHERE id = 30`); n != 1 {
			t.Fatalf("acme's rental 30 is gone")
		}
	})
	// The acknowledgement holds on the parent's key, and on a key through a
	// level column onto the same level (a chain's stores, by chain_id; in
	// Citus's shape, a promotion's (chain_id, store_id) onto the store).
	ok := slices.Clone(ddl)
	ok[1] = `CREATE TABLE stores (id INT_T PRIMARY KEY, chain_id KEY_T NOT NULL REFERENCES chains(id) ON DELETE CASCADE, region_id INT_T, FOREIGN KEY (region_id) REFERENCES regions(id) ON UPDATE CASCADE ON DELETE SET NULL, UNIQUE (chain_id, id))`
	ok = append(ok, `CREATE TABLE promos (id INT_T PRIMARY KEY, chain_id KEY_T NOT NULL, store_id INT_T NOT NULL, FOREIGN KEY (chain_id, store_id) REFERENCES stores(chain_id, id) ON DELETE CASCADE)`)
	ok[4] = `CREATE TABLE rentals (id INT_T PRIMARY KEY, customer_id INT_T NOT NULL, staff_id INT_T NOT NULL,
			FOREIGN KEY (customer_id) REFERENCES customers(id) ON DELETE CASCADE, FOREIGN KEY (staff_id) REFERENCES staff(id))`
	ok = append([]string{`CREATE TABLE chains (id KEY_T PRIMARY KEY)`, `INSERT INTO chains VALUES ('acme'), ('globex')`}, ok...)
	s := newScratch(t, engineSQLite, ok)
	chains := builder.TableDef{Name: "chains", Columns: []string{"id"}, PrimaryKey: []string{"id"}, Levels: map[string]string{"id": "chain"}}
	promos := builder.TableDef{Name: "promos", Columns: []string{"id", "chain_id", "store_id"}, PrimaryKey: []string{"id"}, Levels: map[string]string{"chain_id": "chain"},
		ForeignKeys: []builder.ForeignKey{{Columns: []string{"chain_id", "store_id"}, RefTable: "stores", RefColumns: []string{"chain_id", "id"}}},
		Triggers:    map[string]string{"fk:chain_id,store_id->stores": "a store's promotions are its chain's"}}
	if _, err := s.open(def(map[string]string{byParent: "a customer's rentals are its store's"}, chains, promos)); err != nil {
		t.Errorf("acknowledged cascades from the parent, the chain and the store's composite key: %v", err)
	}
}

// TestGlobalRootRefused: a table declared global whose rows a level column
// references (Chatwoot's accounts, referenced by conversations.account_id)
// holds the tenants themselves: Open refuses it with ErrGlobalDrift unless
// it gives a GlobalReason; declared tenant-bound (its key a level column)
// it opens.
func TestGlobalRootRefused(t *testing.T) {
	ddl := []string{
		`CREATE TABLE accounts (id INT_T PRIMARY KEY, name KEY_T NOT NULL)`,
		`CREATE TABLE conversations (id INT_T PRIMARY KEY, account_id INT_T NOT NULL, FOREIGN KEY (account_id) REFERENCES accounts(id))`,
		`INSERT INTO accounts VALUES (1, 'acme'), (2, 'globex')`,
	}
	def := func(accounts builder.TableDef) *builder.Schema {
		return builder.MustSchema(builder.SchemaDef{
			Levels: []builder.Level{{Name: "account", Key: builder.IntKey}},
			Tables: []builder.TableDef{accounts,
				{Name: "conversations", Columns: []string{"id", "account_id"}, PrimaryKey: []string{"id"}, Levels: map[string]string{"account_id": "account"},
					ForeignKeys: []builder.ForeignKey{{Columns: []string{"account_id"}, RefTable: "accounts"}}},
			},
		})
	}
	global := builder.TableDef{Name: "accounts", Columns: []string{"id", "name"}, PrimaryKey: []string{"id"}, Global: true}
	forEachEngine(t, func(t *testing.T, e engine) {
		s := newScratch(t, e, ddl)
		_, err := s.open(def(global))
		if !errors.Is(err, guardedsql.ErrGlobalDrift) || !strings.Contains(err.Error(), "conversations.account_id") || !strings.Contains(err.Error(), "references accounts") {
			t.Fatalf("accounts declared global: err = %v, want ErrGlobalDrift naming conversations.account_id and accounts", err)
		}
		if n := strings.Count(err.Error(), "conversations.account_id"); n != 1 {
			t.Errorf("the mistake is reported %d times, want once (the foreign-key rule, not the name rule too): %v", n, err)
		}
		t.Log(err)
		reasoned := global
		reasoned.GlobalReason = "test: account names are public"
		if _, err := s.open(def(reasoned)); err != nil {
			t.Fatalf("with a GlobalReason: %v", err)
		}
		bound := builder.TableDef{Name: "accounts", Columns: []string{"id", "name"}, PrimaryKey: []string{"id"}, Levels: map[string]string{"id": "account"}}
		if _, err := s.open(def(bound)); err != nil {
			t.Fatalf("accounts tenant-bound: %v", err)
		}
	})
}

// TestGlobalNamedLikeReferenceRefused: a schema whose framework keeps no
// foreign keys (Rails: Chatwoot's inbox_members(inbox_id, user_id)) shows
// its tenant rows only by column names. A table declared global with a
// column named after a tenant-bound table ("inbox_id" for inboxes) and no
// foreign key on it is refused with ErrGlobalDrift unless it gives a
// GlobalReason; a column named after a global table is not.
func TestGlobalNamedLikeReferenceRefused(t *testing.T) {
	ddl := []string{
		`CREATE TABLE inboxes (id INT_T PRIMARY KEY, account_id INT_T NOT NULL)`,
		`CREATE TABLE languages (id INT_T PRIMARY KEY)`,
		`CREATE TABLE inbox_members (id INT_T PRIMARY KEY, inbox_id INT_T NOT NULL, user_id INT_T NOT NULL, language_id INT_T NULL)`,
	}
	def := func(members builder.TableDef) *builder.Schema {
		return builder.MustSchema(builder.SchemaDef{
			Levels: []builder.Level{{Name: "account", Key: builder.IntKey}},
			Tables: []builder.TableDef{members,
				{Name: "inboxes", Columns: []string{"id", "account_id"}, PrimaryKey: []string{"id"}, Levels: map[string]string{"account_id": "account"}},
				{Name: "languages", Columns: []string{"id"}, PrimaryKey: []string{"id"}, Global: true},
			},
		})
	}
	members := builder.TableDef{Name: "inbox_members", Columns: []string{"id", "inbox_id", "user_id", "language_id"}, PrimaryKey: []string{"id"}, Global: true}
	forEachEngine(t, func(t *testing.T, e engine) {
		s := newScratch(t, e, ddl)
		_, err := s.open(def(members))
		if !errors.Is(err, guardedsql.ErrGlobalDrift) || !strings.Contains(err.Error(), "inbox_members.inbox_id is named like a reference to tenant-bound inboxes") {
			t.Fatalf("inbox_members declared global: err = %v, want ErrGlobalDrift naming inbox_members.inbox_id", err)
		}
		if strings.Contains(err.Error(), "language_id") {
			t.Errorf("language_id (a global table's) refused too: %v", err)
		}
		t.Log(err)
		reasoned := members
		reasoned.GlobalReason = "test: membership lists are public"
		if _, err := s.open(def(reasoned)); err != nil {
			t.Fatalf("with a GlobalReason: %v", err)
		}
	})
}

// TestGlobalPrefixedOrPolymorphicReferenceRefused: the siblings of
// TestGlobalNamedLikeReferenceRefused. Django names a table after its
// application ("sentry_project") but the reference after the model
// ("project_id"); Rails and Laravel store a reference to any of several
// tables as a pair ("taggable_type", "taggable_id") no foreign key can
// hold, and so do Zulip ("type", "type_id") and Django's generic relations
// ("content_type_id", "object_id"). Either, in a table declared global
// without a GlobalReason, may hold tenants' row ids, and is refused with
// ErrGlobalDrift. So is a reference or level named in camel case with no
// separator (Mattermost's ChannelId, folded to channelid).
func TestGlobalPrefixedOrPolymorphicReferenceRefused(t *testing.T) {
	ddl := []string{
		`CREATE TABLE sentry_project (id INT_T PRIMARY KEY, organization_id INT_T NOT NULL)`,
		`CREATE TABLE tags (id INT_T PRIMARY KEY, name VARCHAR(40) NOT NULL)`,
		`CREATE TABLE sentry_option (id INT_T PRIMARY KEY, project_id INT_T NULL, value VARCHAR(40) NULL)`,
		`CREATE TABLE taggings (id INT_T PRIMARY KEY, tag_id INT_T NOT NULL, taggable_type VARCHAR(40) NOT NULL, taggable_id INT_T NOT NULL)`,
		`CREATE TABLE recipients (id INT_T PRIMARY KEY, type INT_T NOT NULL, type_id INT_T NOT NULL)`,
		`CREATE TABLE audit_entries (id INT_T PRIMARY KEY, content_type_id INT_T NOT NULL, object_id VARCHAR(40) NOT NULL)`,
		// Mattermost's shape: no foreign keys, camel-case names (folded
		// to projectid by PostgreSQL when unquoted).
		`CREATE TABLE option_camel (id INT_T PRIMARY KEY, projectid INT_T NULL)`,
		`CREATE TABLE option_org (id INT_T PRIMARY KEY, organizationid INT_T NULL)`,
	}
	project := builder.TableDef{Name: "sentry_project", Columns: []string{"id", "organization_id"}, PrimaryKey: []string{"id"}, Levels: map[string]string{"organization_id": "organization"}}
	tags := builder.TableDef{Name: "tags", Columns: []string{"id", "name"}, PrimaryKey: []string{"id"}, Global: true}
	option := builder.TableDef{Name: "sentry_option", Columns: []string{"id", "project_id", "value"}, PrimaryKey: []string{"id"}, Global: true}
	taggings := builder.TableDef{Name: "taggings", Columns: []string{"id", "tag_id", "taggable_type", "taggable_id"}, PrimaryKey: []string{"id"}, Global: true}
	// Zulip's recipient (type, type_id) and Django's generic relation
	// (content_type_id, object_id).
	recipients := builder.TableDef{Name: "recipients", Columns: []string{"id", "type", "type_id"}, PrimaryKey: []string{"id"}, Global: true}
	audit := builder.TableDef{Name: "audit_entries", Columns: []string{"id", "content_type_id", "object_id"}, PrimaryKey: []string{"id"}, Global: true}
	camel := builder.TableDef{Name: "option_camel", Columns: []string{"id", "projectid"}, PrimaryKey: []string{"id"}, Global: true}
	camelLevel := builder.TableDef{Name: "option_org", Columns: []string{"id", "organizationid"}, PrimaryKey: []string{"id"}, Global: true}
	def := func(tables ...builder.TableDef) *builder.Schema {
		return builder.MustSchema(builder.SchemaDef{
			Levels: []builder.Level{{Name: "organization", Key: builder.IntKey}},
			Tables: append([]builder.TableDef{project, tags}, tables...),
		})
	}
	forEachEngine(t, func(t *testing.T, e engine) {
		s := newScratch(t, e, ddl)
		for _, c := range []struct {
			table builder.TableDef
			want  string
		}{
			{option, "sentry_option.project_id is named like a reference to tenant-bound sentry_project"},
			{taggings, "taggings.taggable_id is a polymorphic reference"},
			{recipients, "recipients.type_id is a polymorphic reference"},
			{audit, "audit_entries.object_id is a polymorphic reference"},
			{camel, "option_camel.projectid is named like a reference to tenant-bound sentry_project"},
			{camelLevel, "option_org.organizationid is named like a scope level"},
		} {
			_, err := s.open(def(c.table))
			if !errors.Is(err, guardedsql.ErrGlobalDrift) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("%s declared global: err = %v, want ErrGlobalDrift containing %q", c.table.Name, err, c.want)
			}
			if strings.Contains(err.Error(), "tag_id") {
				t.Errorf("tag_id (a global table's) refused too: %v", err)
			}
			reasoned := c.table
			reasoned.GlobalReason = "test: reviewed"
			if _, err := s.open(def(reasoned)); err != nil {
				t.Fatalf("%s with a GlobalReason: %v", c.table.Name, err)
			}
		}
	})
}

// TestLevelColumnAnchored: a column declared to carry a level must hold
// that level's keys where the database's foreign keys say anything. On
// the Citus ad-analytics shape (composite keys carrying company_id):
// ads.campaign_id declared a company column maps onto campaigns.id (a
// campaign id), campaigns.id declared a second company column beside
// company_id, or instead of it, has no foreign key (clicks.id likewise),
// a column with no foreign key declared the level beside one named like
// it (Rails: tickets.project_id, not company_id), and (Django's shape) a
// link table's
// project_id declared a level column references projects.id. Each handed
// one company's rows to the company whose id equals a campaign or
// project id, and each is refused with ErrLevelColumn. The correct
// declarations, including clicks carrying company_id onto ads, whose
// own scope comes through its Parent, open.
func TestLevelColumnAnchored(t *testing.T) {
	ddl := []string{
		`CREATE TABLE companies (id INT_T PRIMARY KEY, parent_id INT_T NULL, FOREIGN KEY (parent_id) REFERENCES companies(id))`,
		`CREATE TABLE campaigns (company_id INT_T NOT NULL, id INT_T NOT NULL, PRIMARY KEY (company_id, id), FOREIGN KEY (company_id) REFERENCES companies(id))`,
		`CREATE TABLE ads (company_id INT_T NOT NULL, id INT_T NOT NULL, campaign_id INT_T NOT NULL, PRIMARY KEY (company_id, id),
			FOREIGN KEY (company_id, campaign_id) REFERENCES campaigns(company_id, id))`,
		`CREATE TABLE clicks (company_id INT_T NOT NULL, id INT_T NOT NULL, ad_id INT_T NOT NULL, PRIMARY KEY (company_id, id),
			FOREIGN KEY (company_id, ad_id) REFERENCES ads(company_id, id))`,
		`CREATE TABLE projects (id INT_T PRIMARY KEY, company_id INT_T NOT NULL, FOREIGN KEY (company_id) REFERENCES companies(id))`,
		`CREATE TABLE issues (id INT_T PRIMARY KEY, project_id INT_T NOT NULL, FOREIGN KEY (project_id) REFERENCES projects(id))`,
		// Rails: no foreign keys at all.
		`CREATE TABLE tickets (id INT_T PRIMARY KEY, company_id INT_T NOT NULL, project_id INT_T NOT NULL)`,
	}
	lv := func(cols ...string) map[string]string {
		m := map[string]string{}
		for _, c := range cols {
			m[c] = "company"
		}
		return m
	}
	fk := func(cols, ref string, refCols string) builder.ForeignKey {
		return builder.ForeignKey{Columns: strings.Split(cols, ","), RefTable: ref, RefColumns: strings.Split(refCols, ",")}
	}
	// A holding's subsidiaries: a self-reference beside the level column.
	companies := builder.TableDef{Name: "companies", Columns: []string{"id", "parent_id"}, PrimaryKey: []string{"id"}, Levels: lv("id"),
		ForeignKeys: []builder.ForeignKey{fk("parent_id", "companies", "id")}}
	campaigns := builder.TableDef{Name: "campaigns", Columns: []string{"company_id", "id"}, PrimaryKey: []string{"company_id", "id"}, Levels: lv("company_id"),
		ForeignKeys: []builder.ForeignKey{fk("company_id", "companies", "id")}}
	ads := builder.TableDef{Name: "ads", Columns: []string{"company_id", "id", "campaign_id"}, PrimaryKey: []string{"company_id", "id"},
		ForeignKeys: []builder.ForeignKey{fk("company_id,campaign_id", "campaigns", "company_id,id")}, Parent: "campaign_id"}
	clicks := builder.TableDef{Name: "clicks", Columns: []string{"company_id", "id", "ad_id"}, PrimaryKey: []string{"company_id", "id"}, Levels: lv("company_id"),
		ForeignKeys: []builder.ForeignKey{fk("company_id,ad_id", "ads", "company_id,id")}}
	projects := builder.TableDef{Name: "projects", Columns: []string{"id", "company_id"}, PrimaryKey: []string{"id"}, Levels: lv("company_id"),
		ForeignKeys: []builder.ForeignKey{fk("company_id", "companies", "id")}}
	issues := builder.TableDef{Name: "issues", Columns: []string{"id", "project_id"}, PrimaryKey: []string{"id"},
		ForeignKeys: []builder.ForeignKey{fk("project_id", "projects", "id")}, Parent: "project_id"}
	tickets := builder.TableDef{Name: "tickets", Columns: []string{"id", "company_id", "project_id"}, PrimaryKey: []string{"id"}, Levels: lv("company_id")}
	def := func(tables ...builder.TableDef) (*builder.Schema, error) {
		return builder.NewSchema(builder.SchemaDef{Levels: []builder.Level{{Name: "company", Key: builder.IntKey}}, Tables: tables})
	}
	forEachEngine(t, func(t *testing.T, e engine) {
		s := newScratch(t, e, ddl)
		right := []builder.TableDef{companies, campaigns, ads, clicks, projects, issues, tickets}
		sch, err := def(right...)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.open(sch); err != nil {
			t.Fatalf("the correct declaration: %v", err)
		}
		for _, c := range []struct {
			what string
			with func(tables []builder.TableDef) // changes the right declaration
			want string
		}{
			{"ads.campaign_id a company column beside its Parent", func(ts []builder.TableDef) { ts[2].Levels = lv("campaign_id") },
				"ads.campaign_id is declared a column of level company, but the database's foreign key ads(company_id,campaign_id) -> campaigns(company_id,id) says it holds campaigns.id"},
			{"campaigns.id a second company column", func(ts []builder.TableDef) { ts[1].Levels = lv("company_id", "id") },
				"campaigns declares both company_id and id for level company, and no foreign key says id holds"},
			{"campaigns.id the company column instead of company_id", func(ts []builder.TableDef) { ts[1].Levels = lv("id") },
				"campaigns.id, a column of campaigns's primary key, is declared the column of level company, but the database's foreign key campaigns(company_id) -> companies(id) says campaigns.company_id holds"},
			{"clicks.id the company column instead of company_id", func(ts []builder.TableDef) { ts[3].Levels = lv("id") },
				"clicks.id, a column of clicks's primary key, is declared the column of level company, but the database's foreign key clicks(company_id,ad_id) -> ads(company_id,id) says clicks.company_id holds"},
			{"tickets.project_id the company column, no foreign keys (Rails)", func(ts []builder.TableDef) { ts[6].Levels = lv("project_id") },
				"tickets.project_id is declared the column of level company, but tickets also has company_id, named like the level, undeclared"},
			{"issues.project_id a company column instead of its Parent", func(ts []builder.TableDef) { ts[5].Levels = lv("project_id"); ts[5].Parent = "" },
				"issues.project_id is declared a column of level company, but the database's foreign key issues(project_id) -> projects(id) says it holds projects.id"},
		} {
			ts := slices.Clone(right)
			c.with(ts)
			sch, err := def(ts...)
			if err != nil {
				t.Fatalf("%s: schema: %v", c.what, err)
			}
			_, err = s.open(sch)
			if !errors.Is(err, guardedsql.ErrLevelColumn) || !errors.Is(err, guardedsql.ErrCatalog) || !strings.Contains(err.Error(), c.want) {
				t.Errorf("%s: err = %v, want ErrLevelColumn containing %q", c.what, err, c.want)
			}
		}
	})
}

// TestUniqueThroughConsistencyKeyShared: a unique key made of a checked
// foreign key that does not decide the row's tenant (a stay's guest; its
// room does) collides with other tenants' rows, because a row may
// reference a row of another tenant there: a holder of both chains files
// globex's stay for acme's guest, and acme's insert of a stay for that
// guest then fails with ErrConflict, telling acme of a row it cannot read
// (Cal.com: UNIQUE (userId, slug) on event types told team 1 the slugs of
// team 2's event types for a user of both). Open refuses such a key
// (ErrSharedUnique) unless SharedUnique acknowledges it, on every engine;
// the same for a key through the Parent of a table with level columns,
// which reads by its level columns alone. The exemption for keys through a
// checked foreign key (Plane's cycle_issues UNIQUE (issue_id)) is gone.
func TestUniqueThroughConsistencyKeyShared(t *testing.T) {
	ddl := []string{
		`CREATE TABLE hotels (id INT_T PRIMARY KEY, chain_id KEY_T NOT NULL)`,
		`CREATE TABLE guests (id INT_T PRIMARY KEY, hotel_id INT_T NOT NULL REFERENCES hotels(id))`,
		`CREATE TABLE rooms (id INT_T PRIMARY KEY, hotel_id INT_T NOT NULL REFERENCES hotels(id))`,
		`CREATE TABLE stays (id INT_T PRIMARY KEY, room_id INT_T NOT NULL REFERENCES rooms(id), guest_id INT_T NOT NULL REFERENCES guests(id), note KEY_T NULL)`,
		`CREATE UNIQUE INDEX stays_guest ON stays (guest_id)`,
		`CREATE TABLE events (id INT_T PRIMARY KEY, chain_id KEY_T NULL, guest_id INT_T NOT NULL REFERENCES guests(id), slug KEY_T NOT NULL)`,
		`CREATE UNIQUE INDEX events_slug ON events (guest_id, slug)`,
		`INSERT INTO hotels VALUES (1, 'acme'), (2, 'globex')`,
		`INSERT INTO guests VALUES (10, 1), (11, 2), (12, 1), (13, 2)`,
		`INSERT INTO rooms VALUES (20, 1), (21, 2)`,
		`INSERT INTO stays VALUES (30, 20, 10, NULL), (31, 21, 11, NULL)`,
	}
	fk := func(col, ref string) builder.ForeignKey {
		return builder.ForeignKey{Columns: []string{col}, RefTable: ref}
	}
	def := func(ackStays, ackEvents bool) *builder.Schema {
		stays := builder.TableDef{Name: "stays", Columns: []string{"id", "room_id", "guest_id", "note"}, PrimaryKey: []string{"id"}, Parent: "room_id", Unique: [][]string{{"guest_id"}},
			ForeignKeys: []builder.ForeignKey{fk("room_id", "rooms"), fk("guest_id", "guests")}}
		events := builder.TableDef{Name: "events", Columns: []string{"id", "chain_id", "guest_id", "slug"}, PrimaryKey: []string{"id"}, Parent: "guest_id",
			Levels: map[string]string{"chain_id": "chain"}, Unique: [][]string{{"guest_id", "slug"}}, ForeignKeys: []builder.ForeignKey{fk("guest_id", "guests")}}
		if ackStays {
			stays.SharedUnique = map[string]string{"guest_id": "one stay a guest; a conflict tells that another chain's stay names the guest"}
		}
		if ackEvents {
			events.SharedUnique = map[string]string{"guest_id,slug": "slugs are unique per guest across chains"}
		}
		return builder.MustSchema(builder.SchemaDef{
			Levels: []builder.Level{{Name: "chain", Key: builder.TextKey}},
			Tables: []builder.TableDef{
				{Name: "hotels", Columns: []string{"id", "chain_id"}, PrimaryKey: []string{"id"}, Levels: map[string]string{"chain_id": "chain"}},
				{Name: "guests", Columns: []string{"id", "hotel_id"}, PrimaryKey: []string{"id"}, Parent: "hotel_id", ForeignKeys: []builder.ForeignKey{fk("hotel_id", "hotels")}},
				{Name: "rooms", Columns: []string{"id", "hotel_id"}, PrimaryKey: []string{"id"}, Parent: "hotel_id", ForeignKeys: []builder.ForeignKey{fk("hotel_id", "hotels")}},
				stays, events,
			},
		})
	}
	forEachEngine(t, func(t *testing.T, e engine) {
		s := newScratch(t, e, ddl)
		for _, c := range []struct {
			stays, events bool
			want          string
		}{{false, true, "(guest_id)"}, {true, false, "(guest_id,slug)"}} {
			if _, err := s.open(def(c.stays, c.events)); !errors.Is(err, guardedsql.ErrSharedUnique) || !strings.Contains(err.Error(), c.want) {
				t.Errorf("unacknowledged UNIQUE %s: %v, want ErrSharedUnique", c.want, err)
			}
		}
		sch := def(true, true)
		db, err := s.open(sch)
		if err != nil {
			t.Fatalf("acknowledged: %v", err)
		}
		stays := sch.Table("stays")
		ins := func(ctx context.Context, id, room, guest int) error {
			_, err := db.Exec(ctx, builder.Must(builder.InsertInto(stays).Columns("id", "room_id", "guest_id").Values(id, room, guest).Build()))
			return err
		}
		// A holder of both chains cannot file globex's stay for acme's
		// guest 12: each reference is in its scope, but under no one
		// grant (internal/guard/pairing.go) ...
		if err := ins(grantCtx(chainG("acme"), chainG("globex")), 40, 21, 12); !errors.Is(err, guardedsql.ErrNotFound) {
			t.Fatalf("both chains file globex's stay for acme's guest: %v, want ErrNotFound", err)
		}
		if err := ins(grantCtx(chainG("acme"), chainG("globex")), 42, 21, 13); err != nil {
			t.Fatalf("control: both chains file globex's stay for globex's guest 13: %v", err)
		}
		// ... but why the acknowledgement is needed: such a row, written
		// outside the guard (a migration, an import), ...
		s.mustWrite(t, `INSERT INTO stays VALUES (40, 21, 12, NULL)`)
		// ... which acme cannot read, yet its own stay for guest 12
		// collides with it.
		got := byrefIDs(t, grantCtx(chainG("acme")), db, builder.Must(builder.Select(stays.Col("id")).From(stays).OrderBy(stays.Col("id").Asc()).Build()))
		if slices.Contains(got, int64(40)) {
			t.Fatalf("acme reads globex's stay 40: %v", got)
		}
		if err := ins(grantCtx(chainG("acme")), 41, 20, 12); !errors.Is(err, guardedsql.ErrConflict) {
			t.Errorf("acme's stay for its guest 12: %v; want the ErrConflict the acknowledgement accepts", err)
		}
	})
}

// TestUnlistedNamedAndPolymorphic: a table left out of the graph that
// holds a column named like a reference to a tenant-bound table with no
// foreign key (inbox_archive.inbox_id), or a polymorphic reference
// (Lago's versions, item_type and item_id), is reported as undeclarable
// (Open warns to grant the application role nothing on it; property 27
// does not count it as drift, since no declaration fits it); a table with
// neither (settings) is not reported.
func TestUnlistedNamedAndPolymorphic(t *testing.T) {
	ddl := []string{
		`CREATE TABLE inboxes (id INT_T PRIMARY KEY, account_id INT_T NOT NULL)`,
		`CREATE TABLE inbox_archive (id INT_T PRIMARY KEY, inbox_id INT_T NOT NULL)`,
		`CREATE TABLE versions (id INT_T PRIMARY KEY, item_type KEY_T NOT NULL, item_id INT_T NOT NULL)`,
		`CREATE TABLE settings (id INT_T PRIMARY KEY, name KEY_T NOT NULL)`,
	}
	sch := builder.MustSchema(builder.SchemaDef{
		Levels: []builder.Level{{Name: "account", Key: builder.IntKey}},
		Tables: []builder.TableDef{
			{Name: "inboxes", Columns: []string{"id", "account_id"}, PrimaryKey: []string{"id"}, Levels: map[string]string{"account_id": "account"}},
		},
	})
	forEachEngine(t, func(t *testing.T, e engine) {
		s := newScratch(t, e, ddl)
		db, err := s.open(sch)
		if err != nil {
			t.Fatal(err)
		}
		rep, err := guardedsql.CheckCatalog(context.Background(), db)
		if err != nil {
			t.Fatal(err)
		}
		if want := []string{"inbox_archive", "versions"}; len(rep.Unlisted) > 0 || !slices.Equal(rep.Undeclarable, want) {
			t.Errorf("unlisted %v, undeclarable %v; want none, %v", rep.Unlisted, rep.Undeclarable, want)
		}
	})
}
