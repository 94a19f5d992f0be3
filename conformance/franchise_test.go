package conformance

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tenantmcp/tenantmcp/builder"
	"github.com/tenantmcp/tenantmcp/guardedsql"
	"github.com/tenantmcp/tenantmcp/redact"
	"github.com/tenantmcp/tenantmcp/server"
)

// The store franchise of issue 25: stores are the tenants; customers,
// staff and inventory carry the store; a rental references a copy, a
// customer and a clerk, each with its own path to a store; a payment
// references the rental, the customer and the clerk; addresses live in one
// table referenced from customers, staff and stores; films, cities and
// countries are global. Its unique keys hold a timestamp (rentals, as the
// public schema's UNIQUE (rental_date, inventory_id, customer_id)), a date
// (inventory), a decimal (customers) and a UUID (payments), which the
// write properties' controls must vary with values of those types; each
// holds a column of the row's path to its store, so none is a unique key
// shared across tenants.
//
// The declaration mistakes a team would plausibly make are mutation
// fixtures (TestFranchiseMistakes): each is refused at Open or fails the
// run with a message naming the table and the path or column.

type fcol struct{ name, kind string } // kind: int, text, ts, date, dec, uuid

type ftable struct {
	name   string
	cols   []fcol
	pk     []string
	unique [][]string
	fks    []builder.ForeignKey
	levels map[string]string
	parent string
	global bool
}

const levelStore = "store"

var franchiseTables = []ftable{
	{name: "country", cols: []fcol{{"country_id", "int"}, {"country", "text"}}, pk: []string{"country_id"}, global: true},
	{name: "city", cols: []fcol{{"city_id", "int"}, {"city", "text"}, {"country_id", "int"}}, pk: []string{"city_id"}, global: true,
		fks: []builder.ForeignKey{{Columns: []string{"country_id"}, RefTable: "country"}}},
	{name: "address", cols: []fcol{{"address_id", "int"}, {"address", "text"}, {"city_id", "int"}}, pk: []string{"address_id"}, global: true,
		fks: []builder.ForeignKey{{Columns: []string{"city_id"}, RefTable: "city"}}},
	{name: "film", cols: []fcol{{"film_id", "int"}, {"title", "text"}, {"rental_rate", "dec"}}, pk: []string{"film_id"}, global: true},
	{name: "store", cols: []fcol{{"store_id", "int"}, {"name", "text"}, {"address_id", "int"}}, pk: []string{"store_id"},
		levels: map[string]string{"store_id": levelStore}, fks: []builder.ForeignKey{{Columns: []string{"address_id"}, RefTable: "address"}}},
	{name: "staff", cols: []fcol{{"staff_id", "int"}, {"store_id", "int"}, {"first_name", "text"}, {"last_name", "text"}, {"address_id", "int"}}, pk: []string{"staff_id"},
		levels: map[string]string{"store_id": levelStore},
		fks:    []builder.ForeignKey{{Columns: []string{"store_id"}, RefTable: "store"}, {Columns: []string{"address_id"}, RefTable: "address"}}},
	{name: "customer", cols: []fcol{{"customer_id", "int"}, {"store_id", "int"}, {"first_name", "text"}, {"last_name", "text"}, {"email", "text"}, {"phone", "text"}, {"loyalty_no", "dec"}, {"address_id", "int"}},
		pk: []string{"customer_id"}, unique: [][]string{{"store_id", "loyalty_no"}}, levels: map[string]string{"store_id": levelStore},
		fks: []builder.ForeignKey{{Columns: []string{"store_id"}, RefTable: "store"}, {Columns: []string{"address_id"}, RefTable: "address"}}},
	{name: "inventory", cols: []fcol{{"inventory_id", "int"}, {"film_id", "int"}, {"store_id", "int"}, {"acquired", "date"}}, pk: []string{"inventory_id"},
		unique: [][]string{{"store_id", "film_id", "acquired"}}, levels: map[string]string{"store_id": levelStore},
		fks: []builder.ForeignKey{{Columns: []string{"film_id"}, RefTable: "film"}, {Columns: []string{"store_id"}, RefTable: "store"}}},
	{name: "rental", cols: []fcol{{"rental_id", "int"}, {"rental_date", "ts"}, {"inventory_id", "int"}, {"customer_id", "int"}, {"staff_id", "int"}, {"status", "text"}},
		pk: []string{"rental_id"}, unique: [][]string{{"rental_date", "inventory_id", "customer_id"}}, parent: "inventory_id",
		fks: []builder.ForeignKey{{Columns: []string{"inventory_id"}, RefTable: "inventory"}, {Columns: []string{"customer_id"}, RefTable: "customer"}, {Columns: []string{"staff_id"}, RefTable: "staff"}}},
	{name: "payment", cols: []fcol{{"payment_id", "int"}, {"customer_id", "int"}, {"staff_id", "int"}, {"rental_id", "int"}, {"amount", "dec"}, {"receipt", "uuid"}, {"note", "text"}},
		pk: []string{"payment_id"}, unique: [][]string{{"rental_id", "receipt"}}, parent: "rental_id",
		fks: []builder.ForeignKey{{Columns: []string{"customer_id"}, RefTable: "customer"}, {Columns: []string{"staff_id"}, RefTable: "staff"}, {Columns: []string{"rental_id"}, RefTable: "rental"}}},
}

