// Package server builds a multi-tenant MCP tool server on the go-sdk
// (github.com/modelcontextprotocol/go-sdk) in which every tool call is
// scoped to the tenants of the caller's verified token.
//
// A tool author registers typed tools with AddTool. The handler receives
// the call's context, which carries the caller's scope.Scope, a
// *guardedsql.DB that accepts only builder queries and adds the tenant
// predicates, and the decoded input. It returns a Go value or an error; it
// never sees the token and never writes the wire format:
//
//   - the input schema is inferred from In and must be tenant-free: a
//     property anywhere in it named like a scope key (tenant, tenant_id,
//     chain_id, org, org_id, each scope level and "<level>_id") makes
//     AddTool fail with a *TenantInputError, because the tenant comes only
//     from the token;
//   - the result is serialized by package redact, once, into both the
//     structured content and its text rendering; every error message goes
//     through the same redactor;
//   - guardedsql.ErrNotFound (which is also what a cross-tenant id yields)
//     becomes the tool error "not found"; errors made with InvalidInput
//     reach the caller redacted; a missing or unusable scope becomes a
//     JSON-RPC error with a structured witness (DenyError); anything else
//     is logged and answered with a generic error and a correlation id;
//   - one audit record per call goes to the audit logger: time, subject,
//     grants, tool, outcome, rows, duration and redaction counts, never a
//     token or a value that was redacted.
//
// Transports: Handler serves streamable HTTP (stateful or stateless) behind
// the go-sdk's bearer-token middleware fed by package claims, with RFC 9728
// protected-resource metadata and the WWW-Authenticate challenge on 401;
// ListenAndServe runs it with graceful shutdown. RunStdio serves one client
// over stdin/stdout with a token from configuration (TokenFromEnv,
// TokenFromFile), verified at start and again whenever it expires.
//
// With Options.Flow (package flow), every result also labels the caller's
// session (confidentiality level and data categories, derived from the
// result type's pii tags and the tool's declaration), and a tool declared as
// a sink (Tool.Flow) is checked against the flow policy before its handler
// runs; a forbidden flow is a DenyError carrying the witness.
//
// # Limits and timeouts
//
// Options.Limits keeps one tenant from starving the others: each call takes
// a concurrency slot and a rate token (token bucket) of every top-level
// grant of its scope and of its subject, waiting at most Limits.QueueWait
// for a slot. A refusal is a LimitError: on streamable HTTP it is decided
// before the call is dispatched and answered with 429 and Retry-After; the
// body, and on stdio the error itself, is a JSON-RPC error with code
// CodeLimited and data naming the rule and the retry delay, never a tenant.
// guardedsql.ErrBusy (the pool-wait bound) becomes the same error with
// RuleDBBusy. Token buckets live in the process (NewLocalRates) or, shared
// between replicas, in a RateStore such as package server/redisrate.
// Limits.OnReject and guardedsql.WithPoolWaitObserver are the hooks for
// rejection and pool-wait metrics.
//
// The HTTP layer hands each admitted tools/call a ticket carrying its
// request's lifetime, so a call whose client disconnects is cancelled.
// HTTPOptions bound the rest: body read deadline, write deadline of
// non-streaming responses, idle keep-alives, the session idle timeout (on
// by default) and sessions per subject, the shutdown drain, and the Origin
// allowlist; Options.MaxTokenLifetime refuses tokens that live too long.
//
// The scope of each call is derived from that call's own verified token
// (not the token that opened the session), so a token that expires or is
// swapped mid-session is seen at the next call.
package server
