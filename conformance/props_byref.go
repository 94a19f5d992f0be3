package conformance

// (h4-ref) Issue 25 §1–2: tables owned by reference (P52) and consistency
// paths (P53), each on a fixture of its own: two stores, addresses owned by
// reference from stores, customers and staff, rentals reaching their store
// through their customer (the scope parent) and their clerk (a
// consistency path). Ids interleave between the stores.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/tenantmcp/tenantmcp/builder"
	"github.com/tenantmcp/tenantmcp/guardedsql"
	"github.com/tenantmcp/tenantmcp/scope"
)

func init() {
	register(
		&property{id: 52, name: "owned_by_reference", title: "Rows owned by reference: visible through own referencing rows, claimed and changed only by their tenant",
			criterion: "reads = own referenced rows; foreign/shared claim refused, word for word as a missing row's; shared row ErrSharedRow; db = seed", fn: propOwnedByRef},
		&property{id: 53, name: "consistency_paths", title: "Every foreign key between tenant rows is checked on every write kind",
			criterion: "foreign clerk refused by INSERT/UPDATE/upsert/INSERT…SELECT, and across the grants of a two-store scope (insert, upsert, update, move); mixed row ErrSharedRow; db = seed", fn: propConsistencyPaths},
	)
}

// byRefFixture creates the store fixture with table prefix pre and opens
// it guarded.
func (r *runner) byRefFixture(p *pt, pre string) (*gapFixture, *builder.Schema, *guardedsql.DB) {
	n := func(s string) string { return pre + s }
	f := r.gapFixture(p, []string{n("rentals"), n("staff"), n("customers"), n("stores"), n("addresses")}, []string{
		`CREATE TABLE ` + n("addresses") + ` (id INT_T PRIMARY KEY, line KEY_T NOT NULL)`,
		`CREATE TABLE ` + n("stores") + ` (id INT_T PRIMARY KEY, address_id INT_T NULL REFERENCES ` + n("addresses") + `(id))`,
		`CREATE TABLE ` + n("customers") + ` (id INT_T PRIMARY KEY, store_id INT_T NOT NULL REFERENCES ` + n("stores") + `(id), address_id INT_T NULL REFERENCES ` + n("addresses") + `(id))`,
		`CREATE TABLE ` + n("staff") + ` (id INT_T PRIMARY KEY, store_id INT_T NOT NULL REFERENCES ` + n("stores") + `(id), address_id INT_T NULL REFERENCES ` + n("addresses") + `(id))`,
		`CREATE TABLE ` + n("rentals") + ` (id INT_T PRIMARY KEY, customer_id INT_T NOT NULL REFERENCES ` + n("customers") + `(id), staff_id INT_T NOT NULL REFERENCES ` + n("staff") + `(id), returned INT_T NULL)`,
		`INSERT INTO ` + n("addresses") + ` VALUES (100, 's1'), (101, 's2'), (102, 's1-cust'), (103, 's2-cust'), (104, 'shared'), (105, 'orphan'), (106, 's1-staff'), (107, 's2-staff')`,
		`INSERT INTO ` + n("stores") + ` VALUES (1, 100), (2, 101)`,
		`INSERT INTO ` + n("customers") + ` VALUES (10, 1, 102), (11, 2, 103), (12, 1, 104), (13, 2, 104)`,
		`INSERT INTO ` + n("staff") + ` VALUES (20, 1, 106), (21, 2, 107)`,
		`INSERT INTO ` + n("rentals") + ` VALUES (30, 10, 20, NULL), (31, 11, 21, NULL), (32, 10, 21, NULL)`,
	})
	fk := func(col, ref string) builder.ForeignKey {
		return builder.ForeignKey{Columns: []string{col}, RefTable: n(ref)}
	}
	sch, err := builder.NewSchema(builder.SchemaDef{
		Levels: []builder.Level{{Name: "store", Key: builder.IntKey}},
		Tables: []builder.TableDef{
			{Name: n("addresses"), Columns: []string{"id", "line"}, PrimaryKey: []string{"id"}, OwnedByReference: true},
			{Name: n("stores"), Columns: []string{"id", "address_id"}, PrimaryKey: []string{"id"}, Levels: map[string]string{"id": "store"},
				ForeignKeys: []builder.ForeignKey{fk("address_id", "addresses")}},
			{Name: n("customers"), Columns: []string{"id", "store_id", "address_id"}, PrimaryKey: []string{"id"}, Levels: map[string]string{"store_id": "store"},
				ForeignKeys: []builder.ForeignKey{fk("store_id", "stores"), fk("address_id", "addresses")}},
			{Name: n("staff"), Columns: []string{"id", "store_id", "address_id"}, PrimaryKey: []string{"id"}, Levels: map[string]string{"store_id": "store"},
				ForeignKeys: []builder.ForeignKey{fk("store_id", "stores"), fk("address_id", "addresses")}},
			{Name: n("rentals"), Columns: []string{"id", "customer_id", "staff_id", "returned"}, PrimaryKey: []string{"id"}, Parent: "customer_id",
				ForeignKeys: []builder.ForeignKey{fk("customer_id", "customers"), fk("staff_id", "staff")}},
		},
	})
	if err != nil {
		r.dropByRef(f, pre)
		p.Fatalf("schema: %v", err)
	}
	db, err := f.open(sch)
	if err != nil {
		r.dropByRef(f, pre)
		p.Fatalf("open: %v", err)
	}
	return f, sch, db
}

