package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"unsafe"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tenantmcp/tenantmcp/flow"
	"github.com/tenantmcp/tenantmcp/guardedsql"
	"github.com/tenantmcp/tenantmcp/redact"
	"github.com/tenantmcp/tenantmcp/scope"
)

// Outcomes recorded in the audit log.
const (
	OutcomeOK       = "ok"
	OutcomeNotFound = "not_found"
	OutcomeInvalid  = "invalid_input"
	OutcomeDenied   = "denied"
	OutcomeTimeout  = "timeout"
	OutcomeError    = "error"
	// OutcomeLimited: refused by a limit or a busy database pool
	// (LimitError); the client may retry after the time it was given.
	OutcomeLimited = "limited"
	// OutcomeCancelled: the client went away (disconnected or cancelled)
	// before the call finished; its context was cancelled.
	OutcomeCancelled = "cancelled"
	// OutcomeConflict: the database refused the row as a duplicate
	// (guardedsql.ErrConflict); the client reads "conflict".
	OutcomeConflict = "conflict"
	// OutcomeReferenced: the database refused to delete a row others
	// still reference (guardedsql.ErrReferenced); the client reads
	// "still referenced".
	OutcomeReferenced = "still_referenced"
	// OutcomeRetryable: the database gave up on the call's transaction
	// because of a concurrent one (guardedsql.IsRetryable: serialization
	// failure, deadlock), after any retries the tool asked for; the
	// client reads a retryable tool error (see RetryableMessage).
	OutcomeRetryable = "retryable"
)

// RetryableMessage is the text of the tool error that answers a call whose
// transaction lost to a concurrent one (guardedsql.IsRetryable) once the
// tool's own retries (guardedsql.TxOptions.MaxRetries) ran out. The same
// call may succeed if made again; nothing about the other transaction,
// its tenant or its rows is passed on. Its structured content is
// {"retryable": true, "reason": "transaction conflict", "call_id": …}.
const RetryableMessage = "retryable: the call conflicted with a concurrent transaction; retry it"

// retryableData is the structured content of that tool error.
type retryableData struct {
	Retryable bool   `json:"retryable"`
	Reason    string `json:"reason"`
	CallID    string `json:"call_id"`
}

// toolCall is a tool's handler as the pipeline runs it: run decodes the
// validated arguments into the handler's In type and runs it; decode
// turns a stored result (idempotency.go) back into the handler's Out type,
// so that it is labelled and redacted exactly as the first answer was.
type toolCall struct {
	run    func(ctx context.Context, db *guardedsql.DB, args json.RawMessage) (any, error)
	decode func(stored []byte) (any, error)
}

func typedCall[In, Out any](h ToolHandler[In, Out]) toolCall {
	return toolCall{
		run: func(ctx context.Context, db *guardedsql.DB, args json.RawMessage) (any, error) {
			var in In
			if err := json.Unmarshal(args, &in); err != nil {
				return nil, InvalidInput("invalid arguments: %s", decodeMessage(err))
			}
			out, err := h(ctx, db, in)
			if err != nil {
				return nil, err
			}
			return out, nil
		},
		decode: func(stored []byte) (any, error) {
			var out Out
			if _, ok := any(out).(Content); ok {
				return nil, errors.New("a Content result is not stored")
			}
			err := json.Unmarshal(stored, &out)
			return out, err
		},
	}
}

