package guardedsql_test

// (h4-ref) Issue 25 §1–2: tables owned by reference and rows with several
// paths to a tenant, on SQLite and (when their DSNs are set) PostgreSQL
// and MariaDB/MySQL. Two stores; ids interleave between them.

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tenantmcp/tenantmcp/builder"
	"github.com/tenantmcp/tenantmcp/guardedsql"
	"github.com/tenantmcp/tenantmcp/guardedsql/postgres"
	"github.com/tenantmcp/tenantmcp/scope"
)

var storesDDL = []string{
	`CREATE TABLE addresses (id INT_T PRIMARY KEY, line KEY_T NOT NULL)`,
	`CREATE TABLE stores (id INT_T PRIMARY KEY, address_id INT_T NULL REFERENCES addresses(id))`,
	`CREATE TABLE customers (id INT_T PRIMARY KEY, store_id INT_T NOT NULL REFERENCES stores(id), address_id INT_T NULL REFERENCES addresses(id), name KEY_T NULL)`,
	`CREATE TABLE staff (id INT_T PRIMARY KEY, store_id INT_T NOT NULL REFERENCES stores(id), address_id INT_T NULL REFERENCES addresses(id))`,
	`CREATE TABLE rentals (id INT_T PRIMARY KEY, customer_id INT_T NOT NULL REFERENCES customers(id), staff_id INT_T NOT NULL REFERENCES staff(id), returned INT_T NULL)`,
	`CREATE TABLE payments (id INT_T PRIMARY KEY, rental_id INT_T NOT NULL REFERENCES rentals(id), staff_id INT_T NOT NULL REFERENCES staff(id), amount INT_T NOT NULL)`,
	// 100, 102, 106: store 1's; 101, 103, 107: store 2's; 104 shared by a
	// customer of each; 105 referenced by no one.
	`INSERT INTO addresses VALUES (100, 's1-store'), (101, 's2-store'), (102, 's1-cust'), (103, 's2-cust'), (104, 'shared'), (105, 'orphan'), (106, 's1-staff'), (107, 's2-staff')`,
	`INSERT INTO stores VALUES (1, 100), (2, 101)`,
	`INSERT INTO customers VALUES (10, 1, 102, 'a'), (11, 2, 103, 'b'), (12, 1, 104, 'a2'), (13, 2, 104, 'b2')`,
	`INSERT INTO staff VALUES (20, 1, 106), (21, 2, 107)`,
	// 32: store 1's customer, store 2's clerk (visible to store 1 only).
	`INSERT INTO rentals VALUES (30, 10, 20, NULL), (31, 11, 21, NULL), (32, 10, 21, NULL)`,
	`INSERT INTO payments VALUES (40, 30, 20, 5), (41, 31, 21, 6), (42, 32, 21, 7)`,
}

func storesSchemaDef() builder.SchemaDef {
	fk := func(col, ref string) builder.ForeignKey {
		return builder.ForeignKey{Columns: []string{col}, RefTable: ref}
	}
	return builder.SchemaDef{
		Levels: []builder.Level{{Name: "store", Key: builder.IntKey}},
		Tables: []builder.TableDef{
			{Name: "addresses", Columns: []string{"id", "line"}, PrimaryKey: []string{"id"}, OwnedByReference: true},
			{Name: "stores", Columns: []string{"id", "address_id"}, PrimaryKey: []string{"id"}, Levels: map[string]string{"id": "store"},
				ForeignKeys: []builder.ForeignKey{fk("address_id", "addresses")}},
			{Name: "customers", Columns: []string{"id", "store_id", "address_id", "name"}, PrimaryKey: []string{"id"}, Levels: map[string]string{"store_id": "store"},
				ForeignKeys: []builder.ForeignKey{fk("store_id", "stores"), fk("address_id", "addresses")}},
			{Name: "staff", Columns: []string{"id", "store_id", "address_id"}, PrimaryKey: []string{"id"}, Levels: map[string]string{"store_id": "store"},
				ForeignKeys: []builder.ForeignKey{fk("store_id", "stores"), fk("address_id", "addresses")}},
			{Name: "rentals", Columns: []string{"id", "customer_id", "staff_id", "returned"}, PrimaryKey: []string{"id"}, Parent: "customer_id",
				ForeignKeys: []builder.ForeignKey{fk("customer_id", "customers"), fk("staff_id", "staff")}},
			{Name: "payments", Columns: []string{"id", "rental_id", "staff_id", "amount"}, PrimaryKey: []string{"id"}, Parent: "rental_id",
				ForeignKeys: []builder.ForeignKey{fk("rental_id", "rentals"), fk("staff_id", "staff")}},
		},
	}
}

// storeModes runs fn on every engine, and on PostgreSQL once more with
// Options.RLSOnly: the row-level security policies alone.
func storeModes(t *testing.T, fn func(t *testing.T, e engine, opts guardedsql.Options)) {
	forEachEngine(t, func(t *testing.T, e engine) {
		fn(t, e, guardedsql.Options{})
		if e.name == "postgres" {
			t.Run("rlsonly", func(t *testing.T) { fn(t, e, guardedsql.Options{Engine: postgres.Options{RLSOnly: true}}) })
		}
	})
}

// openStores creates the stores fixture on e and opens it guarded.
func openStores(t *testing.T, e engine, opts guardedsql.Options) (*scratch, *builder.Schema, *guardedsql.DB) {
	t.Helper()
	s := newScratch(t, e, storesDDL)
	sch := builder.MustSchema(storesSchemaDef())
	db, err := s.open(sch, opts)
	if err != nil {
		t.Fatal(err)
	}
	return s, sch, db
}

func storeCtx(id string) context.Context {
	return grantCtx(scope.Grant{Level: "store", ID: id})
}

// ids reads the ids q selects as ctx's caller.
func byrefIDs(t *testing.T, ctx context.Context, db *guardedsql.DB, q builder.Query) []int64 {
	t.Helper()
	got, err := guardedsql.All(ctx, db, q, func(r *guardedsql.Rows) (id int64, err error) { err = r.Scan(&id); return })
	if err != nil {
		t.Fatalf("read: %v", err)
	}
	slices.Sort(got)
	return got
}

// built returns a mutation Build returned, panicking on its error (a test
// bug, not a finding).
func built[M any](m M, err error) M {
	if err != nil {
		panic(err)
	}
	return m
}

// TestOwnedByReferenceRead: an address is visible to a store iff one of its
// customers, staff or the store itself references it; an unreferenced one
// to no one; joins, subqueries and aggregates see the same rows.
func TestOwnedByReferenceRead(t *testing.T) {
	storeModes(t, func(t *testing.T, e engine, opts guardedsql.Options) {
		_, sch, db := openStores(t, e, opts)
		addr, cust := sch.Table("addresses"), sch.Table("customers")
		all := mustQuery(t, builder.Select(addr.Col("id")).From(addr))
		for store, want := range map[string][]int64{"1": {100, 102, 104, 106}, "2": {101, 103, 104, 107}, "3": nil} {
			if got := byrefIDs(t, storeCtx(store), db, all); !slices.Equal(got, want) {
				t.Errorf("store %s reads addresses %v, want %v", store, got, want)
			}
		}
		// A join from customers, and one from addresses, a subquery and a count.
		j := mustQuery(t, builder.Select(addr.Col("id")).From(cust).Join(addr, cust.Col("address_id").EqCol(addr.Col("id"))))
		if got := byrefIDs(t, storeCtx("1"), db, j); !slices.Equal(got, []int64{102, 104}) {
			t.Errorf("customers join addresses as store 1: %v", got)
		}
		lj := mustQuery(t, builder.Select(addr.Col("id")).From(addr).LeftJoin(cust, cust.Col("address_id").EqCol(addr.Col("id"))).Where(cust.Col("id").IsNull()))
		if got := byrefIDs(t, storeCtx("1"), db, lj); !slices.Equal(got, []int64{100, 106}) {
			t.Errorf("addresses without a visible customer as store 1: %v", got)
		}
		sub := mustQuery(t, builder.Select(cust.Col("id")).From(cust).Where(cust.Col("address_id").InQuery(mustQuery(t, builder.Select(addr.Col("id")).From(addr)))))
		if got := byrefIDs(t, storeCtx("2"), db, sub); !slices.Equal(got, []int64{11, 13}) {
			t.Errorf("customers with a visible address as store 2: %v", got)
		}
		n := mustQuery(t, builder.Select(builder.CountAll()).From(addr).Where(addr.Col("id").In(105, 103)))
		if got := byrefIDs(t, storeCtx("1"), db, n); !slices.Equal(got, []int64{0}) {
			t.Errorf("store 1 counts %v of the orphan and store 2's address, want 0", got)
		}
	})
}