// dropByRef drops the fixture: on PostgreSQL the policies of the addresses
// first, which read the tables that reference them (so neither can be
// dropped before the other otherwise).
func (r *runner) dropByRef(f *gapFixture, pre string) {
	if r.engine == Postgres {
		for _, pol := range []string{"tenantmcp_scope", "tenantmcp_excl_update", "tenantmcp_excl_delete"} {
			_, _ = r.sc.owner.ExecContext(f.p.ctx, `DROP POLICY IF EXISTS `+pol+` ON `+pre+`addresses`)
		}
	}
	f.drop()
}

func storeGrant(id string) scope.Grant { return scope.Grant{Level: "store", ID: id} }

// refIDs reads the integer ids q selects.
func refIDs(p *pt, db *guardedsql.DB, ctx context.Context, q builder.Query) []int64 {
	got, err := guardedsql.All(ctx, db, q, func(r *guardedsql.Rows) (id int64, err error) { err = r.Scan(&id); return })
	if err != nil {
		p.Fatalf("query: %v", err)
	}
	slices.Sort(got)
	return got
}

// propOwnedByRef (P52): an address is visible to a store iff one of its
// rows references it; a store cannot point its rows at another store's
// address (and so read it), and a shared address is changed by no one.
func propOwnedByRef(p *pt, r *runner) {
	f, sch, db := r.byRefFixture(p, "g52_")
	defer r.dropByRef(f, "g52_")
	addr, cust := sch.Table("g52_addresses"), sch.Table("g52_customers")
	s1, s2 := gapCtx(p, storeGrant("1")), gapCtx(p, storeGrant("2"))
	all := builder.Must(builder.Select(addr.Col("id")).From(addr).Build())
	for _, c := range []struct {
		ctx  context.Context
		want []int64
	}{{s1, []int64{100, 102, 104, 106}}, {s2, []int64{101, 103, 104, 107}}} {
		if got := refIDs(p, db, c.ctx, all); !slices.Equal(got, c.want) {
			p.Errorf("addresses read %v, want the store's own referenced rows %v", got, c.want)
		}
	}
	seed := f.count(`SELECT COUNT(*) FROM g52_customers WHERE address_id IN (101, 103, 107)`)
	for _, a := range []struct {
		name string
		m    builder.Mutation
	}{
		{"INSERT", builder.Must(builder.InsertInto(cust).Columns("id", "store_id", "address_id").Values(14, 1, 103).Build())},
		{"UPDATE", builder.Must(builder.UpdateTable(cust).Set("address_id", 107).Where(cust.Col("id").Eq(10)).ExpectOne().Build())},
		{"upsert", builder.Must(builder.InsertInto(cust).Columns("id", "store_id", "address_id").Values(15, 1, 101).OnConflict("id").DoNothing().Build())},
	} {
		_, err := db.Exec(s1, a.m)
		if n := f.count(`SELECT COUNT(*) FROM g52_customers WHERE address_id IN (101, 103, 107)`); n != seed {
			p.Errorf("%s by store 1 pointed a row at store 2's address (err %v)", a.name, err)
		}
	}
	for _, c := range []struct {
		ctx  context.Context
		id   int64
		want error
	}{{s1, 104, guardedsql.ErrSharedRow}, {s2, 104, guardedsql.ErrSharedRow}, {s1, 103, guardedsql.ErrNotFound}, {s1, 105, guardedsql.ErrNotFound}} {
		_, err := db.Exec(c.ctx, builder.Must(builder.UpdateTable(addr).Set("line", "changed").Where(addr.Col("id").Eq(c.id)).ExpectOne().Build()))
		if !errors.Is(err, c.want) {
			p.Errorf("UPDATE of address %d: %v, want %v", c.id, err, c.want)
		}
	}
	if n := f.count(`SELECT COUNT(*) FROM g52_addresses WHERE line = 'changed'`); n != 0 {
		p.Errorf("%d addresses not the writer's alone were changed", n)
	}
	// Control: store 1 changes its own address.
	if _, err := db.Exec(s1, builder.Must(builder.UpdateTable(addr).Set("line", "mine").Where(addr.Col("id").Eq(102)).ExpectOne().Build())); err != nil {
		p.Errorf("control: store 1 updates its own address: %v", err)
	}
	// A claim of an address only store 2 references is refused exactly as
	// one of an address that does not exist (999): the same error, word for
	// word, from every write kind, so that a tool showing its errors does
	// not tell another tenant's row from none.
	for _, k := range []struct {
		name string
		m    func(a int64) builder.Mutation
	}{
		{"INSERT", func(a int64) builder.Mutation {
			return builder.Must(builder.InsertInto(cust).Columns("id", "store_id", "address_id").Values(16, 1, a).Build())
		}},
		{"UPDATE", func(a int64) builder.Mutation {
			return builder.Must(builder.UpdateTable(cust).Set("address_id", a).Where(cust.Col("id").Eq(10)).ExpectOne().Build())
		}},
		{"upsert", func(a int64) builder.Mutation {
			return builder.Must(builder.InsertInto(cust).Columns("id", "store_id", "address_id").Values(17, 1, a).OnConflict("id").DoNothing().Build())
		}},
	} {
		_, foreign := db.Exec(s1, k.m(103))
		_, missing := db.Exec(s1, k.m(999))
		switch {
		case !errors.Is(foreign, guardedsql.ErrNotFound):
			p.Errorf("%s at store 2's address: %v, want ErrNotFound", k.name, foreign)
		case missing == nil || foreign.Error() != missing.Error():
			p.Errorf("%s: store 2's address answers %q, a missing one %v: the answers tell them apart", k.name, foreign, missing)
		}
	}
	if n := f.count(`SELECT COUNT(*) FROM g52_customers WHERE id > 13 OR (store_id = 1 AND address_id IN (101, 103, 107))`); n != 0 {
		p.Errorf("%d customers written at another store's or a missing address", n)
	}
	// Control: the unreferenced address 105 exists, and store 1 claims it.
	if _, err := db.Exec(s1, builder.Must(builder.InsertInto(cust).Columns("id", "store_id", "address_id").Values(18, 1, 105).Build())); err != nil {
		p.Errorf("control: store 1 claims the unreferenced address: %v", err)
	}
}

