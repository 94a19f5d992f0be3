package conformance

// Properties 54–57 (issue 25 §2, §3, §5, §6): what the start-up catalog
// check refuses and what the guard and the generated grants keep
// read-only, each on a fixture of its own (tables prefixed gNN_, as the
// modelling-gap properties 25–29 do), because the target graph may not
// have these shapes.

import (
	"context"
	"errors"
	"slices"
	"strings"

	"github.com/tenantmcp/tenantmcp/builder"
	"github.com/tenantmcp/tenantmcp/guardedsql"
	"github.com/tenantmcp/tenantmcp/guardedsql/postgres"
)

func init() {
	register(
		&property{id: 54, name: "undeclared_fk", title: "Undeclared foreign key between tenant tables refused at Open",
			criterion: "rentals' clerk FK omitted: ErrUndeclaredFK naming the table and path", fn: propUndeclaredFK},
		&property{id: 55, name: "global_read_only", title: "Global tables are read-only unless declared writable",
			criterion: "guarded writes ErrReadOnly; AppGrantDDL grants SELECT only; writable control accepted", fn: propGlobalReadOnly},
		&property{id: 56, name: "shared_unique", title: "Unique keys shared across tenants refused unless acknowledged",
			criterion: "ErrSharedUnique at Open; acknowledged: collision = ErrConflict, upsert refused", fn: propSharedUnique},
		&property{id: 57, name: "triggers", title: "Triggers, rules and FK actions on tenant tables refused at Open",
			criterion: "ErrTrigger naming it (ON DELETE CASCADE too, acknowledged or not on a key that does not decide the tenant); acknowledged control opens; PostgreSQL: a pg_temp table shadows nothing", fn: propTriggers},
	)
}

var chainLevel = []builder.Level{{Name: "chain", Key: builder.TextKey}}

// propUndeclaredFK (P54): a rentals table with a customer path and a
// clerk path, whose declaration omits the clerk's, is refused at Open.
func propUndeclaredFK(p *pt, r *runner) {
	f := r.gapFixture(p, []string{"g54_rentals", "g54_customers", "g54_staff", "g54_stores"}, []string{
		`CREATE TABLE g54_stores (id INT_T PRIMARY KEY, chain_id KEY_T NOT NULL)`,
		`CREATE TABLE g54_staff (id INT_T PRIMARY KEY, store_id INT_T NOT NULL, FOREIGN KEY (store_id) REFERENCES g54_stores(id))`,
		`CREATE TABLE g54_customers (id INT_T PRIMARY KEY, store_id INT_T NOT NULL, FOREIGN KEY (store_id) REFERENCES g54_stores(id))`,
		`CREATE TABLE g54_rentals (id INT_T PRIMARY KEY, customer_id INT_T NOT NULL, staff_id INT_T NOT NULL,
			FOREIGN KEY (customer_id) REFERENCES g54_customers(id), FOREIGN KEY (staff_id) REFERENCES g54_staff(id))`,
		`INSERT INTO g54_stores VALUES (1, 'acme'), (2, 'globex')`,
		`INSERT INTO g54_staff VALUES (10, 1), (11, 2)`,
		`INSERT INTO g54_customers VALUES (20, 1), (21, 2)`,
	})
	defer f.drop()
	sch, err := builder.NewSchema(builder.SchemaDef{Levels: chainLevel, Tables: []builder.TableDef{
		{Name: "g54_stores", Columns: []string{"id", "chain_id"}, PrimaryKey: []string{"id"}, Levels: map[string]string{"chain_id": "chain"}},
		{Name: "g54_staff", Columns: []string{"id", "store_id"}, PrimaryKey: []string{"id"},
			ForeignKeys: []builder.ForeignKey{{Columns: []string{"store_id"}, RefTable: "g54_stores"}}},
		{Name: "g54_customers", Columns: []string{"id", "store_id"}, PrimaryKey: []string{"id"},
			ForeignKeys: []builder.ForeignKey{{Columns: []string{"store_id"}, RefTable: "g54_stores"}}},
		{Name: "g54_rentals", Columns: []string{"id", "customer_id", "staff_id"}, PrimaryKey: []string{"id"}, Parent: "customer_id",
			ForeignKeys: []builder.ForeignKey{{Columns: []string{"customer_id"}, RefTable: "g54_customers"}}},
	}})
	if err != nil {
		p.Fatalf("schema: %v", err)
	}
	db, err := f.open(sch)
	if errors.Is(err, guardedsql.ErrUndeclaredFK) {
		if !strings.Contains(err.Error(), "g54_rentals(staff_id) -> g54_staff(id)") {
			p.Errorf("refused without naming the table and the missing path: %v", err)
		}
		return
	}
	if err != nil {
		p.Fatalf("open: %v", err)
	}
	rentals := sch.Table("g54_rentals")
	_, werr := db.Exec(gapCtx(p, chainGrant("acme")), builder.Must(builder.InsertInto(rentals).Columns("id", "customer_id", "staff_id").Values(30, 20, 11).Build()))
	p.Errorf("g54_rentals' clerk foreign key (staff_id -> g54_staff) is not declared, yet Open accepted the graph; chain acme's rental naming globex's clerk: err %v", werr)
}

