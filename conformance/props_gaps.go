package conformance

// Properties 25–29: the modelling gaps of issue 13 §3–7, each on a small
// fixture of its own (tables prefixed gNN_, created in the scratch database
// as its owner and dropped again), because they concern schema shapes the
// target graph may not have: a nullable composite tenant foreign key, a
// scope path onto a non-unique column, a table wrongly declared global, a
// case-insensitive tenant key, a text key compared with a number. Each
// attacks through the guard (and, on PostgreSQL, row-level security) and
// fails on a cross-tenant row, a missing refusal, or an error quoting a
// stored key. P27 also compares the target's own graph with its catalog.

import (
	"context"
	"errors"
	"slices"
	"strings"

	"github.com/tenantmcp/tenantmcp/builder"
	"github.com/tenantmcp/tenantmcp/guardedsql"
	"github.com/tenantmcp/tenantmcp/scope"
	"github.com/tenantmcp/tenantmcp/scope/scopetest"
)

// gapTypes spells the DDL type words KEY_T (a text key: VARCHAR on MySQL,
// which cannot index TEXT) and INT_T for the engine.
func gapTypes(e Engine, q string) string {
	key, integer := "TEXT", "BIGINT"
	switch e {
	case MySQL:
		key = "VARCHAR(64)"
	case SQLite:
		integer = "INTEGER"
	}
	return strings.NewReplacer(" KEY_T", " "+key, " INT_T", " "+integer).Replace(q)
}

// gapFixture creates tables (named in drop order: children first) with
// ddl as the owner, and registers their removal.
type gapFixture struct {
	p      *pt
	r      *runner
	tables []string
	closes []func() error
}

func (r *runner) gapFixture(p *pt, tables []string, ddl []string) *gapFixture {
	f := &gapFixture{p: p, r: r, tables: tables}
	f.drop() // left over from an aborted run
	for _, q := range ddl {
		f.exec(q)
	}
	return f
}

func (f *gapFixture) exec(q string, args ...any) {
	if _, err := f.r.sc.owner.ExecContext(f.p.ctx, gapTypes(f.r.engine, q), args...); err != nil {
		f.p.Fatalf("fixture: %s: %v", q, err)
	}
}

func (f *gapFixture) count(q string, args ...any) int {
	var n int
	if err := f.r.sc.owner.QueryRowContext(f.p.ctx, q, args...).Scan(&n); err != nil {
		f.p.Fatalf("fixture: %s: %v", q, err)
	}
	return n
}

// open guards the fixture with sch as the app role (PostgreSQL: after
// installing sch's row-level security and the role's rights).
func (f *gapFixture) open(sch *builder.Schema) (*guardedsql.DB, error) {
	if err := prepareEngine(f.p.ctx, f.r.sc, sch); err != nil {
		f.p.Fatalf("fixture: %v", err)
	}
	db, closeDB, err := f.r.sc.openGuarded(f.p.ctx, sch, guardedsql.Options{})
	if err == nil {
		f.closes = append(f.closes, closeDB)
	}
	return db, err
}

func (f *gapFixture) drop() {
	for i := len(f.closes) - 1; i >= 0; i-- {
		_ = f.closes[i]()
	}
	f.closes = nil
	for _, t := range f.tables {
		if _, err := f.r.sc.owner.ExecContext(f.p.ctx, `DROP TABLE IF EXISTS `+f.r.engine.quote(t)); err != nil {
			f.p.Errorf("fixture: dropping %s: %v", t, err)
		}
	}
}

func gapCtx(p *pt, grants ...scope.Grant) context.Context {
	return scopetest.NewContext(p.ctx, scopetest.New("conformance", grants))
}

func chainGrant(id string) scope.Grant { return scope.Grant{Level: "chain", ID: id} }

func strs(p *pt, db *guardedsql.DB, ctx context.Context, q builder.Query) []string {
	rows, err := db.Query(ctx, q)
	if err != nil {
		p.Fatalf("query: %v", err)
	}
	out, err := guardedsql.CollectRows(rows, func(r *guardedsql.Rows) (s string, err error) { err = r.Scan(&s); return })
	if err != nil {
		p.Fatalf("query: %v", err)
	}
	return out
}

