package guardedsql_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/tenantmcp/tenantmcp/builder"
	"github.com/tenantmcp/tenantmcp/guardedsql"
	"github.com/tenantmcp/tenantmcp/scope"
)

// The ad-analytics shape of issue 15: campaigns keyed by (company_id, id),
// ids restarting at 1 in every company.
var adsDDL = []string{
	`CREATE TABLE companies (id INT_T NOT NULL PRIMARY KEY, name KEY_T NOT NULL)`,
	`CREATE TABLE campaigns (company_id INT_T NOT NULL, id INT_T NOT NULL, name KEY_T NOT NULL, budget_cents INT_T NOT NULL,
		PRIMARY KEY (company_id, id), FOREIGN KEY (company_id) REFERENCES companies (id))`,
}

var adsDef = builder.SchemaDef{
	Levels: []builder.Level{{Name: "company", Key: builder.IntKey}},
	Tables: []builder.TableDef{
		{Name: "companies", Columns: []string{"id", "name"}, PrimaryKey: []string{"id"},
			Levels: map[string]string{"id": "company"}},
		{Name: "campaigns", Columns: []string{"company_id", "id", "name", "budget_cents"}, PrimaryKey: []string{"company_id", "id"},
			ForeignKeys: []builder.ForeignKey{{Columns: []string{"company_id"}, RefTable: "companies"}}, Parent: "company_id"},
	},
}

// adsCampaign is one seeded campaign.
type adsCampaign struct {
	company, id int64
	name        string
	budget      int64
}

// adsSeed: companies 1, 2 and 4 each have campaigns 1-3 (the same ids);
// company 2 alone has campaign 5. Budgets differ everywhere, so a value
// read or written names its row.
func adsSeed() []adsCampaign {
	var out []adsCampaign
	for _, c := range []int64{1, 2, 4} {
		for id := int64(1); id <= 3; id++ {
			out = append(out, adsCampaign{c, id, fmt.Sprintf("c%d-camp%d", c, id), c*1000 + id})
		}
	}
	return append(out, adsCampaign{2, 5, "c2-camp5", 2005})
}

func companyG(id int64) scope.Grant { return scope.Grant{Level: "company", ID: fmt.Sprint(id)} }