// franchiseDef is the correct declaration.
func franchiseDef() builder.SchemaDef {
	def := builder.SchemaDef{Levels: []builder.Level{{Name: levelStore, Key: builder.IntKey}}}
	for _, ft := range franchiseTables {
		td := builder.TableDef{Name: ft.name, PrimaryKey: slices.Clone(ft.pk), Global: ft.global, Parent: ft.parent,
			ForeignKeys: slices.Clone(ft.fks), Levels: ft.levels, Unique: ft.unique}
		for _, c := range ft.cols {
			td.Columns = append(td.Columns, c.name)
		}
		def.Tables = append(def.Tables, td)
	}
	return def
}

func franchiseType(e Engine, kind string) string {
	switch kind {
	case "int":
		return "INTEGER"
	case "ts":
		if e == MySQL {
			return "DATETIME"
		}
		return "TIMESTAMP"
	case "date":
		return "DATE"
	case "dec":
		return "DECIMAL(10,2)"
	case "uuid":
		switch e {
		case Postgres:
			return "UUID"
		case MySQL:
			return "CHAR(36)"
		}
		return "TEXT"
	}
	if e == MySQL {
		return "VARCHAR(100)"
	}
	return "TEXT"
}

func franchiseDDL(e Engine, ft ftable) string {
	q := e.quote
	qa := func(cs []string) string {
		out := make([]string, len(cs))
		for i, c := range cs {
			out[i] = q(c)
		}
		return strings.Join(out, ", ")
	}
	var parts []string
	for _, c := range ft.cols {
		parts = append(parts, q(c.name)+" "+franchiseType(e, c.kind)+" NOT NULL")
	}
	parts = append(parts, "PRIMARY KEY ("+qa(ft.pk)+")")
	for _, u := range ft.unique {
		parts = append(parts, "UNIQUE ("+qa(u)+")")
	}
	for _, f := range ft.fks {
		parts = append(parts, "FOREIGN KEY ("+qa(f.Columns)+") REFERENCES "+q(f.RefTable)+" ("+qa([]string{f.Columns[0]})+")")
	}
	return "CREATE TABLE " + q(ft.name) + " (" + strings.Join(parts, ", ") + ")"
}