// TestOwnedByReferenceWrite: writes to a table owned by reference need
// every referencing row in scope; a tenant row can be pointed only at an
// address that is unreferenced or already visible to the writer, by every
// statement kind.
func TestOwnedByReferenceWrite(t *testing.T) {
	storeModes(t, func(t *testing.T, e engine, opts guardedsql.Options) {
		s, sch, db := openStores(t, e, opts)
		addr, cust := sch.Table("addresses"), sch.Table("customers")
		src := cust.As("src")
		s1, s2 := storeCtx("1"), storeCtx("2")
		setLine := func(id int64) builder.Update {
			return built(builder.UpdateTable(addr).Set("line", "changed").Where(addr.Col("id").Eq(id)).ExpectOne().Build())
		}
		del := func(id int64) builder.Delete {
			return built(builder.DeleteFrom(addr).Where(addr.Col("id").Eq(id)).ExpectOne().Build())
		}
		changed := func() int { return s.count(`SELECT COUNT(*) FROM addresses WHERE line = 'changed'`) }

		if _, err := db.Exec(s1, setLine(102)); err != nil {
			t.Fatalf("store 1 updates its customer's address: %v", err)
		}
		for _, c := range []struct {
			name string
			ctx  context.Context
			m    builder.Mutation
			want error
		}{
			{"store 1 updates store 2's address", s1, setLine(103), guardedsql.ErrNotFound},
			{"store 1 updates the orphan", s1, setLine(105), guardedsql.ErrNotFound},
			{"store 1 updates the shared address", s1, setLine(104), guardedsql.ErrSharedRow},
			{"store 2 updates the shared address", s2, setLine(104), guardedsql.ErrSharedRow},
			{"store 2 deletes the shared address", s2, del(104), guardedsql.ErrSharedRow},
			{"store 1 deletes store 2's address", s1, del(107), guardedsql.ErrNotFound},
		} {
			_, err := db.Exec(c.ctx, c.m)
			if !errors.Is(err, c.want) {
				t.Errorf("%s: err = %v, want %v", c.name, err, c.want)
			}
			if c.want == guardedsql.ErrNotFound && errors.Is(err, guardedsql.ErrSharedRow) {
				t.Errorf("%s: ErrSharedRow for a row the caller cannot see", c.name)
			}
		}
		if n := changed(); n != 1 {
			t.Fatalf("%d addresses changed, want store 1's own 1", n)
		}
		if n := s.count(`SELECT COUNT(*) FROM addresses`); n != 8 {
			t.Fatalf("%d addresses left, want 8", n)
		}

		// Pointing a tenant row at another tenant's address, by every kind
		// of write, fails as not found and changes nothing.
		attacks := []struct {
			name string
			m    builder.Mutation
		}{
			{"insert", built(builder.InsertInto(cust).Columns("id", "store_id", "address_id").Values(14, 1, 103).Build())},
			{"update", built(builder.UpdateTable(cust).Set("address_id", 107).Where(cust.Col("id").Eq(10)).ExpectOne().Build())},
			{"upsert", built(builder.InsertInto(cust).Columns("id", "store_id", "address_id", "name").Values(15, 1, 101, "x").OnConflict("id").DoUpdate("name").Build())},
			{"insert select", built(builder.InsertInto(cust).Columns("id", "store_id", "address_id").
				Select(mustQuery(t, builder.Select(src.Col("id").Add(1000), src.Col("store_id"), src.Col("address_id").Add(1)).From(src).Where(src.Col("id").Eq(10)))).Build())},
			{"shared address onto store 2's", built(builder.UpdateTable(cust).Set("address_id", 103).Where(cust.Col("id").Eq(12)).ExpectOne().Build())},
		}
		for _, a := range attacks {
			if _, err := db.Exec(s1, a.m); !errors.Is(err, guardedsql.ErrNotFound) {
				t.Errorf("%s: err = %v, want ErrNotFound", a.name, err)
			}
		}
		if n := s.count(`SELECT COUNT(*) FROM customers WHERE store_id = 1 AND address_id IN (101, 103, 107)`); n != 0 {
			t.Fatalf("store 1 has %d customers at store 2's addresses", n)
		}
		if n := s.count(`SELECT COUNT(*) FROM customers`); n != 4 {
			t.Fatalf("%d customers, want 4", n)
		}
		if got := byrefIDs(t, s1, db, mustQuery(t, builder.Select(addr.Col("id")).From(addr))); slices.Contains(got, 103) || slices.Contains(got, 107) || slices.Contains(got, 101) {
			t.Fatalf("store 1 reads store 2's addresses: %v", got)
		}

		// A new address is no one's until a row in scope references it;
		// then it is the writer's, and not claimable by the other store.
		if _, err := db.Exec(s1, built(builder.InsertInto(addr).Columns("id", "line").Values(108, "new").Build())); err != nil {
			t.Fatalf("store 1 inserts an address: %v", err)
		}
		if got := byrefIDs(t, s1, db, mustQuery(t, builder.Select(addr.Col("id")).From(addr).Where(addr.Col("id").Eq(108)))); len(got) != 0 {
			t.Errorf("an unreferenced new address is visible: %v", got)
		}
		if _, err := db.Exec(s1, built(builder.InsertInto(cust).Columns("id", "store_id", "address_id").Values(16, 1, 108).Build())); err != nil {
			t.Fatalf("store 1 references its new address: %v", err)
		}
		if got := byrefIDs(t, s1, db, mustQuery(t, builder.Select(addr.Col("id")).From(addr).Where(addr.Col("id").Eq(108)))); !slices.Equal(got, []int64{108}) {
			t.Errorf("store 1 does not see its referenced new address: %v", got)
		}
		if _, err := db.Exec(s2, built(builder.InsertInto(cust).Columns("id", "store_id", "address_id").Values(17, 2, 108).Build())); !errors.Is(err, guardedsql.ErrNotFound) {
			t.Errorf("store 2 claims store 1's new address: %v, want ErrNotFound", err)
		}
		// Control: store 1 points another row at its own (shared) address.
		if _, err := db.Exec(s1, built(builder.UpdateTable(cust).Set("address_id", 104).Where(cust.Col("id").Eq(10)).ExpectOne().Build())); err != nil {
			t.Errorf("store 1 points its customer at an address it sees: %v", err)
		}
	})
}