// propGlobalReadOnly (P55): guarded writes to a global table not declared
// writable fail with ErrReadOnly, and AppGrantDDL grants it SELECT only;
// declared writable, both allow writes.
func propGlobalReadOnly(p *pt, r *runner) {
	f := r.gapFixture(p, []string{"g55_rates", "g55_hotels"}, []string{
		`CREATE TABLE g55_hotels (id INT_T PRIMARY KEY, chain_id KEY_T NOT NULL)`,
		`CREATE TABLE g55_rates (id INT_T PRIMARY KEY, label KEY_T NOT NULL)`,
		`INSERT INTO g55_hotels VALUES (1, 'acme')`,
		`INSERT INTO g55_rates VALUES (1, 'standard')`,
	})
	defer f.drop()
	def := func(writable string) *builder.Schema {
		sch, err := builder.NewSchema(builder.SchemaDef{Levels: chainLevel, Tables: []builder.TableDef{
			{Name: "g55_hotels", Columns: []string{"id", "chain_id"}, PrimaryKey: []string{"id"}, Levels: map[string]string{"chain_id": "chain"}},
			{Name: "g55_rates", Columns: []string{"id", "label"}, PrimaryKey: []string{"id"}, Global: true, GlobalWritable: writable},
		}})
		if err != nil {
			p.Fatalf("schema: %v", err)
		}
		return sch
	}
	ro := def("")
	ddl, err := postgres.AppGrantDDL(ro, "tmconf_app")
	if err != nil {
		p.Fatalf("AppGrantDDL: %v", err)
	}
	for _, s := range ddl {
		if strings.Contains(s, `"g55_rates"`) && strings.HasPrefix(s, "GRANT") && !strings.HasPrefix(s, `GRANT SELECT ON TABLE "g55_rates"`) {
			p.Errorf("AppGrantDDL gives the application role more than SELECT on read-only global g55_rates: %s", s)
		}
	}
	if !slices.ContainsFunc(ddl, func(s string) bool { return strings.HasPrefix(s, `GRANT SELECT ON TABLE "g55_rates"`) }) {
		p.Errorf("AppGrantDDL grants no SELECT on g55_rates: %q", ddl)
	}
	db, err := f.open(ro)
	if err != nil {
		p.Fatalf("open: %v", err)
	}
	rates := ro.Table("g55_rates")
	acme := gapCtx(p, chainGrant("acme"))
	for name, st := range map[string]builder.Mutation{
		"INSERT": builder.Must(builder.InsertInto(rates).Columns("id", "label").Values(2, "x").Build()),
		"UPDATE": builder.Must(builder.UpdateTable(rates).Set("label", "x").Where(rates.Col("id").Eq(1)).Build()),
		"DELETE": builder.Must(builder.DeleteFrom(rates).Where(rates.Col("id").Eq(1)).Build()),
	} {
		if _, err := db.Exec(acme, st); !errors.Is(err, guardedsql.ErrReadOnly) {
			p.Errorf("guarded %s of read-only global g55_rates: err %v, want ErrReadOnly", name, err)
		}
	}
	if n := f.count(`SELECT COUNT(*) FROM g55_rates WHERE id = 1 AND label = 'standard'`) + f.count(`SELECT COUNT(*) FROM g55_rates`); n != 2 {
		p.Errorf("g55_rates changed through the guard")
	}
	rw := def("conformance: rates are maintained by every chain")
	db, err = f.open(rw)
	if err != nil {
		p.Fatalf("open writable: %v", err)
	}
	w := rw.Table("g55_rates")
	if res, err := db.Exec(acme, builder.Must(builder.UpdateTable(w).Set("label", "basic").Where(w.Col("id").Eq(1)).Build())); err != nil || res.RowsAffected != 1 {
		p.Errorf("control: update of a global declared writable: %+v %v", res, err)
	}
	f.exec(`UPDATE g55_rates SET label = 'standard' WHERE id = 1`)
}