// toolHandler is a tool's part of the pipeline: the arguments validated
// against the input schema, the call narrowed to one grant, the flow check
// of a sink, the handler, and its result redacted (once, into both the
// structured content and its text; a Content result block by block) and
// labelled.
func (s *Server) toolHandler(narrowable bool, in inputSchema, ft *flow.Tool, call toolCall) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		rq := requestOf(ctx)
		rq.narrowable = narrowable
		rq.in.retry(req.Params.InputResponses, req.Params.RequestState)
		args, err := validateArgs(in, req.Params.Arguments)
		if err != nil {
			rq.outcome = OutcomeInvalid
			return toolError(rq.red.String("invalid arguments: " + err.Error())), nil
		}
		sc := rq.caller.scope
		if narrowable {
			var refused *mcp.CallToolResult
			if sc, args, refused = s.narrow(rq, sc, args); refused != nil {
				return refused, nil
			}
		}
		key, err := s.idempotencyKey(rq, sc, args)
		if err != nil {
			var bad errBadKey
			if errors.As(err, &bad) {
				return nil, badKey(rq, string(bad))
			}
			return s.internal(rq, err), nil
		}
		ctx, fc, cancel, err := s.enter(ctx, rq, sc, ft, args)
		if err != nil {
			if res, werr, ok := s.toolInput(rq, err); ok {
				return res, werr
			}
			return nil, err
		}
		defer cancel()
		if key != nil {
			// A recorded key: the write was made; it is never made again.
			rec, err := s.recorded(ctx, rq, key)
			if err != nil {
				return nil, err
			}
			if rec != nil {
				return s.replay(ctx, rq, fc, call, key, rec)
			}
		}
		var claim *guardedsql.IdempotencyClaim
		if key != nil {
			claim = &key.claim
		}
		ctx, writes := guardedsql.WithCallWrites(ctx, claim)
		out, err := safely(func() (any, error) { return call.run(ctx, s.opts.DB, args) })
		if key != nil && writes.KeyTaken() {
			// A concurrent call with the same key committed its write
			// first: this call's write was rolled back; answer as a retry.
			rec, lerr := s.recorded(ctx, rq, key)
			if lerr != nil {
				return nil, lerr
			}
			if rec == nil { // pruned meanwhile
				return nil, s.unconfirmed(rq, true, err)
			}
			return s.replay(ctx, rq, fc, call, key, rec)
		}
		if err != nil {
			res, werr := s.handlerError(ctx, rq, err)
			if (rq.outcome == OutcomeError || rq.outcome == OutcomeTimeout) && writes.Committed() > 0 {
				// Logged by internal (a timeout is not); the write
				// stands: say so.
				return nil, s.unconfirmed(rq, key != nil && writes.Claimed(), nil)
			}
			return res, werr
		}
		if key != nil && writes.Claimed() {
			if _, isContent := out.(Content); !isContent {
				s.storeResult(ctx, rq, key, out)
			}
		}
		return s.release(ctx, rq, fc, out, writes.Committed() > 0, key != nil && writes.Claimed())
	}
}

// recorded looks the key up: nil if no write recorded it; invalid params
// if it was recorded with other arguments.
func (s *Server) recorded(ctx context.Context, rq *request, key *idemKey) (*guardedsql.IdempotencyRecord, error) {
	rec, found, err := s.opts.DB.LookupIdempotency(ctx, key.claim.ID)
	if err != nil {
		if guardedsql.IsUnavailable(err) {
			return nil, s.unavailable(rq, err)
		}
		rq.outcome = OutcomeUnavailable
		s.opts.Logger.Error("idempotency: key lookup failed", slog.String("tool", rq.name),
			slog.String("call_id", rq.callID), slog.String("error", s.logRedactor().Error(err)))
		return nil, &jsonrpc.Error{Code: CodeUnavailable, Message: "unavailable: the idempotency key could not be read, retry later"}
	}
	if !found {
		return nil, nil
	}
	if rec.Args != key.claim.Args {
		return nil, badKey(rq, "the idempotency key was used with other arguments")
	}
	return &rec, nil
}

// replay answers a retry whose key a committed write recorded, without
// running the handler: the stored result, labelled into the caller's
// taint again before release, or write.unconfirmed if none was stored.
func (s *Server) replay(ctx context.Context, rq *request, fc *flow.Call, call toolCall, key *idemKey, rec *guardedsql.IdempotencyRecord) (*mcp.CallToolResult, error) {
	if rec.Result == "" {
		return nil, s.unconfirmed(rq, true, nil)
	}
	plain, err := key.open(rec.Result)
	var out any
	if err == nil {
		out, err = call.decode(plain)
	}
	if err != nil {
		return nil, s.unconfirmed(rq, true, fmt.Errorf("idempotency: stored result: %w", err))
	}
	return s.release(ctx, rq, fc, out, true, true)
}

