package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/tenantmcp/tenantmcp/internal/logbuf"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tenantmcp/tenantmcp/claims/devtoken"
	"github.com/tenantmcp/tenantmcp/examples/hotel/hotel"
	"github.com/tenantmcp/tenantmcp/flow"
	"github.com/tenantmcp/tenantmcp/server"
)

// A scenario is one row of the evaluation: a composition of tool calls
// made by a real MCP client, with a real token, against the hotel server
// in process; its last call is the one judged.
type scenario struct {
	ID, Pattern, Composition string
	// Want is "DENY" or "ALLOW"; WantRule the rule a denial must name;
	// WantCats the categories its witness must list; WantBy the tool its
	// witness must name as having introduced them.
	Want, WantRule string
	WantCats       []string
	WantBy         string
	// WantNote is the audit record's flow note of an allowed sink call.
	WantNote string
	// WantConsent is the audit record's consent outcome ("" for none):
	// whether the user was asked to declassify, and what they answered.
	WantConsent string
	Stateless   bool
	run         func(r *run) result
}

// result is what a scenario observed.
type result struct {
	Verdict string // ALLOW, DENY
	Rule    string
	Witness *flow.Witness
	// Subject made the judged call; Tool is the judged tool.
	Subject, Tool string
	// PlanVerdict is the plan check's verdict, for plan rows.
	PlanVerdict string
	// Extra is a note about the observation (HTTP status, …).
	Extra string
	// planOnly: the judged "call" is a plan step; nothing ran.
	planOnly bool
	// Err is a failure to run the scenario at all.
	Err error
}

// Row is a scenario with its outcome and the checks made on it.
type Row struct {
	scenario
	result
	// Problems lists every way the outcome differs from what the scenario
	// wants; empty means the row passes.
	Problems []string
}

// env is the hotel server twice (stateful and stateless HTTP), with the
// audit logs the rows are checked against.
type env struct {
	stateful, stateless *instance
	guest               hotel.GuestRow // a guest of acme-paris with a unique e-mail
	booking             int64          // a paid booking of that guest
	room                int64          // a room of acme-paris
}

type instance struct {
	app   *hotel.App
	audit *logbuf.Buffer
	stop  func()
}

func startInstance(ctx context.Context, stateless bool) (*instance, error) {
	in := &instance{audit: &logbuf.Buffer{}}
	app, err := hotel.New(ctx, hotel.Options{
		Addr: "127.0.0.1:0", Sessions: !stateless, Seed: 7,
		Logger:      slog.New(slog.DiscardHandler),
		AuditLogger: slog.New(slog.NewJSONHandler(in.audit, nil)),
	})
	if err != nil {
		return nil, err
	}
	sctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- app.Serve(sctx) }()
	in.app = app
	in.stop = func() { cancel(); <-done; app.Close() }
	return in, nil
}

func newEnv(ctx context.Context) (*env, error) {
	e := &env{}
	var err error
	if e.stateful, err = startInstance(ctx, false); err != nil {
		return nil, err
	}
	if e.stateless, err = startInstance(ctx, true); err != nil {
		e.stateful.stop()
		return nil, err
	}
	d := e.stateful.app.Data
	var ok bool
	if e.guest, e.booking, ok = d.PaidBookingOfOwner("acme-paris"); !ok {
		e.close()
		return nil, errors.New("flowtable: the seed has no paid booking of a uniquely addressed acme-paris guest")
	}
	for _, r := range d.Rooms {
		if r.HotelID == "acme-paris" {
			e.room = r.ID
			break
		}
	}
	if e.room == 0 {
		e.close()
		return nil, errors.New("flowtable: the seed has no room of acme-paris")
	}
	return e, nil
}

func (e *env) close() {
	e.stateful.stop()
	e.stateless.stop()
}

// run is one scenario's view of the environment.
type run struct {
	e   *env
	sc  *scenario
	ctx context.Context
}

func (r *run) inst(stateless bool) *instance {
	if stateless {
		return r.e.stateless
	}
	return r.e.stateful
}