// propSharedUnique (P56): a unique key without the tenant column is
// refused at Open unless acknowledged; acknowledged, a colliding insert
// is ErrConflict on every engine and an upsert on it is refused.
func propSharedUnique(p *pt, r *runner) {
	f := r.gapFixture(p, []string{"g56_guests", "g56_hotels"}, []string{
		`CREATE TABLE g56_hotels (id INT_T PRIMARY KEY, chain_id KEY_T NOT NULL)`,
		`CREATE TABLE g56_guests (id INT_T PRIMARY KEY, hotel_id INT_T NOT NULL, email KEY_T NOT NULL, FOREIGN KEY (hotel_id) REFERENCES g56_hotels(id))`,
		`CREATE UNIQUE INDEX g56_guests_email ON g56_guests (email)`,
		`INSERT INTO g56_hotels VALUES (1, 'acme'), (2, 'globex')`,
		`INSERT INTO g56_guests VALUES (10, 2, 'hank@globex.example')`,
	})
	defer f.drop()
	def := func(ack map[string]string) *builder.Schema {
		sch, err := builder.NewSchema(builder.SchemaDef{Levels: chainLevel, Tables: []builder.TableDef{
			{Name: "g56_hotels", Columns: []string{"id", "chain_id"}, PrimaryKey: []string{"id"}, Levels: map[string]string{"chain_id": "chain"}},
			{Name: "g56_guests", Columns: []string{"id", "hotel_id", "email"}, PrimaryKey: []string{"id"}, Unique: [][]string{{"email"}}, SharedUnique: ack,
				ForeignKeys: []builder.ForeignKey{{Columns: []string{"hotel_id"}, RefTable: "g56_hotels"}}},
		}})
		if err != nil {
			p.Fatalf("schema: %v", err)
		}
		return sch
	}
	if _, err := f.open(def(nil)); !errors.Is(err, guardedsql.ErrSharedUnique) || !strings.Contains(err.Error(), "g56_guests") {
		p.Errorf("unacknowledged unique key g56_guests(email), which lacks the tenant column, accepted at Open (err %v)", err)
	}
	sch := def(map[string]string{"email": "that some hotel has a guest with this e-mail address"})
	db, err := f.open(sch)
	if err != nil {
		p.Fatalf("open acknowledged: %v", err)
	}
	guests := sch.Table("g56_guests")
	_, err = db.Exec(gapCtx(p, chainGrant("acme")), builder.Must(builder.InsertInto(guests).Columns("id", "hotel_id", "email").Values(20, 1, "hank@globex.example").Build()))
	var ee *guardedsql.EngineError
	if !errors.Is(err, guardedsql.ErrConflict) || !errors.As(err, &ee) {
		p.Errorf("insert colliding with another tenant's shared key: err %v, want ErrConflict on every engine", err)
	}
	if _, err := builder.InsertInto(guests).Columns("id", "hotel_id", "email").Values(21, 1, "hank@globex.example").OnConflict("email").DoNothing().Build(); err == nil {
		p.Errorf("upsert on the shared key g56_guests(email) accepted at Build")
	}
}