// TestConsistencyPaths: a rental reaches its store through its customer
// (the scope parent) and through its clerk (a consistency path). Every
// write kind checks both; an existing rental whose paths lead to different
// stores is visible through its customer only and writable by no one, and
// so is its payment. An Unchecked clerk key is not checked.
func TestConsistencyPaths(t *testing.T) {
	storeModes(t, func(t *testing.T, e engine, opts guardedsql.Options) {
		s, sch, db := openStores(t, e, opts)
		ren, pay := sch.Table("rentals"), sch.Table("payments")
		src := ren.As("src")
		s1, s2 := storeCtx("1"), storeCtx("2")
		all := mustQuery(t, builder.Select(ren.Col("id")).From(ren))
		if got := byrefIDs(t, s1, db, all); !slices.Equal(got, []int64{30, 32}) {
			t.Errorf("store 1 reads rentals %v, want [30 32] (by customer)", got)
		}
		if got := byrefIDs(t, s2, db, all); !slices.Equal(got, []int64{31}) {
			t.Errorf("store 2 reads rentals %v, want [31]", got)
		}
		ret := func(id int64) builder.Update {
			return built(builder.UpdateTable(ren).Set("returned", 1).Where(ren.Col("id").Eq(id)).ExpectOne().Build())
		}
		cases := []struct {
			name string
			ctx  context.Context
			m    builder.Mutation
			want error
		}{
			{"insert with a foreign clerk", s1, built(builder.InsertInto(ren).Columns("id", "customer_id", "staff_id").Values(33, 10, 21).Build()), guardedsql.ErrNotFound},
			{"update to a foreign clerk", s1, built(builder.UpdateTable(ren).Set("staff_id", 21).Where(ren.Col("id").Eq(30)).ExpectOne().Build()), guardedsql.ErrNotFound},
			{"upsert with a foreign clerk", s1, built(builder.InsertInto(ren).Columns("id", "customer_id", "staff_id", "returned").Values(34, 10, 21, 0).OnConflict("id").DoUpdate("returned").Build()), guardedsql.ErrNotFound},
			{"insert select with a foreign clerk", s1, built(builder.InsertInto(ren).Columns("id", "customer_id", "staff_id").
				Select(mustQuery(t, builder.Select(src.Col("id").Add(100), src.Col("customer_id"), src.Col("staff_id").Add(1)).From(src).Where(src.Col("id").Eq(30)))).Build()), guardedsql.ErrNotFound},
			{"store 1 returns the mixed rental", s1, ret(32), guardedsql.ErrSharedRow},
			{"store 2 returns the mixed rental", s2, ret(32), guardedsql.ErrNotFound},
			{"store 1 deletes the mixed rental's payment", s1, built(builder.DeleteFrom(pay).Where(pay.Col("id").Eq(42)).ExpectOne().Build()), guardedsql.ErrSharedRow},
			{"store 1 upserts onto the mixed rental", s1, built(builder.InsertInto(ren).Columns("id", "customer_id", "staff_id", "returned").Values(32, 10, 20, 1).OnConflict("id").DoUpdate("returned").Build()), guardedsql.ErrNotFound},
			{"store 1 deletes the mixed rental", s1, built(builder.DeleteFrom(ren).Where(ren.Col("id").Eq(32)).ExpectOne().Build()), guardedsql.ErrSharedRow},
		}
		for _, c := range cases {
			_, err := db.Exec(c.ctx, c.m)
			if !errors.Is(err, c.want) {
				t.Errorf("%s: err = %v, want %v", c.name, err, c.want)
			}
			if c.want == guardedsql.ErrNotFound && errors.Is(err, guardedsql.ErrSharedRow) {
				t.Errorf("%s: ErrSharedRow for a row the caller cannot see", c.name)
			}
		}
		if n := s.count(`SELECT COUNT(*) FROM rentals`); n != 3 {
			t.Fatalf("%d rentals, want 3", n)
		}
		if n := s.count(`SELECT COUNT(*) FROM rentals WHERE returned IS NOT NULL`); n != 0 {
			t.Fatalf("%d rentals returned, want 0", n)
		}
		if n := s.count(`SELECT COUNT(*) FROM payments`); n != 3 {
			t.Fatalf("%d payments, want 3", n)
		}
		// Controls: a consistent rental is returned; the read of the mixed
		// payment works for its owner.
		if _, err := db.Exec(s1, ret(30)); err != nil {
			t.Errorf("store 1 returns its consistent rental: %v", err)
		}
		if got := byrefIDs(t, s1, db, mustQuery(t, builder.Select(pay.Col("id")).From(pay))); !slices.Equal(got, []int64{40, 42}) {
			t.Errorf("store 1 reads payments %v, want [40 42]", got)
		}

		// With the clerk key declared Unchecked, the clerk is not checked.
		def := storesSchemaDef()
		def.Tables[4].ForeignKeys[1].Unchecked = "clerks serve every store"
		sch2 := builder.MustSchema(def)
		db2, err := s.open(sch2, opts)
		if err != nil {
			t.Fatal(err)
		}
		ren = sch2.Table("rentals")
		if _, err := db2.Exec(s1, ret(32)); err != nil {
			t.Errorf("unchecked clerk: store 1 returns the mixed rental: %v", err)
		}
		if _, err := db2.Exec(s1, built(builder.InsertInto(ren).Columns("id", "customer_id", "staff_id").Values(35, 10, 21).Build())); err != nil {
			t.Errorf("unchecked clerk: store 1 inserts with store 2's clerk: %v", err)
		}
	})
}

// TestOwnedByReferenceRawSQL: on PostgreSQL, raw SQL as the application
// role (the compromised-credentials adversary) meets the same rules in the
// row-level security policies: it cannot point a row at another store's
// address or clerk, read that address through it, change a shared address,
// or complete the mixed rental.
func TestOwnedByReferenceRawSQL(t *testing.T) {
	s := newScratch(t, enginePostgres, storesDDL)
	if _, err := s.open(builder.MustSchema(storesSchemaDef())); err != nil {
		t.Fatal(err)
	}
	const doc = `{"store":[1]}`
	for _, q := range []string{
		`INSERT INTO customers VALUES (50, 1, 103, 'x')`,
		`UPDATE customers SET address_id = 107 WHERE id = 10`,
		`INSERT INTO rentals VALUES (60, 10, 21, NULL)`,
		`UPDATE rentals SET returned = 1 WHERE id = 32`,
		`UPDATE payments SET amount = 0 WHERE id = 42`,
	} {
		if err := s.appExec(doc, q); err == nil {
			t.Errorf("raw SQL as store 1 succeeded: %s", q)
		}
	}
	for _, q := range []string{
		`UPDATE addresses SET line = 'changed' WHERE id IN (103, 104, 105)`,
		`DELETE FROM addresses WHERE id IN (103, 104, 105)`,
		`UPDATE customers SET name = (SELECT line FROM addresses WHERE id = 103) WHERE id = 10`,
	} {
		if err := s.appExec(doc, q); err != nil {
			t.Errorf("%s: %v", q, err)
		}
	}
	if n := s.count(`SELECT COUNT(*) FROM addresses WHERE line = 'changed'`); n != 0 {
		t.Errorf("raw SQL changed %d addresses not store 1's alone", n)
	}
	if n := s.count(`SELECT COUNT(*) FROM addresses`); n != 8 {
		t.Errorf("%d addresses left, want 8", n)
	}
	if n := s.count(`SELECT COUNT(*) FROM customers WHERE name = 's2-cust'`); n != 0 {
		t.Error("raw SQL as store 1 read store 2's address")
	}
	if n := s.count(`SELECT COUNT(*) FROM rentals WHERE returned IS NOT NULL`) + s.count(`SELECT COUNT(*) FROM payments WHERE amount = 0`); n != 0 {
		t.Errorf("raw SQL completed %d mixed rows", n)
	}
	// Controls: its own address, and pointing a row at it.
	if err := s.appExec(doc, `UPDATE addresses SET line = 'mine' WHERE id = 102`); err != nil {
		t.Fatal(err)
	}
	if n := s.count(`SELECT COUNT(*) FROM addresses WHERE line = 'mine'`); n != 1 {
		t.Errorf("store 1 could not change its own address by raw SQL")
	}
	if err := s.appExec(doc, `UPDATE customers SET address_id = 100 WHERE id = 10`); err != nil {
		t.Errorf("store 1 points its customer at its store's address: %v", err)
	}
}

// TestOwnedByReferenceClaimRace: on PostgreSQL two stores claiming the same
// unreferenced address at once queue on the claim lock; the second, once
// the first committed, is refused, so the address never becomes shared.
func TestOwnedByReferenceClaimRace(t *testing.T) {
	s := newScratch(t, enginePostgres, storesDDL)
	sch := builder.MustSchema(storesSchemaDef())
	db, err := s.open(sch)
	if err != nil {
		t.Fatal(err)
	}
	cust := sch.Table("customers")
	s.mustExec(t, `INSERT INTO addresses VALUES (109, 'fresh')`)
	claim := func(id, store int64) builder.Insert {
		return built(builder.InsertInto(cust).Columns("id", "store_id", "address_id").Values(id, store, 109).Build())
	}
	held, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	unblock := func() { once.Do(func() { close(release) }) }
	defer unblock() // a failure below must not leave the pool held at cleanup
	first := make(chan error, 1)
	go func() {
		first <- db.Tx(storeCtx("1"), func(tx *guardedsql.Tx) error {
			if _, err := tx.Exec(storeCtx("1"), claim(70, 1)); err != nil {
				close(held)
				return err
			}
			close(held)
			<-release
			return nil
		})
	}()
	<-held
	second := make(chan error, 1)
	go func() {
		_, err := db.Exec(storeCtx("2"), claim(71, 2))
		second <- err
	}()
	select {
	case err := <-second:
		unblock()
		<-first
		t.Fatalf("store 2's claim did not wait for store 1's open claim: %v", err)
	case <-time.After(300 * time.Millisecond):
	}
	unblock()
	if err := <-first; err != nil {
		t.Fatalf("store 1's claim: %v", err)
	}
	if err := <-second; !errors.Is(err, guardedsql.ErrNotFound) {
		t.Errorf("store 2's claim after store 1's: %v, want ErrNotFound", err)
	}
	if n := s.count(`SELECT COUNT(*) FROM customers WHERE address_id = 109`); n != 1 {
		t.Errorf("%d customers reference the claimed address, want 1", n)
	}
}