// propNullableFK (P25): a level column covered by a composite tenant
// foreign key with a NULL part is checked on its own, on UPDATE and INSERT.
func propNullableFK(p *pt, r *runner) {
	f := r.gapFixture(p, []string{"g25_notes", "g25_rooms", "g25_hotels", "g25_chains"}, []string{
		`CREATE TABLE g25_chains (id KEY_T PRIMARY KEY)`,
		`CREATE TABLE g25_hotels (id INT_T PRIMARY KEY, chain_id KEY_T NOT NULL REFERENCES g25_chains(id), UNIQUE (chain_id, id))`,
		`CREATE TABLE g25_rooms (id INT_T PRIMARY KEY, hotel_id INT_T NOT NULL REFERENCES g25_hotels(id))`,
		`CREATE TABLE g25_notes (id INT_T PRIMARY KEY, room_id INT_T NOT NULL REFERENCES g25_rooms(id), chain_id KEY_T NOT NULL, hotel_id INT_T NULL,
		   FOREIGN KEY (chain_id, hotel_id) REFERENCES g25_hotels(chain_id, id))`,
		`INSERT INTO g25_chains VALUES ('acme'), ('globex')`,
		`INSERT INTO g25_hotels VALUES (1, 'acme'), (2, 'globex'), (3, 'acme')`,
		`INSERT INTO g25_rooms VALUES (10, 1), (11, 2), (12, 3)`,
		`INSERT INTO g25_notes VALUES (100, 10, 'acme', 1), (101, 11, 'globex', 2)`,
	})
	defer f.drop()
	sch, err := builder.NewSchema(builder.SchemaDef{
		Levels: []builder.Level{{Name: "chain", Key: builder.TextKey}, {Name: "hotel", Key: builder.IntKey}},
		Tables: []builder.TableDef{
			{Name: "g25_chains", Columns: []string{"id"}, PrimaryKey: []string{"id"}, Levels: map[string]string{"id": "chain"}},
			{Name: "g25_hotels", Columns: []string{"id", "chain_id"}, PrimaryKey: []string{"id"}, Unique: [][]string{{"chain_id", "id"}},
				ForeignKeys: []builder.ForeignKey{{Columns: []string{"chain_id"}, RefTable: "g25_chains"}},
				Levels:      map[string]string{"id": "hotel", "chain_id": "chain"}},
			{Name: "g25_rooms", Columns: []string{"id", "hotel_id"}, PrimaryKey: []string{"id"},
				ForeignKeys: []builder.ForeignKey{{Columns: []string{"hotel_id"}, RefTable: "g25_hotels"}}},
			{Name: "g25_notes", Columns: []string{"id", "room_id", "chain_id", "hotel_id"}, PrimaryKey: []string{"id"},
				ForeignKeys: []builder.ForeignKey{{Columns: []string{"room_id"}, RefTable: "g25_rooms"},
					{Columns: []string{"chain_id", "hotel_id"}, RefTable: "g25_hotels", RefColumns: []string{"chain_id", "id"}}},
				Levels: map[string]string{"chain_id": "chain"}, Parent: "room_id"},
		},
	})
	if err != nil {
		p.Fatalf("schema: %v", err)
	}
	db, err := f.open(sch)
	if err != nil {
		p.Fatalf("open: %v", err)
	}
	notes := sch.Table("g25_notes")
	acme, hotel1 := gapCtx(p, chainGrant("acme")), gapCtx(p, scope.Grant{Level: "hotel", ID: "1"})
	move := builder.Must(builder.UpdateTable(notes).Set("chain_id", "globex").Set("hotel_id", nil).Where(notes.Col("id").Eq(100)).Build())
	plant := builder.Must(builder.InsertInto(notes).Columns("id", "room_id", "chain_id", "hotel_id").Values(102, 10, "globex", nil).Build())
	for _, a := range []struct {
		name string
		ctx  context.Context
		m    builder.Mutation
	}{{"UPDATE by chain acme", acme, move}, {"INSERT by chain acme", acme, plant}, {"INSERT by hotel 1", hotel1, plant}} {
		_, _ = db.Exec(a.ctx, a.m)
		if n := f.count(`SELECT COUNT(*) FROM g25_notes WHERE chain_id = 'globex'`); n != 1 {
			p.Fatalf("%s with hotel_id NULL put a row into chain globex (%d rows, want its own 1)", a.name, n)
		}
	}
	n, err := db.Exec(acme, builder.Must(builder.InsertInto(notes).Columns("id", "room_id", "chain_id", "hotel_id").Values(103, 10, "acme", nil).Build()))
	if err != nil || n.RowsAffected != 1 {
		p.Errorf("control: acme's own note with hotel_id NULL refused: %v", err)
	}
}

