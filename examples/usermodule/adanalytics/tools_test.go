package adanalytics_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"example.com/adanalytics/adanalytics"
	"github.com/tenantmcp/tenantmcp/claims/claimstest"
)

// The tests of the tutorial's analytics and of the writes, on every engine
// of TENANTMCP_DSN (embedded SQLite without it), through the real server
// with claimstest tokens. Generate's four companies all number their
// campaigns, ads, clicks and contacts from 1, so every id a caller uses
// exists in every other company too; each result is compared with an
// oracle computed in Go from the owner's copy of the caller's own rows.

// caller is a token's companies.
type caller []int64

func (c caller) groups() []string {
	var g []string
	for _, id := range c {
		g = append(g, fmt.Sprintf("/companies/%d", id))
	}
	return g
}

func (c caller) has(company int64) bool { return slices.Contains(c, company) }

// callers are single companies and one user of two non-adjacent ones.
var callers = []caller{{1}, {3}, {1, 4}}

func (s served) connect(t *testing.T, c caller) *mcp.ClientSession {
	return connect(t, s.endpoint, s.is.Mint(t, claimstest.Token{Subject: fmt.Sprint("u", c), Groups: c.groups(), Roles: []string{"analyst"}}))
}

// devicesOracle is clicks_by_device over the caller's own clicks.
func devicesOracle(t *testing.T, clicks []map[string]any, c caller) []adanalytics.DeviceStat {
	acc := map[string]*adanalytics.DeviceStat{}
	for _, r := range clicks {
		if !c.has(asInt(t, r["company_id"])) {
			continue
		}
		var doc struct {
			IsMobile *bool `json:"is_mobile"`
		}
		if err := json.Unmarshal([]byte(r["user_data"].(string)), &doc); err != nil {
			t.Fatal(err)
		}
		d := "unknown"
		if doc.IsMobile != nil {
			d = map[bool]string{true: "mobile", false: "desktop"}[*doc.IsMobile]
		}
		if acc[d] == nil {
			acc[d] = &adanalytics.DeviceStat{Device: d}
		}
		acc[d].Clicks++
		acc[d].CostCents += asInt(t, r["cost_cents"])
	}
	out := []adanalytics.DeviceStat{}
	for _, v := range acc {
		out = append(out, *v)
	}
	return out
}

func sortedDevices(ds []adanalytics.DeviceStat) []adanalytics.DeviceStat {
	ds = slices.Clone(ds)
	sort.Slice(ds, func(i, j int) bool { return ds[i].Device < ds[j].Device })
	return ds
}

// rankingOracle is campaign_ranking over the caller's own ads and clicks:
// RANK is 1 + the number of ads of the same company and campaign with
// more clicks, or as many clicks and a higher cost.
func rankingOracle(t *testing.T, ads, clicks []map[string]any, c caller) []adanalytics.AdRank {
	type key struct{ company, id int64 }
	stats := map[key]*adanalytics.AdRank{}
	company := map[key]int64{}
	for _, a := range ads {
		k := key{asInt(t, a["company_id"]), asInt(t, a["id"])}
		if !c.has(k.company) {
			continue
		}
		stats[k] = &adanalytics.AdRank{CampaignID: asInt(t, a["campaign_id"]), AdID: k.id, AdName: a["name"].(string)}
		company[k] = k.company
	}
	for _, r := range clicks {
		k := key{asInt(t, r["company_id"]), asInt(t, r["ad_id"])}
		if s := stats[k]; s != nil {
			s.Clicks++
			s.CostCents += asInt(t, r["cost_cents"])
		}
	}
	var keys []key
	for k, s := range stats {
		keys = append(keys, k)
		s.Rank = 1
		for k2, o := range stats {
			if k2.company == k.company && o.CampaignID == s.CampaignID &&
				(o.Clicks > s.Clicks || o.Clicks == s.Clicks && o.CostCents > s.CostCents) {
				s.Rank++
			}
		}
	}
	sort.Slice(keys, func(i, j int) bool {
		a, b := stats[keys[i]], stats[keys[j]]
		if keys[i].company != keys[j].company {
			return keys[i].company < keys[j].company
		}
		if a.CampaignID != b.CampaignID {
			return a.CampaignID < b.CampaignID
		}
		if a.Rank != b.Rank {
			return a.Rank < b.Rank
		}
		return a.AdID < b.AdID
	})
	out := []adanalytics.AdRank{}
	for _, k := range keys {
		out = append(out, *stats[k])
	}
	return out
}

