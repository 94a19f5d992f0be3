package adanalytics_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"example.com/adanalytics/adanalytics"
	"github.com/tenantmcp/tenantmcp/claims"
	"github.com/tenantmcp/tenantmcp/claims/claimstest"
	"github.com/tenantmcp/tenantmcp/guardedsql"
	"github.com/tenantmcp/tenantmcp/server"
)

// serveCompanies serves the tools over HTTP on a fresh SQLite database
// holding Generate(n)'s companies, and returns the endpoint, the issuer and
// the owner's (unguarded) handle on the database.
func serveCompanies(t *testing.T, n int) (string, *claimstest.Issuer, *sql.DB) {
	t.Helper()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "ads.db")
	owner, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { owner.Close() })
	if err := adanalytics.CreateTables(ctx, owner, "sqlite"); err != nil {
		t.Fatal(err)
	}
	if err := adanalytics.Insert(ctx, owner, "sqlite", adanalytics.Generate(n, "g")); err != nil {
		t.Fatal(err)
	}
	db, err := guardedsql.Open(ctx, "sqlite:"+path, adanalytics.Schema, guardedsql.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	endpoint := "http://" + ln.Addr().String() + "/mcp"
	is := claimstest.Start(t, endpoint)
	srv, err := server.New(server.Options{
		Name: "adanalytics", Version: "test", DB: db, Levels: []string{adanalytics.LevelCompany},
		Verifier: is.Verifier(t, claims.Mapping{Patterns: []string{"/companies/{company}"}, Levels: []string{adanalytics.LevelCompany}}),
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := adanalytics.Register(srv); err != nil {
		t.Fatal(err)
	}
	sctx, stop := context.WithCancel(ctx)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(sctx, ln, server.HTTPOptions{ResourceURL: endpoint}) }()
	t.Cleanup(func() {
		stop()
		if err := <-served; err != nil && !errors.Is(err, http.ErrServerClosed) && !errors.Is(err, context.Canceled) {
			t.Errorf("serve: %v", err)
		}
	})
	return endpoint, is, owner
}

// campaignRows reads every campaign as the owner: "company/id" -> "name budget".
func campaignRows(t *testing.T, owner *sql.DB) map[string]string {
	t.Helper()
	rows, err := owner.Query(`SELECT company_id, id, name, budget_cents FROM campaigns`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]string{}
	for rows.Next() {
		var c, id, b int64
		var name string
		if err := rows.Scan(&c, &id, &name, &b); err != nil {
			t.Fatal(err)
		}
		out[fmt.Sprintf("%d/%d", c, id)] = fmt.Sprintf("%s %d", name, b)
	}
	return out
}

// toolText calls a tool and returns its text and whether it is an error.
func toolText(t *testing.T, cs *mcp.ClientSession, tool string, args map[string]any) (string, bool) {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", tool, err)
	}
	return res.Content[0].(*mcp.TextContent).Text, res.IsError
}