// subject is the scenario's own subject for a demo user's grants, so that
// no row inherits another row's taint.
func (r *run) subject(user string) string { return user + "+" + r.sc.ID }

type bearer struct {
	token string
	base  http.RoundTripper
}

func (b bearer) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context())
	req.Header.Set("Authorization", "Bearer "+b.token)
	return b.base.RoundTrip(req)
}

func (r *run) token(user string, stateless bool) (string, error) {
	for _, u := range hotel.DemoUsers {
		if u.Subject == user {
			return r.inst(stateless).app.Issuer.Mint(devtoken.Token{Subject: r.subject(user), Groups: u.Groups, Roles: u.Roles, TTL: time.Hour})
		}
	}
	return "", fmt.Errorf("no demo user %s", user)
}

// session opens an MCP session (go-sdk client, streamable HTTP) as the
// scenario's subject for user.
func (r *run) session(user string, stateless bool) (*mcp.ClientSession, error) {
	return r.sessionWith(user, stateless, nil)
}

// sessionWith is session with client options (an elicitation handler).
func (r *run) sessionWith(user string, stateless bool, opts *mcp.ClientOptions) (*mcp.ClientSession, error) {
	tok, err := r.token(user, stateless)
	if err != nil {
		return nil, err
	}
	// The stateful instance serves 2025-era sessions beside the stateless
	// core: a 2025-11-25 client gets one.
	var so *mcp.ClientSessionOptions
	if !stateless {
		so = &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"}
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "flowtable", Version: "1"}, opts)
	return client.Connect(r.ctx, &mcp.StreamableClientTransport{
		Endpoint:             r.inst(stateless).app.HTTP.ResourceURL,
		HTTPClient:           &http.Client{Transport: bearer{tok, http.DefaultTransport}},
		DisableStandaloneSSE: true,
		MaxRetries:           -1,
	}, so)
}

// call makes one call that must succeed and returns its structured content.
func call(ctx context.Context, cs *mcp.ClientSession, tool string, args map[string]any, meta mcp.Meta) (map[string]any, error) {
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args, Meta: meta})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", tool, err)
	}
	if res.IsError {
		var b strings.Builder
		for _, c := range res.Content {
			if t, ok := c.(*mcp.TextContent); ok {
				b.WriteString(t.Text)
			}
		}
		return nil, fmt.Errorf("%s: tool error: %s", tool, b.String())
	}
	raw, _ := json.Marshal(res.StructuredContent)
	var m map[string]any
	err = json.Unmarshal(raw, &m)
	return m, err
}

// judge makes the judged (sink) call and reports allow or deny with the
// witness the JSON-RPC error carries.
func (r *run) judge(cs *mcp.ClientSession, user, tool string, args map[string]any, meta mcp.Meta) result {
	res := result{Subject: r.subject(user), Tool: tool}
	_, err := cs.CallTool(r.ctx, &mcp.CallToolParams{Name: tool, Arguments: args, Meta: meta})
	var we *jsonrpc.Error
	switch {
	case err == nil:
		res.Verdict = "ALLOW"
	case errors.As(err, &we) && we.Code == server.CodeDenied:
		res.Verdict = "DENY"
		var d struct {
			Rule    string       `json:"rule"`
			Witness flow.Witness `json:"witness"`
		}
		if jerr := json.Unmarshal(we.Data, &d); jerr != nil {
			res.Err = fmt.Errorf("witness %s: %v", we.Data, jerr)
		}
		res.Rule, res.Witness = d.Rule, &d.Witness
	default:
		res.Err = err
	}
	return res
}

func fail(err error) result { return result{Err: err} }

// evaluate runs every scenario, in order, and checks each outcome.
func evaluate(ctx context.Context) ([]Row, error) {
	e, err := newEnv(ctx)
	if err != nil {
		return nil, err
	}
	defer e.close()
	var rows []Row
	for _, sc := range scenarios(e) {
		r := &run{e: e, sc: &sc, ctx: ctx}
		inst := r.inst(sc.Stateless)
		before := len(inst.app.Outbox.Messages())
		res := sc.run(r)
		row := Row{scenario: sc, result: res}
		row.check(inst, before)
		rows = append(rows, row)
	}
	return rows, nil
}