// franchiseData is 3 stores × (2 staff, 4 customers, 4 copies, 8 rentals
// and their payments), ids interleaved across stores, every path of a
// rental and a payment inside its store; names and e-mails shared across
// stores, last names planted as PII canaries (one per customer).
func franchiseData() *Dataset {
	d := &Dataset{}
	d.Add("country", Row{"country_id": int64(1), "country": "Freedonia"})
	d.Add("city", Row{"city_id": int64(1), "city": "Fredville", "country_id": int64(1)})
	addr := int64(0)
	newAddr := func() int64 {
		addr++
		d.Add("address", Row{"address_id": addr, "address": fmt.Sprintf("%d Main St", addr), "city_id": int64(1)})
		return addr
	}
	for f := int64(1); f <= 3; f++ {
		d.Add("film", Row{"film_id": f, "title": fmt.Sprintf("Film %d", f), "rental_rate": "2.99"})
	}
	const stores = 3
	base := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	for s := int64(1); s <= stores; s++ {
		d.Add("store", Row{"store_id": s, "name": fmt.Sprintf("Store %d", s), "address_id": newAddr()})
	}
	id := func(i int, s int64) int64 { return int64(i)*stores + s }
	for i := 0; i < 2; i++ {
		for s := int64(1); s <= stores; s++ {
			d.Add("staff", Row{"staff_id": id(i, s), "store_id": s, "first_name": []string{"Mike", "Jon"}[i], "last_name": "Hillyer", "address_id": newAddr()})
		}
	}
	for i := 0; i < 4; i++ {
		for s := int64(1); s <= stores; s++ {
			d.Add("customer", Row{"customer_id": id(i, s), "store_id": s, "first_name": []string{"Mary", "Patricia", "Linda", "Barbara"}[i], "last_name": fmt.Sprintf("Quillfeather%d%d", s, i),
				"email": fmt.Sprintf("c%d@example.com", i), "phone": fmt.Sprintf("+1555%03d%04d", s, 7000+i), "loyalty_no": fmt.Sprintf("%d.00", 100+i), "address_id": newAddr()})
		}
	}
	for i := 0; i < 4; i++ {
		for s := int64(1); s <= stores; s++ {
			d.Add("inventory", Row{"inventory_id": id(i, s), "film_id": int64(i%3 + 1), "store_id": s, "acquired": base.AddDate(0, 0, -i).Format(time.DateOnly)})
		}
	}
	n := 0
	for i := 0; i < 8; i++ {
		for s := int64(1); s <= stores; s++ {
			rid := id(i, s)
			inv, cust, clerk := id(i%4, s), id((i+1)%4, s), id(i%2, s)
			d.Add("rental", Row{"rental_id": rid, "rental_date": base.Add(time.Duration(i) * time.Hour), "inventory_id": inv, "customer_id": cust, "staff_id": clerk, "status": "out"})
			n++
			d.Add("payment", Row{"payment_id": rid, "customer_id": cust, "staff_id": clerk, "rental_id": rid, "amount": "4.99",
				"receipt": fmt.Sprintf("00000000-0000-4000-8000-%012d", n), "note": "paid"})
		}
	}
	return d
}

// franchiseSeed creates the tables and inserts franchiseData as the owner.
func franchiseSeed(ctx context.Context, db *sql.DB, e Engine) (*Dataset, error) {
	d := franchiseData()
	for _, ft := range franchiseTables {
		if _, err := db.ExecContext(ctx, franchiseDDL(e, ft)); err != nil {
			return nil, fmt.Errorf("creating %s: %w", ft.name, err)
		}
	}
	for _, ft := range franchiseTables {
		for _, r := range d.Tables[ft.name] {
			cols := make([]string, len(ft.cols))
			phs := make([]string, len(ft.cols))
			vals := make([]any, len(ft.cols))
			for i, c := range ft.cols {
				cols[i], phs[i], vals[i] = e.quote(c.name), e.ph(i+1), r[c.name]
			}
			if _, err := db.ExecContext(ctx, "INSERT INTO "+e.quote(ft.name)+" ("+strings.Join(cols, ", ")+") VALUES ("+strings.Join(phs, ", ")+")", vals...); err != nil {
				return nil, fmt.Errorf("inserting into %s: %w", ft.name, err)
			}
		}
	}
	return d, nil
}

// franchiseShared are the run's acknowledgements: reference data every
// store reads, and the address table, owned by reference (until the
// schema can declare it so, it is declared global and acknowledged here).
var franchiseShared = map[string]string{
	"country": "reference data: countries of the franchise's addresses",
	"city":    "reference data: cities of the franchise's addresses",
	"film":    "the franchise's film catalogue, the same for every store",
	"address": "owned by reference (customers, staff, stores point at it); declared global until TableDef.OwnedByReference is available",
}

// fCustomer is a customer as the fixture's tools return it.
type fCustomer struct {
	ID        int64  `json:"id"`
	FirstName string `json:"first_name" pii:"name"`
	LastName  string `json:"last_name" pii:"name"`
	Email     string `json:"email" pii:"email"`
	Phone     string `json:"phone" pii:"phone"`
}

// fCustomerUntagged is the same with the last-name column left untagged:
// the PII mistake of the fixture (names have no free-text detector, so
// nothing else hides them).
type fCustomerUntagged struct {
	ID        int64  `json:"id"`
	FirstName string `json:"first_name" pii:"name"`
	LastName  string `json:"last_name"`
	Email     string `json:"email" pii:"email"`
	Phone     string `json:"phone" pii:"phone"`
}

