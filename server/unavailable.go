package server

import (
	"encoding/json"
	"log/slog"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// CodeUnavailable is the JSON-RPC error code of a call that failed because
// the database could not be reached (guardedsql.IsUnavailable): the call
// did nothing the client can see, and the same call may succeed if retried
// later. Every other failure is a tool error ("internal error (correlation
// id …)") that a retry will not cure. Like CodeDenied it lies in JSON-RPC's
// implementation-defined server range, clear of the go-sdk's and MCP's
// codes.
const CodeUnavailable = -32035

// OutcomeUnavailable is the audit and metrics outcome of such a call.
const OutcomeUnavailable = "unavailable"

// unavailableData is the JSON-RPC error's data. It is the same fixed text
// for every such failure: nothing about the database (engine, address,
// role, driver message) reaches the client, which learns only that a
// retry may help and which correlation id the operator's log carries.
type unavailableData struct {
	Retryable    bool   `json:"retryable"`
	Reason       string `json:"reason"`
	RetryAfterMS int64  `json:"retry_after_ms"`
	CallID       string `json:"call_id"`
}

// retryAfterMS is the wait suggested to clients, a little longer than the
// jittered reconnect a pool attempts.
const retryAfterMS = 1000

// unavailable answers a call that failed for want of a database: logged
// (rate-limited, redacted) with its correlation id, answered with
// CodeUnavailable.
func (s *Server) unavailable(a *request, err error) error {
	a.outcome = OutcomeUnavailable
	s.opts.Logger.Error("tool call failed: database unavailable",
		slog.String("tool", a.name),
		slog.String("call_id", a.callID),
		slog.String("error", s.logRedactor().Error(err)))
	data, _ := json.Marshal(unavailableData{Retryable: true, Reason: "database unavailable", RetryAfterMS: retryAfterMS, CallID: a.callID})
	return &jsonrpc.Error{Code: CodeUnavailable, Message: "unavailable: database unavailable, retry later", Data: json.RawMessage(data)}
}
