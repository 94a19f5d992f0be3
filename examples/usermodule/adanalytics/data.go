package adanalytics

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
)

// Data is generated rows, table by table, each row a column → value map.
type Data map[string][]map[string]any

// Generate makes demo data for companies 1…n: in every company two
// campaigns, two ads per campaign, one to three clicks per ad (1 + (company
// + ad) % 3, so that ads rank differently in every company) and three
// contacts,
// with ids restarting at 1 in every company and campaign names, ad names
// and most e-mails repeating across companies (unique within each, as the
// constraints demand). Each company's first contact is marked with tag
// ("Canary <tag> <company>"), a name and e-mail found in no other company.
// A click's cost is 100*company + its id, and its user_data is the JSON
// document {"country": …, "is_mobile": …} (spelt as PostgreSQL's jsonb
// prints it, so that every engine stores the same text), with a mix of
// mobile and desktop clicks that differs between companies.
func Generate(n int, tag string) Data {
	d := Data{}
	add := func(t string, r map[string]any) { d[t] = append(d[t], r) }
	for c := int64(1); c <= int64(n); c++ {
		add("companies", map[string]any{"id": c, "name": fmt.Sprintf("Company %d", c)})
		add("contacts", map[string]any{"company_id": c, "id": int64(1),
			"full_name": fmt.Sprintf("Canary %s %d", tag, c), "email": fmt.Sprintf("canary.%s.%d@example.net", tag, c)})
		add("contacts", map[string]any{"company_id": c, "id": int64(2), "full_name": "Alex Morgan", "email": "alex@example.com"})
		add("contacts", map[string]any{"company_id": c, "id": int64(3), "full_name": "Sam Lee", "email": "sam@example.com"})
		ad, click := int64(0), int64(0)
		for camp, name := range []string{"Spring sale", "Black Friday"} {
			campID := int64(camp + 1)
			add("campaigns", map[string]any{"company_id": c, "id": campID, "name": name, "budget_cents": 1000 * (c + campID)})
			for range 2 {
				ad++
				add("ads", map[string]any{"company_id": c, "id": ad, "campaign_id": campID,
					"name": fmt.Sprintf("Ad %d", ad), "target_url": fmt.Sprintf("https://example.com/%d", ad)})
				for range 1 + (c+ad)%3 {
					click++
					add("clicks", map[string]any{"company_id": c, "id": click, "ad_id": ad,
						"user_email": fmt.Sprintf("visitor%d@example.org", click), "cost_cents": 100*c + click,
						"user_data": fmt.Sprintf(`{"country": %q, "is_mobile": %t}`, countries[(c*click)%3], (c+click)%3 != 0)})
				}
			}
		}
	}
	return d
}

var countries = [...]string{"de", "fr", "us"}

// Insert writes d into the tables CreateTables made, parents first.
func Insert(ctx context.Context, db *sql.DB, engine Engine, d Data) error {
	for _, t := range SchemaDef().Tables {
		phs := make([]string, len(t.Columns))
		for i := range phs {
			phs[i] = "?"
			if engine == "postgres" {
				phs[i] = fmt.Sprintf("$%d", i+1)
			}
		}
		stmt := "INSERT INTO " + t.Name + " (" + strings.Join(t.Columns, ", ") + ") VALUES (" + strings.Join(phs, ", ") + ")"
		for _, r := range d[t.Name] {
			vals := make([]any, len(t.Columns))
			for i, c := range t.Columns {
				vals[i] = r[c]
			}
			if _, err := db.ExecContext(ctx, stmt, vals...); err != nil {
				return fmt.Errorf("adanalytics: inserting into %s: %w", t.Name, err)
			}
		}
	}
	return nil
}