// TestOwnedByReferenceSharedRowNoLever: on PostgreSQL, a store updating
// its own customer (not the address) while another store holds an open
// transaction that updated its own customer at the same shared address
// is not made to wait: the claim lock is taken only for a claim of an
// address no row in the caller's scope references. Before, both updates
// took it, so one store's open transaction stalled the other's writes
// and told it that someone shared the address (a lever and an oracle).
// Control: a claim of an unreferenced address still queues
// (TestOwnedByReferenceClaimRace).
func TestOwnedByReferenceSharedRowNoLever(t *testing.T) {
	s := newScratch(t, enginePostgres, storesDDL)
	sch := builder.MustSchema(storesSchemaDef())
	db, err := s.open(sch)
	if err != nil {
		t.Fatal(err)
	}
	cust := sch.Table("customers")
	rename := func(id int64, name string) builder.Update {
		return built(builder.UpdateTable(cust).Set("name", name).Where(cust.Col("id").Eq(id)).ExpectOne().Build())
	}
	held, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	unblock := func() { once.Do(func() { close(release) }) }
	defer unblock()
	first := make(chan error, 1)
	go func() {
		first <- db.Tx(storeCtx("1"), func(tx *guardedsql.Tx) error {
			_, err := tx.Exec(storeCtx("1"), rename(12, "a2-renamed"))
			close(held)
			if err != nil {
				return err
			}
			<-release
			return nil
		})
	}()
	<-held
	ctx, cancel := context.WithTimeout(storeCtx("2"), 2*time.Second)
	defer cancel()
	start := time.Now()
	_, err = db.Exec(ctx, rename(13, "b2-renamed"))
	waited := time.Since(start)
	unblock()
	if ferr := <-first; ferr != nil {
		t.Fatalf("store 1's update: %v", ferr)
	}
	if err != nil {
		t.Fatalf("store 2's update of its own customer at the shared address while store 1's transaction is open: %v after %v", err, waited)
	}
	if waited > time.Second {
		t.Errorf("store 2's update waited %v for store 1's transaction", waited)
	}
	if n := s.count(`SELECT COUNT(*) FROM customers WHERE name IN ('a2-renamed', 'b2-renamed')`); n != 2 {
		t.Errorf("%d of the 2 renames landed", n)
	}
}

// TestOwnedByReferenceKeyTypes: on PostgreSQL a reference to a table owned
// by reference from a column of a type that cannot become the key's
// implicitly (a bigint column referencing an integer key: Chatwoot's
// account_users.user_id -> users.id) stops ApplyRLS with a message naming
// both columns and the fix, not the engine's "function does not exist"; a
// narrower column (integer referencing bigint) is accepted.
func TestOwnedByReferenceKeyTypes(t *testing.T) {
	for _, tc := range []struct {
		name, key, ref string
		ok             bool
	}{
		{"bigint column, integer key", "INTEGER", "BIGINT", false},
		{"integer column, bigint key", "BIGINT", "INTEGER", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newScratch(t, enginePostgres, []string{
				`CREATE TABLE users (id ` + tc.key + ` PRIMARY KEY, email KEY_T NOT NULL)`,
				`CREATE TABLE accounts (id INT_T PRIMARY KEY)`,
				`CREATE TABLE account_users (id INT_T PRIMARY KEY, account_id INT_T NOT NULL REFERENCES accounts(id), user_id ` + tc.ref + ` NOT NULL REFERENCES users(id))`,
			})
			fk := func(col, ref string) builder.ForeignKey {
				return builder.ForeignKey{Columns: []string{col}, RefTable: ref}
			}
			sch := builder.MustSchema(builder.SchemaDef{
				Levels: []builder.Level{{Name: "account", Key: builder.IntKey}},
				Tables: []builder.TableDef{
					{Name: "users", Columns: []string{"id", "email"}, PrimaryKey: []string{"id"}, OwnedByReference: true},
					{Name: "accounts", Columns: []string{"id"}, PrimaryKey: []string{"id"}, Levels: map[string]string{"id": "account"}},
					{Name: "account_users", Columns: []string{"id", "account_id", "user_id"}, PrimaryKey: []string{"id"},
						Levels: map[string]string{"account_id": "account"}, ForeignKeys: []builder.ForeignKey{fk("account_id", "accounts"), fk("user_id", "users")}},
				},
			})
			_, err := s.open(sch)
			switch {
			case tc.ok && err != nil:
				t.Fatalf("refused: %v", err)
			case !tc.ok && (err == nil || !strings.Contains(err.Error(), "account_users.user_id is bigint but users.id") || strings.Contains(err.Error(), "does not exist")):
				t.Fatalf("err = %v, want the mismatch named", err)
			}
			if err != nil {
				t.Log(err)
			}
		})
	}
}

// TestApplyRLSKeyTypeDrift: a level declared with text keys over bigint
// columns is refused by ApplyRLS before any DDL with Open's error
// (ErrTypeDrift naming the column), not PostgreSQL's "operator does not
// exist" from inside a CREATE POLICY.
func TestApplyRLSKeyTypeDrift(t *testing.T) {
	s := newScratch(t, enginePostgres, []string{
		`CREATE TABLE accounts (id BIGINT PRIMARY KEY)`,
		`CREATE TABLE notes (id BIGINT PRIMARY KEY, account_id BIGINT NOT NULL REFERENCES accounts(id))`,
	})
	sch := builder.MustSchema(builder.SchemaDef{
		Levels: []builder.Level{{Name: "account", Key: builder.TextKey}},
		Tables: []builder.TableDef{
			{Name: "accounts", Columns: []string{"id"}, PrimaryKey: []string{"id"}, Levels: map[string]string{"id": "account"}},
			{Name: "notes", Columns: []string{"id", "account_id"}, PrimaryKey: []string{"id"}, Levels: map[string]string{"account_id": "account"},
				ForeignKeys: []builder.ForeignKey{{Columns: []string{"account_id"}, RefTable: "accounts"}}},
		},
	})
	_, err := s.open(sch)
	if !errors.Is(err, guardedsql.ErrTypeDrift) || !strings.Contains(err.Error(), "notes.account_id is bigint in the database, the graph says text values") ||
		strings.Contains(err.Error(), "operator does not exist") || strings.Contains(err.Error(), "CREATE POLICY") {
		t.Fatalf("err = %v, want ErrTypeDrift naming notes.account_id, before any DDL", err)
	}
}