// propPathKey (P26): a foreign key into a tenant-bound table must
// reference a key, in the declared graph and in the live catalog.
func propPathKey(p *pt, r *runner) {
	fk := " REFERENCES g26_hotels(code)"
	if r.engine == Postgres {
		fk = "" // PostgreSQL itself refuses a foreign key onto a non-key
	}
	f := r.gapFixture(p, []string{"g26_rooms", "g26_hotels"}, []string{
		`CREATE TABLE g26_hotels (id INT_T PRIMARY KEY, chain_id KEY_T NOT NULL, code KEY_T NOT NULL)`,
		`CREATE INDEX g26_hotels_code ON g26_hotels(code)`,
		`CREATE TABLE g26_rooms (id INT_T PRIMARY KEY, hotel_code KEY_T NOT NULL` + fk + `)`,
	})
	defer f.drop()
	def := func(unique bool) builder.SchemaDef {
		h := builder.TableDef{Name: "g26_hotels", Columns: []string{"id", "chain_id", "code"}, PrimaryKey: []string{"id"}, Levels: map[string]string{"chain_id": "chain"}}
		if unique {
			h.Unique = [][]string{{"code"}}
		}
		return builder.SchemaDef{Levels: []builder.Level{{Name: "chain", Key: builder.TextKey}}, Tables: []builder.TableDef{h,
			{Name: "g26_rooms", Columns: []string{"id", "hotel_code"}, PrimaryKey: []string{"id"},
				ForeignKeys: []builder.ForeignKey{{Columns: []string{"hotel_code"}, RefTable: "g26_hotels", RefColumns: []string{"code"}}}}}}
	}
	if _, err := builder.NewSchema(def(false)); !errors.Is(err, builder.ErrFKTarget) {
		p.Errorf("declared graph with a scope path onto non-unique g26_hotels(code) accepted (err %v); a tenant could copy another's code and reach its rows", err)
	}
	sch, err := builder.NewSchema(def(true))
	if err != nil {
		p.Fatalf("schema: %v", err)
	}
	if _, err := f.open(sch); !errors.Is(err, guardedsql.ErrPathKey) {
		p.Errorf("Open accepted a graph claiming g26_hotels(code) unique where the database has a plain index (err %v)", err)
	}
}

