package adanalytics

import (
	"context"

	"github.com/tenantmcp/tenantmcp/builder"
	"github.com/tenantmcp/tenantmcp/guardedsql"
	"github.com/tenantmcp/tenantmcp/server"
)

// CampaignIn names a campaign by its id. Ids restart at 1 in every
// company, so for a caller with several companies an id alone can name a
// campaign of each: the tool then answers "ambiguous", and the caller
// narrows the call with "within" (the tools are Narrowable), e.g.
// {"id": 2, "within": "company:4"}.
type CampaignIn struct {
	ID int64 `json:"id" jsonschema:"the campaign id (ids restart at 1 in every company)"`
}

// GetCampaign returns one campaign. Another company's campaign is "not
// found"; a campaign id that several of the caller's companies have is
// "ambiguous" (guardedsql.ErrAmbiguous from QueryRow) until narrowed.
func GetCampaign(ctx context.Context, db *guardedsql.DB, in CampaignIn) (Campaign, error) {
	return getCampaign(ctx, db, in.ID)
}

func getCampaign(ctx context.Context, q guardedsql.Querier, id int64) (Campaign, error) {
	c := campaignsT
	sel, err := builder.Select(c.Col("id"), c.Col("name"), c.Col("budget_cents")).From(c).Where(c.Col("id").Eq(id)).Build()
	if err != nil {
		return Campaign{}, err
	}
	var out Campaign
	err = q.QueryRow(ctx, sel).Scan(&out.ID, &out.Name, &out.BudgetCents)
	return out, err
}

// UpdateCampaignIn is the input of update_campaign.
type UpdateCampaignIn struct {
	ID          int64  `json:"id" jsonschema:"the campaign id (ids restart at 1 in every company)"`
	Name        string `json:"name" jsonschema:"the new name, unique within the company"`
	BudgetCents int64  `json:"budget_cents" jsonschema:"the new budget in cents"`
}

// UpdateCampaign renames a campaign and sets its budget, returning it as
// stored. The update is ExpectOne: with an id several of the caller's
// companies have it fails with guardedsql.ErrAmbiguous and changes
// nothing, and the caller narrows the call with "within".
func UpdateCampaign(ctx context.Context, db *guardedsql.DB, in UpdateCampaignIn) (Campaign, error) {
	if in.Name == "" || in.BudgetCents < 0 {
		return Campaign{}, server.InvalidInput("name must not be empty and budget_cents not negative")
	}
	c := campaignsT
	up, err := builder.UpdateTable(c).Set("name", in.Name).Set("budget_cents", in.BudgetCents).
		Where(c.Col("id").Eq(in.ID)).ExpectOne().Build()
	if err != nil {
		return Campaign{}, err
	}
	var out Campaign
	err = db.Tx(ctx, func(tx *guardedsql.Tx) error {
		if _, err := tx.Exec(ctx, up); err != nil {
			return err
		}
		out, err = getCampaign(ctx, tx, in.ID)
		return err
	})
	return out, err
}
