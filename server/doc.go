// Package server builds a multi-tenant MCP server on the go-sdk
// (github.com/modelcontextprotocol/go-sdk) in which every tool call is
// scoped to the tenants of the caller's verified token.
//
// A tool author registers typed tools with [AddTool]. The handler receives
// the call's context, which carries the caller's [scope.Scope], a
// *[guardedsql.DB] that accepts only builder queries and adds the tenant
// predicates, and the decoded input. It returns a Go value or an error; it
// never sees the token and never writes the wire format:
//
//   - the input schema is inferred from In and must be tenant-free: a
//     property anywhere in it named like a scope key (tenant, tenant_id,
//     chain_id, org, org_id, each scope level and "<level>_id") makes
//     AddTool fail with a *TenantInputError, because the tenant comes only
//     from the token. The scope levels are the schema's ([Options.Levels]
//     defaults to them); [New] refuses configured levels or a claims
//     mapping that disagree with the schema ([ErrLevels]);
//   - the result is serialized by package redact, once, into both the
//     structured content and its text rendering; every error message goes
//     through the same redactor;
//   - arguments that do not fit the input schema are a tool error in the
//     schema's terms (`invalid arguments: argument "id" must be an
//     integer, not a string`): the argument's path, the JSON type or the
//     bound it fails, never a Go type nor the value sent; the 400
//     responses of the HTTP endpoint likewise echo nothing of the request;
//   - guardedsql.ErrNotFound (which is also what a cross-tenant id yields)
//     becomes the tool error "not found", guardedsql.ErrAmbiguous the
//     tool error "ambiguous: …" (see "Callers with several grants"); errors made with InvalidInput
//     reach the caller redacted; a missing or unusable scope becomes a
//     JSON-RPC error with a structured witness (DenyError); anything else
//     is logged and answered with a generic error and a correlation id;
//   - one audit record per call goes to the audit logger: time, subject,
//     grants, tool, outcome, rows, duration and redaction counts, never a
//     token or a value that was redacted.
//
// # Callers with several grants
//
// A caller may hold several grants (companies 1 and 4), and with composite
// keys such as (company_id, id) the ids repeat across tenants, so "campaign
// 2" can name a row of each. A statement meant for one row that matches
// several fails with guardedsql.ErrAmbiguous (an ExpectOne update or
// delete changes nothing; QueryRow and One read nothing), which the caller
// reads as the tool error "ambiguous: more than one row matched" (outcome
// OutcomeAmbiguous), never as an internal error nor as one of the rows.
//
// Tool.Narrowable is the one sanctioned way to let the caller say which:
// the tool's input gains the optional string property NarrowProperty
// ("within"), one of the caller's grants written as scope.Grant.String
// writes it ("company:4", "chain:initech/hotel:acme-paris"). Before the
// handler runs the server compares it with the grants of the call's
// verified token (scope.Scope.NarrowPath), removes it from the arguments
// (the handler never sees it) and runs the handler under the scope of that
// one grant; the ambiguity error of a Narrowable tool says how to narrow.
// The selector can only narrow: it is matched against the token's own
// grants and never parsed into a new one, so a grant the token lacks —
// another tenant, one that does not exist, an ancestor or a hierarchy
// level above a grant, a malformed path — is refused before anything
// reaches the database with one and the same tool error, `not found:
// "within" names none of your grants`, which tells nothing about the
// tenant it named. The tenant-free rule is unchanged: a tool input naming
// a scope key is still refused, and a Narrowable tool may not have a
// "within" of its own. Authorization (Tool.Require) and redaction keep
// using the whole token's scope (the most restrictive roles). The audit
// record of a narrowed call names the grant ("within").
//
// The rest of the MCP surface goes the same way. [AddResource] and
// [AddResourceTemplate] (URIs such as "hotel://bookings/{id}") and [AddPrompt]
// take handlers of the same shape (ctx with the scope, the guarded DB, the
// template variables or prompt arguments); template variables and prompt
// arguments obey the tenant-free rule of tool inputs; results go through
// the redactor, label the session's flow taint and get one audit record
// each. A resource of another tenant reads exactly like a missing one
// (mcp.ResourceNotFoundError), as does a URI no template matches.
// Completion (on a [PromptArg] or a [ResourceTemplate] variable) answers
// completion/complete under the caller's scope through the guard, and
// offers a value only if the caller's redaction leaves it unchanged, so a
// completion never suggests another tenant's value or personal data the
// role may not see. Subscribing to any URI succeeds; a resources/updated
// notification ([Server.ResourceUpdated], after a write) reaches a
// subscriber only if the scope it subscribed with can read the URI then.
//
// Results other than JSON: a tool whose Out is [Content] answers with its
// blocks ([TextBlock], [ImageBlock], [AudioBlock], [ResourceBlock],
// [LinkBlock]) instead of structured content, a prompt whose data is
// Content sends one user message per block, and a resource handler that
// returns a [Blob] is read as that blob with its MIME type. Every string
// of a block passes the redactor; binary data is the handler's own bytes,
// sent as is and never scanned. The flow label and the audit record are
// those of any result.
//
// Per-item authorization: [Tool.Require], [Prompt.Require] and
// [Resource.Require] name roles (any of) and OAuth scopes (all of, from the
// token's scope or scp claim). tools/list, prompts/list, resources/list
// and resources/templates/list show each caller only what it meets; a
// request naming an item anyway is refused before its handler: with HTTP
// 403 and WWW-Authenticate: Bearer error="insufficient_scope", scope="…"
// on streamable HTTP (read from the request body before the go-sdk
// handles it), and always at call time with a [DenyError] of rule
// [RuleInsufficientScope] ([ErrInsufficientScope]), which is all a stdio
// client sees. The protected-resource metadata's scopes_supported lists
// every scope a [Require] names.
//
// Declassification is the user's decision. When the flow policy denies a
// sink call that one of its declassification rules would allow, the
// server asks the client's user, showing the witness in plain words
// (which data, from which calls, to which destination, under which rule).
// Only an explicit accept (allow=true) declassifies, for that call only,
// and the audit record keeps the witness and "consent":"accepted";
// decline, cancel, a client that cannot be asked (no elicitation
// capability; a client before 2026-07-28 without a session) and an
// expired question deny as before. A declassification reason in the
// call's _meta is written by the model's host and counts only if the
// policy opts in (see package flow).
//
// # Consent and Input: multi round-trip requests
//
// The question is asked through an MCP multi round-trip request (SEP-2322):
// the sink call is answered with an input-required result (an elicitation
// form; "consent":"requested" in the audit record) and the client retries
// the same call with the answer and the result's requestState. A
// 2026-07-28 client does so by itself, on any replica; for a 2025-era
// client in a session the go-sdk asks on the session and runs the call
// once more, so both take one path. Tool, prompt and resource handlers
// ask the person the same way with [Input] (elicitation, sampling, roots,
// over one or several rounds); [CanInput] says, asking nothing, whether
// the client could answer a kind of request.
//
// # Progress and log notifications
//
// A handler reports progress with [Progress] (sent only when the request
// carried a progressToken) and sends log messages with [Log] (only at or
// above the level the client asked for: a 2026-07-28 request's _meta
// logLevel, a session's logging/setLevel). Both go only to the request
// that made them, on its own session and response stream; their text and
// data pass the caller's redactor, and under flow control join the
// caller's taint before the client sees them, as a result does.
//
// requestState is attacker-controlled, so the server signs it (HMAC-SHA256,
// [InputOptions.Keys]) and binds it to: the endpoint (HTTPOptions.ResourceURL,
// or "stdio:"+Name), the token's issuer and subject, a SHA-256 of the
// caller's canonical grants, the method, the tool or prompt name or the
// resource URI, a SHA-256 of the canonical arguments (keys sorted), its
// kind, for consent the offered rule and a SHA-256 of the witness the
// person saw, an expiry [Options.ConsentTimeout] after it was issued, a
// random nonce, and earlier rounds' answers. A retry whose state fails any
// check (signature, a binding, expiry, a replay) is refused with one
// generic JSON-RPC invalid-params error, the same for every cause; the
// audit record's "request_state" says which. A verified state is spent
// once in [InputOptions.Replays]; consent also needs the flow check, run
// again, to deny with the same rule and witness, and then runs it with
// the consent. Replicas behind one endpoint must share the keys (Keys[0]
// signs, every key verifies: rotate by prepending) and the replay store
// (server/pgstore, server/redisstore), and the flow taints (package flow's
// Store) for the witness to match.
//
// Transports: Handler serves streamable HTTP behind the go-sdk's
// bearer-token middleware fed by package claims, with RFC 9728
// protected-resource metadata and the WWW-Authenticate challenge on 401.
// It speaks MCP 2026-07-28 statelessly (per-request _meta,
// server/discover) and negotiates 2025-era versions per request; state
// that spans requests lives in shared stores, the flow taint keyed by the
// conversation handle (flow.MetaConversation or flow.HeaderConversation).
// [HTTPOptions.Sessions] adds 2025-era stateful sessions (Mcp-Session-Id)
// for what needs one: subscriptions and per-session taint.
//
// ListenAndServe runs it with graceful shutdown. RunStdio serves one client
// over stdin/stdout with a token from configuration ([TokenFromEnv],
// [TokenFromFile]), verified at start and again whenever it expires.
//
// With [Options.Flow] (package flow), every result also labels the caller's
// session (confidentiality level and data categories, derived from the
// result type's pii tags and the tool's declaration), and a tool declared as
// a sink ([Tool.Flow]) is checked against the flow policy before its handler
// runs; a forbidden flow is a [DenyError] carrying the witness. The label of
// a result is recorded in the checker's taint store before the client can
// see it; if the store fails, the result is withheld (an internal error, or,
// when the call committed a write, the JSON-RPC error [CodeWriteUnconfirmed]
// that says the write stands), and a sink call whose taint cannot be read is
// denied ([flow.RuleTaintStore]). With [Server.EnableIdempotencyKeys] a
// call may carry an idempotency key ([MetaIdempotencyKey] or the
// [HeaderIdempotencyKey] header), recorded in the tool's own write
// transaction: a retry with it never writes twice (docs/server.md).
//
// Operations: [Server.Handler] serves liveness at [HealthPath] and readiness at
// [ReadyPath] (signing keys loaded, database reachable, PostgreSQL row-level
// security still in force, egress guard active when required; see
// [HealthOptions]; shared taint and consent replay stores that implement
// [Pinger] must answer, and a shared rate store that does not answer is
// listed in [Readiness].Degraded). [Options.Tracer] observes every call and limit refusal
// ([Tracer], the seam for metrics and traces); package server/otelserver
// implements it with OpenTelemetry metrics and one span per call, labelled
// by tool, outcome, rule and category but never by subject or tenant unless
// configured, and [HTTPOptions.MetricsPath] serves its Prometheus handler.
// Without a Tracer no telemetry code is linked. A call that
// fails because the database is unreachable ([guardedsql.IsUnavailable]) is
// answered with the JSON-RPC error [CodeUnavailable], marked retryable and
// saying nothing about the database, so a client can tell "retry later"
// from a bug. A call whose transaction lost to a concurrent one
// ([guardedsql.IsRetryable]: a serialization failure or deadlock, after
// the retries the tool asked of [guardedsql.DB.TxWith]) is answered with
// the tool error [RetryableMessage], structured {"retryable": true}, and
// audited as [OutcomeRetryable]; a lock timeout stays "timed out waiting
// for the database". [Options.Logger] is rate-limited per kind of record
// ([LogLimit]), so an outage cannot flood the log.
//
// # Limits and timeouts
//
// [Options.Limits] keeps one tenant from starving the others: each tool
// call, resource read, prompt, completion and list takes a concurrency slot
// and a rate token (token bucket) of each root tenant of its scope (a
// grant's outermost ancestor: a chain's hotels share the chain's budget)
// and of its subject, waiting at most [Limits.QueueWait] for a slot; ping
// and server/discover are free. A refusal is a [LimitError]: on streamable
// HTTP it is decided before the request is dispatched and answered with 429
// and Retry-After; the body, and on stdio the error itself, is a JSON-RPC
// error with code [CodeLimited] and data naming the rule, the method and
// the retry delay, never a tenant.
// [guardedsql.ErrBusy] (the pool-wait bound) becomes the same error with
// [RuleDBBusy]. Token buckets live in the process ([NewLocalRates]) or, shared
// between replicas, in a [RateStore] such as package server/redisstore. A
// shared store that fails does not refuse every call: admission falls back
// to per-replica buckets of the same rate, warns once per outage and calls
// [Limits.OnDegraded]; [Limits.FailClosed] refuses instead. What a call
// costs is charged at the pool: guardedsql's tenant-fair queue
// ([guardedsql.Options].PoolFIFO, PoolShare) gives the next free connection
// to the tenant that holds and has held the least connection time, and
// holds back a tenant over its share while others are active.
// [Limits.OnReject] and [guardedsql.Options].PoolWaitObserver are the hooks for
// rejection and pool-wait metrics.
//
// A tools/call admitted on streamable HTTP is cancelled when its client
// disconnects. [HTTPOptions] bound the rest: body read deadline (a body
// that stalls is answered 408, one over [Options.MaxRequestBytes] 413),
// write deadline of non-streaming responses, idle keep-alives, the session
// idle timeout (on by default) and sessions per subject, the shutdown
// drain, the Origin allowlist, and failed bearer tokens per client address
// ([HTTPOptions.FailedTokens], on by default: after
// [DefaultFailedTokenBurst] failures an address is answered 429 with
// Retry-After, before its token is verified, until its bucket refills).
// Token lifetime is bounded by the verifier (claims.Options.MaxTokenLifetime,
// 24 hours by default, [ErrTokenLifetime]); [Options.MaxTokenLifetime]
// tightens it per server.
//
// # The request pipeline
//
// Every request takes one path, each concern in one place. On streamable
// HTTP the go-sdk's bearer middleware calls the server's token verifier,
// which checks the token's lifetime and derives the caller (scope, OAuth
// scopes) once, from that request's own token (not the one that opened the
// session, so a token that expires or is swapped mid-session is seen at
// the next call), into a value it hangs on the request's auth.TokenInfo.
// The HTTP front then reads and decodes the body once and answers what only
// HTTP can, before anything is dispatched: 403 insufficient_scope, 429 for
// a request over its limits (whose admission and the request's lifetime
// it leaves on the same value, which the go-sdk hands to that request's
// messages only: no state travels in a header), the per-subject session
// cap. On every transport, every method then passes one go-sdk receiving
// middleware, the pipeline: list results keep what the caller's Require
// admits; a tools/call, prompts/get, resources/read or completion/complete
// becomes one request value in its context (caller, from the TokenInfo or
// the stdio token; redactor; correlation id; what the audit record will
// say), is denied without a scope or short of the item's Require, admitted
// against the limits (tools/call), handed to the item's handler, then
// audited once and traced. The item's handler checks its own arguments
// (the input schema; narrowing), enters the call (the scope into the
// context for the guarded DB, the flow check of a sink, the call timeout),
// runs the handler with panics caught, and redacts and labels the result
// once; its errors reach the wire through one mapping for tools and one
// for the other methods.
package server
