// Package adanalytics is a small multi-tenant ad-analytics tool server in
// the style of Citus's example: companies (the tenants) run campaigns,
// campaigns hold ads, ads collect clicks, and each company keeps its
// contacts. Every tenant-bound table is keyed by (company_id, id), ids
// restart at 1 in every company, foreign keys are composite
// ((company_id, campaign_id) → campaigns(company_id, id)), and names and
// e-mails are unique per company (UNIQUE(company_id, email)), not
// globally.
//
// It lives in a module of its own and imports only tenantmcp's public
// packages, as a user's application does; its tests run the conformance
// suite and a claimstest issuer against it.
package adanalytics

import (
	"context"
	"database/sql"
	"fmt"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tenantmcp/tenantmcp/builder"
	"github.com/tenantmcp/tenantmcp/guardedsql"
	"github.com/tenantmcp/tenantmcp/redact"
	"github.com/tenantmcp/tenantmcp/server"
)

// LevelCompany is the only scope level: a company id.
const LevelCompany = "company"

// SchemaDef returns the schema graph. The per-company unique keys are
// declared (TableDef.Unique) as well as created, so that the conformance
// suite's write controls give the copies they insert new names and
// e-mails.
func SchemaDef() builder.SchemaDef {
	byCompany := func(ref string) []builder.ForeignKey {
		return []builder.ForeignKey{{Columns: []string{"company_id", ref + "_id"}, RefTable: ref + "s", RefColumns: []string{"company_id", "id"}}}
	}
	key := []string{"company_id", "id"}
	return builder.SchemaDef{
		Levels: []builder.Level{{Name: LevelCompany, Key: builder.IntKey}},
		Tables: []builder.TableDef{
			{Name: "companies", Columns: []string{"id", "name"}, PrimaryKey: []string{"id"},
				Levels: map[string]string{"id": LevelCompany}},
			{Name: "contacts", Columns: []string{"company_id", "id", "full_name", "email"}, PrimaryKey: key,
				Unique:      [][]string{{"company_id", "email"}},
				ForeignKeys: []builder.ForeignKey{{Columns: []string{"company_id"}, RefTable: "companies"}}, Parent: "company_id"},
			{Name: "campaigns", Columns: []string{"company_id", "id", "name", "budget_cents"}, PrimaryKey: key,
				Unique:      [][]string{{"company_id", "name"}},
				ForeignKeys: []builder.ForeignKey{{Columns: []string{"company_id"}, RefTable: "companies"}}, Parent: "company_id"},
			{Name: "ads", Columns: []string{"company_id", "id", "campaign_id", "name", "target_url"}, PrimaryKey: key,
				ForeignKeys: byCompany("campaign"), Parent: "campaign_id"},
			{Name: "clicks", Columns: []string{"company_id", "id", "ad_id", "user_email", "cost_cents", "user_data"}, PrimaryKey: key,
				ForeignKeys: byCompany("ad"), Parent: "ad_id"},
		},
	}
}

// Schema is the validated graph the tools build their statements on.
var Schema = builder.MustSchema(SchemaDef())

// Engine names the SQL dialect of CreateTables: "sqlite", "postgres" or
// "mysql" (the values of conformance.Engine).
type Engine string

