package guardedsql_test

// Tests for the writes of issue 15: RETURNING, upserts and multi-row
// inserts, on a composite-key schema of the Citus ad-analytics kind where
// ids repeat across tenants. Each runs on SQLite and, when their DSNs are
// set, on PostgreSQL and MariaDB; on MariaDB a second pass renders as for
// MySQL 8 (no RETURNING), running the read-back fallbacks.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/tenantmcp/tenantmcp/builder"
	"github.com/tenantmcp/tenantmcp/guardedsql"
	"github.com/tenantmcp/tenantmcp/internal/guardfault"
	"github.com/tenantmcp/tenantmcp/scope"
)

// adsDDL: companies 1 and 2 (and 3, granted to nobody here) with campaigns
// and ads keyed (company_id, id); ids interleave between the companies and
// id 7 exists in both. Coupons have a code unique across all tenants: the
// conflict target an upsert can share with another tenant.
var adsDDL = []string{
	`CREATE TABLE companies (id INT_T PRIMARY KEY, name KEY_T NOT NULL)`,
	`CREATE TABLE campaigns (company_id INT_T NOT NULL REFERENCES companies(id), id INT_T NOT NULL, name KEY_T NOT NULL, budget INT_T NOT NULL,
	   PRIMARY KEY (company_id, id))`,
	`CREATE TABLE ads (company_id INT_T NOT NULL, id INT_T NOT NULL, campaign_id INT_T NOT NULL, name KEY_T NOT NULL,
	   PRIMARY KEY (company_id, id), FOREIGN KEY (company_id, campaign_id) REFERENCES campaigns(company_id, id))`,
	`CREATE TABLE coupons (code KEY_T PRIMARY KEY, company_id INT_T NOT NULL REFERENCES companies(id), uses INT_T NOT NULL)`,
	`CREATE TABLE archive (company_id INT_T NOT NULL REFERENCES companies(id), id INT_T NOT NULL, name KEY_T NOT NULL, budget INT_T NOT NULL,
	   PRIMARY KEY (company_id, id))`,
	`INSERT INTO companies VALUES (1, 'one'), (2, 'two'), (3, 'three')`,
	`INSERT INTO campaigns VALUES (1, 1, 'c1-1', 100), (2, 2, 'c2-2', 200), (1, 3, 'c1-3', 300), (2, 4, 'c2-4', 400), (1, 7, 'c1-7', 700), (2, 7, 'c2-7', 7000)`,
	`INSERT INTO ads VALUES (1, 1, 1, 'a1-1'), (2, 2, 2, 'a2-2'), (1, 3, 3, 'a1-3'), (2, 4, 4, 'a2-4'), (1, 7, 7, 'a1-7'), (2, 7, 7, 'a2-7')`,
	`INSERT INTO coupons VALUES ('ONE', 1, 10), ('TWO', 2, 20)`,
}

var adsDef = builder.SchemaDef{
	Levels: []builder.Level{{Name: "company", Key: builder.IntKey}},
	Tables: []builder.TableDef{
		{Name: "companies", Columns: []string{"id", "name"}, PrimaryKey: []string{"id"}, Levels: map[string]string{"id": "company"}},
		{Name: "campaigns", Columns: []string{"company_id", "id", "name", "budget"}, PrimaryKey: []string{"company_id", "id"},
			ForeignKeys: []builder.ForeignKey{{Columns: []string{"company_id"}, RefTable: "companies"}},
			Levels:      map[string]string{"company_id": "company"}},
		{Name: "ads", Columns: []string{"company_id", "id", "campaign_id", "name"}, PrimaryKey: []string{"company_id", "id"},
			ForeignKeys: []builder.ForeignKey{{Columns: []string{"company_id", "campaign_id"}, RefTable: "campaigns", RefColumns: []string{"company_id", "id"}}},
			Levels:      map[string]string{"company_id": "company"}},
		{Name: "archive", Columns: []string{"company_id", "id", "name", "budget"}, PrimaryKey: []string{"company_id", "id"},
			ForeignKeys: []builder.ForeignKey{{Columns: []string{"company_id"}, RefTable: "companies"}},
			Levels:      map[string]string{"company_id": "company"}},
		{Name: "coupons", Columns: []string{"code", "company_id", "uses"}, PrimaryKey: []string{"code"},
			ForeignKeys: []builder.ForeignKey{{Columns: []string{"company_id"}, RefTable: "companies"}},
			Levels:      map[string]string{"company_id": "company"}},
	},
}

