package adanalytics_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"example.com/adanalytics/adanalytics"
	"github.com/tenantmcp/tenantmcp/claims"
	"github.com/tenantmcp/tenantmcp/claims/claimstest"
	"github.com/tenantmcp/tenantmcp/conformance"
	"github.com/tenantmcp/tenantmcp/guardedsql"
	"github.com/tenantmcp/tenantmcp/redact"
	"github.com/tenantmcp/tenantmcp/server"
)

// dsns are the engines to run on: TENANTMCP_DSN (one DSN or several), or
// the embedded SQLite database when it is unset.
func dsns(t *testing.T) []string {
	env, err := conformance.FromEnv()
	if err != nil {
		t.Fatal(err)
	}
	if len(env.DSNs) == 0 {
		return []string{""}
	}
	return env.DSNs
}

func engineName(t *testing.T, dsn string) string {
	e, err := conformance.EngineOf(dsn)
	if err != nil {
		t.Fatal(err)
	}
	return string(e)
}

// TestConformance runs tenantmcp's isolation properties on this module's
// schema — composite (company_id, id) keys, composite foreign keys and
// per-company unique names and e-mails — with its own seed and its own
// tools, the way an application adds the suite to its tests.
func TestConformance(t *testing.T) {
	tag := strconv.FormatInt(time.Now().UnixNano()%1_000_000_007, 36)
	for _, dsn := range dsns(t) {
		t.Run(engineName(t, dsn), func(t *testing.T) {
			rep := conformance.Run(t, target(dsn, tag))
			requirePassed(t, rep, 9, 10, 19, 20)
		})
	}
}

// target is this module's schema, seed and tools as a conformance target.
func target(dsn, tag string) conformance.Target {
	return conformance.Target{
		Name:   "adanalytics",
		DSN:    dsn,
		Graph:  adanalytics.SchemaDef(),
		Schema: adanalytics.Schema,
		// The write properties assign a plain column: not
		// user_data, whose JSON type refuses arbitrary text.
		Mutable: map[string]string{"clicks": "cost_cents"},
		Seed: func(ctx context.Context, db *sql.DB, engine conformance.Engine) (*conformance.Dataset, error) {
			data := adanalytics.Generate(3, tag)
			if err := adanalytics.CreateTables(ctx, db, adanalytics.Engine(engine)); err != nil {
				return nil, err
			}
			if err := adanalytics.Insert(ctx, db, adanalytics.Engine(engine), data); err != nil {
				return nil, err
			}
			return dataset(data), nil
		},
		Tools: &conformance.Tools{
			Register:  adanalytics.Register,
			Levels:    []string{adanalytics.LevelCompany},
			Redaction: adanalytics.Redaction,
			Callers:   [][]string{{"analyst"}, {"viewer"}},
			Calls:     calls,
			Canaries:  canaries,
		},
	}
}

// TestMutation is the mutation check on this module's own schema: with
// the guard's tenant predicate of a table dropped (and, on PostgreSQL, its
// row-level security disabled), the properties must fail — P1 and P58 at
// least — or the suite above could not see a leak in this schema at all.
// conformance.Mutate does it from any module's tests; campaigns and clicks
// (the top of the composite-key chain and its leaf) keep it quick.
// TENANTMCP_CONFORMANCE_MUTATE=<table> go test -run TestConformance shows
// the same on a whole run, failing. Both need the fault hook, compiled
// only with the build tag: go test -tags tenantmcp_faults ./... (without
// it Mutate skips this test and says so).
func TestMutation(t *testing.T) {
	if os.Getenv(conformance.EnvMutate) != "" {
		t.Skipf("%s is set: every run is mutated already", conformance.EnvMutate)
	}
	tag := strconv.FormatInt(time.Now().UnixNano()%1_000_000_007, 36)
	for _, dsn := range dsns(t) {
		t.Run(engineName(t, dsn), func(t *testing.T) {
			for _, m := range conformance.Mutate(t, target(dsn, tag), conformance.MutateOptions{Tables: []string{"campaigns", "clicks"}}) {
				t.Logf("%s on %s caught by %v", m.Fault, m.Table, m.Caught)
			}
		})
	}
}

