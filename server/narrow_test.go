package server_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	_ "modernc.org/sqlite"

	"github.com/tenantmcp/tenantmcp/builder"
	"github.com/tenantmcp/tenantmcp/claims/devtoken"
	"github.com/tenantmcp/tenantmcp/guardedsql"
	"github.com/tenantmcp/tenantmcp/scope"
	"github.com/tenantmcp/tenantmcp/server"
)

// campSchema: campaigns keyed by (org_id, id), ids restarting at 1 in
// every org, as in issue 15's composite-key schema.
var campSchema = builder.MustSchema(builder.SchemaDef{
	Levels: []builder.Level{{Name: "org", Key: builder.TextKey}},
	Tables: []builder.TableDef{
		{Name: "orgs", Columns: []string{"id"}, PrimaryKey: []string{"id"}, Levels: map[string]string{"id": "org"}},
		{Name: "campaigns", Columns: []string{"org_id", "id", "budget"}, PrimaryKey: []string{"org_id", "id"},
			ForeignKeys: []builder.ForeignKey{{Columns: []string{"org_id"}, RefTable: "orgs"}}, Parent: "org_id"},
	},
})

type campaign struct {
	ID     int64 `json:"id"`
	Budget int64 `json:"budget"`
}

type campaignIn struct {
	ID int64 `json:"id"`
}

type budgetIn struct {
	ID     int64 `json:"id"`
	Budget int64 `json:"budget"`
}

// campOrgs are the seeded orgs; every org has campaigns 1-3 with budget
// org number * 100 + id (north 1xx, south 2xx, east 3xx).
var campOrgs = []string{"north", "south", "east"}