// release redacts a result, records its flow label and returns it. A
// result that cannot be released after the call committed a write is
// answered write.unconfirmed (retrySafe: the write's key was recorded),
// never "internal error": the client must know the write stands.
func (s *Server) release(ctx context.Context, rq *request, fc *flow.Call, out any, wrote, retrySafe bool) (*mcp.CallToolResult, error) {
	fail := func(err error) (*mcp.CallToolResult, error) {
		if wrote {
			return nil, s.unconfirmed(rq, retrySafe, err)
		}
		return s.internal(rq, err), nil
	}
	if c, ok := out.(Content); ok {
		blocks, err := c.wire(rq.red)
		if err == nil {
			err = s.record(ctx, rq, fc, out)
		}
		if err != nil {
			return fail(err)
		}
		return &mcp.CallToolResult{Content: blocks}, nil
	}
	js, err := rq.red.JSON(out)
	if err == nil {
		err = s.record(ctx, rq, fc, out)
	}
	if err != nil {
		return fail(err)
	}
	return &mcp.CallToolResult{
		StructuredContent: json.RawMessage(js),
		// The text rendering is the same redacted bytes, so each redaction
		// is counted once and the two can never disagree. It shares them
		// rather than copying a page per call: js is this call's own slice
		// (Scoped.JSON returns a fresh one) and nothing writes to it after
		// this point.
		Content: []mcp.Content{&mcp.TextContent{Text: unsafe.String(unsafe.SliceData(js), len(js))}},
	}, nil
}

func (s *Server) handlerError(ctx context.Context, a *request, err error) (*mcp.CallToolResult, error) {
	var deny *DenyError
	var input *inputError
	if res, werr, ok := s.toolInput(a, err); ok {
		return res, werr
	}
	switch {
	case errors.As(err, &deny):
		d := *deny
		d.Tool = a.name
		return nil, s.deny(a, &d)
	case errors.Is(err, guardedsql.ErrNoScope):
		return nil, s.deny(a, &DenyError{Rule: RuleScopeRequired, Reason: "the call reached the database without a tenant scope", Tool: a.name})
	case errors.Is(err, guardedsql.ErrNotFound):
		a.outcome = OutcomeNotFound
		return toolError("not found"), nil
	case errors.Is(err, guardedsql.ErrAmbiguous):
		return ambiguous(a), nil
	// The database's refusals, as guardedsql typed them: the words only,
	// never the engine's text (it can quote another tenant's values).
	case errors.Is(err, guardedsql.ErrConflict):
		a.outcome = OutcomeConflict
		return toolError("conflict"), nil
	case errors.Is(err, guardedsql.ErrReferenced):
		a.outcome = OutcomeReferenced
		return toolError("still referenced"), nil
	case errors.Is(err, guardedsql.ErrInvalidValue):
		a.outcome = OutcomeInvalid
		return toolError("invalid value"), nil
	case errors.As(err, &input):
		a.outcome = OutcomeInvalid
		return toolError(a.red.String(input.msg)), nil
	case errors.Is(err, guardedsql.ErrBusy):
		return nil, s.limited(a, s.limiter.reject(ctx, &LimitError{Rule: RuleDBBusy, Tool: a.name, RetryAfter: s.limiter.l.RetryAfter}))
	case errors.Is(err, context.DeadlineExceeded) && ctx.Err() != nil:
		a.outcome = OutcomeTimeout
		return toolError(fmt.Sprintf("timed out after %s", s.opts.CallTimeout)), nil
	case guardedsql.IsTimeout(err):
		// The database's statement or lock timeout (set with the scope)
		// stopped it: nothing about the database is passed on.
		a.outcome = OutcomeTimeout
		return toolError("timed out waiting for the database; retry later"), nil
	case errors.Is(err, context.Canceled) && ctx.Err() != nil:
		a.outcome = OutcomeCancelled
		return toolError("cancelled"), nil
	case guardedsql.IsRetryable(err):
		// A serialization failure or deadlock (a lock timeout was
		// answered above): not a bug, and the client may try again. After
		// the deadline and cancellation cases, so a retry loop that the
		// call's end interrupted is answered as that.
		a.outcome = OutcomeRetryable
		res := toolError(RetryableMessage)
		res.StructuredContent = retryableData{Retryable: true, Reason: "transaction conflict", CallID: a.callID}
		return res, nil
	case guardedsql.IsUnavailable(err):
		return nil, s.unavailable(a, err)
	}
	return s.internal(a, err), nil
}