type fEmpty struct{}

type fReport struct {
	Rentals int64 `json:"rentals"`
}

// franchiseTools registers store_report (managers only) and
// list_customers (twice, as customers_again), whose last-name column is
// tagged unless untagged is set.
func franchiseTools(sch func() *builder.Schema, untagged bool) func(*server.Server) error {
	manager := server.Require{Roles: []string{"manager"}}
	return func(s *server.Server) error {
		report := func(ctx context.Context, db *guardedsql.DB, _ fEmpty) (fReport, error) {
			x := sch().Table("rental").As("r")
			q, err := builder.Select(builder.CountAll()).From(x).Build()
			if err != nil {
				return fReport{}, err
			}
			var out fReport
			err = db.QueryRow(ctx, q).Scan(&out.Rentals)
			return out, err
		}
		list := func(ctx context.Context, db *guardedsql.DB) ([]fCustomer, error) {
			x := sch().Table("customer").As("c")
			q, err := builder.Select(x.Col("customer_id"), x.Col("first_name"), x.Col("last_name"), x.Col("email"), x.Col("phone")).From(x).OrderBy(x.Col("customer_id").Asc()).Build()
			if err != nil {
				return nil, err
			}
			rows, err := db.Query(ctx, q)
			if err != nil {
				return nil, err
			}
			return guardedsql.CollectRows(rows, func(rs *guardedsql.Rows) (fCustomer, error) {
				var c fCustomer
				err := rs.Scan(&c.ID, &c.FirstName, &c.LastName, &c.Email, &c.Phone)
				return c, err
			})
		}
		if err := server.AddTool(s, server.Tool{Name: "store_report", Require: manager}, report); err != nil {
			return err
		}
		for _, name := range []string{"list_customers", "customers_again"} {
			var err error
			if untagged {
				err = server.AddTool(s, server.Tool{Name: name}, func(ctx context.Context, db *guardedsql.DB, _ fEmpty) (struct {
					Customers []fCustomerUntagged `json:"customers"`
				}, error) {
					cs, err := list(ctx, db)
					out := make([]fCustomerUntagged, len(cs))
					for i, c := range cs {
						out[i] = fCustomerUntagged(c)
					}
					return struct {
						Customers []fCustomerUntagged `json:"customers"`
					}{out}, err
				})
			} else {
				err = server.AddTool(s, server.Tool{Name: name}, func(ctx context.Context, db *guardedsql.DB, _ fEmpty) (struct {
					Customers []fCustomer `json:"customers"`
				}, error) {
					cs, err := list(ctx, db)
					return struct {
						Customers []fCustomer `json:"customers"`
					}{cs}, err
				})
			}
			if err != nil {
				return err
			}
		}
		return nil
	}
}

// franchiseTarget is the correct declaration with its tools: a
// role-gated tool is the first call of every caller.
func franchiseTarget(dsn string, untagged bool) Target {
	tg := Target{Name: "franchise", DSN: dsn, Graph: franchiseDef(), Seed: franchiseSeed, Shared: franchiseShared}
	var sch *builder.Schema
	tg.Tools = &Tools{
		Register: func(s *server.Server) error {
			return franchiseTools(func() *builder.Schema { return sch }, untagged)(s)
		},
		Levels:    []string{levelStore},
		Redaction: redact.Options{Reveal: map[string][]redact.Category{"clerk": {redact.Email}, "manager": {redact.Name, redact.Email, redact.Phone}}},
		Callers:   [][]string{{"clerk"}, {"manager"}},
		Calls: func(*Dataset, Tenant) []ToolCall {
			return []ToolCall{{Tool: "store_report", Args: map[string]any{}}, {Tool: "list_customers", Args: map[string]any{}}, {Tool: "customers_again", Args: map[string]any{}}}
		},
		Canaries: func(d *Dataset) []Canary {
			var out []Canary
			for _, r := range d.Tables["customer"] {
				out = append(out, Canary{Value: r["last_name"].(string), Category: redact.Name, Table: "customer", Column: "last_name", Key: canon(r["customer_id"])})
			}
			return out
		},
	}
	s, err := builder.NewSchema(tg.Graph)
	if err != nil {
		panic(err)
	}
	sch, tg.Schema = s, s
	return tg
}