// propTriggers (P57): a trigger (PostgreSQL: a rule) copying a tenant's
// rows into another tenant's table is refused at Open; on PostgreSQL a
// temporary table of the same name as a tenant table shadows nothing.
func propTriggers(p *pt, r *runner) {
	trigger := `CREATE TRIGGER g57_leak AFTER INSERT ON g57_notes BEGIN INSERT INTO g57_inbox (id, hotel_id, body) VALUES (NEW.id, 2, NEW.body); END`
	switch r.engine {
	case MySQL:
		trigger = `CREATE TRIGGER g57_leak AFTER INSERT ON g57_notes FOR EACH ROW INSERT INTO g57_inbox (id, hotel_id, body) VALUES (NEW.id, 2, NEW.body)`
	case Postgres:
		trigger = `CREATE RULE g57_leak AS ON INSERT TO g57_notes DO ALSO INSERT INTO g57_inbox (id, hotel_id, body) VALUES (NEW.id, 2, NEW.body)`
	}
	f := r.gapFixture(p, []string{"g57_marks", "g57_visits", "g57_notes", "g57_inbox", "g57_hotels"}, []string{
		`CREATE TABLE g57_hotels (id INT_T PRIMARY KEY, chain_id KEY_T NOT NULL)`,
		`CREATE TABLE g57_notes (id INT_T PRIMARY KEY, hotel_id INT_T NOT NULL, body KEY_T NOT NULL, FOREIGN KEY (hotel_id) REFERENCES g57_hotels(id))`,
		`CREATE TABLE g57_inbox (id INT_T PRIMARY KEY, hotel_id INT_T NOT NULL, body KEY_T NOT NULL, FOREIGN KEY (hotel_id) REFERENCES g57_hotels(id))`,
		// A note's visits cascade with it: the action writes g57_visits
		// rows, whichever tenant's, with no tenant predicate.
		`CREATE TABLE g57_visits (id INT_T PRIMARY KEY, note_id INT_T NOT NULL, FOREIGN KEY (note_id) REFERENCES g57_notes(id) ON DELETE CASCADE)`,
		// A note's marks cascade with the inbox entry they also name, a
		// consistency path: an entry of another tenant's inbox takes them.
		`CREATE TABLE g57_marks (id INT_T PRIMARY KEY, note_id INT_T NOT NULL, inbox_id INT_T NOT NULL, FOREIGN KEY (note_id) REFERENCES g57_notes(id),
			FOREIGN KEY (inbox_id) REFERENCES g57_inbox(id) ON DELETE CASCADE)`,
		`INSERT INTO g57_hotels VALUES (1, 'acme'), (2, 'globex')`,
		trigger,
	})
	defer f.drop()
	def := func(ack, visitsAck map[string]string, more ...builder.TableDef) *builder.Schema {
		sch, err := builder.NewSchema(builder.SchemaDef{Levels: chainLevel, Tables: append([]builder.TableDef{
			{Name: "g57_hotels", Columns: []string{"id", "chain_id"}, PrimaryKey: []string{"id"}, Levels: map[string]string{"chain_id": "chain"}},
			{Name: "g57_notes", Columns: []string{"id", "hotel_id", "body"}, PrimaryKey: []string{"id"}, Triggers: ack,
				ForeignKeys: []builder.ForeignKey{{Columns: []string{"hotel_id"}, RefTable: "g57_hotels"}}},
			{Name: "g57_inbox", Columns: []string{"id", "hotel_id", "body"}, PrimaryKey: []string{"id"},
				ForeignKeys: []builder.ForeignKey{{Columns: []string{"hotel_id"}, RefTable: "g57_hotels"}}},
			{Name: "g57_visits", Columns: []string{"id", "note_id"}, PrimaryKey: []string{"id"}, Triggers: visitsAck,
				ForeignKeys: []builder.ForeignKey{{Columns: []string{"note_id"}, RefTable: "g57_notes"}}},
		}, more...)})
		if err != nil {
			p.Fatalf("schema: %v", err)
		}
		return sch
	}
	cascade := map[string]string{"fk:note_id->g57_notes": "conformance control"}
	if _, err := f.open(def(nil, cascade)); !errors.Is(err, guardedsql.ErrTrigger) || !strings.Contains(err.Error(), "g57_leak on g57_notes") {
		p.Errorf("trigger g57_leak on g57_notes, copying every note into another tenant's inbox, accepted at Open (err %v)", err)
	}
	leak := map[string]string{"g57_leak": "conformance control"}
	if _, err := f.open(def(leak, nil)); !errors.Is(err, guardedsql.ErrTrigger) || !strings.Contains(err.Error(), "fk:note_id->g57_notes of g57_visits") {
		p.Errorf("foreign key fk:note_id->g57_notes of g57_visits, ON DELETE CASCADE (a note's deletion deletes visits of any tenant), accepted at Open (err %v)", err)
	}
	acked := def(leak, cascade)
	if _, err := f.open(acked); err != nil {
		p.Fatalf("control: acknowledged trigger refused: %v", err)
	}
	// An acknowledgement holds only on the key that decides the row's
	// tenant: the marks' cascade from the inbox, a consistency path,
	// reaches other tenants' marks whatever the reason given.
	marks := builder.TableDef{Name: "g57_marks", Columns: []string{"id", "note_id", "inbox_id"}, PrimaryKey: []string{"id"}, Parent: "note_id",
		Triggers:    map[string]string{"fk:inbox_id->g57_inbox": "conformance: the cascade crosses tenants"},
		ForeignKeys: []builder.ForeignKey{{Columns: []string{"note_id"}, RefTable: "g57_notes"}, {Columns: []string{"inbox_id"}, RefTable: "g57_inbox"}}}
	if _, err := f.open(def(leak, cascade, marks)); !errors.Is(err, guardedsql.ErrTrigger) || !strings.Contains(err.Error(), "fk:inbox_id->g57_inbox of g57_marks") {
		p.Errorf("acknowledged ON DELETE CASCADE fk:inbox_id->g57_inbox of g57_marks, a consistency path (an inbox entry's deletion deletes marks of any tenant), accepted at Open (err %v)", err)
	}
	if r.engine == Postgres {
		pgTempShadow(p, r, f, acked)
	}
}

