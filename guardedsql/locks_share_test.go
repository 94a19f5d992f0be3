package guardedsql_test

import (
	"testing"
	"time"

	"github.com/tenantmcp/tenantmcp/builder"
	"github.com/tenantmcp/tenantmcp/guardedsql"
)

// TestShareLockLocksTheRow: on MariaDB/MySQL a guarded locking read runs
// by key (keyed.go). Reading only columns a secondary index covers, InnoDB
// share-locked that index's records and not the row's, so FOR SHARE
// returned a row another transaction of the same tenant held FOR UPDATE,
// at once (Invoice Ninja probe), and docs/transactions.md's "no lost
// updates" did not hold. The locking step reads by primary key now: the
// FOR SHARE waits for the row.
func TestShareLockLocksTheRow(t *testing.T) {
	forEachEngine(t, func(t *testing.T, e engine) {
		if e.name != "mysql" {
			t.Skip("only InnoDB's locking reads are split by key (keyed.go); PostgreSQL locks the row it returns, SQLite has one writer")
		}
		s := newScratch(t, e, []string{
			`CREATE TABLE companies (id INT_T PRIMARY KEY)`,
			`CREATE TABLE invoices (id INT_T PRIMARY KEY, company_id INT_T NOT NULL, amount INT_T NOT NULL,
			   KEY invoices_company (company_id, id), FOREIGN KEY (company_id) REFERENCES companies(id))`,
			`INSERT INTO companies VALUES (1), (2)`,
			`INSERT INTO invoices VALUES (1, 1, 10), (2, 1, 20), (3, 2, 30), (4, 1, 40)`,
		})
		sch := builder.MustSchema(builder.SchemaDef{
			Levels: []builder.Level{{Name: "company", Key: builder.IntKey}},
			Tables: []builder.TableDef{
				{Name: "companies", Columns: []string{"id"}, PrimaryKey: []string{"id"}, Levels: map[string]string{"id": "company"}},
				{Name: "invoices", Columns: []string{"id", "company_id", "amount"}, PrimaryKey: []string{"id"}, Levels: map[string]string{"company_id": "company"},
					ForeignKeys: []builder.ForeignKey{{Columns: []string{"company_id"}, RefTable: "companies"}}},
			},
		})
		db, err := s.open(sch, guardedsql.Options{LockTimeout: 5 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		inv := sch.Table("invoices")
		ctx := grantCtx(companyG(1))
		locked, release, held := make(chan struct{}), make(chan struct{}), make(chan error, 1)
		go func() {
			held <- db.Tx(ctx, func(tx *guardedsql.Tx) error {
				_, err := guardedsql.All(ctx, tx, builder.Must(builder.Select(inv.Col("id")).From(inv).Where(inv.Col("id").Eq(1)).ForUpdate().Build()), guardedsql.Scalar[int64])
				close(locked)
				<-release
				return err
			})
		}()
		<-locked
		type result struct {
			ids []int64
			err error
		}
		shared := make(chan result, 1)
		go func() {
			var r result
			r.err = db.Tx(ctx, func(tx *guardedsql.Tx) error {
				var err error
				r.ids, err = guardedsql.All(ctx, tx, builder.Must(builder.Select(inv.Col("id")).From(inv).Where(inv.Col("id").Le(3)).ForShare().Build()), guardedsql.Scalar[int64])
				return err
			})
			shared <- r
		}()
		var early *result
		select {
		case r := <-shared:
			early = &r
			t.Errorf("FOR SHARE of ids <= 3 returned %v (%v) while another transaction holds row 1 FOR UPDATE: the row was not share-locked", r.ids, r.err)
		case <-time.After(700 * time.Millisecond):
		}
		close(release)
		if err := <-held; err != nil {
			t.Fatalf("the FOR UPDATE transaction: %v", err)
		}
		if early == nil {
			if r := <-shared; r.err != nil || len(r.ids) != 2 {
				t.Errorf("FOR SHARE after the lock was released: %v, %v; want company 1's rows 1 and 2", r.ids, r.err)
			}
		}
	})
}