// TestAmbiguousMatch: a caller holding companies 1 and 4 who names campaign
// 2 has named two rows. QueryRow, One and an ExpectOne update or delete
// fail with ErrAmbiguous (a message with no value, count or tenant), the
// writes change nothing (also inside Tx, where the transaction carries on),
// and the read leaves nothing scanned. Controls: the same calls by a
// caller of company 1 alone read and change exactly company 1's row;
// company 2's rows (same ids) never count towards the ambiguity, and its
// campaign 5 is not found.
func TestAmbiguousMatch(t *testing.T) {
	forEachEngine(t, func(t *testing.T, e engine) {
		s := newScratch(t, e, adsDDL)
		for _, c := range []int64{1, 2, 4} {
			s.mustExec(t, `INSERT INTO companies VALUES (?, ?)`, c, fmt.Sprintf("company %d", c))
		}
		seed := adsSeed()
		for _, c := range seed {
			s.mustExec(t, `INSERT INTO campaigns VALUES (?, ?, ?, ?)`, c.company, c.id, c.name, c.budget)
		}
		sch := builder.MustSchema(adsDef)
		db, err := s.open(sch)
		if err != nil {
			t.Fatal(err)
		}
		camp := sch.Table("campaigns")
		two := grantCtx(companyG(1), companyG(4))
		one := grantCtx(companyG(1))
		// unchanged checks, unguarded, that every seeded row holds its
		// seeded values and that there is no other row.
		unchanged := func(what string, except ...adsCampaign) {
			t.Helper()
			if n := s.count(`SELECT COUNT(*) FROM campaigns`); n != len(seed) {
				t.Fatalf("%s: %d campaigns, want %d", what, n, len(seed))
			}
			for _, c := range seed {
				skip := false
				for _, x := range except {
					skip = skip || x.company == c.company && x.id == c.id
				}
				if !skip && s.count(`SELECT COUNT(*) FROM campaigns WHERE company_id = ? AND id = ? AND name = ? AND budget_cents = ?`, c.company, c.id, c.name, c.budget) != 1 {
					t.Fatalf("%s: campaign %d of company %d changed", what, c.id, c.company)
				}
			}
		}
		byID := func(id int64) builder.Query {
			return mustQuery(t, builder.Select(camp.Col("name"), camp.Col("budget_cents")).From(camp).Where(camp.Col("id").Eq(id)))
		}
		noValue := func(what string, err error) {
			t.Helper()
			if !errors.Is(err, guardedsql.ErrAmbiguous) || !errors.Is(err, guardedsql.ErrTooManyRows) {
				t.Fatalf("%s: err = %v, want ErrAmbiguous", what, err)
			}
			if msg := err.Error(); strings.ContainsAny(msg, "0123456789") || strings.Contains(msg, "camp") || strings.Contains(msg, "company") {
				t.Fatalf("%s: the message names a value, a count or a tenant: %q", what, msg)
			}
		}

		// Reads.
		name, budget := "preset", int64(-1)
		noValue("QueryRow", db.QueryRow(two, byID(2)).Scan(&name, &budget))
		if name != "" || budget != 0 {
			t.Fatalf("QueryRow left %q %d scanned", name, budget)
		}
		names := mustQuery(t, builder.Select(camp.Col("name")).From(camp).Where(camp.Col("id").Eq(2)))
		_, err = guardedsql.One(two, db, names, guardedsql.Scalar[string])
		noValue("One", err)
		if err := db.QueryRow(one, byID(2)).Scan(&name, &budget); err != nil || name != "c1-camp2" || budget != 1002 {
			t.Fatalf("company 1 alone: %q %d %v, want its campaign 2", name, budget, err)
		}
		if err := db.QueryRow(one, byID(5)).Scan(&name, &budget); !errors.Is(err, guardedsql.ErrNotFound) {
			t.Fatalf("company 2's campaign 5 as company 1: %v, want ErrNotFound", err)
		}
		if err := db.QueryRow(two, byID(5)).Scan(&name, &budget); !errors.Is(err, guardedsql.ErrNotFound) {
			t.Fatalf("company 2's campaign 5 as companies 1+4: %v, want ErrNotFound", err)
		}
		// A tool that wants the first of several says so.
		first := mustQuery(t, builder.Select(camp.Col("name")).From(camp).Where(camp.Col("id").Eq(2)).
			OrderBy(camp.Col("company_id").Desc()).Limit(1))
		if err := db.QueryRow(two, first).Scan(&name); err != nil || name != "c4-camp2" {
			t.Fatalf("ordered Limit(1): %q %v", name, err)
		}

		// Writes.
		up := builder.Must(builder.UpdateTable(camp).Set("budget_cents", 7).Where(camp.Col("id").Eq(2)).ExpectOne().Build())
		_, err = db.Exec(two, up)
		noValue("ExpectOne update", err)
		unchanged("ExpectOne update")
		// One of the two rows already holds the value: both still match
		// (MySQL counts matched rows, not changed ones: clientFoundRows).
		same := builder.Must(builder.UpdateTable(camp).Set("budget_cents", 1002).Where(camp.Col("id").Eq(2)).ExpectOne().Build())
		_, err = db.Exec(two, same)
		noValue("ExpectOne update to a value one row holds", err)
		unchanged("ExpectOne update to a value one row holds")
		if res, err := db.Exec(one, same); err != nil || res.RowsAffected != 1 {
			t.Fatalf("company 1 alone, setting the value its row holds: %+v %v", res, err)
		}
		unchanged("ExpectOne update to the value the row holds")
		del := builder.Must(builder.DeleteFrom(camp).Where(camp.Col("id").Eq(3)).ExpectOne().Build())
		_, err = db.Exec(two, del)
		noValue("ExpectOne delete", err)
		unchanged("ExpectOne delete")
		err = db.Tx(two, func(tx *guardedsql.Tx) error {
			_, err := tx.Exec(two, up)
			noValue("ExpectOne update in Tx", err)
			var n string
			noValue("QueryRow in Tx", tx.QueryRow(two, names).Scan(&n))
			return nil // commit: the ambiguous update must not be in it
		})
		if err != nil {
			t.Fatal(err)
		}
		unchanged("Tx")
		// Control: one grant, one row.
		res, err := db.Exec(one, up)
		if err != nil || res.RowsAffected != 1 {
			t.Fatalf("company 1 alone: %+v %v", res, err)
		}
		if s.count(`SELECT budget_cents FROM campaigns WHERE company_id = 1 AND id = 2`) != 7 {
			t.Fatal("company 1's campaign 2 was not updated")
		}
		unchanged("company 1 alone", adsCampaign{company: 1, id: 2})
	})
}