func companyG(id int64) scope.Grant { return scope.Grant{Level: "company", ID: fmt.Sprint(id)} }

// forEachWritesEngine runs fn per engine, on MariaDB a second time with
// the MySQL 8 fallbacks, and on PostgreSQL a second time RLS-only (the
// policies the only read boundary).
func forEachWritesEngine(t *testing.T, fn func(t *testing.T, s *scratch, sch *builder.Schema, db *guardedsql.DB)) {
	forEachEngine(t, func(t *testing.T, e engine) {
		modes := []string{"native"}
		switch e.name {
		case "mysql":
			modes = append(modes, "fallback")
		case "postgres":
			modes = append(modes, "rls-only")
		}
		for _, mode := range modes {
			t.Run(mode, func(t *testing.T) {
				s := newScratch(t, e, adsDDL)
				sch := builder.MustSchema(adsDef)
				var opts []guardedsql.Option
				if mode == "rls-only" {
					opts = append(opts, guardedsql.WithRLSOnly())
				}
				db, err := s.open(sch, opts...)
				if err != nil {
					t.Fatal(err)
				}
				if mode == "fallback" && !guardedsql.MySQLFallbackForTest(db) {
					t.Fatal("fallback mode on a non-MySQL DB")
				}
				fn(t, s, sch, db)
			})
		}
	})
}

// campaign is a returned campaigns row.
type campaign struct {
	CompanyID int64
	ID        int64
	Name      string
	Budget    int64
}

func scanCampaigns(t *testing.T) func(rows *guardedsql.Rows, err error) []campaign {
	return func(rows *guardedsql.Rows, err error) []campaign {
		t.Helper()
		return scanCampaignRows(t, rows, err)
	}
}

func scanCampaignRows(t *testing.T, rows *guardedsql.Rows, err error) []campaign {
	t.Helper()
	if err != nil {
		t.Fatalf("ExecReturning: %v", err)
	}
	got, err := guardedsql.CollectRows(rows, guardedsql.RowToStruct[campaign])
	if err != nil {
		t.Fatalf("scan: %v", err)
	}
	slices.SortFunc(got, func(a, b campaign) int { return int(a.CompanyID*1000 + a.ID - b.CompanyID*1000 - b.ID) })
	return got
}

// campaignsSum is an unguarded fingerprint of every campaign row: any
// change to any tenant's rows changes it.
func campaignsSum(s *scratch) int {
	return s.count(`SELECT COUNT(*) * 1000000 + SUM(company_id * 100000 + id * 1000 + budget) FROM campaigns`)
}