// propCatalog (P27): the target graph agrees with its catalog, and a
// table wrongly declared global is refused at Open: one referencing a
// tenant-bound table, one naming one without a foreign key (by its name,
// by its name after an application prefix, or by a polymorphic pair), and
// the tenants' own table (referenced by a foreign key, or only named).
func propCatalog(p *pt, r *runner) {
	rep, err := guardedsql.CheckCatalog(p.ctx, r.db)
	if err != nil {
		p.Errorf("the target's schema graph disagrees with its catalog: %v", err)
	}
	if len(rep.Unlisted) > 0 || len(rep.Missing) > 0 {
		p.Errorf("catalog drift: tables that look tenant-bound but are not in the graph %v; in the graph but not the database %v", rep.Unlisted, rep.Missing)
	}
	if len(rep.Undeclarable) > 0 {
		p.Logf("left out of the graph, reached only through tables owned by reference or references with no foreign key (no declaration fits them; the guard cannot reach them): %v", rep.Undeclarable)
	}
	f := r.gapFixture(p, []string{"g27_taggings", "g27_memos", "g27_notes", "g27_rooms", "g27_hotels", "g27_chains"}, []string{
		`CREATE TABLE g27_chains (id KEY_T PRIMARY KEY)`,
		`CREATE TABLE g27_hotels (id INT_T PRIMARY KEY, chain_id KEY_T NOT NULL, FOREIGN KEY (chain_id) REFERENCES g27_chains(id))`,
		`CREATE TABLE g27_rooms (id INT_T PRIMARY KEY, hotel_id INT_T NOT NULL, secret KEY_T NOT NULL, FOREIGN KEY (hotel_id) REFERENCES g27_hotels(id))`,
		// A framework that keeps no foreign keys: the hotel is only named.
		`CREATE TABLE g27_notes (id INT_T PRIMARY KEY, g27_hotel_id INT_T NOT NULL, secret KEY_T NOT NULL)`,
		`CREATE TABLE g27_memos (id INT_T PRIMARY KEY, hotel_id INT_T NOT NULL, secret KEY_T NOT NULL)`,
		`CREATE TABLE g27_taggings (id INT_T PRIMARY KEY, taggable_type KEY_T NOT NULL, taggable_id INT_T NOT NULL, secret KEY_T NOT NULL)`,
		`INSERT INTO g27_chains VALUES ('acme'), ('globex')`,
		`INSERT INTO g27_hotels VALUES (1, 'acme'), (2, 'globex')`,
		`INSERT INTO g27_rooms VALUES (10, 1, 'acme room'), (11, 2, 'globex room')`,
		`INSERT INTO g27_notes VALUES (20, 1, 'acme note'), (21, 2, 'globex note')`,
		`INSERT INTO g27_memos VALUES (30, 1, 'acme memo'), (31, 2, 'globex memo')`,
		`INSERT INTO g27_taggings VALUES (40, 'g27_hotels', 1, 'acme tag'), (41, 'g27_hotels', 2, 'globex tag')`,
	})
	defer f.drop()
	fk := func(col, ref string) []builder.ForeignKey {
		return []builder.ForeignKey{{Columns: []string{col}, RefTable: ref}}
	}
	chains := builder.TableDef{Name: "g27_chains", Columns: []string{"id"}, PrimaryKey: []string{"id"}, Levels: map[string]string{"id": "chain"}}
	rooms := builder.TableDef{Name: "g27_rooms", Columns: []string{"id", "hotel_id", "secret"}, PrimaryKey: []string{"id"}, ForeignKeys: fk("hotel_id", "g27_hotels")}
	notes := builder.TableDef{Name: "g27_notes", Columns: []string{"id", "g27_hotel_id", "secret"}, PrimaryKey: []string{"id"}, Global: true,
		GlobalReason: "conformance control: acknowledged"}
	memos := builder.TableDef{Name: "g27_memos", Columns: []string{"id", "hotel_id", "secret"}, PrimaryKey: []string{"id"}, Global: true,
		GlobalReason: "conformance control: acknowledged"}
	taggings := builder.TableDef{Name: "g27_taggings", Columns: []string{"id", "taggable_type", "taggable_id", "secret"}, PrimaryKey: []string{"id"}, Global: true,
		GlobalReason: "conformance control: acknowledged"}
	hotels := builder.TableDef{Name: "g27_hotels", Columns: []string{"id", "chain_id"}, PrimaryKey: []string{"id"}, Levels: map[string]string{"chain_id": "chain"},
		ForeignKeys: fk("chain_id", "g27_chains")}
	// Each case declares one table global without a reason, the rest right.
	for _, c := range []struct {
		what, table, want string
		tables            func() []builder.TableDef
	}{
		{"g27_rooms (references tenant-bound g27_hotels) declared global", "g27_rooms", "g27_rooms(hotel_id) references tenant-bound g27_hotels", func() []builder.TableDef {
			r := rooms
			r.Global = true
			return []builder.TableDef{chains, hotels, r, notes, memos, taggings}
		}},
		{"g27_notes (g27_hotel_id names tenant-bound g27_hotels, no foreign key) declared global", "g27_notes", "g27_notes.g27_hotel_id is named like a reference to tenant-bound g27_hotels", func() []builder.TableDef {
			n := notes
			n.GlobalReason = ""
			return []builder.TableDef{chains, hotels, rooms, n, memos, taggings}
		}},
		{"g27_memos (hotel_id names tenant-bound g27_hotels after its prefix, no foreign key) declared global", "g27_memos", "g27_memos.hotel_id is named like a reference to tenant-bound g27_hotels", func() []builder.TableDef {
			m := memos
			m.GlobalReason = ""
			return []builder.TableDef{chains, hotels, rooms, notes, m, taggings}
		}},
		{"g27_taggings (a polymorphic reference taggable_type/taggable_id) declared global", "g27_taggings", "g27_taggings.taggable_id is a polymorphic reference", func() []builder.TableDef {
			tg := taggings
			tg.GlobalReason = ""
			return []builder.TableDef{chains, hotels, rooms, notes, memos, tg}
		}},
		{"g27_chains (the tenants, referenced by level column g27_hotels.chain_id) declared global", "g27_chains", "references g27_chains, declared global", func() []builder.TableDef {
			return []builder.TableDef{{Name: "g27_chains", Columns: []string{"id"}, PrimaryKey: []string{"id"}, Global: true}, hotels, rooms, notes, memos, taggings}
		}},
	} {
		sch, err := builder.NewSchema(builder.SchemaDef{Levels: []builder.Level{{Name: "chain", Key: builder.TextKey}}, Tables: c.tables()})
		if err != nil {
			p.Fatalf("%s: schema: %v", c.what, err)
		}
		db, err := f.open(sch)
		if errors.Is(err, guardedsql.ErrGlobalDrift) && strings.Contains(err.Error(), c.want) {
			continue
		}
		if err != nil {
			p.Errorf("%s: Open refused it, but not for that: %v", c.what, err)
			continue
		}
		t := sch.Table(c.table)
		col := "secret"
		if c.table == "g27_chains" {
			col = "id"
		}
		got := strs(p, db, gapCtx(p, chainGrant("acme")), builder.Must(builder.Select(t.Col(col)).From(t).Build()))
		p.Errorf("%s was accepted at Open; chain acme reads %v", c.what, got)
	}
	f.drop()
	namedTenants(p, r)
	levelAnchors(p, r)
}

