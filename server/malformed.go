package server

import (
	"context"
	"strconv"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// RuleMalformed: a request names its item, cursor or completion reference
// with text that is not printable UTF-8 (a NUL, a control character,
// invalid UTF-8).
const RuleMalformed = "request.malformed"

// malformed refuses, with invalid params and an audit record, a request
// whose names, URIs or cursor are not printable UTF-8. Why: the go-sdk
// quotes a resource URI into its not-found error's data with Go's %q,
// which is not JSON for such text; the response then fails to encode and
// the session's connection dies (every later request an empty 200).
// Invariant: no identifier that is not printable UTF-8 reaches the go-sdk's
// handlers, and the refused value is in neither the answer nor the log.
func (s *Server) malformed(ctx context.Context, method string, req mcp.Request) error {
	var ids []string
	switch r := req.(type) {
	case *mcp.CallToolRequest:
		ids = []string{r.Params.Name}
	case *mcp.GetPromptRequest:
		ids = []string{r.Params.Name}
	case *mcp.ReadResourceRequest:
		ids = []string{r.Params.URI}
	case *mcp.SubscribeRequest:
		ids = []string{r.Params.URI}
	case *mcp.UnsubscribeRequest:
		ids = []string{r.Params.URI}
	case *mcp.CompleteRequest:
		if r.Params.Ref != nil {
			ids = append(ids, r.Params.Ref.Name, r.Params.Ref.URI)
		}
		ids = append(ids, r.Params.Argument.Name)
	case *mcp.ListToolsRequest:
		if r.Params != nil {
			ids = []string{r.Params.Cursor}
		}
	case *mcp.ListPromptsRequest:
		if r.Params != nil {
			ids = []string{r.Params.Cursor}
		}
	case *mcp.ListResourcesRequest:
		if r.Params != nil {
			ids = []string{r.Params.Cursor}
		}
	case *mcp.ListResourceTemplatesRequest:
		if r.Params != nil {
			ids = []string{r.Params.Cursor}
		}
	}
	for _, id := range ids {
		if !printable(id) {
			rq := s.newRequest(method, "", s.callerOf(ctx, req.GetExtra()))
			rq.outcome, rq.rule = OutcomeInvalid, RuleMalformed
			s.audit(ctx, rq)
			return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "invalid params: a name, URI or cursor is not printable UTF-8 text"}
		}
	}
	return nil
}

// printable: valid UTF-8 of printable runes only (strconv.IsPrint: no
// NUL, control or format characters), the text %q leaves as it is.
func printable(s string) bool {
	if !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if !strconv.IsPrint(r) {
			return false
		}
	}
	return true
}