// TestFranchise runs the whole property table on the franchise, correctly
// declared, on every target engine: its timestamp, date, decimal and UUID
// unique keys included.
func TestFranchise(t *testing.T) {
	forEachDSN(t, func(t *testing.T, dsn string) {
		rep := Run(t, franchiseTarget(dsn, false))
		reportsMu.Lock()
		reports = append(reports, rep)
		reportsMu.Unlock()
	})
}

// without returns def with the foreign keys of table on column removed
// from the declaration (the column stays).
func without(def builder.SchemaDef, table, column string) builder.SchemaDef {
	def.Tables = slices.Clone(def.Tables)
	for i := range def.Tables {
		if td := &def.Tables[i]; td.Name == table {
			td.ForeignKeys = slices.DeleteFunc(slices.Clone(td.ForeignKeys), func(f builder.ForeignKey) bool { return slices.Contains(f.Columns, column) })
		}
	}
	return def
}

// TestFranchiseClerkPathRefusedAtOpen is mistake (a) of issue 25:
// omitting the clerk path (staff_id) of rentals and payments. Open must
// refuse the graph (guardedsql's check of foreign keys between
// tenant-bound tables that the graph does not declare), naming the table
// and the column; before that check it was accepted silently, and a store
// could write rentals and payments pointing at other stores' staff.
func TestFranchiseClerkPathRefusedAtOpen(t *testing.T) {
	forEachDSN(t, func(t *testing.T, dsn string) {
		for _, table := range []string{"rental", "payment"} {
			t.Run(table, func(t *testing.T) {
				tg := franchiseTarget(dsn, false)
				tg.Graph, tg.Schema = without(tg.Graph, table, "staff_id"), nil
				_, err := runSome(t, tg, 1)
				if err == nil {
					t.Fatalf("the franchise opened with the clerk path of %s undeclared", table)
				}
				if !errors.Is(err, guardedsql.ErrCatalog) || !strings.Contains(err.Error(), table) || !strings.Contains(err.Error(), "staff_id") {
					t.Fatalf("clerk path of %s undeclared: err = %v; want a catalog error naming %s and staff_id", table, err, table)
				}
				t.Logf("refused at Open: %v", err)
			})
		}
	})
}

// TestFranchiseMistakes: the other two declaration mistakes of issue 25
// fail the run, each with a message naming the table and the column, on
// every engine:
//
//   - (b) payment declared global with the reason the start-up error asks
//     for: property 58 (the live catalog gives its rows to their stores);
//     so does the address table when the run does not acknowledge it;
//   - (c) the customer phone column left untagged, with a role-gated tool
//     as the first call of every caller: property 20 names customer.phone
//     (the calls after the refused one are made on a new session).
//
// And the harness rule behind (c): callers whose calls mostly fail make P20
// and P59 fail as vacuous.
func TestFranchiseMistakes(t *testing.T) {
	forEachDSN(t, func(t *testing.T, dsn string) {
		expect := func(t *testing.T, tg Target, id int, want ...string) {
			t.Helper()
			out, err := runSome(t, tg, id)
			if err != nil {
				t.Fatalf("setup: %v", err)
			}
			o := out[id]
			all := strings.Join(o.msgs, "\n")
			for _, w := range want {
				if !o.failed || !strings.Contains(all, w) {
					t.Fatalf("P%d: failed=%v, messages %q; want a failure containing %q", id, o.failed, o.msgs, w)
				}
			}
			t.Logf("P%d: %s", id, o.msgs[0])
		}
		t.Run("b_payment_global_with_reason", func(t *testing.T) {
			expect(t, declareGlobal(franchiseTarget(dsn, false), "payment"), 58, "payment (declared global with GlobalReason")
		})
		t.Run("b_address_unacknowledged", func(t *testing.T) {
			tg := franchiseTarget(dsn, false)
			tg.Shared = maps.Clone(tg.Shared)
			delete(tg.Shared, "address")
			expect(t, tg, 58, "address (declared global)")
		})
		t.Run("c_untagged_phone", func(t *testing.T) {
			expect(t, franchiseTarget(dsn, true), 20, "customer.last_name", "roles [clerk] may not see")
		})
		t.Run("vacuous", func(t *testing.T) {
			tg := franchiseTarget(dsn, true)
			tools := *tg.Tools
			tools.Calls = func(*Dataset, Tenant) []ToolCall {
				gated := ToolCall{Tool: "store_report", Args: map[string]any{}}
				return []ToolCall{gated, gated, gated, {Tool: "list_customers", Args: map[string]any{}}}
			}
			tools.Callers = [][]string{{"clerk"}}
			tools.Redaction.Reveal = map[string][]redact.Category{"clerk": {redact.Name, redact.Email}}
			tg.Tools = &tools
			expect(t, tg, 20, "vacuous: 3 of 4 calls as store 1 {store:1} roles [clerk] failed")
		})
	})
}