// pgTempShadow: on a one-connection pool, a temporary g57_inbox created
// by raw SQL with a planted row neither serves a guarded read nor receives
// a guarded insert.
func pgTempShadow(p *pt, r *runner, f *gapFixture, sch *builder.Schema) {
	pool, err := r.sc.appPool(p.ctx, 1)
	if err != nil {
		p.Fatalf("one-connection pool: %v", err)
	}
	defer pool.Close()
	db, err := postgres.New(p.ctx, pool, sch, guardedsql.Options{Engine: postgres.Options{Key: r.sc.rlsKey}})
	if err != nil {
		p.Fatalf("open on a one-connection pool: %v", err)
	}
	defer db.Close()
	// The scratch database withholds TEMPORARY from the app role (a
	// deployment may too); the attack needs it, so it is lent here.
	grant := `GRANT TEMPORARY ON DATABASE ` + Postgres.quote(r.sc.dbName) + ` TO ` + Postgres.quote(r.sc.appRole)
	if _, err := r.sc.owner.ExecContext(p.ctx, grant); err != nil {
		p.Fatalf("%s: %v", grant, err)
	}
	defer func() {
		_, _ = r.sc.owner.ExecContext(context.Background(), `REVOKE TEMPORARY ON DATABASE `+Postgres.quote(r.sc.dbName)+` FROM `+Postgres.quote(r.sc.appRole))
	}()
	for _, q := range []string{
		`CREATE TEMP TABLE g57_inbox (id bigint PRIMARY KEY, hotel_id bigint NOT NULL, body text NOT NULL)`,
		`INSERT INTO g57_inbox VALUES (900, 1, 'planted')`,
	} {
		if _, err := pool.Exec(p.ctx, q); err != nil {
			p.Fatalf("raw SQL as the app role: %s: %v", q, err)
		}
	}
	acme := gapCtx(p, chainGrant("acme"))
	inbox := sch.Table("g57_inbox")
	if got := strs(p, db, acme, builder.Must(builder.Select(inbox.Col("body")).From(inbox).Build())); slices.Contains(got, "planted") {
		p.Errorf("a temporary g57_inbox on the pooled connection shadowed the table: the guarded read served its planted row %v", got)
	}
	if _, err := db.Exec(acme, builder.Must(builder.InsertInto(inbox).Columns("id", "hotel_id", "body").Values(901, 1, "sent").Build())); err != nil {
		p.Errorf("guarded insert into g57_inbox: %v", err)
	}
	var temp int
	if err := pool.QueryRow(p.ctx, `SELECT count(*) FROM pg_temp.g57_inbox WHERE id = 901`).Scan(&temp); err != nil {
		p.Fatalf("reading the temporary table: %v", err)
	}
	if real := f.count(`SELECT COUNT(*) FROM g57_inbox WHERE id = 901`); temp != 0 || real != 1 {
		p.Errorf("the guarded insert went to the temporary g57_inbox (temporary %d, real %d)", temp, real)
	}
	f.exec(`DELETE FROM g57_inbox WHERE id = 901`)
}
