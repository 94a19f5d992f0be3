package server

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// CodeDenied is the JSON-RPC error code of a denied call. It lies in the
// range JSON-RPC reserves for implementation-defined server errors, clear
// of the codes the go-sdk and MCP use themselves (-32001 to -32005 mean
// transport states to the go-sdk client; -32002 and -32020 to -32042 are
// MCP's), so a client never mistakes a denial for a closed connection.
const CodeDenied = -32030

// Deny rules the server itself applies.
const (
	// RuleScopeRequired: the call carried no verified token from which a
	// tenant scope could be minted.
	RuleScopeRequired = "scope.required"
	// RuleTokenExpired: the stdio token expired and no fresh one verified.
	RuleTokenExpired = "token.expired"
)

// ErrDenied is matched (errors.Is) by every *DenyError.
var ErrDenied = errors.New("server: call denied")

// DenyError refuses a call with a structured witness. AddTool handlers and
// the server return it; the client receives a JSON-RPC error with code
// CodeDenied, message "denied: <Rule>", and data {"rule", "reason", "tool",
// "witness"}. The witness names what was decided and why, never another
// tenant's data; it is redacted like every other output.
type DenyError struct {
	Rule    string         `json:"rule"`
	Reason  string         `json:"reason"`
	Tool    string         `json:"tool,omitempty"`
	Witness map[string]any `json:"witness,omitempty"`
}

func (e *DenyError) Error() string {
	return fmt.Sprintf("server: denied by %s: %s", e.Rule, e.Reason)
}

func (e *DenyError) Is(target error) bool {
	return target == ErrDenied || target == ErrInsufficientScope && e.Rule == RuleInsufficientScope
}

// Deny returns a *DenyError for a handler to return.
func Deny(rule, reason string, witness map[string]any) error {
	return &DenyError{Rule: rule, Reason: reason, Witness: witness}
}

// wire turns the (already redacted) witness into the JSON-RPC error the
// go-sdk sends as is.
func (e *DenyError) wire(data []byte) *jsonrpc.Error {
	return &jsonrpc.Error{Code: CodeDenied, Message: "denied: " + e.Rule, Data: json.RawMessage(data)}
}

// inputError is a message meant for the caller, sent redacted.
type inputError struct{ msg string }

func (e *inputError) Error() string { return e.msg }

// InvalidInput returns an error whose message the caller sees (after
// redaction), for input a handler rejects: "check_out must be after
// check_in". Every other handler error is hidden behind a correlation id.
func InvalidInput(format string, args ...any) error {
	return &inputError{msg: fmt.Sprintf(format, args...)}
}