// TestSuiteFixesAreLoadBearing removes each of the suite's own fixes of
// issue 25 in turn (suitefault.go) and shows the franchise mistake it
// catches going unnoticed, so that the tests above fail for the fix's
// reason and not by accident: without the catalog oracle P58 passes with
// payment declared global; without the vacuous-pass rule P20 still catches
// the untagged last name, since a role denial no longer closes the
// caller's session (issue 27: a JSON-RPC error, not a 403), so the calls
// after it are made (TestFranchiseMistakes/vacuous keeps the rule honest);
// without typed seeds P60 fails on every engine and the control
// of P9 on PostgreSQL and MySQL/MariaDB (SQLite stores the text anyway).
func TestSuiteFixesAreLoadBearing(t *testing.T) {
	forEachDSN(t, func(t *testing.T, dsn string) {
		passes := func(t *testing.T, off *atomic.Bool, tg Target, id int, wantFail bool) {
			t.Helper()
			defer switchOff(off)()
			out, err := runSome(t, tg, id)
			if err != nil {
				t.Fatalf("setup: %v", err)
			}
			if o := out[id]; o.failed != wantFail {
				t.Fatalf("fix switched off: P%d failed=%v (want %v): %v", id, o.failed, wantFail, o.msgs)
			}
		}
		t.Run("catalog_oracle", func(t *testing.T) {
			passes(t, &offCatalogOracle, declareGlobal(franchiseTarget(dsn, false), "payment"), 58, false)
		})
		t.Run("vacuous", func(t *testing.T) {
			passes(t, &offVacuous, franchiseTarget(dsn, true), 20, true)
		})
		t.Run("typed_seeds", func(t *testing.T) {
			e, _ := EngineOf(dsn)
			passes(t, &offTypedSeeds, franchiseTarget(dsn, false), 60, true)
			passes(t, &offTypedSeeds, franchiseTarget(dsn, false), 9, e != SQLite)
		})
	})
}

// TestUncheckedKeysReported: a foreign key declared Unchecked (the clerk of
// a rental, "clerks serve every store") lets a store write a rental with
// another store's clerk: P9 fails the run on it unless the run
// acknowledges the key (Target.Unchecked), and the report and summary list
// it with its reason either way.
func TestUncheckedKeysReported(t *testing.T) {
	forEachDSN(t, func(t *testing.T, dsn string) {
		tg := uncheckedClerk(franchiseTarget(dsn, false))
		tg.Tools = nil
		out, err := runSome(t, tg, 9)
		if err != nil {
			t.Fatalf("setup: %v", err)
		}
		if o := out[9]; !o.failed || !strings.Contains(strings.Join(o.msgs, "\n"), `Target.Unchecked["rental.staff_id"]`) {
			t.Fatalf("P9 with an unacknowledged Unchecked clerk key: failed=%v, %q; want a failure naming Target.Unchecked[\"rental.staff_id\"]", o.failed, o.msgs)
		}
		tg.Unchecked = map[string]string{"rental.staff_id": "a clerk of any store may serve a rental"}
		rep := Run(t, tg)
		want := UncheckedKey{Table: "rental", Columns: []string{"staff_id"}, RefTable: "staff", Reason: "clerks serve every store", Acknowledged: "a clerk of any store may serve a rental"}
		if len(rep.Unchecked) != 1 || !reflect.DeepEqual(rep.Unchecked[0], want) {
			t.Fatalf("report lists unchecked keys %+v, want [%+v]", rep.Unchecked, want)
		}
		var b strings.Builder
		if err := WriteTable(&b, rep); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(b.String(), "rental(staff_id) -> staff: clerks serve every store; acknowledged by the run: a clerk of any store may serve a rental") {
			t.Errorf("summary does not list the unchecked key:\n%s", b.String())
		}
	})
}