// namedTenants (P27, continued): Kill Bill's shape, which keeps no foreign
// keys: every table's tenant_record_id names tenants.record_id only by
// its name. The tenants table (each tenant's API secret) declared global
// is refused at Open; the correct declaration is the control.
func namedTenants(p *pt, r *runner) {
	f := r.gapFixture(p, []string{"g27_bundles", "g27_tenants"}, []string{
		`CREATE TABLE g27_tenants (record_id INT_T PRIMARY KEY, api_secret KEY_T NOT NULL)`,
		`CREATE TABLE g27_bundles (record_id INT_T PRIMARY KEY, tenant_record_id INT_T NOT NULL, secret KEY_T NOT NULL)`,
		`INSERT INTO g27_tenants VALUES (1, 'tenant 1 secret'), (2, 'tenant 2 secret')`,
		`INSERT INTO g27_bundles VALUES (1, 2, 'tenant 2 bundle'), (2, 1, 'tenant 1 bundle')`,
	})
	defer f.drop()
	tenant := func(col string) map[string]string { return map[string]string{col: "tenant"} }
	bundles := builder.TableDef{Name: "g27_bundles", Columns: []string{"record_id", "tenant_record_id", "secret"}, PrimaryKey: []string{"record_id"}, Levels: tenant("tenant_record_id")}
	read := func(tenants builder.TableDef) ([]string, error) {
		sch, err := builder.NewSchema(builder.SchemaDef{Levels: []builder.Level{{Name: "tenant", Key: builder.IntKey}}, Tables: []builder.TableDef{tenants, bundles}})
		if err != nil {
			p.Fatalf("schema: %v", err)
		}
		db, err := f.open(sch)
		if err != nil {
			return nil, err
		}
		t := sch.Table("g27_tenants")
		return strs(p, db, gapCtx(p, scope.Grant{Level: "tenant", ID: "1"}), builder.Must(builder.Select(t.Col("api_secret")).From(t).Build())), nil
	}
	tenants := builder.TableDef{Name: "g27_tenants", Columns: []string{"record_id", "api_secret"}, PrimaryKey: []string{"record_id"}, Levels: tenant("record_id")}
	if got, err := read(tenants); err != nil || !slices.Equal(got, []string{"tenant 1 secret"}) {
		p.Fatalf("control: the correct declaration: tenant 1 reads %v of g27_tenants, err %v", got, err)
	}
	tenants.Levels, tenants.Global = nil, true
	got, err := read(tenants)
	switch {
	case errors.Is(err, guardedsql.ErrGlobalDrift) && strings.Contains(err.Error(), "g27_bundles.tenant_record_id, a column of level tenant, is named like a reference to g27_tenants.record_id"):
	case err != nil:
		p.Errorf("g27_tenants (named by tenant_record_id, no foreign key) declared global: Open refused it, but not for that: %v", err)
	default:
		p.Errorf("g27_tenants (named by tenant_record_id, no foreign key) declared global was accepted at Open; tenant 1 reads %v", got)
	}
}