// CreateTables creates the tables, with their composite keys and
// per-company unique constraints, as the database owner.
//
// clicks.user_data is the click's JSON document ({"country": "fr",
// "is_mobile": true}), as in Citus's tutorial: JSONB on PostgreSQL, JSON
// on MariaDB/MySQL (LONGTEXT checked by JSON_VALID on MariaDB) and TEXT on
// SQLite. The tools read it only through builder.JSONText.
func CreateTables(ctx context.Context, db *sql.DB, engine Engine) error {
	text, json := "TEXT", "TEXT"
	switch engine {
	case "mysql":
		text, json = "VARCHAR(191)", "JSON" // VARCHAR(191): indexable under utf8mb4
	case "postgres":
		json = "JSONB"
	}
	for _, ddl := range []string{
		`CREATE TABLE companies (id BIGINT NOT NULL PRIMARY KEY, name TEXT NOT NULL)`,
		`CREATE TABLE contacts (company_id BIGINT NOT NULL REFERENCES companies (id), id BIGINT NOT NULL,
			full_name TEXT NOT NULL, email TEXT NOT NULL,
			PRIMARY KEY (company_id, id), UNIQUE (company_id, email))`,
		`CREATE TABLE campaigns (company_id BIGINT NOT NULL REFERENCES companies (id), id BIGINT NOT NULL,
			name TEXT NOT NULL, budget_cents BIGINT NOT NULL,
			PRIMARY KEY (company_id, id), UNIQUE (company_id, name))`,
		`CREATE TABLE ads (company_id BIGINT NOT NULL, id BIGINT NOT NULL, campaign_id BIGINT NOT NULL,
			name TEXT NOT NULL, target_url TEXT NOT NULL,
			PRIMARY KEY (company_id, id),
			FOREIGN KEY (company_id, campaign_id) REFERENCES campaigns (company_id, id))`,
		`CREATE TABLE clicks (company_id BIGINT NOT NULL, id BIGINT NOT NULL, ad_id BIGINT NOT NULL,
			user_email TEXT NOT NULL, cost_cents BIGINT NOT NULL, user_data JSONDOC NOT NULL,
			PRIMARY KEY (company_id, id),
			FOREIGN KEY (company_id, ad_id) REFERENCES ads (company_id, id))`,
	} {
		if engine == "mysql" {
			// MySQL ignores a column-level REFERENCES: spell it out.
			ddl = strings.Replace(ddl, "company_id BIGINT NOT NULL REFERENCES companies (id),", "company_id BIGINT NOT NULL, FOREIGN KEY (company_id) REFERENCES companies (id),", 1)
		}
		ddl = strings.ReplaceAll(strings.ReplaceAll(ddl, "TEXT", text), "JSONDOC", json)
		if _, err := db.ExecContext(ctx, ddl); err != nil {
			return fmt.Errorf("adanalytics: creating tables: %w", err)
		}
	}
	return nil
}

// Redaction reveals contact names and e-mails to analysts; everyone else
// sees masks.
var Redaction = redact.Options{
	Reveal: map[string][]redact.Category{"analyst": {redact.Name, redact.Email}},
}

var (
	campaignsT = Schema.Table("campaigns")
	adsT       = Schema.Table("ads")
	clicksT    = Schema.Table("clicks")
	contactsT  = Schema.Table("contacts")
)

// Register adds the tools to s.
func Register(s *server.Server) error {
	ro := &mcp.ToolAnnotations{ReadOnlyHint: true}
	for _, err := range []error{
		server.AddTool(s, server.Tool{Name: "list_campaigns", Description: "The company's campaigns with their budgets.", Annotations: ro}, ListCampaigns),
		server.AddTool(s, server.Tool{Name: "campaign_clicks", Description: "The clicks on the ads of one campaign.", Annotations: ro}, CampaignClicks),
		server.AddTool(s, server.Tool{Name: "find_contact", Description: "Contacts whose e-mail equals, or whose name starts with, the query.", Annotations: ro}, FindContact),
		// Narrowable: a caller with several companies names the one a
		// campaign id is about with "within" (campaigns.go).
		server.AddTool(s, server.Tool{Name: "get_campaign", Description: "One campaign by id.", Annotations: ro, Narrowable: true}, GetCampaign),
		server.AddTool(s, server.Tool{Name: "update_campaign", Description: "Rename a campaign and set its budget.", Narrowable: true}, UpdateCampaign),
		// The tutorial's analytics (analytics.go) and the writes that
		// return composite keys, count atomically and upsert (writes.go).
		server.AddTool(s, server.Tool{Name: "clicks_by_device", Description: "Clicks and their cost by device (user_data's is_mobile).", Annotations: ro}, ClicksByDevice),
		server.AddTool(s, server.Tool{Name: "campaign_ranking", Description: "Every ad ranked within its campaign by clicks, then cost.", Annotations: ro}, CampaignRanking),
		server.AddTool(s, server.Tool{Name: "list_clicks", Description: "The company's clicks, a page at a time (pass next_cursor back).", Annotations: ro}, ListClicks),
		server.AddTool(s, server.Tool{Name: "create_ad", Description: "Add an ad to a campaign; returns its key.", Narrowable: true}, CreateAd),
		server.AddTool(s, server.Tool{Name: "add_budget", Description: "Add cents to a campaign's budget, atomically.", Narrowable: true}, AddBudget),
		server.AddTool(s, server.Tool{Name: "upsert_contact", Description: "Create a contact, or rename the one with this e-mail.", Narrowable: true}, UpsertContact),
	} {
		if err != nil {
			return err
		}
	}
	return nil
}

// Campaign is one campaign.
type Campaign struct {
	ID          int64  `json:"id"`
	Name        string `json:"name"`
	BudgetCents int64  `json:"budget_cents"`
}