// toolInput answers a multi round-trip error (see mrtrAnswer): the
// input-required result, with no content, or the JSON-RPC error.
func (s *Server) toolInput(a *request, err error) (*mcp.CallToolResult, error, bool) {
	ir, werr, ok := s.mrtrAnswer(a, err)
	if !ok || werr != nil {
		return nil, werr, ok
	}
	return &mcp.CallToolResult{InputRequests: ir.reqs, RequestState: ir.state}, nil, true
}

// internal logs err (redacted, with no reveal) and answers with a generic
// message that only carries the correlation id.
func (s *Server) internal(a *request, err error) *mcp.CallToolResult {
	a.outcome = OutcomeError
	s.opts.Logger.Error("tool call failed",
		slog.String("tool", a.name),
		slog.String("call_id", a.callID),
		slog.String("error", s.logRedactor().Error(err)))
	return toolError(fmt.Sprintf("internal error (correlation id %s)", a.callID))
}

// flowDeny denies a sink call with the flow witness, and keeps the witness
// (as redacted JSON) for the audit record.
func (s *Server) flowDeny(a *request, fd *flow.Denial) error {
	if w, err := json.Marshal(fd.Witness); err == nil {
		a.witness = s.logRedactor().String(string(w))
	}
	return s.deny(a, &DenyError{Rule: fd.Rule, Reason: fd.Reason, Tool: a.name, Witness: fd.Witness.Map()})
}

func mustJSON(v string) []byte {
	b, _ := json.Marshal(v)
	return b
}

func toolError(msg string) *mcp.CallToolResult {
	return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: msg}}}
}

// logRedactor redacts for logs: a zero scope, so no role reveals anything.
func (s *Server) logRedactor() *redact.Scoped { return s.opts.Redactor.ForScope(scope.Scope{}) }

// inputSchema is a tool's resolved input schema and, when the schema is
// simple enough, its compiled check (argcheck.go).
type inputSchema struct {
	resolved *jsonschema.Resolved
	check    *argCheck // nil: every call takes the full validation
}

// validateArgs validates the arguments against the input schema and
// returns the bytes the handler's input is decoded from: the client's own
// bytes, never a re-encoding, because validation decodes numbers as float64
// and an int64 id above 2^53 must reach the handler exactly. (Inferred
// schemas carry no defaults, so there is nothing to apply.) Arguments the
// compiled check accepts are valid (its invariant); any other goes through
// the full validation, which decides and words the error.
func validateArgs(in inputSchema, raw json.RawMessage) (json.RawMessage, error) {
	if len(raw) == 0 || string(raw) == "null" {
		raw = json.RawMessage("{}")
	}
	m := map[string]any{}
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, errors.New("arguments must be a JSON object")
	}
	if in.check != nil && in.check.accepts(m) {
		return raw, nil
	}
	var v any = m
	if err := in.resolved.Validate(&v); err != nil {
		return nil, errors.New(schemaMessage(err))
	}
	return raw, nil
}

// countRows is the audit log's "rows returned": the length of a top-level
// list result, or the summed lengths of the lists among a struct result's
// top-level fields, or 1 for any other non-nil result.
func countRows(out any) int {
	v := reflect.ValueOf(out)
	for v.IsValid() && (v.Kind() == reflect.Pointer || v.Kind() == reflect.Interface) {
		if v.IsNil() {
			return 0
		}
		v = v.Elem()
	}
	if !v.IsValid() {
		return 0
	}
	switch v.Kind() {
	case reflect.Slice, reflect.Array:
		return v.Len()
	case reflect.Struct:
		n, lists := 0, 0
		for i := 0; i < v.NumField(); i++ {
			if !v.Type().Field(i).IsExported() {
				continue
			}
			if f := v.Field(i); f.Kind() == reflect.Slice || f.Kind() == reflect.Array {
				n += f.Len()
				lists++
			}
		}
		if lists > 0 {
			return n
		}
	}
	return 1
}