// levelAnchors (P27, continued): a column declared to carry a level that
// the database's foreign keys show to hold something else is refused at
// Open: a project id declared a company column instead of the Parent,
// a second company column beside the anchored one, the project's own id
// declared its company column (Levels copied from the companies), and,
// with no foreign key to tell, a project id declared the company column
// of a table that has a company_id. The project and
// company ids interleave, so either mistake would hand company 1 company
// 2's issue; the correct declaration is the control. And a task's
// company_id, which holds the companies' keys, left undeclared beside its
// Parent issue_id: its loose task (no issue) would be no one's, and a
// writer granted both companies could file a task under one through the
// issue and the other through company_id.
func levelAnchors(p *pt, r *runner) {
	f := r.gapFixture(p, []string{"g27_tasks", "g27_tickets", "g27_issues", "g27_projects", "g27_companies"}, []string{
		`CREATE TABLE g27_companies (id INT_T PRIMARY KEY)`,
		`CREATE TABLE g27_projects (id INT_T PRIMARY KEY, company_id INT_T NOT NULL, FOREIGN KEY (company_id) REFERENCES g27_companies(id))`,
		`CREATE TABLE g27_issues (id INT_T PRIMARY KEY, project_id INT_T NOT NULL, secret KEY_T NOT NULL, FOREIGN KEY (project_id) REFERENCES g27_projects(id))`,
		`INSERT INTO g27_companies VALUES (1), (2)`,
		`INSERT INTO g27_projects VALUES (1, 2), (2, 1)`,
		`INSERT INTO g27_issues VALUES (10, 1, 'company 2 issue'), (11, 2, 'company 1 issue')`,
		// A framework that keeps no foreign keys: only the names tell.
		`CREATE TABLE g27_tickets (id INT_T PRIMARY KEY, company_id INT_T NOT NULL, project_id INT_T NOT NULL, secret KEY_T NOT NULL)`,
		`INSERT INTO g27_tickets VALUES (20, 2, 1, 'company 2 ticket'), (21, 1, 2, 'company 1 ticket')`,
		// Taiga's tasks: a Parent that may be NULL (the user story) beside
		// the row's own company column.
		`CREATE TABLE g27_tasks (id INT_T PRIMARY KEY, issue_id INT_T NULL, company_id INT_T NOT NULL, secret KEY_T NOT NULL,
		   FOREIGN KEY (issue_id) REFERENCES g27_issues(id), FOREIGN KEY (company_id) REFERENCES g27_companies(id))`,
		`INSERT INTO g27_tasks VALUES (30, 10, 2, 'company 2 task'), (31, 11, 1, 'company 1 task'), (32, NULL, 1, 'company 1 loose task')`,
	})
	defer f.drop()
	fk := func(col, ref string) []builder.ForeignKey {
		return []builder.ForeignKey{{Columns: []string{col}, RefTable: ref}}
	}
	company := func(cols ...string) map[string]string {
		m := map[string]string{}
		for _, c := range cols {
			m[c] = "company"
		}
		return m
	}
	companies := builder.TableDef{Name: "g27_companies", Columns: []string{"id"}, PrimaryKey: []string{"id"}, Levels: company("id")}
	projects := builder.TableDef{Name: "g27_projects", Columns: []string{"id", "company_id"}, PrimaryKey: []string{"id"}, Levels: company("company_id"),
		ForeignKeys: fk("company_id", "g27_companies")}
	issues := builder.TableDef{Name: "g27_issues", Columns: []string{"id", "project_id", "secret"}, PrimaryKey: []string{"id"},
		ForeignKeys: fk("project_id", "g27_projects"), Parent: "project_id"}
	tickets := builder.TableDef{Name: "g27_tickets", Columns: []string{"id", "company_id", "project_id", "secret"}, PrimaryKey: []string{"id"}, Levels: company("company_id")}
	tasks := builder.TableDef{Name: "g27_tasks", Columns: []string{"id", "issue_id", "company_id", "secret"}, PrimaryKey: []string{"id"}, Levels: company("company_id"),
		ForeignKeys: append(fk("issue_id", "g27_issues"), fk("company_id", "g27_companies")...), Parent: "issue_id"}
	ctx := gapCtx(p, scope.Grant{Level: "company", ID: "1"})
	read := func(what, table string, tables ...builder.TableDef) (got []string, err error) {
		sch, err := builder.NewSchema(builder.SchemaDef{Levels: []builder.Level{{Name: "company", Key: builder.IntKey}}, Tables: tables})
		if err != nil {
			p.Fatalf("%s: schema: %v", what, err)
		}
		db, err := f.open(sch)
		if err != nil {
			return nil, err
		}
		t := sch.Table(table)
		return strs(p, db, ctx, builder.Must(builder.Select(t.Col("secret")).From(t).Build())), nil
	}
	for table, want := range map[string][]string{"g27_issues": {"company 1 issue"}, "g27_tickets": {"company 1 ticket"}, "g27_tasks": {"company 1 loose task", "company 1 task"}} {
		got, err := read("the correct declaration", table, companies, projects, issues, tickets, tasks)
		slices.Sort(got)
		if err != nil || !slices.Equal(got, want) {
			p.Fatalf("control: the correct declaration: company 1 reads %v of %s, err %v; want %v", got, table, err, want)
		}
	}
	wrongTickets := tickets
	wrongTickets.Levels = company("project_id")
	wrongIssues := issues
	wrongIssues.Parent, wrongIssues.Levels = "", company("project_id")
	wrongProjects := projects
	wrongProjects.Levels = company("company_id", "id")
	copiedProjects := projects
	copiedProjects.Levels = company("id")
	undeclaredTasks := tasks
	undeclaredTasks.Levels = nil
	for _, c := range []struct {
		what, want, table string
		tables            []builder.TableDef
	}{
		{"g27_issues.project_id declared a company column (instead of the Parent)", "g27_issues.project_id is declared a column of level company", "g27_issues",
			[]builder.TableDef{companies, projects, wrongIssues, tickets, tasks}},
		{"g27_projects.id declared a second company column", "g27_projects declares both company_id and id for level company", "g27_issues",
			[]builder.TableDef{companies, wrongProjects, issues, tickets, tasks}},
		{"g27_projects.id declared the company column (Levels copied from g27_companies)", "g27_projects.id, a column of g27_projects's primary key, is declared the column of level company", "g27_issues",
			[]builder.TableDef{companies, copiedProjects, issues, tickets, tasks}},
		{"g27_tickets.project_id declared the company column (no foreign keys; company_id beside it)", "g27_tickets.project_id is declared the column of level company, but g27_tickets also has company_id", "g27_tickets",
			[]builder.TableDef{companies, projects, issues, wrongTickets, tasks}},
		{"g27_tasks.company_id left undeclared beside Parent issue_id (Taiga's tasks.project_id)", "g27_tasks.company_id references g27_companies.id, which holds the keys of level company", "g27_tasks",
			[]builder.TableDef{companies, projects, issues, tickets, undeclaredTasks}},
	} {
		got, err := read(c.what, c.table, c.tables...)
		switch {
		case errors.Is(err, guardedsql.ErrLevelColumn) && strings.Contains(err.Error(), c.want):
		case err != nil:
			p.Errorf("%s: Open refused it, but not for that: %v", c.what, err)
		default:
			p.Errorf("%s was accepted at Open; company 1 reads %v", c.what, got)
		}
	}
}