func campFixture(t *testing.T) (*fixture, *sql.DB, *atomic.Int64) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "camp.db")
	raw, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { raw.Close() })
	for _, q := range []string{
		`CREATE TABLE orgs (id TEXT NOT NULL PRIMARY KEY)`,
		`CREATE TABLE campaigns (org_id TEXT NOT NULL REFERENCES orgs (id), id INTEGER NOT NULL, budget INTEGER NOT NULL, PRIMARY KEY (org_id, id))`,
	} {
		if _, err := raw.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	for i, o := range campOrgs {
		if _, err := raw.Exec(`INSERT INTO orgs VALUES (?)`, o); err != nil {
			t.Fatal(err)
		}
		for id := 1; id <= 3; id++ {
			if _, err := raw.Exec(`INSERT INTO campaigns VALUES (?, ?, ?)`, o, id, (i+1)*100+id); err != nil {
				t.Fatal(err)
			}
		}
	}
	db, err := guardedsql.Open(context.Background(), "sqlite:"+path, campSchema, guardedsql.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	f := newFixture(t, func(o *server.Options) { o.DB = db })
	calls := &atomic.Int64{}
	camp := campSchema.Table("campaigns")
	get := func(ctx context.Context, db *guardedsql.DB, in campaignIn) (campaign, error) {
		calls.Add(1)
		out := campaign{ID: in.ID}
		q := builder.Must(builder.Select(camp.Col("budget")).From(camp).Where(camp.Col("id").Eq(in.ID)).Build())
		return out, db.QueryRow(ctx, q).Scan(&out.Budget)
	}
	update := func(ctx context.Context, db *guardedsql.DB, in budgetIn) (campaign, error) {
		calls.Add(1)
		u := builder.Must(builder.UpdateTable(camp).Set("budget", in.Budget).Where(camp.Col("id").Eq(in.ID)).ExpectOne().Build())
		_, err := db.Exec(ctx, u)
		return campaign(in), err
	}
	for _, err := range []error{
		server.AddTool(f.srv, server.Tool{Name: "get_campaign", Narrowable: true}, get),
		server.AddTool(f.srv, server.Tool{Name: "update_campaign", Narrowable: true}, update),
		server.AddTool(f.srv, server.Tool{Name: "get_campaign_plain"}, get),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	return f, raw, calls
}

// budgets reads every campaign's budget, unguarded: "org/id" -> budget.
func budgets(t *testing.T, raw *sql.DB) map[string]int64 {
	t.Helper()
	rows, err := raw.Query(`SELECT org_id, id, budget FROM campaigns`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]int64{}
	for rows.Next() {
		var o string
		var id, b int64
		if err := rows.Scan(&o, &id, &b); err != nil {
			t.Fatal(err)
		}
		out[fmt.Sprintf("%s/%d", o, id)] = b
	}
	return out
}

func sameBudgets(a, b map[string]int64) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// TestNarrowableTool is issue 15's scenario on the server: a caller with
// grants on north and east, whose campaign ids both include 2.
//
//   - Unnarrowed, get_campaign and update_campaign {"id":2} are the
//     client-visible ambiguity error (not "internal error", not north's
//     row), and nothing changed.
//   - Narrowed ("within") to either grant, they read and change exactly
//     that grant's row.
//   - A selector naming a foreign org (south), an org that does not
//     exist (west), or anything malformed is refused with one and the same
//     answer before the handler runs, and changes nothing.
//   - tools/list shows "within" on Narrowable tools only; the audit record
//     names the grant a call was narrowed to.
func TestNarrowableTool(t *testing.T) {
	f, raw, calls := campFixture(t)
	tok, _ := f.issuer.Mint(devtoken.Token{Subject: "ann", Groups: []string{"org:north", "org:east"}})
	cs, err := connectStdio(t, f, staticToken(tok))
	if err != nil {
		t.Fatal(err)
	}
	call := func(tool string, args map[string]any) (string, bool) {
		t.Helper()
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: tool, Arguments: args})
		if err != nil {
			t.Fatalf("%s %v: %v", tool, args, err)
		}
		return res.Content[0].(*mcp.TextContent).Text, res.IsError
	}
	seed := budgets(t, raw)

	// tools/list.
	lt, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tl := range lt.Tools {
		js, _ := json.Marshal(tl.InputSchema)
		var sch struct {
			Properties map[string]struct {
				Type string `json:"type"`
			} `json:"properties"`
		}
		if err := json.Unmarshal(js, &sch); err != nil {
			t.Fatal(err)
		}
		p, has := sch.Properties[server.NarrowProperty]
		if want := tl.Name != "get_campaign_plain"; has != want || has && p.Type != "string" {
			t.Errorf("tools/list: %s has %q: %v (%s), want %v", tl.Name, server.NarrowProperty, has, js, want)
		}
	}

	// Unnarrowed: ambiguous, visibly, and nothing changed.
	for _, c := range []struct {
		tool string
		args map[string]any
		hint bool
	}{
		{"get_campaign", map[string]any{"id": 2}, true},
		{"update_campaign", map[string]any{"id": 2, "budget": 9}, true},
		{"get_campaign_plain", map[string]any{"id": 2}, false},
	} {
		txt, isErr := call(c.tool, c.args)
		if !isErr || !strings.HasPrefix(txt, "ambiguous: more than one row matched") || strings.Contains(txt, "within") != c.hint {
			t.Errorf("%s %v unnarrowed: %q (isError %v), want the ambiguity error (hint %v)", c.tool, c.args, txt, isErr, c.hint)
		}
		for _, leak := range []string{"north", "east", "south", "102", "302", "internal"} {
			if strings.Contains(txt, leak) {
				t.Errorf("%s: the ambiguity error says %q: %q", c.tool, leak, txt)
			}
		}
	}
	if !sameBudgets(budgets(t, raw), seed) {
		t.Fatal("an ambiguous update changed rows")
	}
	if !strings.Contains(f.audit.String(), `"outcome":"ambiguous"`) {
		t.Errorf("audit lacks the ambiguous outcome:\n%s", f.audit.String())
	}

	// Narrowed to either grant: that grant's row.
	for _, c := range []struct {
		within string
		want   int64
	}{{"org:north", 102}, {"org:east", 302}} {
		txt, isErr := call("get_campaign", map[string]any{"id": 2, "within": c.within})
		var got campaign
		if isErr || json.Unmarshal([]byte(txt), &got) != nil || got.Budget != c.want {
			t.Errorf("get_campaign within %s: %q, want budget %d", c.within, txt, c.want)
		}
	}
	f.audit.Reset()
	if txt, isErr := call("update_campaign", map[string]any{"id": 2, "budget": 9, "within": "org:east"}); isErr {
		t.Fatalf("update_campaign within org:east: %s", txt)
	}
	want := budgets(t, raw)
	if want["east/2"] != 9 {
		t.Fatalf("east's campaign 2 not updated: %v", want)
	}
	want["east/2"] = seed["east/2"]
	if !sameBudgets(want, seed) {
		t.Fatalf("the narrowed update changed other rows: %v", budgets(t, raw))
	}
	if a := f.audit.String(); !strings.Contains(a, `"within":"org:east"`) || !strings.Contains(a, `"outcome":"ok"`) {
		t.Errorf("audit record does not name the narrowing:\n%s", a)
	}
	seed = budgets(t, raw)

	// Refused selectors: one answer, whatever they name; the handler never
	// runs and nothing changes.
	before := calls.Load()
	var answers []string
	for _, sel := range []string{"org:south", "org:west", "north", "org/north", "", "org:north/org:east", "ORG:north", " org:north", `{"level":"org","id":"north"}`, "tenant:north"} {
		for _, tool := range []string{"get_campaign", "update_campaign"} {
			txt, isErr := call(tool, map[string]any{"id": 2, "budget": 1, "within": sel})
			if tool == "get_campaign" {
				txt, isErr = call(tool, map[string]any{"id": 2, "within": sel})
			}
			if !isErr {
				t.Errorf("%s within %q: accepted: %s", tool, sel, txt)
			}
			answers = append(answers, txt)
		}
	}
	for _, a := range answers {
		if a != answers[0] {
			t.Errorf("refusals differ: %q vs %q", a, answers[0])
		}
	}
	if strings.Contains(answers[0], "south") || strings.Contains(answers[0], "west") || !strings.HasPrefix(answers[0], "not found") {
		t.Errorf("refusal: %q", answers[0])
	}
	if n := calls.Load() - before; n != 0 {
		t.Errorf("the handler ran %d times for refused selectors", n)
	}
	if !sameBudgets(budgets(t, raw), seed) {
		t.Fatal("a refused selector changed rows")
	}
	// A selector that is not a string is the schema's error.
	if txt, isErr := call("get_campaign", map[string]any{"id": 2, "within": 4}); !isErr || !strings.HasPrefix(txt, "invalid arguments") {
		t.Errorf("numeric selector: %q", txt)
	}
	// The plain tool has no selector to take.
	if txt, isErr := call("get_campaign_plain", map[string]any{"id": 2, "within": "org:north"}); !isErr || !strings.HasPrefix(txt, "invalid arguments") {
		t.Errorf("selector on a plain tool: %q", txt)
	}
}