// TestUncheckedAcknowledgementValidated: an acknowledgement that names no
// foreign key declared Unchecked (a typo, a key since checked) or gives no
// reason is refused before anything runs, like Target.Shared's.
func TestUncheckedAcknowledgementValidated(t *testing.T) {
	tg := franchiseTarget("", false)
	for key, want := range map[string]string{
		"rental.staff_id":  "names no foreign key the graph declares Unchecked", // declared checked
		"rental":           "names no foreign key",
		"no_such.staff_id": "names no foreign key",
	} {
		tg.Unchecked = map[string]string{key: "a reason"}
		if _, err := newRunner(tg); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Target.Unchecked[%q]: %v, want an error containing %q", key, err, want)
		}
	}
	tg = uncheckedClerk(tg)
	tg.Unchecked = map[string]string{"rental.staff_id": " "}
	if _, err := newRunner(tg); err == nil || !strings.Contains(err.Error(), "without a reason") {
		t.Errorf("acknowledgement without a reason: %v", err)
	}
	tg.Unchecked = map[string]string{"rental.staff_id": "a clerk of any store may serve a rental"}
	if _, err := newRunner(tg); err != nil {
		t.Errorf("a valid acknowledgement: %v", err)
	}
}

// TestEnvAcknowledgements: a graph file's run takes both acknowledgements
// from the environment, and refuses an item without a reason.
func TestEnvAcknowledgements(t *testing.T) {
	t.Setenv(EnvDSN, "")
	t.Setenv(EnvShared, "countries=ISO codes; labels = picked by every org")
	t.Setenv(EnvUnchecked, "rental.staff_id=a clerk of any store may serve")
	e, err := FromEnv()
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(e.Shared, map[string]string{"countries": "ISO codes", "labels": "picked by every org"}) ||
		!reflect.DeepEqual(e.Unchecked, map[string]string{"rental.staff_id": "a clerk of any store may serve"}) {
		t.Fatalf("Shared %q, Unchecked %q", e.Shared, e.Unchecked)
	}
	t.Setenv(EnvUnchecked, "rental.staff_id")
	if _, err := FromEnv(); err == nil || !strings.Contains(err.Error(), "is not table.column=reason") {
		t.Fatalf("an item without a reason: %v", err)
	}
}

// uncheckedClerk returns tg with rental.staff_id declared Unchecked.
func uncheckedClerk(tg Target) Target {
	tg.Graph.Tables = slices.Clone(tg.Graph.Tables)
	for i := range tg.Graph.Tables {
		if td := &tg.Graph.Tables[i]; td.Name == "rental" {
			td.ForeignKeys = slices.Clone(td.ForeignKeys)
			for k := range td.ForeignKeys {
				if slices.Equal(td.ForeignKeys[k].Columns, []string{"staff_id"}) {
					td.ForeignKeys[k].Unchecked = "clerks serve every store"
				}
			}
		}
	}
	tg.Schema = builder.MustSchema(tg.Graph)
	return tg
}

// TestTargetDSNList: TENANTMCP_DSN's list handed to a Target as one DSN
// (the README's snippet did so) ran on the first engine alone and ignored
// the rest without a word; it is refused, naming FromEnv, and echoes no
// password.
func TestTargetDSNList(t *testing.T) {
	for _, dsn := range []string{"sqlite: postgres://u:s3cretpw@127.0.0.1:1/db", "postgres://u:s3cretpw@127.0.0.1:1/db mysql://root@tcp(127.0.0.1:1)/test"} {
		_, err := newRunner(Target{Name: "franchise", DSN: dsn, Graph: franchiseDef()})
		if err == nil || !strings.Contains(err.Error(), "several DSNs") || !strings.Contains(err.Error(), "FromEnv") {
			t.Errorf("DSN list %q: %v; want a refusal naming FromEnv", strings.Fields(dsn)[0], err)
		}
		if err != nil && strings.Contains(err.Error(), "s3cretpw") {
			t.Errorf("the refusal echoes the password: %v", err)
		}
	}
	for _, dsn := range []string{"", "sqlite:", "postgres://u@127.0.0.1:1/db"} {
		if _, err := engineOf(dsn); err != nil {
			t.Errorf("one DSN %q refused: %v", dsn, err)
		}
	}
}
