package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"time"
	"unsafe"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tenantmcp/tenantmcp/claims"
	"github.com/tenantmcp/tenantmcp/flow"
	"github.com/tenantmcp/tenantmcp/guardedsql"
	"github.com/tenantmcp/tenantmcp/internal/mint"
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

// callFunc decodes the validated arguments into the handler's In type and
// runs it.
type callFunc func(ctx context.Context, db *guardedsql.DB, args json.RawMessage) (any, error)

func typedCall[In, Out any](h ToolHandler[In, Out]) callFunc {
	return func(ctx context.Context, db *guardedsql.DB, args json.RawMessage) (any, error) {
		var in In
		if err := json.Unmarshal(args, &in); err != nil {
			return nil, InvalidInput("invalid arguments: %s", decodeMessage(err))
		}
		out, err := h(ctx, db, in)
		if err != nil {
			return nil, err
		}
		return out, nil
	}
}

// wrap is the one path of a tool call: scope, input validation, the flow
// check of a sink, the handler under a deadline, redaction of whatever
// leaves, the flow label of the result, and the audit record.
func (s *Server) wrap(tool string, narrowable bool, in *jsonschema.Resolved, ft *flow.Tool, call callFunc) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		s.inflight.Add(1)
		defer s.inflight.Add(-1)
		start := s.opts.Now()
		a := auditRecord{tool: tool, callID: newCorrelationID(), narrowable: narrowable}
		if s.opts.Tracer != nil {
			ctx = s.opts.Tracer.TraceCallStart(ctx, TraceCallStartData{Tool: tool})
		}
		sc, denyErr := s.scopeOf(ctx, req)
		a.scope = sc
		// A zero scope (denied) gets the most restrictive redaction.
		red := s.redactor().ForScope(sc)
		var res *mcp.CallToolResult
		var rpcErr error
		if denyErr == nil {
			var limErr *LimitError
			var done func(outcome string)
			ctx, done, limErr = s.admitCall(ctx, req, sc, tool)
			defer func() { done(a.outcome) }()
			if limErr != nil {
				rpcErr = s.limited(&a, limErr)
			}
		}
		if rpcErr == nil {
			res, rpcErr = s.run(ctx, &a, red, sc, denyErr, in, ft, call, req)
		}
		a.duration = s.opts.Now().Sub(start)
		a.report = red.Report()
		s.audit(ctx, &a)
		if s.opts.Tracer != nil {
			s.opts.Tracer.TraceCallEnd(ctx, TraceCallEndData{Tool: tool, CallID: a.callID, Outcome: a.outcome,
				Rule: a.rule, Scope: a.scope, Duration: a.duration, Redactions: a.report})
		}
		return res, rpcErr
	}
}

