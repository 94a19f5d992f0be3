package adanalytics

import (
	"context"

	"github.com/tenantmcp/tenantmcp/builder"
	"github.com/tenantmcp/tenantmcp/guardedsql"
	"github.com/tenantmcp/tenantmcp/server"
)

// The write tools. Rows are keyed by (company_id, id) with ids restarting
// at 1 in every company, so a new row's key is made by the engine from the
// caller's own rows (INSERT ... SELECT) and read back with RETURNING:
// LastInsertID means nothing for a composite key.

var companiesT = Schema.Table("companies")

// CreateAdIn is the input of create_ad.
type CreateAdIn struct {
	CampaignID int64  `json:"campaign_id" jsonschema:"the campaign the ad belongs to (ids restart at 1 in every company)"`
	Name       string `json:"name"`
	TargetURL  string `json:"target_url"`
}

// AdKey is a created ad's composite key.
type AdKey struct {
	CompanyID int64 `json:"company_id"`
	ID        int64 `json:"id"`
}

// CreateAd adds an ad to one of the caller's campaigns and returns its key
// (company_id, id), read from the INSERT's RETURNING. The row is
// INSERT ... SELECT from the campaign: its company_id is the campaign's,
// its id one more than the company's highest ad id (a scalar subquery the
// guard confines like the rest). In a transaction, the campaign is first
// read with QueryRow, so that a campaign id several of the caller's
// companies have is "ambiguous" (the tool is Narrowable) instead of
// creating an ad in each. Two concurrent creates in one company may pick
// the same id: the second fails on the primary key and changes nothing.
func CreateAd(ctx context.Context, db *guardedsql.DB, in CreateAdIn) (AdKey, error) {
	if in.Name == "" || in.TargetURL == "" {
		return AdKey{}, server.InvalidInput("name and target_url must not be empty")
	}
	c, a := campaignsT.As("c"), adsT.As("a")
	one, err := builder.Select(c.Col("id")).From(c).Where(c.Col("id").Eq(in.CampaignID)).Build()
	if err != nil {
		return AdKey{}, err
	}
	maxID, err := builder.Select(builder.Max(a.Col("id"))).From(a).Where(a.Col("company_id").EqCol(c.Col("company_id"))).Build()
	if err != nil {
		return AdKey{}, err
	}
	src, err := builder.Select(c.Col("company_id"), builder.Coalesce(builder.ScalarQuery(maxID), 0).Add(1),
		c.Col("id"), builder.Val(in.Name), builder.Val(in.TargetURL)).
		From(c).Where(c.Col("id").Eq(in.CampaignID)).Build()
	if err != nil {
		return AdKey{}, err
	}
	ins, err := builder.InsertInto(adsT).Columns("company_id", "id", "campaign_id", "name", "target_url").
		Select(src).Returning("company_id", "id").Build()
	if err != nil {
		return AdKey{}, err
	}
	var key AdKey
	err = db.Tx(ctx, func(tx *guardedsql.Tx) error {
		var id int64
		if err := tx.QueryRow(ctx, one).Scan(&id); err != nil {
			return err // ErrNotFound, or ErrAmbiguous for a multi-company caller
		}
		rows, err := tx.ExecReturning(ctx, ins)
		if err != nil {
			return err
		}
		keys, err := guardedsql.CollectRows(rows, func(rs *guardedsql.Rows) (AdKey, error) {
			var k AdKey
			return k, rs.Scan(&k.CompanyID, &k.ID)
		})
		if err != nil {
			return err
		}
		if len(keys) != 1 {
			return guardedsql.ErrNotFound
		}
		key = keys[0]
		return nil
	})
	return key, err
}

// AddBudgetIn is the input of add_budget.
type AddBudgetIn struct {
	ID         int64 `json:"id" jsonschema:"the campaign id (ids restart at 1 in every company)"`
	AddedCents int64 `json:"added_cents" jsonschema:"cents to add to the budget (negative to take away)"`
}

// AddBudget adds to a campaign's budget atomically: SET budget_cents =
// budget_cents + ?, computed by the engine, so concurrent calls lose no
// increment (a read-modify-write in Go would). ExpectOne makes a campaign
// id several of the caller's companies have "ambiguous" (the tool is
// Narrowable). The new budget is read back in the same transaction, so it
// is the one this call produced.
func AddBudget(ctx context.Context, db *guardedsql.DB, in AddBudgetIn) (Campaign, error) {
	c := campaignsT
	up, err := builder.UpdateTable(c).SetExpr("budget_cents", c.Col("budget_cents").Add(in.AddedCents)).
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

// UpsertContactIn is the input of upsert_contact.
type UpsertContactIn struct {
	Email    string `json:"email" jsonschema:"the contact's e-mail, unique within the company"`
	FullName string `json:"full_name"`
}

// UpsertContact creates a contact, or renames the company's contact with
// that e-mail: INSERT ... SELECT from the caller's company row, ON CONFLICT
// (company_id, email) DO UPDATE SET full_name, returning the contact.
//
// The conflict target includes company_id, and the inserted company_id
// comes from the caller's own company row: a conflict can only be with a
// contact of the caller's company. Another company's contact with the
// same e-mail is a different key, so a foreign conflict cannot happen
// here (the guard would refuse to touch one anyway). A caller with several
// companies names one with "within" (the tool is Narrowable).
func UpsertContact(ctx context.Context, db *guardedsql.DB, in UpsertContactIn) (Contact, error) {
	if len(in.Email) < 3 || in.FullName == "" {
		return Contact{}, server.InvalidInput("email and full_name must not be empty")
	}
	co, ct := companiesT.As("co"), contactsT.As("ct")
	one, err := builder.Select(co.Col("id")).From(co).Build()
	if err != nil {
		return Contact{}, err
	}
	maxID, err := builder.Select(builder.Max(ct.Col("id"))).From(ct).Where(ct.Col("company_id").EqCol(co.Col("id"))).Build()
	if err != nil {
		return Contact{}, err
	}
	src, err := builder.Select(co.Col("id"), builder.Coalesce(builder.ScalarQuery(maxID), 0).Add(1),
		builder.Val(in.FullName), builder.Val(in.Email)).From(co).Build()
	if err != nil {
		return Contact{}, err
	}
	ins, err := builder.InsertInto(contactsT).Columns("company_id", "id", "full_name", "email").Select(src).
		OnConflict("company_id", "email").DoUpdate("full_name").
		Returning("id", "full_name", "email").Build()
	if err != nil {
		return Contact{}, err
	}
	var out Contact
	err = db.Tx(ctx, func(tx *guardedsql.Tx) error {
		var company int64
		if err := tx.QueryRow(ctx, one).Scan(&company); err != nil {
			return err // ErrAmbiguous for a caller with several companies
		}
		rows, err := tx.ExecReturning(ctx, ins)
		if err != nil {
			return err
		}
		got, err := guardedsql.CollectRows(rows, func(rs *guardedsql.Rows) (Contact, error) {
			var x Contact
			return x, rs.Scan(&x.ID, &x.FullName, &x.Email)
		})
		if err != nil {
			return err
		}
		if len(got) != 1 {
			return guardedsql.ErrNotFound
		}
		out = got[0]
		return nil
	})
	return out, err
}