func TestReturningInsertCompositeKey(t *testing.T) {
	forEachWritesEngine(t, func(t *testing.T, s *scratch, sch *builder.Schema, db *guardedsql.DB) {
		cmp := sch.Table("campaigns")
		one := grantCtx(companyG(1))
		ins, err := builder.InsertInto(cmp).Columns("company_id", "id", "name", "budget").
			Values(1, 9, "new-9", 900).Values(1, 11, "new-11", 1100).
			Returning("company_id", "id", "name", "budget").Build()
		if err != nil {
			t.Fatal(err)
		}
		got := scanCampaigns(t)(db.ExecReturning(one, ins))
		want := []campaign{{1, 9, "new-9", 900}, {1, 11, "new-11", 1100}}
		if !slices.Equal(got, want) {
			t.Fatalf("returned %v, want %v", got, want)
		}
		if n := s.count(`SELECT COUNT(*) FROM campaigns WHERE company_id = 1 AND id IN (9, 11)`); n != 2 {
			t.Fatalf("%d rows inserted, want 2", n)
		}
		// The same insert into company 2 by company 1 returns nothing and
		// inserts nothing, with the error of a missing parent.
		before := campaignsSum(s)
		foreign, err := builder.InsertInto(cmp).Columns("company_id", "id", "name", "budget").
			Values(1, 12, "mine", 1).Values(2, 12, "theirs", 1).Returning("id").Build()
		if err != nil {
			t.Fatal(err)
		}
		rows, err := db.ExecReturning(one, foreign)
		if !errors.Is(err, guardedsql.ErrOutOfScope) && !errors.Is(err, guardedsql.ErrNotFound) || rows != nil {
			t.Fatalf("insert under company 2: rows %v, err %v; want ErrNotFound/ErrOutOfScope and no rows", rows, err)
		}
		if after := campaignsSum(s); after != before {
			t.Fatalf("a refused multi-row insert changed campaigns (%d -> %d)", before, after)
		}
		// Exec of a Returning insert runs it without rows.
		ins2, _ := builder.InsertInto(cmp).Columns("company_id", "id", "name", "budget").Values(1, 13, "x", 1).Returning("id").Build()
		if res, err := db.Exec(one, ins2); err != nil || res.RowsAffected != 1 {
			t.Fatalf("Exec of a Returning insert: %+v, %v", res, err)
		}
	})
}