func (s *Server) run(ctx context.Context, a *auditRecord, red *redact.Scoped, sc scope.Scope, denyErr *DenyError,
	in *jsonschema.Resolved, ft *flow.Tool, call callFunc, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	if denyErr != nil {
		return nil, s.deny(a, red, denyErr)
	}
	if d := s.authorize(kindTool, a.tool, s.callerOf(ctx, req.Extra)); d != nil {
		return nil, s.deny(a, red, d)
	}
	args, err := validateArgs(in, req.Params.Arguments)
	if err != nil {
		a.outcome = OutcomeInvalid
		return toolError(red.String("invalid arguments: " + err.Error())), nil
	}
	if a.narrowable {
		var refused *mcp.CallToolResult
		if sc, args, refused = s.narrow(a, sc, args); refused != nil {
			return refused, nil
		}
	}
	ctx = mint.NewContext(ctx, sc)
	var fc *flow.Call
	if ft != nil {
		var fd *flow.Denial
		ci := flowCallInfo(sc, a.callID, args, req)
		if fc, fd = beginFlow(ctx, ft, ci); fd != nil {
			// A rule could allow it: only the user may say so.
			if fc, fd = s.consent(ctx, a, red, ft, ci, fd, req.Session); fd != nil {
				return nil, s.flowDeny(a, red, fd)
			}
		}
		a.flow = fc.Note()
		ctx = flow.NewContext(ctx, fc)
	}
	ctx, cancel := context.WithTimeout(ctx, s.opts.CallTimeout)
	defer cancel()
	out, err := s.callHandler(ctx, call, args)
	if err != nil {
		return s.handlerError(ctx, a, red, err)
	}
	js, err := red.JSON(out)
	if err != nil {
		return s.internal(a, red, fmt.Errorf("redacting result: %w", err)), nil
	}
	if fc != nil {
		// Before the client can see the result: a sink call it makes next
		// is judged with this result's label.
		// A result whose label could not be recorded is withheld.
		if err := fc.Record(ctx, out, red.Report()); err != nil {
			return s.internal(a, red, err), nil
		}
	}
	a.outcome = OutcomeOK
	a.rows = countRows(out)
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

// callHandler runs the handler, turning a panic into an internal error so
// that one faulty tool cannot take the server (and every tenant) down.
func (s *Server) callHandler(ctx context.Context, call callFunc, args json.RawMessage) (out any, err error) {
	defer func() {
		if r := recover(); r != nil {
			out, err = nil, fmt.Errorf("handler panic: %v", r)
		}
	}()
	return call(ctx, s.opts.DB, args)
}

func (s *Server) handlerError(ctx context.Context, a *auditRecord, red *redact.Scoped, err error) (*mcp.CallToolResult, error) {
	var deny *DenyError
	var input *inputError
	switch {
	case errors.As(err, &deny):
		d := *deny
		d.Tool = a.tool
		return nil, s.deny(a, red, &d)
	case errors.Is(err, guardedsql.ErrNoScope):
		return nil, s.deny(a, red, &DenyError{Rule: RuleScopeRequired, Reason: "the call reached the database without a tenant scope", Tool: a.tool})
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
		return toolError(red.String(input.msg)), nil
	case errors.Is(err, guardedsql.ErrBusy):
		return nil, s.limited(a, s.limiter.reject(ctx, &LimitError{Rule: RuleDBBusy, Tool: a.tool, RetryAfter: s.limiter.l.RetryAfter}))
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
	return s.internal(a, red, err), nil
}

// internal logs err (redacted, with no reveal) and answers with a generic
// message that only carries the correlation id.
func (s *Server) internal(a *auditRecord, red *redact.Scoped, err error) *mcp.CallToolResult {
	a.outcome = OutcomeError
	s.opts.Logger.Error("tool call failed",
		slog.String("tool", a.tool),
		slog.String("call_id", a.callID),
		slog.String("error", s.logRedactor().Error(err)))
	return toolError(fmt.Sprintf("internal error (correlation id %s)", a.callID))
}

func (s *Server) deny(a *auditRecord, red *redact.Scoped, d *DenyError) error {
	a.outcome = OutcomeDenied
	a.rule = d.Rule
	if d.Tool == "" {
		d.Tool = a.tool
	}
	data, err := red.JSON(d)
	if err != nil {
		data = []byte(`{"rule":` + string(mustJSON(d.Rule)) + `}`)
	}
	return d.wire(data)
}

// flowCallInfo is what package flow needs of a call: the verified subject
// of this request's token, the MCP session, the client's _meta and headers.
func flowCallInfo(sc scope.Scope, callID string, args json.RawMessage, req *mcp.CallToolRequest) flow.CallInfo {
	ci := flow.CallInfo{Subject: sc.Subject(), CallID: callID, Args: args}
	if req.Session != nil {
		ci.SessionID = req.Session.ID()
	}
	if req.Params != nil {
		ci.Meta = req.Params.Meta
	}
	if req.Extra != nil {
		ci.Header = req.Extra.Header
	}
	return ci
}

// flowDeny denies a sink call with the flow witness, and keeps the witness
// (as redacted JSON) for the audit record.
func (s *Server) flowDeny(a *auditRecord, red *redact.Scoped, fd *flow.Denial) error {
	if w, err := json.Marshal(fd.Witness); err == nil {
		a.witness = s.logRedactor().String(string(w))
	}
	return s.deny(a, red, &DenyError{Rule: fd.Rule, Reason: fd.Reason, Tool: a.tool, Witness: fd.Witness.Map()})
}

func mustJSON(v string) []byte {
	b, _ := json.Marshal(v)
	return b
}

func toolError(msg string) *mcp.CallToolResult {
	return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: msg}}}
}

