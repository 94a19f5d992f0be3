package adanalytics

import (
	"context"
	"database/sql"
	"errors"

	"github.com/tenantmcp/tenantmcp/builder"
	"github.com/tenantmcp/tenantmcp/guardedsql"
	"github.com/tenantmcp/tenantmcp/server"
)

// The tutorial's own analytics: clicks grouped by a key of their JSON
// user_data, ads ranked within their campaign by a window function, and
// clicks paged with a keyset cursor. None names a company: the guard
// confines every table reference of every statement to the caller's.

// DeviceStat is the clicks of one device class.
type DeviceStat struct {
	// Device is "mobile", "desktop", or "unknown" when user_data has no
	// is_mobile key.
	Device    string `json:"device"`
	Clicks    int64  `json:"clicks"`
	CostCents int64  `json:"cost_cents"`
}

// DevicesOut is the output of clicks_by_device.
type DevicesOut struct {
	Devices []DeviceStat `json:"devices"`
}

// ClicksByDevice counts the caller's clicks and sums their cost by
// user_data's is_mobile key: the tutorial's GROUP BY user_data->>'is_mobile',
// spelt by builder.JSONText for each engine ('true'/'false' everywhere).
func ClicksByDevice(ctx context.Context, db *guardedsql.DB, _ struct{}) (DevicesOut, error) {
	k := clicksT
	mobile := builder.JSONText(k.Col("user_data"), "is_mobile")
	q, err := builder.Select(mobile.As("is_mobile"), builder.CountAll().As("clicks"),
		builder.Cast(builder.Sum(k.Col("cost_cents")), builder.AsInteger).As("cost_cents")).
		From(k).GroupBy(mobile).OrderBy(mobile.Asc()).Build()
	if err != nil {
		return DevicesOut{}, err
	}
	rows, err := db.Query(ctx, q)
	if err != nil {
		return DevicesOut{}, err
	}
	out, err := guardedsql.CollectRows(rows, func(rs *guardedsql.Rows) (DeviceStat, error) {
		var (
			m sql.NullString
			x DeviceStat
		)
		err := rs.Scan(&m, &x.Clicks, &x.CostCents)
		x.Device = map[string]string{"true": "mobile", "false": "desktop"}[m.String]
		if x.Device == "" {
			x.Device = "unknown"
		}
		return x, err
	})
	return DevicesOut{Devices: nonNil(out)}, err
}

// AdRank is one ad's place in its campaign.
type AdRank struct {
	CampaignID int64  `json:"campaign_id"`
	AdID       int64  `json:"ad_id"`
	AdName     string `json:"ad_name"`
	Clicks     int64  `json:"clicks"`
	CostCents  int64  `json:"cost_cents"`
	Rank       int64  `json:"rank"`
}

// RankingOut is the output of campaign_ranking.
type RankingOut struct {
	Ads []AdRank `json:"ads"`
}

// CampaignRanking is the tutorial's report: every ad with its clicks and
// their cost, ranked within its campaign by clicks, then cost, descending
// (RANK() OVER (PARTITION BY campaign ORDER BY count DESC, cost DESC)).
// The partition includes company_id: for a caller with several companies,
// campaign 1 of one company is not campaign 1 of another. Ads without
// clicks are ranked too (LEFT JOIN; their count is 0).
func CampaignRanking(ctx context.Context, db *guardedsql.DB, _ struct{}) (RankingOut, error) {
	a, k := adsT.As("a"), clicksT.As("k")
	clicks := builder.Count(k.Col("id"))
	cost := builder.Cast(builder.Coalesce(builder.Sum(k.Col("cost_cents")), 0), builder.AsInteger)
	rank := builder.Rank().Over(builder.Window().
		PartitionBy(a.Col("company_id"), a.Col("campaign_id")).
		OrderBy(clicks.Desc(), cost.Desc()))
	q, err := builder.Select(a.Col("campaign_id"), a.Col("id"), a.Col("name"),
		clicks.As("clicks"), cost.As("cost_cents"), rank.As("rank")).
		From(a).
		LeftJoin(k, builder.And(k.Col("company_id").EqCol(a.Col("company_id")), k.Col("ad_id").EqCol(a.Col("id")))).
		GroupBy(a.Col("company_id"), a.Col("campaign_id"), a.Col("id"), a.Col("name")).
		OrderBy(a.Col("company_id").Asc(), a.Col("campaign_id").Asc(), rank.Asc(), a.Col("id").Asc()).
		Limit(500).Build()
	if err != nil {
		return RankingOut{}, err
	}
	rows, err := db.Query(ctx, q)
	if err != nil {
		return RankingOut{}, err
	}
	out, err := guardedsql.CollectRows(rows, func(rs *guardedsql.Rows) (AdRank, error) {
		var x AdRank
		return x, rs.Scan(&x.CampaignID, &x.AdID, &x.AdName, &x.Clicks, &x.CostCents, &x.Rank)
	})
	return RankingOut{Ads: nonNil(out)}, err
}