// propConsistencyPaths (P53): a rental's clerk is checked on every write
// kind, and a rental whose customer and clerk belong to different stores
// is visible to the customer's store and changed by no one.
func propConsistencyPaths(p *pt, r *runner) {
	f, sch, db := r.byRefFixture(p, "g53_")
	defer r.dropByRef(f, "g53_")
	ren := sch.Table("g53_rentals")
	src := ren.As("src")
	s1 := gapCtx(p, storeGrant("1"))
	if got := refIDs(p, db, s1, builder.Must(builder.Select(ren.Col("id")).From(ren).Build())); !slices.Equal(got, []int64{30, 32}) {
		p.Errorf("store 1 reads rentals %v, want [30 32] (by customer)", got)
	}
	var msgs []string
	for _, a := range []struct {
		name string
		m    builder.Mutation
		want error
	}{
		{"INSERT", builder.Must(builder.InsertInto(ren).Columns("id", "customer_id", "staff_id").Values(33, 10, 21).Build()), guardedsql.ErrNotFound},
		{"UPDATE", builder.Must(builder.UpdateTable(ren).Set("staff_id", 21).Where(ren.Col("id").Eq(30)).ExpectOne().Build()), guardedsql.ErrNotFound},
		{"upsert", builder.Must(builder.InsertInto(ren).Columns("id", "customer_id", "staff_id", "returned").Values(34, 10, 21, 0).OnConflict("id").DoUpdate("returned").Build()), guardedsql.ErrNotFound},
		{"INSERT…SELECT", builder.Must(builder.InsertInto(ren).Columns("id", "customer_id", "staff_id").
			Select(builder.Must(builder.Select(src.Col("id").Add(100), src.Col("customer_id"), src.Col("staff_id").Add(1)).From(src).Where(src.Col("id").Eq(30)).Build())).Build()), guardedsql.ErrNotFound},
		{"UPDATE of the mixed rental", builder.Must(builder.UpdateTable(ren).Set("returned", 1).Where(ren.Col("id").Eq(32)).ExpectOne().Build()), guardedsql.ErrSharedRow},
		{"upsert onto the mixed rental", builder.Must(builder.InsertInto(ren).Columns("id", "customer_id", "staff_id", "returned").Values(32, 10, 20, 1).OnConflict("id").DoUpdate("returned").Build()), guardedsql.ErrNotFound},
		{"DELETE of the mixed rental", builder.Must(builder.DeleteFrom(ren).Where(ren.Col("id").Eq(32)).ExpectOne().Build()), guardedsql.ErrSharedRow},
	} {
		if _, err := db.Exec(s1, a.m); !errors.Is(err, a.want) {
			msgs = append(msgs, fmt.Sprintf("%s: %v, want %v", a.name, err, a.want))
		}
	}
	if len(msgs) > 0 {
		p.Errorf("store 1's writes through store 2's clerk: %s", strings.Join(msgs, "; "))
	}
	if n := f.count(`SELECT COUNT(*) FROM g53_rentals WHERE staff_id = 21 OR returned IS NOT NULL`); n != 2 {
		p.Errorf("rentals with store 2's clerk or returned: %d, want the seed's 2", n)
	}
	if _, err := db.Exec(s1, builder.Must(builder.UpdateTable(ren).Set("returned", 1).Where(ren.Col("id").Eq(30)).ExpectOne().Build())); err != nil {
		p.Errorf("control: store 1 returns its consistent rental: %v", err)
	}
	// A holder of both stores sees store 1's customer and store 2's clerk,
	// each under one of its grants: a rental joining them would be filed
	// under store 1 through its customer while naming store 2's clerk, and
	// store 2 alone could then not delete its clerk. The inserted row's
	// checks must hold under one grant.
	both := gapCtx(p, storeGrant("1"), storeGrant("2"))
	for _, a := range []struct {
		name string
		m    builder.Mutation
	}{
		{"INSERT", builder.Must(builder.InsertInto(ren).Columns("id", "customer_id", "staff_id").Values(35, 10, 21).Build())},
		{"upsert", builder.Must(builder.InsertInto(ren).Columns("id", "customer_id", "staff_id", "returned").Values(35, 10, 21, 0).OnConflict("id").DoUpdate("returned").Build())},
		{"UPDATE of store 1's rental 30 to store 2's clerk", builder.Must(builder.UpdateTable(ren).Set("staff_id", 21).Where(ren.Col("id").Eq(30)).ExpectOne().Build())},
		{"UPDATE moving store 1's rental 30 to store 2's customer, its clerk kept", builder.Must(builder.UpdateTable(ren).Set("customer_id", 11).Where(ren.Col("id").Eq(30)).ExpectOne().Build())},
	} {
		if _, err := db.Exec(both, a.m); !errors.Is(err, guardedsql.ErrNotFound) {
			p.Errorf("stores 1 and 2 together: %s (store 1's customer with store 2's clerk): %v, want ErrNotFound", a.name, err)
		}
	}
	if n := f.count(`SELECT COUNT(*) FROM g53_rentals WHERE id = 35 OR id = 30 AND (staff_id <> 20 OR customer_id <> 10)`); n != 0 {
		p.Errorf("stores 1 and 2 together joined a store's customer with the other's clerk (rental 35, or 30 changed)")
	}
	for _, c := range []struct {
		what string
		m    builder.Mutation
	}{
		{"file a rental of store 1's customer with store 1's clerk", builder.Must(builder.InsertInto(ren).Columns("id", "customer_id", "staff_id").Values(36, 10, 20).Build())},
		{"move rental 31 with its clerk to store 1's customer and clerk", builder.Must(builder.UpdateTable(ren).Set("customer_id", 10).Set("staff_id", 20).Where(ren.Col("id").Eq(31)).ExpectOne().Build())},
	} {
		if _, err := db.Exec(both, c.m); err != nil {
			p.Errorf("control: stores 1 and 2 together %s: %v", c.what, err)
		}
	}
}