// TestCallerWithTwoCompanies is issue 15's scenario: a user of companies 1
// and 4 (of 1-4, each with campaigns 1 and 2: Generate's budget is
// 1000 * (company + campaign), so campaign 2 costs 3000 in company 1 and
// 6000 in company 4).
//
//   - get_campaign {"id":2} and update_campaign {"id":2,…} answer
//     "ambiguous" (before: company 1's row, and "internal error"), and the
//     update changed nothing;
//   - narrowed with "within", each reads and changes its own company's
//     campaign 2 and nothing else;
//   - "within" naming company 2 (which exists, and has a campaign 2) or
//     company 9 (which does not) gets one and the same refusal, and
//     changes nothing;
//   - a caller of company 2 alone still gets its own campaign 2 without a
//     selector.
func TestCallerWithTwoCompanies(t *testing.T) {
	endpoint, is, owner := serveCompanies(t, 4)
	two := connect(t, endpoint, is.Mint(t, claimstest.Token{Subject: "tess", Groups: []string{"/companies/1", "/companies/4"}}))
	seed := campaignRows(t, owner)
	if seed["1/2"] != "Black Friday 3000" || seed["4/2"] != "Black Friday 6000" || seed["2/2"] != "Black Friday 4000" {
		t.Fatalf("unexpected seed: %v", seed)
	}

	var list adanalytics.CampaignsOut
	callTool(t, two, "list_campaigns", map[string]any{}, &list)
	if len(list.Campaigns) != 4 {
		t.Fatalf("list_campaigns as companies 1+4: %+v, want their 4 campaigns", list.Campaigns)
	}

	for _, c := range []struct {
		tool string
		args map[string]any
	}{
		{"get_campaign", map[string]any{"id": 2}},
		{"update_campaign", map[string]any{"id": 2, "name": "Renamed", "budget_cents": 1}},
	} {
		txt, isErr := toolText(t, two, c.tool, c.args)
		if !isErr || !strings.HasPrefix(txt, "ambiguous: more than one row matched") || !strings.Contains(txt, `"within"`) {
			t.Errorf("%s %v: %q (isError %v), want the ambiguity error telling how to narrow", c.tool, c.args, txt, isErr)
		}
		for _, leak := range []string{"3000", "6000", "Black Friday", "internal"} {
			if strings.Contains(txt, leak) {
				t.Errorf("%s: the ambiguity error says %q: %q", c.tool, leak, txt)
			}
		}
	}
	if got := campaignRows(t, owner); fmt.Sprint(got) != fmt.Sprint(seed) {
		t.Fatalf("an ambiguous update changed campaigns: %v", got)
	}

	for _, c := range []struct {
		within string
		budget int64
	}{{"company:1", 3000}, {"company:4", 6000}} {
		var got adanalytics.Campaign
		callTool(t, two, "get_campaign", map[string]any{"id": 2, "within": c.within}, &got)
		if got.ID != 2 || got.BudgetCents != c.budget {
			t.Errorf("get_campaign 2 within %s: %+v, want budget %d", c.within, got, c.budget)
		}
	}
	var updated adanalytics.Campaign
	callTool(t, two, "update_campaign", map[string]any{"id": 2, "name": "Cyber Monday", "budget_cents": 6500, "within": "company:4"}, &updated)
	if updated != (adanalytics.Campaign{ID: 2, Name: "Cyber Monday", BudgetCents: 6500}) {
		t.Errorf("update_campaign within company:4 returned %+v", updated)
	}
	want := map[string]string{}
	for k, v := range seed {
		want[k] = v
	}
	want["4/2"] = "Cyber Monday 6500"
	if got := campaignRows(t, owner); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("after the narrowed update: %v, want only company 4's campaign 2 changed: %v", got, want)
	}
	seed = want

	var refusals []string
	for _, within := range []string{"company:2", "company:9", "company", "2", "/companies/1"} {
		for _, c := range []struct {
			tool string
			args map[string]any
		}{
			{"get_campaign", map[string]any{"id": 2, "within": within}},
			{"update_campaign", map[string]any{"id": 2, "name": "Taken", "budget_cents": 1, "within": within}},
		} {
			txt, isErr := toolText(t, two, c.tool, c.args)
			if !isErr {
				t.Errorf("%s within %q accepted: %s", c.tool, within, txt)
			}
			refusals = append(refusals, txt)
		}
	}
	for _, r := range refusals {
		if r != refusals[0] {
			t.Errorf("refusals differ: %q vs %q", r, refusals[0])
		}
	}
	if got := campaignRows(t, owner); fmt.Sprint(got) != fmt.Sprint(seed) {
		t.Fatalf("a refused selector changed campaigns: %v", got)
	}

	one := connect(t, endpoint, is.Mint(t, claimstest.Token{Subject: "uma", Groups: []string{"/companies/2"}}))
	var own adanalytics.Campaign
	callTool(t, one, "get_campaign", map[string]any{"id": 2}, &own)
	if own.BudgetCents != 4000 {
		t.Errorf("get_campaign 2 as company 2 alone: %+v, want its own (4000)", own)
	}
}