// TestUUIDLevelColumnRefused: a team's uuid key (Outline ships them) was
// refused by PostgreSQL deep inside a CREATE POLICY ("operator does not
// exist: uuid = text"), and opened on MariaDB, whose guard then compared
// the 16 raw bytes with the scope's text and every read returned no rows.
// Both now refuse it at the start with ErrTypeDrift naming the column and
// the remedy (text); SQLite, where a column declared UUID holds the text,
// opens and reads.
func TestUUIDLevelColumnRefused(t *testing.T) {
	forEachEngine(t, func(t *testing.T, e engine) {
		s := newScratch(t, e, []string{
			`CREATE TABLE teams (id UUID PRIMARY KEY)`,
			`CREATE TABLE docs (id INT_T PRIMARY KEY, team_id UUID NOT NULL REFERENCES teams(id))`,
			`INSERT INTO teams VALUES ('0b5c5a4e-8f0e-4a57-9d3a-1c2f3e4d5a6b'), ('1c6d6b5f-9a1f-4b68-8e4b-2d3a4f5e6b7c')`,
			`INSERT INTO docs VALUES (1, '0b5c5a4e-8f0e-4a57-9d3a-1c2f3e4d5a6b'), (2, '1c6d6b5f-9a1f-4b68-8e4b-2d3a4f5e6b7c')`,
		})
		sch := builder.MustSchema(builder.SchemaDef{
			Levels: []builder.Level{{Name: "team", Key: builder.TextKey}},
			Tables: []builder.TableDef{
				{Name: "teams", Columns: []string{"id"}, PrimaryKey: []string{"id"}, Levels: map[string]string{"id": "team"}},
				{Name: "docs", Columns: []string{"id", "team_id"}, PrimaryKey: []string{"id"}, Levels: map[string]string{"team_id": "team"},
					ForeignKeys: []builder.ForeignKey{{Columns: []string{"team_id"}, RefTable: "teams"}}},
			},
		})
		db, err := s.open(sch)
		if e.name == "sqlite" {
			if err != nil {
				t.Fatalf("SQLite, UUID-declared text: %v", err)
			}
			docs := sch.Table("docs")
			got := byrefIDs(t, grantCtx(scope.Grant{Level: "team", ID: "1c6d6b5f-9a1f-4b68-8e4b-2d3a4f5e6b7c"}), db, builder.Must(builder.Select(docs.Col("id")).From(docs).Build()))
			if !slices.Equal(got, []int64{2}) {
				t.Errorf("SQLite: the team reads %v, want [2]", got)
			}
			return
		}
		if !errors.Is(err, guardedsql.ErrTypeDrift) || !strings.Contains(err.Error(), "is uuid in the database") || !strings.Contains(err.Error(), "store it as text") ||
			strings.Contains(err.Error(), "operator does not exist") {
			t.Fatalf("err = %v, want ErrTypeDrift naming the uuid column and the remedy", err)
		}
	})
}

// TestOwnedByReferenceClaimExistence: pointing a row at an address only
// another store's rows reference, and at an address that does not exist,
// fail alike (the same error, word for word) on every write kind, so a
// tool that shows its errors does not tell another tenant's address from
// no address. Claiming an unreferenced address that exists still works.
func TestOwnedByReferenceClaimExistence(t *testing.T) {
	storeModes(t, func(t *testing.T, e engine, opts guardedsql.Options) {
		s, sch, db := openStores(t, e, opts)
		cust := sch.Table("customers")
		src := cust.As("src")
		s1 := storeCtx("1")
		// 103 is store 2's alone; 999 is no address. Customer 10 (store 1)
		// lives at 102, so the INSERT ... SELECT adds 1 or 897 to it.
		kinds := []struct {
			name string
			m    func(addr int64) builder.Mutation
		}{
			{"insert", func(a int64) builder.Mutation {
				return built(builder.InsertInto(cust).Columns("id", "store_id", "address_id").Values(14, 1, a).Build())
			}},
			{"update", func(a int64) builder.Mutation {
				return built(builder.UpdateTable(cust).Set("address_id", a).Where(cust.Col("id").Eq(10)).ExpectOne().Build())
			}},
			{"plain update", func(a int64) builder.Mutation {
				return built(builder.UpdateTable(cust).Set("address_id", a).Where(cust.Col("id").Eq(10)).Build())
			}},
			{"upsert", func(a int64) builder.Mutation {
				return built(builder.InsertInto(cust).Columns("id", "store_id", "address_id", "name").Values(15, 1, a, "x").OnConflict("id").DoUpdate("name").Build())
			}},
			{"insert select", func(a int64) builder.Mutation {
				return built(builder.InsertInto(cust).Columns("id", "store_id", "address_id").
					Select(mustQuery(t, builder.Select(src.Col("id").Add(1000), src.Col("store_id"), src.Col("address_id").Add(a-102)).From(src).Where(src.Col("id").Eq(10)))).Build())
			}},
		}
		for _, k := range kinds {
			res1, foreign := db.Exec(s1, k.m(103))
			res2, missing := db.Exec(s1, k.m(999))
			if foreign == nil && missing == nil {
				// A plain UPDATE skips the row it may not write: it must
				// then skip it alike.
				if res1.RowsAffected != 0 || res2.RowsAffected != 0 {
					t.Errorf("%s: %d and %d rows written, want 0", k.name, res1.RowsAffected, res2.RowsAffected)
				}
				continue
			}
			if !errors.Is(foreign, guardedsql.ErrNotFound) {
				t.Errorf("%s at store 2's address: err = %v, want ErrNotFound", k.name, foreign)
			}
			if foreign == nil || missing == nil || foreign.Error() != missing.Error() {
				t.Errorf("%s: store 2's address answers %q, a missing one %q: want the same", k.name, foreign, missing)
			}
		}
		if n := s.count(`SELECT COUNT(*) FROM customers WHERE (store_id = 1 AND address_id IN (103, 999)) OR id > 13`); n != 0 {
			t.Fatalf("%d customers written at store 2's or a missing address", n)
		}
		// Control: the orphan address 105 exists and no one references it,
		// so store 1 may claim it.
		if _, err := db.Exec(s1, kinds[0].m(105)); err != nil {
			t.Errorf("store 1 claims the unreferenced address: %v", err)
		}
	})
}

// TestUndeclarableReachedThroughByRef: a table left out of the graph whose
// only path to a tenant is a table owned by reference (Zulip's huddle,
// which references a recipient) is reported apart from the tables the
// graph should list: no declaration fits it (Global would show every
// tenant's rows to all, OwnedByReference needs referrers, a Parent must be
// tenant-bound), and the guard cannot reach it.
func TestUndeclarableReachedThroughByRef(t *testing.T) {
	forEachEngine(t, func(t *testing.T, e engine) {
		s := newScratch(t, e, append(slices.Clone(storesDDL),
			`CREATE TABLE address_notes (id INT_T PRIMARY KEY, address_id INT_T NOT NULL REFERENCES addresses(id), note KEY_T NULL)`,
			`CREATE TABLE customer_notes (id INT_T PRIMARY KEY, customer_id INT_T NOT NULL REFERENCES customers(id))`))
		db, err := s.open(builder.MustSchema(storesSchemaDef()), guardedsql.Options{})
		if err != nil {
			t.Fatal(err)
		}
		rep, err := guardedsql.CheckCatalog(context.Background(), db)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(rep.Undeclarable, []string{"address_notes"}) || !slices.Equal(rep.Unlisted, []string{"customer_notes"}) {
			t.Errorf("report: unlisted %v, undeclarable %v; want [customer_notes], [address_notes]", rep.Unlisted, rep.Undeclarable)
		}
		// The builder's refusals say so, rather than sending the author
		// from one declaration to the other.
		for name, td := range map[string]builder.TableDef{
			"parent":             {Name: "address_notes", Columns: []string{"id", "address_id", "note"}, PrimaryKey: []string{"id"}, Parent: "address_id"},
			"owned by reference": {Name: "address_notes", Columns: []string{"id", "address_id", "note"}, PrimaryKey: []string{"id"}, OwnedByReference: true},
		} {
			def := storesSchemaDef()
			td.ForeignKeys = []builder.ForeignKey{{Columns: []string{"address_id"}, RefTable: "addresses"}}
			def.Tables = append(def.Tables, td)
			if _, err := builder.NewSchema(def); err == nil || !strings.Contains(err.Error(), "leave it out of the graph") {
				t.Errorf("%s: %v; want a refusal saying to leave address_notes out of the graph", name, err)
			}
		}
	})
}