// check compares the outcome with the scenario, the outbox and the audit
// log.
func (row *Row) check(inst *instance, outboxBefore int) {
	p := &row.Problems
	if row.Err != nil {
		*p = append(*p, "error: "+row.Err.Error())
		return
	}
	if row.Verdict != row.Want {
		*p = append(*p, fmt.Sprintf("verdict %s, want %s", row.Verdict, row.Want))
	}
	sent := len(inst.app.Outbox.Messages()) - outboxBefore
	switch {
	case row.Want == "DENY" && sent != 0:
		*p = append(*p, fmt.Sprintf("%d message(s) reached the outbox", sent))
	case row.Want == "ALLOW" && row.Tool != "" && sent != 1:
		*p = append(*p, fmt.Sprintf("%d message(s) in the outbox, want 1", sent))
	}
	if row.Want == "DENY" && row.Rule != row.WantRule {
		*p = append(*p, fmt.Sprintf("rule %s, want %s", row.Rule, row.WantRule))
	}
	if row.Want == "DENY" && row.Tool != "" {
		if w := row.Witness; w != nil {
			if w.Rule != row.Rule || w.Sink.Tool != row.Tool {
				*p = append(*p, fmt.Sprintf("witness names rule %s sink %s", w.Rule, w.Sink.Tool))
			}
			if row.WantCats != nil && !slices.Equal(w.Categories, row.WantCats) {
				*p = append(*p, fmt.Sprintf("witness categories %v, want %v", w.Categories, row.WantCats))
			}
			if row.WantBy != "" && (len(w.IntroducedBy) == 0 || w.IntroducedBy[0].Tool != row.WantBy) {
				*p = append(*p, fmt.Sprintf("witness introduced_by %+v, want %s first", w.IntroducedBy, row.WantBy))
			}
		}
	}
	if row.Tool == "" || row.Subject == "" || row.planOnly {
		return
	}
	// The audit log: the judged call's record, and for a denial the
	// records of the calls the witness names.
	recs := auditRecords(inst.audit.String(), row.Subject)
	var last map[string]any
	for _, rec := range recs {
		if rec["tool"] == row.Tool {
			last = rec
		}
	}
	if last != nil {
		if got, _ := last["consent"].(string); got != row.WantConsent {
			*p = append(*p, fmt.Sprintf("audit consent %q, want %q", got, row.WantConsent))
		}
	}
	switch {
	case last == nil:
		*p = append(*p, "no audit record of the judged call")
	case row.Want == "DENY":
		if last["outcome"] != server.OutcomeDenied || last["rule"] != row.WantRule || last["witness"] == nil {
			*p = append(*p, fmt.Sprintf("audit record %v lacks outcome denied, rule %s and the witness", last, row.WantRule))
		}
		if row.Witness != nil {
			for _, o := range row.Witness.IntroducedBy {
				found := false
				for _, rec := range recs {
					found = found || rec["call_id"] == o.CallID && rec["tool"] == o.Tool && rec["outcome"] == server.OutcomeOK
				}
				if !found {
					*p = append(*p, fmt.Sprintf("witness origin %s/%s is not an audited call of %s", o.Tool, o.CallID, row.Subject))
				}
			}
		}
	case row.Want == "ALLOW":
		note, _ := last["flow"].(string)
		if last["outcome"] != server.OutcomeOK || note != row.WantNote {
			*p = append(*p, fmt.Sprintf("audit record outcome %v flow %q, want ok %q", last["outcome"], note, row.WantNote))
		}
	}
}

func auditRecords(log, subject string) []map[string]any {
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(log), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(line), &m) == nil && m["sub"] == subject {
			out = append(out, m)
		}
	}
	return out
}