func TestReturningUpdateDeleteNeverForeign(t *testing.T) {
	forEachWritesEngine(t, func(t *testing.T, s *scratch, sch *builder.Schema, db *guardedsql.DB) {
		cmp := sch.Table("campaigns")
		one := grantCtx(companyG(1))
		all := []string{"company_id", "id", "name", "budget"}

		// id 7 exists in both companies: only company 1's row changes and
		// comes back.
		upd, err := builder.UpdateTable(cmp).Set("budget", 77).Where(cmp.Col("id").Eq(7)).Returning(all...).Build()
		if err != nil {
			t.Fatal(err)
		}
		got := scanCampaigns(t)(db.ExecReturning(one, upd))
		if want := []campaign{{1, 7, "c1-7", 77}}; !slices.Equal(got, want) {
			t.Fatalf("update id 7 returned %v, want %v", got, want)
		}
		if n := s.count(`SELECT COUNT(*) FROM campaigns WHERE company_id = 2 AND id = 7 AND budget = 7000`); n != 1 {
			t.Fatal("company 2's campaign 7 changed")
		}
		// Aimed at company 2's ids only: nothing returned, nothing changed.
		before := campaignsSum(s)
		foreign, _ := builder.UpdateTable(cmp).Set("budget", 1).Where(cmp.Col("id").In(2, 4)).Returning(all...).Build()
		if got := scanCampaigns(t)(db.ExecReturning(one, foreign)); len(got) != 0 {
			t.Fatalf("update of foreign ids returned %v", got)
		}
		foreignOne, _ := builder.UpdateTable(cmp).Set("budget", 1).Where(cmp.Col("id").Eq(2)).ExpectOne().Returning(all...).Build()
		if rows, err := db.ExecReturning(one, foreignOne); !errors.Is(err, guardedsql.ErrNotFound) || rows != nil {
			t.Fatalf("ExpectOne update of a foreign id: %v, %v; want ErrNotFound", rows, err)
		}
		// ExpectOne matching two rows in scope: rolled back.
		two, _ := builder.UpdateTable(cmp).Set("budget", 5).Where(cmp.Col("id").In(1, 3)).ExpectOne().Returning("id").Build()
		if _, err := db.ExecReturning(one, two); !errors.Is(err, guardedsql.ErrTooManyRows) {
			t.Fatalf("ExpectOne update of 2 rows: %v, want ErrTooManyRows", err)
		}
		dfor, _ := builder.DeleteFrom(cmp).Where(cmp.Col("id").In(2, 4)).Returning(all...).Build()
		if got := scanCampaigns(t)(db.ExecReturning(one, dfor)); len(got) != 0 {
			t.Fatalf("delete of foreign ids returned %v", got)
		}
		if after := campaignsSum(s); after != before {
			t.Fatalf("writes aimed at company 2 changed campaigns (%d -> %d)", before, after)
		}
		// Delete of id 7 (ads first: they reference it) returns company
		// 1's old values only.
		ads := sch.Table("ads")
		dads, _ := builder.DeleteFrom(ads).Where(ads.Col("campaign_id").Eq(7)).Returning("company_id", "id").Build()
		rows, err := db.ExecReturning(one, dads)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for rows.Next() {
			var c, id int64
			if err := rows.Scan(&c, &id); err != nil {
				t.Fatal(err)
			}
			if c != 1 || id != 7 {
				t.Errorf("deleted ad (%d, %d) returned to company 1", c, id)
			}
			n++
		}
		if err := rows.Close(); err != nil || n != 1 {
			t.Fatalf("delete of ads returned %d rows (%v), want 1", n, err)
		}
		del, _ := builder.DeleteFrom(cmp).Where(cmp.Col("id").Eq(7)).ExpectOne().Returning(all...).Build()
		got = scanCampaigns(t)(db.ExecReturning(one, del))
		if want := []campaign{{1, 7, "c1-7", 77}}; !slices.Equal(got, want) {
			t.Fatalf("delete id 7 returned %v, want %v", got, want)
		}
		if n := s.count(`SELECT COUNT(*) FROM campaigns WHERE id = 7`); n != 1 {
			t.Fatalf("%d campaigns 7 left, want company 2's", n)
		}
		// Inside a transaction, a failing write is undone and the
		// transaction goes on.
		err = db.Tx(one, func(tx *guardedsql.Tx) error {
			if _, err := tx.ExecReturning(one, foreignOne); !errors.Is(err, guardedsql.ErrNotFound) {
				return fmt.Errorf("in Tx: %v, want ErrNotFound", err)
			}
			got := scanCampaigns(t)(tx.ExecReturning(one, upd))
			if len(got) != 0 {
				return fmt.Errorf("update of deleted id 7 returned %v", got)
			}
			up1, _ := builder.UpdateTable(cmp).Set("name", "renamed").Where(cmp.Col("id").Eq(1)).ExpectOne().Returning("name").Build()
			rows, err := tx.ExecReturning(one, up1)
			if err != nil {
				return err
			}
			names, err := guardedsql.CollectRows(rows, guardedsql.Scalar[string])
			if err != nil || !slices.Equal(names, []string{"renamed"}) {
				return fmt.Errorf("renamed: %v %v", names, err)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if n := s.count(`SELECT COUNT(*) FROM campaigns WHERE company_id = 1 AND id = 1 AND name = 'renamed'`); n != 1 {
			t.Fatal("the transaction's update was not committed")
		}
	})
}

func TestUpsertForeignConflict(t *testing.T) {
	forEachWritesEngine(t, func(t *testing.T, s *scratch, sch *builder.Schema, db *guardedsql.DB) {
		cp := sch.Table("coupons")
		one := grantCtx(companyG(1))
		upsert := func(code string, company, uses int64) builder.Insert {
			m, err := builder.InsertInto(cp).Columns("code", "company_id", "uses").Values(code, company, uses).
				OnConflict("code").DoUpdate("uses").Returning("code", "company_id", "uses").Build()
			if err != nil {
				t.Fatal(err)
			}
			return m
		}
		twoRow := func() int {
			return s.count(`SELECT COUNT(*) FROM coupons WHERE code = 'TWO' AND company_id = 2 AND uses = 20`)
		}

		// In scope: a conflict updates and returns the row; no conflict
		// inserts it.
		for _, c := range []struct {
			code string
			uses int64
		}{{"ONE", 11}, {"NEW", 1}} {
			rows, err := db.ExecReturning(one, upsert(c.code, 1, c.uses))
			if err != nil {
				t.Fatalf("upsert %s: %v", c.code, err)
			}
			type coupon struct {
				Code      string
				CompanyID int64
				Uses      int64
			}
			got, err := guardedsql.CollectRows(rows, guardedsql.RowToStruct[coupon])
			if err != nil || len(got) != 1 || got[0] != (coupon{c.code, 1, c.uses}) {
				t.Fatalf("upsert %s returned %v (%v)", c.code, got, err)
			}
			if n := s.count(`SELECT COUNT(*) FROM coupons WHERE code = ? AND company_id = 1 AND uses = ?`, c.code, c.uses); n != 1 {
				t.Fatalf("upsert %s: row not written", c.code)
			}
		}

		// The conflict lands on company 2's coupon: nothing changes, and the
		// error is the one of an upsert whose row is not in scope at all.
		_, errForeign := db.ExecReturning(one, upsert("TWO", 1, 99))
		if !errors.Is(errForeign, guardedsql.ErrNotFound) {
			t.Fatalf("foreign conflict: %v, want ErrNotFound", errForeign)
		}
		if twoRow() != 1 {
			t.Fatal("company 2's coupon changed")
		}
		_, errMiss := db.ExecReturning(one, upsert("THREE", 3, 99))
		if !errors.Is(errMiss, guardedsql.ErrNotFound) || errMiss.Error() != errForeign.Error() {
			t.Fatalf("foreign conflict %q differs from out-of-scope miss %q", errForeign, errMiss)
		}
		if _, err := db.Exec(one, upsert("TWO", 1, 98)); err == nil || err.Error() != errForeign.Error() {
			t.Fatalf("Exec of the foreign upsert: %v", err)
		}
		// DO NOTHING: a foreign conflict looks exactly like an own one.
		nothing := func(code string) builder.Insert {
			m, err := builder.InsertInto(cp).Columns("code", "company_id", "uses").Values(code, 1, 5).
				OnConflict("code").DoNothing().Returning("uses").Build()
			if err != nil {
				t.Fatal(err)
			}
			return m
		}
		for _, code := range []string{"ONE", "TWO"} {
			rows, err := db.ExecReturning(one, nothing(code))
			if err != nil {
				t.Fatalf("do nothing %s: %v", code, err)
			}
			got, err := guardedsql.CollectRows(rows, guardedsql.Scalar[int64])
			if err != nil || len(got) != 0 {
				t.Fatalf("do nothing %s returned %v (%v)", code, got, err)
			}
		}
		if twoRow() != 1 {
			t.Fatal("company 2's coupon changed")
		}
		// The row's own checks still fail loudly under DO NOTHING.
		bad, _ := builder.InsertInto(cp).Columns("code", "company_id", "uses").Values("X", 2, 5).OnConflict("code").DoNothing().Build()
		if _, err := db.Exec(one, bad); !errors.Is(err, guardedsql.ErrNotFound) {
			t.Fatalf("do nothing under company 2: %v, want ErrNotFound", err)
		}

		// Mutation check: without the conflict-row scope check the upsert
		// overwrites company 2's coupon; on PostgreSQL the row-level
		// security of the UPDATE is a second boundary that still stops it.
		restore := guardfault.Disable(guardfault.UpsertConflict)
		_, err := db.Exec(one, upsert("TWO", 1, 66))
		restore()
		if s.e.name == "postgres" {
			if !errors.Is(err, guardedsql.ErrNotFound) || twoRow() != 1 {
				t.Fatalf("with the fault, RLS let the foreign upsert through (%v)", err)
			}
		} else if err != nil || twoRow() != 0 {
			t.Fatalf("with the fault the foreign upsert was still refused (%v): the check is not what stops it", err)
		}
	})
}

func TestMultiRowInsertForeignParent(t *testing.T) {
	forEachWritesEngine(t, func(t *testing.T, s *scratch, sch *builder.Schema, db *guardedsql.DB) {
		ads := sch.Table("ads")
		one := grantCtx(companyG(1))
		count := func() int { return s.count(`SELECT COUNT(*) FROM ads`) }
		before := count()
		// The third row's campaign is company 2's (2, 4): the statement
		// inserts nothing.
		ins, err := builder.InsertInto(ads).Columns("company_id", "id", "campaign_id", "name").
			Values(1, 20, 1, "x").Values(1, 21, 3, "y").Values(2, 22, 4, "z").Build()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := db.Exec(one, ins); !errors.Is(err, guardedsql.ErrNotFound) {
			t.Fatalf("multi-row insert with a foreign parent: %v, want ErrNotFound", err)
		}
		// Same with RETURNING, and a row naming company 1 with company 2's
		// campaign id 2 (no such campaign of company 1).
		ins2, _ := builder.InsertInto(ads).Columns("company_id", "id", "campaign_id", "name").
			Values(1, 20, 1, "x").Values(1, 23, 2, "w").Returning("id").Build()
		if rows, err := db.ExecReturning(one, ins2); !errors.Is(err, guardedsql.ErrNotFound) || rows != nil {
			t.Fatalf("returning multi-row insert with a foreign parent: %v, %v", rows, err)
		}
		if n := count(); n != before {
			t.Fatalf("refused inserts left %d rows, want %d", n, before)
		}
		// Control: the own rows alone go in.
		ok, _ := builder.InsertInto(ads).Columns("company_id", "id", "campaign_id", "name").
			Values(1, 20, 1, "x").Values(1, 21, 3, "y").Returning("company_id", "id").Build()
		rows, err := db.ExecReturning(one, ok)
		if err != nil {
			t.Fatal(err)
		}
		type key struct{ CompanyID, ID int64 }
		got, err := guardedsql.CollectRows(rows, guardedsql.RowToStruct[key])
		if err != nil || !slices.Equal(got, []key{{1, 20}, {1, 21}}) {
			t.Fatalf("returned %v (%v)", got, err)
		}
	})
}

// TestWritesNoScope: without a scope nothing is sent, whatever the write.
func TestWritesNoScope(t *testing.T) {
	sch := builder.MustSchema(adsDef)
	s := newScratch(t, engineSQLite, adsDDL)
	sent := 0
	db, err := s.open(sch, guardedsql.WithObserver(func(context.Context, guardedsql.Statement) { sent++ }))
	if err != nil {
		t.Fatal(err)
	}
	sent = 0
	cmp, cp := sch.Table("campaigns"), sch.Table("coupons")
	upd, _ := builder.UpdateTable(cmp).Set("budget", 1).Where(cmp.Col("id").Eq(1)).Returning("id").Build()
	ups, _ := builder.InsertInto(cp).Columns("code", "company_id", "uses").Values("ONE", 1, 1).OnConflict("code").DoUpdate("uses").Build()
	sel := mustQuery(t, builder.Select(cmp.Col("company_id"), cmp.Col("id"), cmp.Col("name"), cmp.Col("budget")).From(cmp))
	cpy, _ := builder.InsertInto(sch.Table("archive")).Columns("company_id", "id", "name", "budget").Select(sel).Build()
	for _, m := range []builder.Mutation{upd, ups, cpy} {
		if _, err := db.ExecReturning(context.Background(), m); !errors.Is(err, guardedsql.ErrNoScope) {
			t.Errorf("ExecReturning without scope: %v", err)
		}
		if _, err := db.Exec(context.Background(), m); !errors.Is(err, guardedsql.ErrNoScope) {
			t.Errorf("Exec without scope: %v", err)
		}
	}
	if sent != 0 {
		t.Fatalf("%d statements sent without a scope", sent)
	}
	// Control: with a scope the observer sees the upsert's statements.
	if _, err := db.Exec(grantCtx(companyG(1)), ups); err != nil || sent == 0 {
		t.Fatalf("scoped upsert: %v, %d statements seen", err, sent)
	}
}

func TestInsertSelect(t *testing.T) {
	forEachWritesEngine(t, func(t *testing.T, s *scratch, sch *builder.Schema, db *guardedsql.DB) {
		cmp, arc := sch.Table("campaigns"), sch.Table("archive")
		one := grantCtx(companyG(1))
		// Copy every campaign visible to company 1, and aim at company 2's
		// ids too: only company 1's rows are copied.
		q := mustQuery(t, builder.Select(cmp.Col("company_id"), cmp.Col("id"), cmp.Col("name"), cmp.Col("budget")).From(cmp).
			Where(cmp.Col("id").In(2, 4, 7)))
		ins, err := builder.InsertInto(arc).Columns("company_id", "id", "name", "budget").Select(q).Returning("company_id", "id").Build()
		if err != nil {
			t.Fatal(err)
		}
		rows, err := db.ExecReturning(one, ins)
		if err != nil {
			t.Fatal(err)
		}
		type key struct{ CompanyID, ID int64 }
		got, err := guardedsql.CollectRows(rows, guardedsql.RowToStruct[key])
		slices.SortFunc(got, func(a, b key) int { return int(a.ID - b.ID) })
		if err != nil || !slices.Equal(got, []key{{1, 7}}) {
			t.Fatalf("copied %v (%v), want company 1's campaign 7", got, err)
		}
		if n := s.count(`SELECT COUNT(*) FROM archive WHERE company_id <> 1 OR budget <> 700`); n != 0 {
			t.Fatalf("%d foreign or altered rows copied", n)
		}
		// The produced rows are checked like inserted rows: a SELECT that
		// turns its own data into company 2's key (budget 2 as the
		// company) fails whole, inserting nothing.
		for _, id := range []int64{1, 3} {
			upd, _ := builder.UpdateTable(cmp).Set("budget", id).Where(cmp.Col("id").Eq(id)).ExpectOne().Build()
			if _, err := db.Exec(one, upd); err != nil {
				t.Fatal(err)
			}
		}
		before := s.count(`SELECT COUNT(*) FROM archive`)
		q2 := mustQuery(t, builder.Select(cmp.Col("budget"), cmp.Col("id"), cmp.Col("name"), cmp.Col("budget")).From(cmp).
			Where(cmp.Col("id").In(3, 5)))
		// (budget 1 for campaign 1 is company 1: allowed; add it to the
		// batch with the foreign one.)
		q3 := mustQuery(t, builder.Select(cmp.Col("budget"), cmp.Col("id"), cmp.Col("name"), cmp.Col("budget")).From(cmp).
			Where(cmp.Col("id").In(1, 3)))
		for _, src := range []builder.Query{q2, q3} {
			bad, err := builder.InsertInto(arc).Columns("company_id", "id", "name", "budget").Select(src).Build()
			if err != nil {
				t.Fatal(err)
			}
			if _, err := db.Exec(one, bad); !errors.Is(err, guardedsql.ErrNotFound) && !errors.Is(err, guardedsql.ErrOutOfScope) {
				t.Fatalf("INSERT ... SELECT producing a company 2 row: %v, want ErrNotFound/ErrOutOfScope", err)
			}
		}
		if n := s.count(`SELECT COUNT(*) FROM archive`); n != before {
			t.Fatalf("refused INSERT ... SELECT left %d rows, want %d", n, before)
		}
		if n := s.count(`SELECT COUNT(*) FROM archive WHERE company_id = 2 OR id <> 7`); n != 0 {
			t.Fatal("a row of a refused INSERT ... SELECT was inserted")
		}
	})
}

// TestUpsertConcurrent: two callers upserting the same fresh keys at once
// both succeed on every engine (no duplicate-key or deadlock error from the
// checked plans), and the row ends with one of their values.
func TestUpsertConcurrent(t *testing.T) {
	forEachWritesEngine(t, func(t *testing.T, s *scratch, sch *builder.Schema, db *guardedsql.DB) {
		cp := sch.Table("coupons")
		one := grantCtx(companyG(1))
		const n = 30
		errs := make(chan error, 2*n)
		var wg sync.WaitGroup
		for w := range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range n {
					code := fmt.Sprintf("K%d", i)
					if i%2 == 1 {
						code = "ONE" // an existing row, upserted by both at once
					}
					m, err := builder.InsertInto(cp).Columns("code", "company_id", "uses").Values(code, 1, int64(w)).
						OnConflict("code").DoUpdate("uses").Build()
					if err == nil {
						_, err = db.Exec(one, m)
					}
					errs <- err
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Errorf("concurrent upsert: %v", err)
			}
		}
		if got := s.count(`SELECT COUNT(*) FROM coupons WHERE (code LIKE 'K%' OR code = 'ONE') AND company_id = 1 AND uses IN (0, 1)`); got != (n+1)/2+1 {
			t.Fatalf("%d upserted coupons, want %d", got, (n+1)/2+1)
		}
	})
}