// TestLevelsAndParentRawSQL: on PostgreSQL a table with its own level
// column and a scope parent that does not carry it (a note with store_id
// and customer_id, Parent customer_id) admits a row whose level column is
// in scope; its WITH CHECK must still test the parent, or raw SQL as the
// application role points an own-store note at another store's customer
// (the guard refuses it). Found on Zulip's messages (realm_id and sender).
func TestLevelsAndParentRawSQL(t *testing.T) {
	s, sch, db := openNotes(t, enginePostgres, `(70, 1, 10, 'a'), (71, 2, 11, 'b')`, guardedsql.Options{})
	const doc = `{"store":[1]}`
	for _, q := range []string{
		`INSERT INTO notes VALUES (72, 1, 11, 'x')`,
		`UPDATE notes SET customer_id = 11 WHERE id = 70`,
	} {
		if err := s.appExec(doc, q); err == nil {
			t.Errorf("raw SQL as store 1 pointed its note at store 2's customer: %s", q)
		}
	}
	if n := s.count(`SELECT COUNT(*) FROM notes WHERE store_id = 1 AND customer_id = 11`); n != 0 {
		t.Fatalf("%d store-1 notes on store 2's customer", n)
	}
	// The guard refuses the same, and both accept the own customer.
	notes := sch.Table("notes")
	if _, err := db.Exec(storeCtx("1"), built(builder.InsertInto(notes).Columns("id", "store_id", "customer_id").Values(73, 1, 11).Build())); !errors.Is(err, guardedsql.ErrNotFound) {
		t.Errorf("guarded insert on store 2's customer: %v, want ErrNotFound", err)
	}
	if err := s.appExec(doc, `INSERT INTO notes VALUES (74, 1, 12, 'own')`); err != nil {
		t.Errorf("control: raw insert on the own customer: %v", err)
	}
}

// TestLevelColumnsRawSQL: under row-level security alone (raw SQL as the
// application role, signed scope), a row in scope by one level column
// cannot carry another tenant's id in another, though a foreign key covers
// it (keep.go). From the Plane probe (issues with workspace_id and
// project_id) and the hotel's shape (hotels.chain_id beside the hotel's
// own id): a project's member moved its project, or its issue, to another
// org; an org planted an issue in another org's project. Each is refused,
// as the guard refuses it; a member's update that keeps the level columns
// and an org's insert under its own project pass.
func TestLevelColumnsRawSQL(t *testing.T) {
	s, sch, db := openOrgProjects(t, enginePostgres)
	const member, org = `{"project":[10]}`, `{"org":[1]}`
	for _, c := range []struct{ doc, q string }{
		{member, `UPDATE projects SET org_id = 2 WHERE id = 10`},
		{member, `UPDATE issues SET org_id = 2 WHERE id = 30`},
		{member, `INSERT INTO issues VALUES (41, 2, 10, 'moved')`},
		{org, `INSERT INTO issues VALUES (40, 1, 11, 'planted')`},
		{org, `UPDATE issues SET project_id = 11 WHERE id = 30`},
	} {
		if err := s.appExec(c.doc, c.q); err == nil {
			t.Errorf("raw SQL as %s: %s was accepted", c.doc, c.q)
		}
	}
	if n := s.count(`SELECT COUNT(*) FROM projects WHERE org_id = 2`) + s.count(`SELECT COUNT(*) FROM issues WHERE org_id = 2 OR project_id = 11`); n != 2 {
		t.Fatalf("org 2 holds %d projects and issues, want its own 2", n)
	}
	for _, c := range []struct{ doc, q string }{
		{member, `UPDATE projects SET name = 'own' WHERE id = 10`},
		{member, `UPDATE issues SET name = 'own' WHERE id = 30`},
		{org, `INSERT INTO issues VALUES (42, 1, 10, 'filed')`},
		{org, `INSERT INTO projects VALUES (13, 1, 'new')`},
	} {
		if err := s.appExec(c.doc, c.q); err != nil {
			t.Errorf("control: raw SQL as %s: %s: %v", c.doc, c.q, err)
		}
	}
	// The guard refuses the moves too.
	ctx := grantCtx(scope.Grant{Level: "project", ID: "10"})
	projects := sch.Table("projects")
	if _, err := db.Exec(ctx, builder.Must(builder.UpdateTable(projects).Set("org_id", 2).Where(projects.Col("id").Eq(10)).ExpectOne().Build())); err == nil {
		t.Errorf("guarded move of project 10 to org 2 accepted")
	}
}

// TestLevelsAndParentDisagreeingRow: a note that carries store 1 in its
// own level column but hangs on store 2's customer (Mattermost's probe: a
// webhook of team 1 on team 2's channel) is store 1's to read, by its
// level column, and no one's to change: its parent is a path like any
// other once the table has level columns of its own. Before, store 1
// deleted it. On every engine, and on PostgreSQL with row-level security
// alone.
func TestLevelsAndParentDisagreeingRow(t *testing.T) {
	storeModes(t, func(t *testing.T, e engine, opts guardedsql.Options) {
		s, sch, db := openNotes(t, e, `(70, 1, 10, 'own'), (71, 1, 11, 'disagrees')`, opts)
		notes := sch.Table("notes")
		if got := byrefIDs(t, storeCtx("1"), db, builder.Must(builder.Select(notes.Col("id")).From(notes).OrderBy(notes.Col("id").Asc()).Build())); !slices.Equal(got, []int64{70, 71}) {
			t.Fatalf("store 1 reads notes %v, want [70 71] (by its level column)", got)
		}
		for _, q := range []builder.Mutation{
			builder.Must(builder.UpdateTable(notes).Set("body", "x").Where(notes.Col("id").Eq(71)).Build()),
			builder.Must(builder.DeleteFrom(notes).Where(notes.Col("id").Eq(71)).Build()),
		} {
			res, err := db.Exec(storeCtx("1"), q)
			if err == nil && res.RowsAffected != 0 {
				t.Errorf("store 1 changed note 71 (on store 2's customer): %d rows", res.RowsAffected)
			}
		}
		if _, err := db.Exec(storeCtx("1"), builder.Must(builder.UpdateTable(notes).Set("body", "x").Where(notes.Col("id").Eq(71)).ExpectOne().Build())); !errors.Is(err, guardedsql.ErrSharedRow) {
			t.Errorf("ExpectOne update of note 71: %v, want ErrSharedRow", err)
		}
		if res, err := db.Exec(storeCtx("1"), builder.Must(builder.UpdateTable(notes).Set("body", "y").Where(notes.Col("id").Eq(70)).Build())); err != nil || res.RowsAffected != 1 {
			t.Errorf("control: store 1 updates its own note 70: %d rows, %v", res.RowsAffected, err)
		}
		if n := s.count(`SELECT COUNT(*) FROM notes WHERE id = 71 AND body = 'disagrees'`); n != 1 {
			t.Fatalf("note 71 changed")
		}
	})
}

// TestLevelColumnAgreesWithParent: Django's ProjectBaseModel (Plane) stores
// an issue's workspace_id beside its project_id, both level columns. A
// member granted one project sees no workspace row, so the guard refused
// every issue it filed (the workspace's foreign key pointed at a row out of
// its scope): the project's members could not create their own rows. A
// level value now also passes when it is the level's id of another row the
// written row references and the writer sees (the project's workspace).
// Another workspace's id, or another workspace's project, is still refused,
// through the guard and under row-level security alone.
func TestLevelColumnAgreesWithParent(t *testing.T) {
	forEachEngine(t, func(t *testing.T, e engine) {
		s, sch, db := openOrgProjects(t, e)
		issues := sch.Table("issues")
		ins := func(id, org, project int) builder.Mutation {
			return builder.Must(builder.InsertInto(issues).Columns("id", "org_id", "project_id", "name").Values(id, org, project, "filed").Build())
		}
		member := grantCtx(scope.Grant{Level: "project", ID: "10"})
		if _, err := db.Exec(member, ins(20, 1, 10)); err != nil {
			t.Errorf("project 10's member files an issue of project 10 in its org 1: %v", err)
		}
		for _, c := range []struct{ id, org, project int }{{21, 2, 10}, {22, 1, 12}, {23, 2, 11}, {24, 1, 11}} {
			if _, err := db.Exec(member, ins(c.id, c.org, c.project)); !errors.Is(err, guardedsql.ErrNotFound) {
				t.Errorf("project 10's member files an issue in org %d, project %d: %v, want ErrNotFound", c.org, c.project, err)
			}
		}
		if e.name != "postgres" {
			return
		}
		const doc = `{"project":[10]}`
		if err := s.appExec(doc, `INSERT INTO issues VALUES (40, 1, 10, 'raw')`); err != nil {
			t.Errorf("raw SQL as project 10's member files an issue of project 10: %v", err)
		}
		for _, q := range []string{`INSERT INTO issues VALUES (41, 2, 10, 'x')`, `INSERT INTO issues VALUES (42, 1, 12, 'x')`, `INSERT INTO issues VALUES (43, 1, 11, 'x')`} {
			if err := s.appExec(doc, q); err == nil {
				t.Errorf("raw SQL as project 10's member: %s accepted", q)
			}
		}
	})
}