// TestNarrowSingleGrant: a caller with one grant reads its own row with or
// without a selector naming it; the foreign org's row of the same id is
// never reached.
func TestNarrowSingleGrant(t *testing.T) {
	f, _, _ := campFixture(t)
	tok, _ := f.issuer.Mint(devtoken.Token{Subject: "bob", Groups: []string{"org:south"}})
	cs, err := connectStdio(t, f, staticToken(tok))
	if err != nil {
		t.Fatal(err)
	}
	for _, args := range []map[string]any{{"id": 2}, {"id": 2, "within": "org:south"}} {
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "get_campaign", Arguments: args})
		if err != nil {
			t.Fatal(err)
		}
		if txt := res.Content[0].(*mcp.TextContent).Text; res.IsError || !strings.Contains(txt, `"budget":202`) {
			t.Errorf("%v: %q", args, txt)
		}
	}
}

// TestNarrowableRegistration: the selector does not open a way around the
// tenant-free rule (a Narrowable tool naming a scope key is still
// refused), a tool may not bring its own "within", and the handler never
// sees the selector nor a wider scope.
func TestNarrowableRegistration(t *testing.T) {
	f, _, _ := campFixture(t)
	type Keyed struct {
		OrgID string `json:"org_id"`
	}
	type Own struct {
		Within string `json:"within"`
	}
	if err := server.AddTool(f.srv, server.Tool{Name: "keyed", Narrowable: true}, func(context.Context, *guardedsql.DB, Keyed) (empty, error) { return empty{}, nil }); !errors.Is(err, server.ErrTenantInInput) {
		t.Errorf("narrowable tool with org_id: %v", err)
	}
	if err := server.AddTool(f.srv, server.Tool{Name: "own", Narrowable: true}, func(context.Context, *guardedsql.DB, Own) (empty, error) { return empty{}, nil }); !errors.Is(err, server.ErrConfig) {
		t.Errorf("narrowable tool with its own within: %v", err)
	}
	type OwnUpper struct {
		Within string `json:"WITHIN"`
	}
	if err := server.AddTool(f.srv, server.Tool{Name: "own_upper", Narrowable: true}, func(context.Context, *guardedsql.DB, OwnUpper) (empty, error) { return empty{}, nil }); !errors.Is(err, server.ErrConfig) {
		t.Errorf("narrowable tool with its own WITHIN: %v", err)
	}
	// Without Narrowable, "within" is an ordinary input name.
	if err := server.AddTool(f.srv, server.Tool{Name: "own_plain"}, func(context.Context, *guardedsql.DB, Own) (empty, error) { return empty{}, nil }); err != nil {
		t.Errorf("plain tool with an input named within: %v", err)
	}
	type seen struct {
		Keys   []string `json:"keys"`
		Grants []string `json:"grants"`
	}
	err := server.AddTool(f.srv, server.Tool{Name: "echo", Narrowable: true}, func(ctx context.Context, _ *guardedsql.DB, in map[string]any) (seen, error) {
		sc, _ := scope.FromContext(ctx)
		out := seen{Keys: []string{}, Grants: sc.GrantsAt("org")}
		for k := range in {
			out.Keys = append(out.Keys, k)
		}
		return out, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	tok, _ := f.issuer.Mint(devtoken.Token{Subject: "ann", Groups: []string{"org:north", "org:east"}})
	cs, err := connectStdio(t, f, staticToken(tok))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args map[string]any
		want string
	}{
		{map[string]any{"q": 1, "within": "org:east"}, `{"keys":["q"],"grants":["east"]}`},
		{map[string]any{"q": 1}, `{"keys":["q"],"grants":["east","north"]}`},
	} {
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "echo", Arguments: c.args})
		if err != nil {
			t.Fatal(err)
		}
		if txt := res.Content[0].(*mcp.TextContent).Text; res.IsError || txt != c.want {
			t.Errorf("%v: %s, want %s", c.args, txt, c.want)
		}
	}
}