// TestConformanceSyntheticSeed runs the properties on the same graph with
// the suite's generated data instead of this module's: the synthetic
// seed numbers composite keys within each company and keeps the declared
// unique keys unique.
func TestConformanceSyntheticSeed(t *testing.T) {
	for _, dsn := range dsns(t) {
		t.Run(engineName(t, dsn), func(t *testing.T) {
			rep := conformance.Run(t, conformance.Target{
				Name:  "adanalytics-synthetic",
				DSN:   dsn,
				Graph: adanalytics.SchemaDef(),
				Seed:  conformance.SyntheticSeed(adanalytics.SchemaDef(), 2),
			})
			requirePassed(t, rep, 9, 10)
		})
	}
}

// requirePassed fails unless the run passed and the listed properties
// really ran: P9 and P10 skip or fail when their control insert (a copy of
// an own row, with new keys, names and e-mails) is refused.
func requirePassed(t *testing.T, rep *conformance.Report, ids ...int) {
	t.Helper()
	if !rep.Passed() {
		_ = conformance.WriteTable(os.Stderr, rep)
		t.Fatalf("conformance failed on %s", rep.Engine)
	}
	for _, p := range rep.Results {
		for _, id := range ids {
			if p.ID == id && p.Pass == 0 {
				t.Errorf("P%d did not run on %s (skip: %q)", id, rep.Engine, p.SkipReason)
			}
		}
	}
}

// dataset is the generated data as the suite's Dataset.
func dataset(d adanalytics.Data) *conformance.Dataset {
	ds := &conformance.Dataset{}
	for table, rows := range d {
		for _, r := range rows {
			ds.Add(table, conformance.Row(r))
		}
	}
	return ds
}

func isCanary(r conformance.Row) bool {
	return strings.HasPrefix(r["full_name"].(string), "Canary ")
}

// canaries are every company's marked contact: name and e-mail.
func canaries(d *conformance.Dataset) []conformance.Canary {
	var out []conformance.Canary
	for _, r := range d.Tables["contacts"] {
		if isCanary(r) {
			k := conformance.Key(r, []string{"company_id", "id"})
			out = append(out,
				conformance.Canary{Value: r["full_name"].(string), Category: redact.Name, Table: "contacts", Key: k},
				conformance.Canary{Value: r["email"].(string), Category: redact.Email, Table: "contacts", Key: k})
		}
	}
	return out
}

// calls read everything the tools show, and aim at every company's
// canary e-mail and at campaign ids that exist in every company.
func calls(d *conformance.Dataset, tn conformance.Tenant) []conformance.ToolCall {
	out := []conformance.ToolCall{
		{Tool: "list_campaigns", Args: map[string]any{}},
		{Tool: "get_campaign", Args: map[string]any{"id": 1}},
		{Tool: "get_campaign", Args: map[string]any{"id": 2}},
		{Tool: "campaign_clicks", Args: map[string]any{"campaign_id": 1}},
		{Tool: "campaign_clicks", Args: map[string]any{"campaign_id": 2}},
		{Tool: "find_contact", Args: map[string]any{"query": "Canary"}},
		{Tool: "clicks_by_device", Args: map[string]any{}},
		{Tool: "campaign_ranking", Args: map[string]any{}},
		{Tool: "list_clicks", Args: map[string]any{"limit": 100}},
	}
	for _, r := range d.Tables["contacts"] {
		if isCanary(r) {
			out = append(out, conformance.ToolCall{Tool: "find_contact", Args: map[string]any{"query": r["email"]}})
		}
	}
	// Narrowed to each of the tenant's own grants, and aimed at every
	// company's grant (refused unless it is the tenant's own).
	for _, g := range tn.Grants {
		out = append(out, conformance.ToolCall{Tool: "get_campaign", Args: map[string]any{"id": 1, "within": g.String()}})
	}
	for _, r := range d.Tables["companies"] {
		out = append(out, conformance.ToolCall{Tool: "get_campaign", Args: map[string]any{"id": 2, "within": fmt.Sprintf("%s:%v", adanalytics.LevelCompany, r["id"])}})
	}
	return out
}