// openOrgProjects creates, on e, two orgs, their projects (10 and 12 are
// org 1's, 11 org 2's) and issues that store both level columns (Plane's
// shape), and opens it guarded.
func openOrgProjects(t *testing.T, e engine) (*scratch, *builder.Schema, *guardedsql.DB) {
	t.Helper()
	s := newScratch(t, e, append(slices.Clone(orgProjectsDDL),
		`CREATE TABLE issues (id INT_T PRIMARY KEY, org_id INT_T NOT NULL REFERENCES orgs(id), project_id INT_T NOT NULL REFERENCES projects(id), name KEY_T NULL)`,
		`INSERT INTO issues VALUES (30, 1, 10, 'x'), (31, 2, 11, 'y')`))
	sch := builder.MustSchema(orgProjectsDef(builder.TableDef{Name: "issues", Columns: []string{"id", "org_id", "project_id", "name"}, PrimaryKey: []string{"id"},
		Levels: map[string]string{"org_id": "org", "project_id": "project"}, ForeignKeys: []builder.ForeignKey{fkOf("org_id", "orgs"), fkOf("project_id", "projects")}}))
	db, err := s.open(sch)
	if err != nil {
		t.Fatal(err)
	}
	return s, sch, db
}

// openNotes adds to the stores fixture, on e, notes that carry their store
// in a level column beside a scope parent that does not carry it (a
// customer), with the rows values, and opens it guarded with opts.
func openNotes(t *testing.T, e engine, values string, opts guardedsql.Options) (*scratch, *builder.Schema, *guardedsql.DB) {
	t.Helper()
	s := newScratch(t, e, append(slices.Clone(storesDDL),
		`CREATE TABLE notes (id INT_T PRIMARY KEY, store_id INT_T NOT NULL REFERENCES stores(id), customer_id INT_T NOT NULL REFERENCES customers(id), body KEY_T NULL)`,
		`INSERT INTO notes VALUES `+values))
	def := storesSchemaDef()
	def.Tables = append(def.Tables, builder.TableDef{Name: "notes", Columns: []string{"id", "store_id", "customer_id", "body"}, PrimaryKey: []string{"id"},
		Levels: map[string]string{"store_id": "store"}, Parent: "customer_id",
		ForeignKeys: []builder.ForeignKey{{Columns: []string{"store_id"}, RefTable: "stores"}, {Columns: []string{"customer_id"}, RefTable: "customers"}}})
	sch := builder.MustSchema(def)
	db, err := s.open(sch, opts)
	if err != nil {
		t.Fatal(err)
	}
	return s, sch, db
}

// TestUpHierarchyKeyRawSQL: a key up the hierarchy (a project's task and
// its org-level assignee) is one a project's member never sees the target
// of, so the policies left it to the guard; raw SQL as the application
// role then pointed an org's task at another org's member, and told that
// member's id (accepted) from a missing one (the foreign key's 23503).
// WITH CHECK now needs the assignee to be a row the writer sees or the one
// the row already holds: the attacks fail with the policy's 42501, alike,
// and a member's update that keeps the assignee passes.
func TestUpHierarchyKeyRawSQL(t *testing.T) {
	s := newScratch(t, enginePostgres, append(slices.Clone(orgProjectsDDL),
		`CREATE TABLE members (id INT_T PRIMARY KEY, org_id INT_T NOT NULL REFERENCES orgs(id))`,
		`CREATE TABLE tasks (id INT_T PRIMARY KEY, project_id INT_T NOT NULL REFERENCES projects(id), assignee_id INT_T NULL REFERENCES members(id), name KEY_T NULL)`,
		`INSERT INTO members VALUES (20, 1), (21, 2)`,
		`INSERT INTO tasks VALUES (30, 10, 20, 'a'), (31, 11, 21, 'b')`))
	sch := builder.MustSchema(orgProjectsDef(
		builder.TableDef{Name: "members", Columns: []string{"id", "org_id"}, PrimaryKey: []string{"id"},
			Levels: map[string]string{"org_id": "org"}, ForeignKeys: []builder.ForeignKey{fkOf("org_id", "orgs")}},
		builder.TableDef{Name: "tasks", Columns: []string{"id", "project_id", "assignee_id", "name"}, PrimaryKey: []string{"id"}, Parent: "project_id",
			ForeignKeys: []builder.ForeignKey{fkOf("project_id", "projects"), fkOf("assignee_id", "members")}}))
	if _, err := s.open(sch); err != nil {
		t.Fatal(err)
	}
	const org, member = `{"org":[1]}`, `{"project":[10]}`
	for _, c := range []struct{ doc, q string }{
		{org, `INSERT INTO tasks VALUES (40, 10, 21, 'x')`},
		{org, `UPDATE tasks SET assignee_id = 21 WHERE id = 30`},
		{member, `UPDATE tasks SET assignee_id = 21 WHERE id = 30`},
		{member, `INSERT INTO tasks VALUES (41, 10, 20, 'x')`}, // the guard refuses it too: the member sees no member row
	} {
		if err := s.appExec(c.doc, c.q); err == nil {
			t.Errorf("raw SQL as %s: %s accepted", c.doc, c.q)
		}
	}
	foreign, missing := s.appExec(org, `INSERT INTO tasks VALUES (42, 10, 21, 'x')`), s.appExec(org, `INSERT INTO tasks VALUES (43, 10, 99, 'x')`)
	if foreign == nil || missing == nil || !strings.Contains(foreign.Error(), "42501") || !strings.Contains(missing.Error(), "42501") {
		t.Errorf("another org's member: %v; a missing member: %v; want the policy's refusal (42501) for both", foreign, missing)
	}
	for _, c := range []struct{ doc, q string }{
		{org, `INSERT INTO tasks VALUES (44, 10, 20, 'own')`},
		{member, `UPDATE tasks SET name = 'kept' WHERE id = 30`},
		{member, `UPDATE tasks SET assignee_id = NULL WHERE id = 44`},
	} {
		if err := s.appExec(c.doc, c.q); err != nil {
			t.Errorf("control: raw SQL as %s: %s: %v", c.doc, c.q, err)
		}
	}
	if n := s.count(`SELECT COUNT(*) FROM tasks WHERE assignee_id = 21`); n != 1 {
		t.Fatalf("%d tasks assigned to org 2's member, want its own 1", n)
	}
}