// TestAnalyticsOracle: clicks_by_device (GROUP BY a JSON key) and
// campaign_ranking (RANK() OVER a partition) equal the oracle over the
// caller's own rows for single companies and a caller of two: another
// company's clicks change neither a count, a sum nor a rank. The control
// checks that the companies' results differ, so equal results cannot come
// from reading everyone's rows.
func TestAnalyticsOracle(t *testing.T) {
	forEngine(t, func(t *testing.T, dsn string) {
		s := serveEngine(t, dsn, 4)
		ads, clicks := table(t, s.owner, "ads"), table(t, s.owner, "clicks")
		results := map[string]bool{}
		for _, c := range callers {
			cs := s.connect(t, c)
			var dev adanalytics.DevicesOut
			callTool(t, cs, "clicks_by_device", map[string]any{}, &dev)
			want := devicesOracle(t, clicks, c)
			if fmt.Sprint(sortedDevices(dev.Devices)) != fmt.Sprint(sortedDevices(want)) {
				t.Errorf("clicks_by_device as %v: %+v, want %+v", c, dev.Devices, want)
			}
			results[fmt.Sprint(sortedDevices(dev.Devices))] = true

			var rk adanalytics.RankingOut
			callTool(t, cs, "campaign_ranking", map[string]any{}, &rk)
			if wantR := rankingOracle(t, ads, clicks, c); fmt.Sprint(rk.Ads) != fmt.Sprint(wantR) {
				t.Errorf("campaign_ranking as %v:\n got %+v\nwant %+v", c, rk.Ads, wantR)
			}
			for _, a := range rk.Ads {
				if a.Rank < 1 || a.Rank > 2 {
					t.Errorf("campaign_ranking as %v: rank %d among a campaign's 2 ads: %+v", c, a.Rank, a)
				}
			}
			results[fmt.Sprint(rk.Ads)] = true
		}
		if len(results) != 2*len(callers) {
			t.Errorf("the callers' results are not all different (%d distinct of %d): the seed no longer tells companies apart", len(results), 2*len(callers))
		}
	})
}

// TestListClicksKeyset pages through list_clicks three rows at a time: the
// pages joined are exactly the caller's clicks in key order, with no
// repeat and no gap. A cursor taken from another company's listing moves
// the position only: company 1 given company 2's cursor sees nothing
// (every own key sorts before it), company 3 sees all of its own clicks,
// neither sees a click of company 2. A damaged cursor is refused without
// being echoed.
func TestListClicksKeyset(t *testing.T) {
	forEngine(t, func(t *testing.T, dsn string) {
		s := serveEngine(t, dsn, 4)
		clicks := table(t, s.owner, "clicks")
		own := func(c caller) []string {
			var out []string
			sort.Slice(clicks, func(i, j int) bool {
				a, b := clicks[i], clicks[j]
				if ca, cb := asInt(t, a["company_id"]), asInt(t, b["company_id"]); ca != cb {
					return ca < cb
				}
				return asInt(t, a["id"]) < asInt(t, b["id"])
			})
			for _, r := range clicks {
				if c.has(asInt(t, r["company_id"])) {
					out = append(out, fmt.Sprintf("%d:%d", asInt(t, r["id"]), asInt(t, r["cost_cents"])))
				}
			}
			return out
		}
		render := func(cl []adanalytics.Click) []string {
			var out []string
			for _, k := range cl {
				out = append(out, fmt.Sprintf("%d:%d", k.ID, k.CostCents))
			}
			return out
		}
		all := func(cs *mcp.ClientSession, cursor string) ([]string, int) {
			var got []string
			pages := 0
			for {
				var p adanalytics.ClickPage
				callTool(t, cs, "list_clicks", map[string]any{"cursor": cursor, "limit": 3}, &p)
				pages++
				got = append(got, render(p.Clicks)...)
				if p.NextCursor == "" || pages > 50 {
					return got, pages
				}
				cursor = p.NextCursor
			}
		}
		for _, c := range callers {
			got, pages := all(s.connect(t, c), "")
			if want := own(c); fmt.Sprint(got) != fmt.Sprint(want) || pages < 3 {
				t.Errorf("list_clicks as %v in %d pages: %v, want %v", c, pages, got, want)
			}
		}

		var first adanalytics.ClickPage
		callTool(t, s.connect(t, caller{2}), "list_clicks", map[string]any{"limit": 3}, &first)
		if first.NextCursor == "" {
			t.Fatal("company 2's first page has no cursor")
		}
		for _, c := range []struct {
			who  caller
			want []string
		}{{caller{1}, nil}, {caller{3}, own(caller{3})}} {
			got, _ := all(s.connect(t, c.who), first.NextCursor)
			if fmt.Sprint(got) != fmt.Sprint(c.want) {
				t.Errorf("list_clicks as %v after company 2's cursor: %v, want %v", c.who, got, c.want)
			}
			for _, r := range got {
				var id, cost int64
				fmt.Sscanf(r, "%d:%d", &id, &cost)
				if cost/100 != c.who[0] { // Generate: cost_cents = 100*company + click id
					t.Errorf("list_clicks as %v showed a click of company %d", c.who, cost/100)
				}
			}
		}
		const forged = "not-a-cursor!!"
		txt, isErr := toolText(t, s.connect(t, caller{1}), "list_clicks", map[string]any{"cursor": forged})
		if !isErr || strings.Contains(txt, forged) || !strings.Contains(txt, "cursor") {
			t.Errorf("list_clicks with a damaged cursor: %q (isError %v), want a refusal that does not echo it", txt, isErr)
		}
	})
}