// scopeOf derives the call's scope from the current request's verified
// token (req.Extra.TokenInfo, never the session's first token), or from
// the stdio token.
func (s *Server) scopeOf(ctx context.Context, req *mcp.CallToolRequest) (scope.Scope, *DenyError) {
	if req.Extra != nil && req.Extra.TokenInfo != nil {
		if sc, ok := claims.ScopeFromTokenInfo(req.Extra.TokenInfo); ok {
			return sc, nil
		}
		return scope.Scope{}, &DenyError{Rule: RuleScopeRequired, Reason: "the verified token carries no tenant scope"}
	}
	if s.stdioScope != nil {
		sc, err := s.stdioScope(ctx)
		if err != nil {
			return scope.Scope{}, &DenyError{Rule: RuleTokenExpired, Reason: s.logRedactor().Error(err)}
		}
		return sc, nil
	}
	return scope.Scope{}, &DenyError{Rule: RuleScopeRequired, Reason: "the call carries no verified bearer token"}
}

func (s *Server) redactor() *redact.Redactor { return s.opts.Redactor }

// logRedactor redacts for logs: a zero scope, so no role reveals anything.
func (s *Server) logRedactor() *redact.Scoped { return s.opts.Redactor.ForScope(scope.Scope{}) }

// validateArgs validates the arguments against the input schema and
// returns the bytes the handler's input is decoded from: the client's own
// bytes, never a re-encoding, because validation decodes numbers as float64
// and an int64 id above 2^53 must reach the handler exactly. (Inferred
// schemas carry no defaults, so there is nothing to apply.)
func validateArgs(in *jsonschema.Resolved, raw json.RawMessage) (json.RawMessage, error) {
	if len(raw) == 0 || string(raw) == "null" {
		raw = json.RawMessage("{}")
	}
	m := map[string]any{}
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, errors.New("arguments must be a JSON object")
	}
	var v any = m
	if err := in.Validate(&v); err != nil {
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

type auditRecord struct {
	method   string // the MCP method, "" for tools/call
	tool     string
	callID   string
	scope    scope.Scope
	outcome  string
	rule     string
	rows     int
	duration time.Duration
	report   redact.Report
	flow     string // flow decision note (declassification, owner)
	witness  string // flow denial witness, redacted JSON
	consent  string // the user's answer to a declassification request
	// narrowable: the tool takes NarrowProperty; within: the grant the
	// call was narrowed to (narrow.go).
	narrowable bool
	within     string
}

// audit writes the call's one audit record. Subject and grant ids pass
// through the log redactor: an IdP may use an e-mail address as sub.
func (s *Server) audit(ctx context.Context, a *auditRecord) {
	lr := s.logRedactor()
	grants := a.scope.Grants()
	gs := make([]string, len(grants))
	for i, g := range grants {
		gs[i] = lr.String(g.String())
	}
	attrs := []slog.Attr{
		slog.String("call_id", a.callID),
		slog.String("tool", a.tool),
		slog.String("sub", lr.String(a.scope.Subject())),
		slog.Any("grants", gs),
		slog.String("outcome", a.outcome),
		slog.Int("rows", a.rows),
		slog.Duration("duration", a.duration),
		slog.Any("redactions", a.report),
	}
	if a.rule != "" {
		attrs = append(attrs, slog.String("rule", a.rule))
	}
	if a.flow != "" {
		attrs = append(attrs, slog.String("flow", lr.String(a.flow)))
	}
	if a.witness != "" {
		attrs = append(attrs, slog.String("witness", a.witness))
	}
	if a.consent != "" {
		attrs = append(attrs, slog.String("consent", a.consent))
	}
	if a.within != "" {
		attrs = append(attrs, slog.String("within", lr.String(a.within)))
	}
	msg := "tool call"
	if a.method != "" {
		msg = a.method
		attrs = append(attrs, slog.String("method", a.method))
	}
	level := slog.LevelInfo
	if a.outcome == OutcomeError || a.outcome == OutcomeDenied || a.outcome == OutcomeUnavailable {
		level = slog.LevelWarn
	}
	s.opts.AuditLogger.LogAttrs(context.WithoutCancel(ctx), level, msg, attrs...)
}