// TestCompositeLevelKeyRawSQL: in Citus's shape every table carries the
// org and references its parent by a composite key, (org_id, workspace_id)
// onto workspaces (org_id, id). The key proves only that some workspace,
// perhaps another org's, holds the tuple; WITH CHECK trusted it when fully
// non-NULL, so raw SQL as a project's member (its project in scope by its
// own id) moved the project into another org's workspace. Each level
// column it covers must now be granted, held by a row the writer sees with
// the whole tuple, or kept; a foreign tuple and a missing one are refused
// alike (42501, before the foreign key is checked), and the holders of the
// org, the workspace and the project still write their own.
func TestCompositeLevelKeyRawSQL(t *testing.T) {
	s := newScratch(t, enginePostgres, []string{
		`CREATE TABLE orgs (id INT_T PRIMARY KEY)`,
		`CREATE TABLE workspaces (id INT_T PRIMARY KEY, org_id INT_T NOT NULL REFERENCES orgs(id), UNIQUE (org_id, id))`,
		`CREATE TABLE projects (id INT_T PRIMARY KEY, org_id INT_T NOT NULL, workspace_id INT_T NOT NULL, name KEY_T NULL, FOREIGN KEY (org_id, workspace_id) REFERENCES workspaces(org_id, id))`,
		`INSERT INTO orgs VALUES (1), (2)`,
		`INSERT INTO workspaces VALUES (5, 1), (6, 2), (7, 1)`,
		`INSERT INTO projects VALUES (10, 1, 5, 'a'), (11, 2, 6, 'b')`,
	})
	sch := builder.MustSchema(builder.SchemaDef{
		Levels: []builder.Level{{Name: "org", Key: builder.IntKey}, {Name: "workspace", Key: builder.IntKey}, {Name: "project", Key: builder.IntKey}},
		Tables: []builder.TableDef{
			{Name: "orgs", Columns: []string{"id"}, PrimaryKey: []string{"id"}, Levels: map[string]string{"id": "org"}},
			{Name: "workspaces", Columns: []string{"id", "org_id"}, PrimaryKey: []string{"id"}, Levels: map[string]string{"id": "workspace", "org_id": "org"},
				ForeignKeys: []builder.ForeignKey{fkOf("org_id", "orgs")}},
			{Name: "projects", Columns: []string{"id", "org_id", "workspace_id", "name"}, PrimaryKey: []string{"id"},
				Levels:      map[string]string{"id": "project", "org_id": "org", "workspace_id": "workspace"},
				ForeignKeys: []builder.ForeignKey{{Columns: []string{"org_id", "workspace_id"}, RefTable: "workspaces", RefColumns: []string{"org_id", "id"}}}},
		},
	})
	db, err := s.open(sch)
	if err != nil {
		t.Fatal(err)
	}
	const member, ws, org = `{"project":[10]}`, `{"workspace":[5]}`, `{"org":[1]}`
	for _, c := range []struct{ doc, q string }{
		{member, `UPDATE projects SET org_id = 2, workspace_id = 6 WHERE id = 10`},
		{ws, `UPDATE projects SET org_id = 2, workspace_id = 6 WHERE id = 10`},
		{org, `UPDATE projects SET org_id = 2, workspace_id = 6 WHERE id = 10`},
		{member, `INSERT INTO projects VALUES (12, 2, 6, 'planted')`},
	} {
		if err := s.appExec(c.doc, c.q); err == nil {
			t.Errorf("raw SQL as %s: %s accepted", c.doc, c.q)
		}
	}
	foreign := s.appExec(member, `UPDATE projects SET org_id = 2, workspace_id = 6 WHERE id = 10`)
	missing := s.appExec(member, `UPDATE projects SET org_id = 2, workspace_id = 9 WHERE id = 10`)
	if foreign == nil || missing == nil || !strings.Contains(foreign.Error(), "42501") || !strings.Contains(missing.Error(), "42501") {
		t.Errorf("another org's workspace: %v; a missing one: %v; want the policy's refusal (42501) for both", foreign, missing)
	}
	if n := s.count(`SELECT COUNT(*) FROM projects WHERE org_id = 2`); n != 1 {
		t.Fatalf("org 2 holds %d projects, want its own 1", n)
	}
	for _, c := range []struct{ doc, q string }{
		{member, `UPDATE projects SET name = 'kept' WHERE id = 10`},
		{org, `UPDATE projects SET workspace_id = 7 WHERE id = 10`},
		{ws, `INSERT INTO projects VALUES (13, 1, 5, 'filed')`},
		{org, `INSERT INTO projects VALUES (14, 1, 7, 'filed')`},
	} {
		if err := s.appExec(c.doc, c.q); err != nil {
			t.Errorf("control: raw SQL as %s: %s: %v", c.doc, c.q, err)
		}
	}
	// The guard refuses the move too.
	projects := sch.Table("projects")
	mv := builder.Must(builder.UpdateTable(projects).Set("org_id", 2).Set("workspace_id", 6).Where(projects.Col("id").Eq(10)).ExpectOne().Build())
	if _, err := db.Exec(grantCtx(scope.Grant{Level: "project", ID: "10"}), mv); !errors.Is(err, guardedsql.ErrNotFound) {
		t.Errorf("guarded move of project 10 into org 2's workspace: %v, want ErrNotFound", err)
	}
}

// TestSelfKeyRawSQL: a key of a table into itself (Outline's
// documents.parentDocumentId, comments.parentCommentId) was left out of
// WITH CHECK (a policy reading its own table recurses), so raw SQL as the
// application role filed an org's document under another org's, moved its
// own there, and told that org's document ids (accepted) from missing ones
// (the foreign key's 23503). The sees function, SECURITY INVOKER, now
// wants a parent the writer sees, or the one the row holds: each attack
// fails with the policy's 42501, alike, and the org's own nesting passes.
func TestSelfKeyRawSQL(t *testing.T) {
	s := newScratch(t, enginePostgres, append(slices.Clone(orgProjectsDDL),
		`CREATE TABLE docs (id INT_T PRIMARY KEY, org_id INT_T NOT NULL REFERENCES orgs(id), parent_id INT_T NULL REFERENCES docs(id), title KEY_T NULL)`,
		`INSERT INTO docs VALUES (50, 1, NULL, 'a'), (51, 2, NULL, 'b'), (52, 1, 50, 'c')`))
	sch := builder.MustSchema(orgProjectsDef(builder.TableDef{Name: "docs", Columns: []string{"id", "org_id", "parent_id", "title"}, PrimaryKey: []string{"id"},
		Levels: map[string]string{"org_id": "org"}, ForeignKeys: []builder.ForeignKey{fkOf("org_id", "orgs"), fkOf("parent_id", "docs")}}))
	db, err := s.open(sch)
	if err != nil {
		t.Fatal(err)
	}
	const org = `{"org":[1]}`
	for _, q := range []string{
		`INSERT INTO docs VALUES (60, 1, 51, 'under 51')`,
		`UPDATE docs SET parent_id = 51 WHERE id = 52`,
	} {
		if err := s.appExec(org, q); err == nil {
			t.Errorf("raw SQL as org 1: %s accepted", q)
		}
	}
	foreign, missing := s.appExec(org, `INSERT INTO docs VALUES (61, 1, 51, 'x')`), s.appExec(org, `INSERT INTO docs VALUES (62, 1, 99, 'x')`)
	if foreign == nil || missing == nil || !strings.Contains(foreign.Error(), "42501") || !strings.Contains(missing.Error(), "42501") {
		t.Errorf("another org's document: %v; a missing one: %v; want the policy's refusal (42501) for both", foreign, missing)
	}
	if n := s.count(`SELECT COUNT(*) FROM docs WHERE parent_id = 51`); n != 0 {
		t.Fatalf("%d documents under org 2's document", n)
	}
	for _, q := range []string{
		`INSERT INTO docs VALUES (63, 1, 50, 'own')`,
		`UPDATE docs SET parent_id = NULL WHERE id = 52`,
		`UPDATE docs SET title = 'kept', parent_id = 50 WHERE id = 63`,
	} {
		if err := s.appExec(org, q); err != nil {
			t.Errorf("control: raw SQL as org 1: %s: %v", q, err)
		}
	}
	docs := sch.Table("docs")
	ins := builder.Must(builder.InsertInto(docs).Columns("id", "org_id", "parent_id").Values(64, 1, 51).Build())
	if _, err := db.Exec(grantCtx(scope.Grant{Level: "org", ID: "1"}), ins); !errors.Is(err, guardedsql.ErrNotFound) {
		t.Errorf("guarded insert under org 2's document: %v, want ErrNotFound", err)
	}
}

// orgProjectsDDL creates two orgs and their projects (10 and 12 are org
// 1's, 11 org 2's); orgProjectsDef declares them, with extra tables.
var orgProjectsDDL = []string{
	`CREATE TABLE orgs (id INT_T PRIMARY KEY)`,
	`CREATE TABLE projects (id INT_T PRIMARY KEY, org_id INT_T NOT NULL REFERENCES orgs(id), name KEY_T NULL)`,
	`INSERT INTO orgs VALUES (1), (2)`,
	`INSERT INTO projects VALUES (10, 1, 'a'), (11, 2, 'b'), (12, 1, 'c')`,
}

func orgProjectsDef(extra ...builder.TableDef) builder.SchemaDef {
	return builder.SchemaDef{
		Levels: []builder.Level{{Name: "org", Key: builder.IntKey}, {Name: "project", Key: builder.IntKey}},
		Tables: append([]builder.TableDef{
			{Name: "orgs", Columns: []string{"id"}, PrimaryKey: []string{"id"}, Levels: map[string]string{"id": "org"}},
			{Name: "projects", Columns: []string{"id", "org_id", "name"}, PrimaryKey: []string{"id"},
				Levels: map[string]string{"org_id": "org", "id": "project"}, ForeignKeys: []builder.ForeignKey{fkOf("org_id", "orgs")}},
		}, extra...),
	}
}

func fkOf(col, ref string) builder.ForeignKey {
	return builder.ForeignKey{Columns: []string{col}, RefTable: ref}
}