// propCollation (P28): tenant keys compare byte for byte: a level column
// with a case-insensitive collation is refused at Open, or (MySQL) tenant
// "ACME" still reads nothing of tenant "acme".
func propCollation(p *pt, r *runner) {
	var ddl []string
	coll := "COLLATE NOCASE"
	switch r.engine {
	case Postgres:
		ddl = append(ddl, `CREATE COLLATION IF NOT EXISTS g28_ci (provider = icu, locale = 'und-u-ks-level2', deterministic = false)`)
		coll = "COLLATE g28_ci"
	case MySQL:
		coll = "COLLATE utf8mb4_general_ci"
	}
	f := r.gapFixture(p, []string{"g28_hotels"}, append(ddl,
		`CREATE TABLE g28_hotels (id INT_T PRIMARY KEY, chain_id KEY_T `+coll+` NOT NULL, secret KEY_T NOT NULL)`,
		`INSERT INTO g28_hotels VALUES (1, 'acme', 'acme secret'), (2, 'globex', 'globex secret')`))
	defer f.drop()
	sch, err := builder.NewSchema(builder.SchemaDef{
		Levels: []builder.Level{{Name: "chain", Key: builder.TextKey}},
		Tables: []builder.TableDef{{Name: "g28_hotels", Columns: []string{"id", "chain_id", "secret"}, PrimaryKey: []string{"id"},
			Levels: map[string]string{"chain_id": "chain"}}},
	})
	if err != nil {
		p.Fatalf("schema: %v", err)
	}
	db, err := f.open(sch)
	if errors.Is(err, guardedsql.ErrCollation) {
		return
	}
	if err != nil {
		p.Fatalf("open: %v", err)
	}
	hotels := sch.Table("g28_hotels")
	if got := strs(p, db, gapCtx(p, chainGrant("ACME")), builder.Must(builder.Select(hotels.Col("secret")).From(hotels).Build())); len(got) > 0 {
		p.Errorf("chain_id %s: a grant for tenant ACME reads %v", coll, got)
	}
}

