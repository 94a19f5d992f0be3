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
//   - arguments that do not fit the input schema are a tool error in the
//     schema's terms (`invalid arguments: argument "id" must be an
//     integer, not a string`): the argument's path, the JSON type or the
//     bound it fails, never a Go type nor the value sent; the 400
//     responses of the HTTP endpoint likewise echo nothing of the request;
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
// runs; a forbidden flow is a DenyError carrying the witness. The label of
// a result is recorded in the checker's taint store before the client can
// see it; if the store fails, the result is withheld (an internal error),
// and a sink call whose taint cannot be read is denied (flow.RuleTaintStore).
//
// The scope of each call is derived from that call's own verified token
// (not the token that opened the session), so a token that expires or is
// swapped mid-session is seen at the next call.
package server