// rowsOf renders a table's rows, keyed "company/id", without the columns
// in skip; a map prints sorted, so two renderings compare as text.
func rowsOf(t *testing.T, s served, name string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, r := range table(t, s.owner, name) {
		k := fmt.Sprintf("%d/%d", asInt(t, r["company_id"]), asInt(t, r["id"]))
		delete(r, "user_data") // engines differ in how they print JSON; not written here
		for c, v := range r {
			if i, ok := v.(int64); ok {
				r[c] = i
			} else if c != "name" && c != "full_name" && c != "email" && c != "target_url" && c != "user_email" {
				r[c] = asInt(t, v)
			}
		}
		out[k] = fmt.Sprint(r)
	}
	return out
}

// TestCreateAd: create_ad returns the new ad's composite key from
// RETURNING — (2, 5) for company 2, whose ads are 1-4 like every
// company's — and the owner finds exactly that row, in that company's
// campaign, and no other change. A caller of companies 1 and 4 is told
// the campaign id is ambiguous and creates nothing until it narrows the
// call; a campaign id no own company has is "not found".
func TestCreateAd(t *testing.T) {
	forEngine(t, func(t *testing.T, dsn string) {
		s := serveEngine(t, dsn, 4)
		before := rowsOf(t, s, "ads")
		var key adanalytics.AdKey
		callTool(t, s.connect(t, caller{2}), "create_ad", map[string]any{"campaign_id": 1, "name": "New ad", "target_url": "https://example.com/new"}, &key)
		if key != (adanalytics.AdKey{CompanyID: 2, ID: 5}) {
			t.Errorf("create_ad as company 2 returned %+v, want {2 5}", key)
		}
		want := maps(before)
		want["2/5"] = fmt.Sprint(map[string]any{"campaign_id": int64(1), "company_id": int64(2), "id": int64(5), "name": "New ad", "target_url": "https://example.com/new"})
		after := rowsOf(t, s, "ads")
		if fmt.Sprint(after) != fmt.Sprint(want) {
			t.Fatalf("ads after create_ad:\n got %v\nwant %v", after, want)
		}

		two := s.connect(t, caller{1, 4})
		txt, isErr := toolText(t, two, "create_ad", map[string]any{"campaign_id": 2, "name": "Twice", "target_url": "https://example.com/x"})
		if !isErr || !strings.HasPrefix(txt, "ambiguous") {
			t.Errorf("create_ad as companies 1+4 without within: %q (isError %v), want ambiguous", txt, isErr)
		}
		txt, isErr = toolText(t, two, "create_ad", map[string]any{"campaign_id": 9, "name": "Nowhere", "target_url": "https://example.com/x"})
		if !isErr || !strings.HasPrefix(txt, "not found") {
			t.Errorf("create_ad in campaign 9: %q (isError %v), want not found", txt, isErr)
		}
		if got := rowsOf(t, s, "ads"); fmt.Sprint(got) != fmt.Sprint(after) {
			t.Fatalf("a refused create_ad changed ads: %v", got)
		}
		callTool(t, two, "create_ad", map[string]any{"campaign_id": 2, "name": "Narrowed", "target_url": "https://example.com/n", "within": "company:4"}, &key)
		if key != (adanalytics.AdKey{CompanyID: 4, ID: 5}) {
			t.Errorf("create_ad within company:4 returned %+v, want {4 5}", key)
		}
		want = maps(after)
		want["4/5"] = fmt.Sprint(map[string]any{"campaign_id": int64(2), "company_id": int64(4), "id": int64(5), "name": "Narrowed", "target_url": "https://example.com/n"})
		if got := rowsOf(t, s, "ads"); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("ads after the narrowed create_ad:\n got %v\nwant %v", got, want)
		}
	})
}