// CampaignsOut lists campaigns.
type CampaignsOut struct {
	Campaigns []Campaign `json:"campaigns"`
}

// ListCampaigns lists the caller's campaigns. No tenant column appears in
// the statement: the guard adds it.
func ListCampaigns(ctx context.Context, db *guardedsql.DB, _ struct{}) (CampaignsOut, error) {
	c := campaignsT
	q, err := builder.Select(c.Col("id"), c.Col("name"), c.Col("budget_cents")).From(c).
		OrderBy(c.Col("company_id").Asc(), c.Col("id").Asc()).Limit(200).Build()
	if err != nil {
		return CampaignsOut{}, err
	}
	rows, err := db.Query(ctx, q)
	if err != nil {
		return CampaignsOut{}, err
	}
	out, err := guardedsql.CollectRows(rows, func(rs *guardedsql.Rows) (Campaign, error) {
		var x Campaign
		return x, rs.Scan(&x.ID, &x.Name, &x.BudgetCents)
	})
	return CampaignsOut{Campaigns: nonNil(out)}, err
}

// CampaignClicksIn is the input of campaign_clicks.
type CampaignClicksIn struct {
	CampaignID int64 `json:"campaign_id" jsonschema:"a campaign id (ids restart at 1 in every company)"`
}

// Click is one click.
type Click struct {
	ID        int64  `json:"id"`
	AdID      int64  `json:"ad_id"`
	AdName    string `json:"ad_name"`
	UserEmail string `json:"user_email" pii:"email"`
	CostCents int64  `json:"cost_cents"`
}

// ClicksOut lists clicks.
type ClicksOut struct {
	Clicks []Click `json:"clicks"`
}

// CampaignClicks lists the clicks on a campaign's ads: a join along the
// composite key (company_id, id), which every company's campaign 1 shares
// the id part of.
func CampaignClicks(ctx context.Context, db *guardedsql.DB, in CampaignClicksIn) (ClicksOut, error) {
	a, k := adsT.As("a"), clicksT.As("k")
	q, err := builder.Select(k.Col("id"), a.Col("id"), a.Col("name"), k.Col("user_email"), k.Col("cost_cents")).
		From(a).
		Join(k, builder.And(k.Col("company_id").EqCol(a.Col("company_id")), k.Col("ad_id").EqCol(a.Col("id")))).
		Where(a.Col("campaign_id").Eq(in.CampaignID)).
		OrderBy(k.Col("company_id").Asc(), k.Col("id").Asc()).Limit(500).Build()
	if err != nil {
		return ClicksOut{}, err
	}
	rows, err := db.Query(ctx, q)
	if err != nil {
		return ClicksOut{}, err
	}
	out, err := guardedsql.CollectRows(rows, func(rs *guardedsql.Rows) (Click, error) {
		var x Click
		return x, rs.Scan(&x.ID, &x.AdID, &x.AdName, &x.UserEmail, &x.CostCents)
	})
	return ClicksOut{Clicks: nonNil(out)}, err
}

// FindContactIn is the input of find_contact.
type FindContactIn struct {
	Query string `json:"query" jsonschema:"an exact e-mail address, or a name prefix"`
}

// Contact is one contact.
type Contact struct {
	ID       int64  `json:"id"`
	FullName string `json:"full_name" pii:"name"`
	Email    string `json:"email" pii:"email"`
}

// ContactsOut lists contacts.
type ContactsOut struct {
	Contacts []Contact `json:"contacts"`
}

// FindContact finds the caller's contacts by e-mail or name prefix.
func FindContact(ctx context.Context, db *guardedsql.DB, in FindContactIn) (ContactsOut, error) {
	if len(in.Query) < 2 {
		return ContactsOut{}, server.InvalidInput("query must have at least 2 characters")
	}
	c := contactsT
	q, err := builder.Select(c.Col("id"), c.Col("full_name"), c.Col("email")).From(c).
		Where(builder.Or(c.Col("email").Eq(in.Query), c.Col("full_name").HasPrefix(in.Query))).
		OrderBy(c.Col("company_id").Asc(), c.Col("id").Asc()).Limit(50).Build()
	if err != nil {
		return ContactsOut{}, err
	}
	rows, err := db.Query(ctx, q)
	if err != nil {
		return ContactsOut{}, err
	}
	out, err := guardedsql.CollectRows(rows, func(rs *guardedsql.Rows) (Contact, error) {
		var x Contact
		return x, rs.Scan(&x.ID, &x.FullName, &x.Email)
	})
	return ContactsOut{Contacts: nonNil(out)}, err
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}
