// Package flow enforces information-flow control on the tool calls of a
// tenantmcp server: results carry labels, each session accumulates the
// labels of what it has received (its taint), and a call to a tool that
// sends data out of the server (a sink) is judged against a policy before
// it runs. It lifts CapShim's typing rules (T-Net, T-Declassify) onto the
// server, with ContractWarden's monotonic propagation: a taint is a join
// that only grows.
//
// # Labels
//
// A [Label] is a confidentiality [Level] ([Public] < [Internal] < [Confidential] <
// Secret) and a set of categories ("guest.pii", "payment", …). The label of
// a tool's results is the join of:
//
//   - what the tool declares at registration (server.Tool.Flow, a Decl);
//   - the policy's "tools" entry for it;
//   - the categories of the pii-tagged fields of its result type (package
//     redact's `pii:"email"` and so on), through the policy's "pii" mapping
//     (DefaultPII for the categories the policy does not name: personal
//     data to "pii", card and iban to "payment");
//   - the level of each of those categories;
//   - at run time, the categories of personal data the redactor detected
//     in the result's free text (an address in an untagged "notes" field).
//
// A tool declared nowhere gets the policy's default_level ("internal" if
// the policy does not say). Neither the code nor the policy can lower what
// the other raises.
//
// # Sessions and taint
//
// The server calls [Tool.Begin] before every handler and [Call.Record] with
// every successful result before the client receives it. The taint a call
// reads and joins into is keyed by the subject verified from that call's
// own token (never from the session), and by the policy's taint scope:
//
//   - "subject" (the default): one taint per subject, across all its MCP
//     sessions and conversations. Data read in one session cannot leave
//     through another, at the price of precision: a subject that has read
//     a guest's data cannot send public data to an untrusted destination
//     from a fresh session either, until the taint is released.
//   - "session": one taint per (subject, MCP session id) in stateful HTTP;
//     in stateless HTTP and over stdio, per (subject, conversation id),
//     where the client names the conversation in the request's _meta
//     (MetaConversation, "tenantmcp/conversation") or in the HTTP header
//     HeaderConversation ("Tenantmcp-Conversation-Id"); with neither, per
//     subject. The conversation id is the client's claim: a client that
//     invents a new id starts clean, so use this scope only for clients
//     trusted to name conversations honestly.
//
// Under both, a session id presented with another subject's token names
// the other subject's taint: it neither inherits nor resets the session's
// (the go-sdk also refuses such a request with 403). Nothing a session
// does lowers its taint: a taint is dropped only whole, when it has been
// idle for the policy's taint.retain (24h by default): no sink call has
// read it and no result has been joined into it, so retention runs from
// the last exposure. A result that is public with no category changes no
// decision and is not recorded; one the store already holds, marked used
// at most retain/1024 (at most 250 ms) earlier, is not written again: every
// taint is kept that much longer than retain, so a skipped write never
// shortens it.
//
// A sink's own result (a receipt echoing {"to": "x@evil.example"}) adds
// only the personal data found in it more often than in the call's
// arguments: sending an address does not taint the sender with it.
//
// # Where taints live
//
// Taints are kept by a [Store] ([Options.Store]), keyed by [Key], in the stored
// form [Taint] (level, categories by name, the origin of each, the data
// subjects). [NewMemoryStore], the default, is private to the process: a
// subject that reads guest data through one replica could send it from
// another, and a restart forgets. Package flow/pgtaint keeps them in a
// table of the application's PostgreSQL database, so N replicas behind a
// load balancer share them and a restart keeps them; the application role
// reaches that table only through functions that make a taint grow, so its
// own SQL cannot erase one. Without PostgreSQL, server/redisstore.NewTaints
// keeps them on Redis. Every store joins
// atomically per key and drops a taint only whole, after retain. The
// checker fails closed on a store error ([ErrTaintStore]): a sink call whose
// taint cannot be read is denied with [RuleTaintStore], and [Call.Record]
// returns the error so the server withholds the result.
//
// # Sinks and the check
//
// A sink declares its kind ([Email] or [URL]) and the input property holding
// the destination ([Sink.DestArg]) or a fixed destination ([Sink.Dest]). The
// arguments are decoded into the tool's input type exactly as the handler
// decodes them, and the destination parsed into the canonical form the
// policy judges ([ParseDestination] refuses lists of recipients, header
// syntax, URLs without a host, percent-encoded hosts). With the taint's
// level ℓ and categories C, the call is allowed when:
//
//   - every category in C lists a pattern matching the destination in its
//     "to" (RuleCategory otherwise, CapShim's T-Net-Egress), and
//   - ℓ is at most the destination's clearance: the highest level of the
//     "destinations" patterns it matches, Public for any other destination
//     (RuleLevel otherwise, T-Net-Confidentiality).
//
// The pattern "$owner" matches an e-mail destination when the session's
// categorised results are about exactly one person and that person's
// address is the destination: the values of the results' fields tagged
// pii:"email", where the redactor counted no other address. It is how a
// guest's own data may reach that guest and nobody else.
//
// A declassification (CapShim's T-Declassify) is granted by the person
// using the client, not by the model. When a sink call is denied (by
// [RuleCategory] or [RuleLevel]) and a rule of the policy's "declassify" list
// would allow it, the [Denial] names that rule's reason in Offer, and
// [Denial.Explain] renders the witness in plain words. The server asks the
// user (MCP elicitation) and, only on an explicit accept, calls Begin again
// with [CallInfo.Consent] set to that reason: the rule lets its categories
// through and clears the destination up to its max_level, for this call
// only; the taint is unchanged and the audit record notes
// "declassified:<reason> (user consent)".
//
// A reason in the call's _meta ([MetaDeclassify], "tenantmcp/declassify") is
// written by the client, that is by the model's host, so by default it is
// ignored: a model that sets it is judged as if it had not (and the user is
// asked, if a rule applies). A policy may opt in with
// "declassify_from_meta": true, for clients trusted to set _meta only on
// their user's word; then the rule of that reason, if it names the sink and
// the destination, applies as above (noted "declassified:<reason>"), and a
// reason no rule names, or whose rule does not cover the call, is denied
// ([RuleDeclassify]), even for a flow that would be allowed without it. A
// consented reason that does not cover the call is denied the same way.
//
// # Denials and witnesses
//
// A denial is an error from [Tool.Begin] that is a *[Denial] (errors.As)
// and matches [ErrDenied], with a [Witness]: the rule, the session's label, the
// offending categories, the destination's clearance, the tool and call id
// of the call that introduced each category (and the level), the sink and
// its destination. The server answers the call with a JSON-RPC error (code
// server.CodeDenied, message "denied: <rule>") whose data is
// {"rule", "reason", "tool", "witness"}, redacted like every output, and
// writes it to the audit record with outcome "denied".
//
// # Plans
//
// CheckPlan typechecks a CapShim-shaped plan — tool calls in order whose
// arguments may be "$ret:N" references to earlier results — before any of
// it runs, from the caller's current taint, and returns per step allow,
// deny with the witness the call would get, or deferred (the destination
// comes from a result, or only $owner would allow it). Register it as a
// tool named [PlanToolName]:
//
//	server.AddTool(srv, server.Tool{Name: flow.PlanToolName, Description: flow.PlanToolDescription,
//		Flow: flow.Decl{Level: flow.Public, EchoOnly: true}},
//		func(ctx context.Context, _ *guardedsql.DB, p flow.Plan) (flow.PlanReport, error) {
//			return checker.CheckPlan(ctx, p)
//		})
//
// # Policy file
//
// The policy is a JSON object. Unknown keys, duplicate keys, unknown
// levels and categories, malformed patterns and rules without a reason are
// errors, each reported with its line (*[PolicyError], matching [ErrPolicy]),
// all at once. A five-minute policy:
//
//	{
//	  "version": 1,
//	  "default_level": "internal",
//	  "taint": {"scope": "subject", "retain": "24h"},
//	  "pii": {"name": "guest.pii", "email": "guest.pii", "phone": "guest.pii", "card": "payment"},
//	  "categories": {
//	    "guest.pii": {"level": "confidential", "to": ["$owner", "email:*@hotels.example"]},
//	    "payment":   {"level": "secret"}
//	  },
//	  "destinations": {
//	    "$owner":                   "confidential",
//	    "email:*@hotels.example":   "confidential",
//	    "https://*.hotels.example": "internal"
//	  },
//	  "tools": {"search_availability": "public", "revenue_report": "internal"},
//	  "declassify": [
//	    {"reason": "guest-invoice", "sink": "send_confirmation_email", "to": "$owner",
//	     "categories": ["payment"], "max_level": "secret"}
//	  ]
//	}
//
// The keys:
//
//   - version: 1 (required).
//   - default_level: the level of a tool declared nowhere.
//   - taint: scope ("subject" or "session") and retain (a Go duration, at
//     least 1m).
//   - pii: redact category → flow category, over DefaultPII.
//   - categories: per category, its level (default confidential) and the
//     destination patterns ("to") it may reach. A category with no "to"
//     never leaves but by a declassification.
//   - destinations: pattern → clearance. Any other destination is cleared
//     for public data only.
//   - tools: tool → level, or {"level", "categories"}.
//   - declassify: rules of reason (a short lower-case name), sink (a tool
//     name or a list), to (patterns), categories, max_level.
//   - declassify_from_meta: true lets a call's _meta name the reason
//     (default false: only the user's consent declassifies).
//
// Destination patterns: "email:ann@example.com", "email:*@example.com"
// (that domain only), "email:*@*.example.com" (its subdomains only),
// "https://api.example.com", "https://*.example.com" (subdomains at any
// depth, not example.com itself; never "evilexample.com" or
// "example.com.evil.net"), "http://…" likewise (a https pattern does not
// match http), "$owner", and "*" (in a category's "to" only). Hosts are
// written lower case; ports and paths are not distinguished; "*" is only
// ever a whole leftmost label over a domain of at least two labels.
//
// [Checker.Verify], called after every tool is registered, fails when the
// policy names a tool that does not exist or a declassification sink that
// is not a sink.
//
// # Cost
//
// The check of a sink call decodes its arguments once more into the input
// type and matches the destination against the compiled patterns; labels
// are bit sets, and the in-memory store's update a merge under a sharded
// lock. A shared store costs a read on each sink call, and a write only
// for a result that adds to the taint or re-exposes it after the slack
// above (PostgreSQL: one statement, or a transaction when the taint
// grows). See the
// benchmarks in bench_test.go: a few microseconds per sink call, a few
// hundred nanoseconds for any other call, against CapShim's 43 µs.
//
// # Limits
//
// Labels are per result and per session, not per value: the checker does
// not follow which bytes of a result reach a sink's body (the model's
// context holds all of them), so it over-approximates. It does not label
// stored data: a write tool that stores free text which a read tool
// returns untagged launders it; tag such fields pii or declare the read
// tool's label. Tool errors are not labelled (their messages pass through
// the redactor). The policy is one per server, not per tenant.
package flow