func maps(m map[string]string) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// TestAddBudgetNoLostIncrement is issue 15's lost-update criterion through
// the tools: two clients of company 3 each call add_budget +1 on campaign 2
// twenty times at once; the budget grows by exactly 40 (SET budget_cents =
// budget_cents + ? is computed by the engine), every call returns a budget
// of its own company (3000 + … as Generate seeds 1000*(3+2)), and campaign 2
// of every other company is untouched.
func TestAddBudgetNoLostIncrement(t *testing.T) {
	forEngine(t, func(t *testing.T, dsn string) {
		s := serveEngine(t, dsn, 4)
		before := rowsOf(t, s, "campaigns")
		const workers, calls = 2, 20
		var wg sync.WaitGroup
		seen := make(chan int64, workers*calls)
		for range workers {
			cs := s.connect(t, caller{3})
			wg.Go(func() {
				for range calls {
					res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "add_budget", Arguments: map[string]any{"id": 2, "added_cents": 1}})
					if err != nil {
						t.Errorf("add_budget: %v", err)
						return
					}
					if res.IsError {
						t.Errorf("add_budget: tool error %q", res.Content[0].(*mcp.TextContent).Text)
						return
					}
					raw, _ := json.Marshal(res.StructuredContent)
					var c adanalytics.Campaign
					if err := json.Unmarshal(raw, &c); err != nil {
						t.Error(err)
						return
					}
					seen <- c.BudgetCents
				}
			})
		}
		wg.Wait()
		close(seen)
		distinct := map[int64]bool{}
		for b := range seen {
			if b <= 5000 || b > 5000+workers*calls || distinct[b] {
				t.Errorf("add_budget returned budget %d (seed 5000; each call's new budget is unique)", b)
			}
			distinct[b] = true
		}
		want := maps(before)
		want["3/2"] = strings.Replace(before["3/2"], "budget_cents:5000", fmt.Sprintf("budget_cents:%d", 5000+workers*calls), 1)
		if want["3/2"] == before["3/2"] {
			t.Fatalf("unexpected seed row 3/2: %s", before["3/2"])
		}
		if got := rowsOf(t, s, "campaigns"); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("campaigns after %d×%d add_budget +1:\n got %v\nwant %v", workers, calls, got, want)
		}
	})
}

// TestUpsertContact: upsert_contact with an e-mail company 2 has not got
// creates contact (2, 4); with alex@example.com, which every company has
// as contact 2, it renames company 2's contact 2 only — the conflict
// target (company_id, email) cannot land on another company's row. A
// caller of two companies must narrow the call, and then writes to the
// named company only.
func TestUpsertContact(t *testing.T) {
	forEngine(t, func(t *testing.T, dsn string) {
		s := serveEngine(t, dsn, 4)
		before := rowsOf(t, s, "contacts")
		one := s.connect(t, caller{2})
		var got adanalytics.Contact
		callTool(t, one, "upsert_contact", map[string]any{"email": "new@example.com", "full_name": "New Person"}, &got)
		if got != (adanalytics.Contact{ID: 4, FullName: "New Person", Email: "new@example.com"}) {
			t.Errorf("upsert_contact (new) as company 2: %+v", got)
		}
		callTool(t, one, "upsert_contact", map[string]any{"email": "alex@example.com", "full_name": "Alexandra Morgan"}, &got)
		if got != (adanalytics.Contact{ID: 2, FullName: "Alexandra Morgan", Email: "alex@example.com"}) {
			t.Errorf("upsert_contact (existing) as company 2: %+v", got)
		}
		want := maps(before)
		want["2/4"] = fmt.Sprint(map[string]any{"company_id": int64(2), "email": "new@example.com", "full_name": "New Person", "id": int64(4)})
		want["2/2"] = strings.Replace(before["2/2"], "Alex Morgan", "Alexandra Morgan", 1)
		after := rowsOf(t, s, "contacts")
		if fmt.Sprint(after) != fmt.Sprint(want) {
			t.Fatalf("contacts after upsert_contact:\n got %v\nwant %v", after, want)
		}

		two := s.connect(t, caller{1, 4})
		txt, isErr := toolText(t, two, "upsert_contact", map[string]any{"email": "alex@example.com", "full_name": "Both"})
		if !isErr || !strings.HasPrefix(txt, "ambiguous") {
			t.Errorf("upsert_contact as companies 1+4 without within: %q (isError %v), want ambiguous", txt, isErr)
		}
		if got := rowsOf(t, s, "contacts"); fmt.Sprint(got) != fmt.Sprint(after) {
			t.Fatalf("an ambiguous upsert_contact changed contacts: %v", got)
		}
		callTool(t, two, "upsert_contact", map[string]any{"email": "alex@example.com", "full_name": "Alex Four", "within": "company:4"}, &got)
		want = maps(after)
		want["4/2"] = strings.Replace(after["4/2"], "Alex Morgan", "Alex Four", 1)
		if got := rowsOf(t, s, "contacts"); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("contacts after the narrowed upsert:\n got %v\nwant %v", got, want)
		}
	})
}