// TestToolsWithClaimstest calls the tools over HTTP with tokens from a
// claimstest issuer, as company 1: campaign 1 exists in every company,
// yet only company 1's clicks come back, another company's contact cannot
// be found by its e-mail, names are revealed to analysts only, and an
// expired token is refused.
func TestToolsWithClaimstest(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "ads.db")
	owner, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer owner.Close()
	const tag = "t1"
	if err := adanalytics.CreateTables(ctx, owner, "sqlite"); err != nil {
		t.Fatal(err)
	}
	if err := adanalytics.Insert(ctx, owner, "sqlite", adanalytics.Generate(3, tag)); err != nil {
		t.Fatal(err)
	}
	db, err := guardedsql.Open(ctx, "sqlite:"+path, adanalytics.Schema, guardedsql.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	endpoint := "http://" + ln.Addr().String() + "/mcp"
	is := claimstest.Start(t, endpoint)
	red, err := redact.New(adanalytics.Redaction)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := server.New(server.Options{
		Name: "adanalytics", Version: "test", DB: db, Redactor: red, Levels: []string{adanalytics.LevelCompany},
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

	analyst := connect(t, endpoint, is.Mint(t, claimstest.Token{Subject: "ana", Groups: []string{"/companies/1"}, Roles: []string{"analyst"}}))
	var clicks adanalytics.ClicksOut
	callTool(t, analyst, "campaign_clicks", map[string]any{"campaign_id": 1}, &clicks)
	if len(clicks.Clicks) != 4 {
		t.Errorf("campaign_clicks(1) as company 1: %d clicks, want company 1's 4: %+v", len(clicks.Clicks), clicks.Clicks)
	}
	for _, c := range clicks.Clicks {
		if c.CostCents/100 != 1 { // Generate: cost_cents = 100*company + click
			t.Errorf("campaign_clicks(1) as company 1 returned click %+v of company %d", c, c.CostCents/100)
		}
	}
	var contacts adanalytics.ContactsOut
	callTool(t, analyst, "find_contact", map[string]any{"query": "canary." + tag + ".2@example.net"}, &contacts)
	if len(contacts.Contacts) != 0 {
		t.Errorf("company 1 found company 2's contact by e-mail: %+v", contacts.Contacts)
	}
	callTool(t, analyst, "find_contact", map[string]any{"query": "Canary"}, &contacts)
	if want := "Canary " + tag + " 1"; len(contacts.Contacts) != 1 || contacts.Contacts[0].FullName != want {
		t.Errorf("find_contact(Canary) as an analyst of company 1: %+v, want exactly %q", contacts.Contacts, want)
	}

	viewer := connect(t, endpoint, is.Mint(t, claimstest.Token{Subject: "vic", Groups: []string{"/companies/1"}, Roles: []string{"viewer"}}))
	callTool(t, viewer, "find_contact", map[string]any{"query": "Canary"}, &contacts)
	if len(contacts.Contacts) != 1 || strings.Contains(fmt.Sprint(contacts.Contacts), "Canary "+tag) {
		t.Errorf("find_contact(Canary) as a viewer: %+v, want one contact with its name masked", contacts.Contacts)
	}

	expired := is.Mint(t, claimstest.Token{Subject: "ana", Groups: []string{"/companies/1"}, TTL: -time.Minute})
	if cs, err := dial(endpoint, expired); err == nil {
		cs.Close()
		t.Error("an expired token connected")
	}
}

type bearer struct {
	token string
	base  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.base.RoundTrip(r)
}

func dial(endpoint, token string) (*mcp.ClientSession, error) {
	return mcp.NewClient(&mcp.Implementation{Name: "adanalytics-test", Version: "1"}, nil).Connect(context.Background(),
		&mcp.StreamableClientTransport{Endpoint: endpoint, HTTPClient: &http.Client{Transport: bearer{token, http.DefaultTransport}},
			DisableStandaloneSSE: true, MaxRetries: -1}, nil)
}

func connect(t *testing.T, endpoint, token string) *mcp.ClientSession {
	t.Helper()
	cs, err := dial(endpoint, token)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// callTool calls a tool and decodes its structured result into out.
func callTool(t *testing.T, cs *mcp.ClientSession, tool string, args map[string]any, out any) {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", tool, err)
	}
	if res.IsError {
		raw, _ := json.Marshal(res.Content)
		t.Fatalf("%s: tool error %s", tool, raw)
	}
	raw, err := json.Marshal(res.StructuredContent)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, out); err != nil {
		t.Fatalf("%s: decoding %s: %v", tool, raw, err)
	}
}