// propTyped (P29): a value that does not fit its column is refused at
// Build, and a number for a text key reaches the engine as text: acme's
// integer 7 neither matches its own "7eleven" nor plants a row under
// globex's "7", nor draws an error quoting a stored key.
func propTyped(p *pt, r *runner) {
	f := r.gapFixture(p, []string{"g29_rooms", "g29_hotels"}, []string{
		`CREATE TABLE g29_hotels (id INT_T PRIMARY KEY, chain_id KEY_T NOT NULL, code KEY_T NOT NULL UNIQUE)`,
		`CREATE TABLE g29_rooms (id INT_T PRIMARY KEY, hotel_code KEY_T NOT NULL REFERENCES g29_hotels(code))`,
		`INSERT INTO g29_hotels VALUES (1, 'acme', '7eleven'), (2, 'globex', '7')`,
		`INSERT INTO g29_rooms VALUES (10, '7eleven'), (11, '7')`,
	})
	defer f.drop()
	sch, err := builder.NewSchema(builder.SchemaDef{
		Levels: []builder.Level{{Name: "chain", Key: builder.TextKey}},
		Tables: []builder.TableDef{
			{Name: "g29_hotels", Columns: []string{"id", "chain_id", "code"}, PrimaryKey: []string{"id"}, Unique: [][]string{{"code"}}, SharedUnique: map[string]string{"code": "hotel codes are public; a conflict reveals that some chain uses one"},
				Types: map[string]string{"id": "BIGINT", "code": "TEXT"}, Levels: map[string]string{"chain_id": "chain"}},
			{Name: "g29_rooms", Columns: []string{"id", "hotel_code"}, PrimaryKey: []string{"id"},
				ForeignKeys: []builder.ForeignKey{{Columns: []string{"hotel_code"}, RefTable: "g29_hotels", RefColumns: []string{"code"}}}},
		},
	})
	if err != nil {
		p.Fatalf("schema: %v", err)
	}
	hotels, rooms := sch.Table("g29_hotels"), sch.Table("g29_rooms")
	if _, err := builder.Select(hotels.Col("id")).From(hotels).Where(hotels.Col("code").Eq(true)).Build(); !errors.Is(err, builder.ErrType) {
		p.Errorf("a bool compared with text column g29_hotels.code was not refused at Build (err %v)", err)
	}
	db, err := f.open(sch)
	if err != nil {
		p.Fatalf("open: %v", err)
	}
	acme := gapCtx(p, chainGrant("acme"))
	_, err = db.Exec(acme, builder.Must(builder.InsertInto(rooms).Columns("id", "hotel_code").Values(20, 7).Build()))
	if err != nil && strings.Contains(err.Error(), "7eleven") {
		p.Errorf("inserting under hotel code 7 drew an error quoting a stored key: %v", err)
	}
	if !errors.Is(err, guardedsql.ErrNotFound) {
		p.Errorf("acme inserting a room under globex's hotel code 7: err = %v, want ErrNotFound", err)
	}
	if n := f.count(`SELECT COUNT(*) FROM g29_rooms WHERE id = 20`); n != 0 {
		p.Errorf("acme planted a room under globex's hotel code 7")
	}
	if got := strs(p, db, acme, builder.Must(builder.Select(hotels.Col("code")).From(hotels).Where(hotels.Col("code").Eq(7)).Build())); slices.Contains(got, "7eleven") {
		p.Errorf("code = 7 matched %v", got)
	}
}