// ListClicksIn is the input of list_clicks.
type ListClicksIn struct {
	Cursor string `json:"cursor,omitempty" jsonschema:"the next_cursor of the previous page; empty for the first page"`
	Limit  int    `json:"limit,omitempty" jsonschema:"rows per page, 1-100 (default 20)"`
}

// ClickPage is one page of list_clicks.
type ClickPage struct {
	Clicks []Click `json:"clicks"`
	// NextCursor resumes after the last click of this page; empty on the
	// last page.
	NextCursor string `json:"next_cursor,omitempty"`
}

// clickPages orders clicks by their composite key. A cursor carries a
// position only: the page query is guarded like any other, so a cursor
// taken from another company's listing (or forged) moves the position
// within the caller's own clicks and shows nothing else.
// Its keys are columns of pagedClicks, the reference the page query reads
// clicks through (a column belongs to one reference of a table).
var (
	pagedClicks = clicksT.As("k")
	clickPages  = builder.Keyset{Keys: []builder.Order{pagedClicks.Col("company_id").Asc(), pagedClicks.Col("id").Asc()}}
)

// ListClicks pages through the caller's clicks (with their ads' names) in
// the order of their key, with an opaque keyset cursor: unlike an offset,
// it neither skips nor repeats clicks recorded between calls.
func ListClicks(ctx context.Context, db *guardedsql.DB, in ListClicksIn) (ClickPage, error) {
	n := in.Limit
	switch {
	case n == 0:
		n = 20
	case n < 1 || n > 100:
		return ClickPage{}, server.InvalidInput("limit must be between 1 and 100")
	}
	a, k := adsT.As("a"), pagedClicks
	base := builder.Select(k.Col("company_id"), k.Col("id"), a.Col("id"), a.Col("name"), k.Col("user_email"), k.Col("cost_cents")).
		From(k).
		Join(a, builder.And(a.Col("company_id").EqCol(k.Col("company_id")), a.Col("id").EqCol(k.Col("ad_id"))))
	q, err := clickPages.Page(base, builder.Cursor(in.Cursor), n).Build()
	if errors.Is(err, builder.ErrCursor) {
		// Not echoed: the cursor is whatever the client sent.
		return ClickPage{}, server.InvalidInput("cursor is not one list_clicks issued")
	}
	if err != nil {
		return ClickPage{}, err
	}
	rows, err := db.Query(ctx, q)
	if err != nil {
		return ClickPage{}, err
	}
	var lastCompany int64
	out, err := guardedsql.CollectRows(rows, func(rs *guardedsql.Rows) (Click, error) {
		var x Click
		return x, rs.Scan(&lastCompany, &x.ID, &x.AdID, &x.AdName, &x.UserEmail, &x.CostCents)
	})
	if err != nil {
		return ClickPage{}, err
	}
	page := ClickPage{Clicks: nonNil(out)}
	if len(out) == n {
		c, err := clickPages.Cursor(lastCompany, out[len(out)-1].ID)
		if err != nil {
			return ClickPage{}, err
		}
		page.NextCursor = string(c)
	}
	return page, nil
}
