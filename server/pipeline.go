package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tenantmcp/tenantmcp/flow"
	"github.com/tenantmcp/tenantmcp/internal/mint"
	"github.com/tenantmcp/tenantmcp/redact"
	"github.com/tenantmcp/tenantmcp/scope"
)

// request is the per-call value of the pipeline, carried in the context
// from the middleware to the item's handler: who calls, what, with which
// redaction, and what its audit record says.
type request struct {
	method  string // the MCP method
	name    string // the tool, prompt or resource: the audit record's "tool"
	callID  string // the correlation id of the audit record and of internal errors
	start   time.Time
	caller  caller
	red     *redact.Scoped // the caller's redaction; a zero scope gets the most restrictive
	session *mcp.ServerSession
	meta    mcp.Meta
	header  http.Header

	outcome, rule string
	rows          int
	flow          string // flow decision note (declassification, owner)
	witness       string // flow denial witness, redacted JSON
	consent       string // the user's answer to a declassification request
	narrowable    bool   // the tool takes NarrowProperty
	within        string // the grant the call was narrowed to (narrow.go)
	state         string // why a requestState was refused (mrtr.go)
	in            *round // multi round-trip: bindings, capabilities, the retry's answers
}

type requestKey struct{}

// requestOf is the request the pipeline put in ctx.
func requestOf(ctx context.Context) *request {
	rq, _ := ctx.Value(requestKey{}).(*request)
	return rq
}

func (s *Server) newRequest(method, name string, c caller) *request {
	return &request{method: method, name: name, callID: newCorrelationID(), start: s.opts.Now(), caller: c,
		red: s.opts.Redactor.ForScope(c.scope)}
}

// pipeline is the receiving middleware every MCP method passes. A
// tools/call, prompts/get, resources/read of a registered item and a
// completion/complete become one request: its caller (derived once), the
// denial of a caller without a scope, the item's Require, the limits,
// then the item's handler (which reads the request from its context), one
// audit record and the Tracer's end. Lists (and requests for items not
// registered) pass the limits only, and list results keep what the caller
// may see; every other method passes untouched.
func (s *Server) pipeline(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if err := s.malformed(ctx, method, req); err != nil {
			return nil, err
		}
		name, kind, key, ok := s.itemOf(req)
		if !ok {
			ctx, done, err := s.admitOnly(ctx, method, name, req)
			if err != nil {
				return nil, err
			}
			defer done("")
			res, err := next(ctx, method, req)
			if err == nil {
				s.filterList(ctx, req, res)
			}
			return res, err
		}
		s.inflight.Add(1)
		defer s.inflight.Add(-1)
		tracer := s.opts.Tracer
		if method != methodCallTool {
			tracer = nil
		}
		if tracer != nil {
			ctx = tracer.TraceCallStart(ctx, TraceCallStartData{Tool: name})
		}
		rq := s.newRequest(method, name, s.callerOf(ctx, req.GetExtra()))
		rq.session, _ = req.GetSession().(*mcp.ServerSession)
		if ex := req.GetExtra(); ex != nil {
			rq.header = ex.Header
		}
		rq.meta = req.GetParams().GetMeta()
		rq.in = s.newRound(req, rq)
		ctx, unbound := rq.in.limit(ctx)
		res, err := s.serve(ctx, rq, kind, key, req, next)
		unbound()
		if err != nil {
			rq.in.unanswered(ctx, rq)
		}
		s.audit(ctx, rq)
		if tracer != nil {
			tracer.TraceCallEnd(ctx, TraceCallEndData{Tool: name, CallID: rq.callID, Outcome: rq.outcome,
				Rule: rq.rule, Scope: rq.caller.scope, Duration: s.opts.Now().Sub(rq.start), Redactions: rq.red.Report()})
		}
		return res, err
	}
}

// itemOf names the item a request addresses and its Require key; ok is
// false for methods that are not one request of the pipeline and for
// items not registered (the go-sdk answers those as it does).
func (s *Server) itemOf(req mcp.Request) (name, kind, key string, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch r := req.(type) {
	case *mcp.CallToolRequest:
		return r.Params.Name, kindTool, r.Params.Name, s.tools[r.Params.Name]
	case *mcp.GetPromptRequest:
		return r.Params.Name, kindPrompt, r.Params.Name, s.surface.prompts[r.Params.Name] != nil
	case *mcp.ReadResourceRequest:
		if e, _ := s.lookupResourceLocked(r.Params.URI); e != nil {
			return e.name, kindResource, e.key, true
		}
	case *mcp.CompleteRequest:
		return "", "", "", true // Require: per reference, in complete
	}
	return "", "", "", false
}

// serve denies a caller without a scope or short of the item's Require,
// admits the request against the limits, and runs the item's handler.
func (s *Server) serve(ctx context.Context, rq *request, kind, key string, req mcp.Request, next mcp.MethodHandler) (mcp.Result, error) {
	if rq.caller.deny != nil {
		d := *rq.caller.deny
		return nil, s.deny(rq, &d)
	}
	if d := s.authorize(kind, key, rq.caller); d != nil {
		return nil, s.deny(rq, d)
	}
	ctx, done, le := s.admit(ctx, rq.caller.scope, rq.method, rq.name, req.GetExtra())
	defer func() { done(rq.outcome) }()
	if le != nil {
		return nil, s.limited(rq, le)
	}
	return next(context.WithValue(ctx, requestKey{}, rq), rq.method, req)
}

// admit takes a request's limits: those the HTTP front took before
// dispatch (then the context it returns ends when the client's HTTP
// request does), or, without them (stdio, a batch), here. done gives the
// slots back with the request's outcome (a timeout keeps them for
// Limits.TimeoutPenalty).
func (s *Server) admit(ctx context.Context, sc scope.Scope, method, name string, extra *mcp.RequestExtra) (context.Context, func(outcome string), *LimitError) {
	none := func(string) {}
	if extra != nil {
		if x := exchangeOf(extra.TokenInfo); x != nil {
			if reqCtx, release, live := x.claim(); reqCtx != nil {
				cctx, cancel := context.WithCancelCause(ctx)
				if !live {
					cancel(errClientGone) // the request is already gone: run nothing for it
					return cctx, none, nil
				}
				stop := context.AfterFunc(reqCtx, func() { cancel(errClientGone) })
				return cctx, func(outcome string) { stop(); cancel(nil); s.limiter.finish(release, outcome) }, nil
			}
		}
	}
	if !s.limiter.active() {
		return ctx, none, nil
	}
	release, le := s.limiter.admit(ctx, sc, method, name)
	if le != nil {
		return ctx, none, le
	}
	return ctx, func(outcome string) { s.limiter.finish(release, outcome) }, nil
}

// admitOnly admits a list, or a request for an item not registered: the
// limits without the rest of the pipeline, a refusal audited. A caller
// without a scope has no tenant to charge; it is denied every item, and
// its lists show only those that need no Require.
func (s *Server) admitOnly(ctx context.Context, method, name string, req mcp.Request) (context.Context, func(string), error) {
	none := func(string) {}
	if !admitted(method) {
		return ctx, none, nil
	}
	c := s.callerOf(ctx, req.GetExtra())
	if c.deny != nil {
		return ctx, none, nil
	}
	ctx, done, le := s.admit(ctx, c.scope, method, name, req.GetExtra())
	if le != nil {
		rq := s.newRequest(method, name, c)
		err := s.limited(rq, le)
		s.audit(ctx, rq)
		return ctx, done, err
	}
	return ctx, done, nil
}

// limited records a limit refusal for the audit log and returns its wire
// form.
func (s *Server) limited(rq *request, e *LimitError) error {
	rq.outcome, rq.rule = OutcomeLimited, e.Rule
	return e.wire()
}

// deny records a denial and returns its wire form, the witness redacted.
func (s *Server) deny(rq *request, d *DenyError) error {
	rq.outcome, rq.rule = OutcomeDenied, d.Rule
	if d.Tool == "" {
		d.Tool = rq.name
	}
	data, err := rq.red.JSON(d)
	if err != nil {
		data = []byte(`{"rule":` + string(mustJSON(d.Rule)) + `}`)
	}
	return d.wire(data)
}

// enter gives a handler its context: the scope sc (the only way a scope
// reaches the guarded DB), the flow call that judges a sink and labels the
// result (nil without a flow checker), and the call timeout; or the flow
// denial of a sink call, or the consent's multi round-trip error (see
// mrtrAnswer).
func (s *Server) enter(ctx context.Context, rq *request, sc scope.Scope, ft *flow.Tool, args json.RawMessage) (context.Context, *flow.Call, context.CancelFunc, error) {
	ctx = mint.NewContext(ctx, sc)
	var fc *flow.Call
	if ft != nil {
		ci := flow.CallInfo{Subject: sc.Subject(), CallID: rq.callID, Args: args, Meta: rq.meta, Header: rq.header}
		if rq.session != nil {
			ci.SessionID = rq.session.ID()
		}
		var fd *flow.Denial
		if fc, fd = beginFlow(ctx, ft, ci); fd != nil {
			// A rule could allow it: only the user may say so.
			var err error
			if fc, fd, err = s.consent(ctx, rq, ft, ci, fd); err != nil {
				return nil, nil, nil, err
			} else if fd != nil {
				return nil, nil, nil, s.flowDeny(rq, fd)
			}
		}
		rq.flow = fc.Note()
		ctx = flow.NewContext(ctx, fc)
	}
	ctx, cancel := context.WithTimeout(ctx, s.opts.CallTimeout)
	return ctx, fc, cancel, nil
}

// safely runs a handler, turning a panic into an error so that one faulty
// handler cannot take the server (and every tenant) down.
func safely[T any](h func() (T, error)) (out T, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("panic: %v", r)
		}
	}()
	return h()
}

// record labels the caller's taint with a result before the client can
// see it (a result whose label could not be recorded is withheld: the
// error), and counts it for the audit record.
func (s *Server) record(ctx context.Context, rq *request, fc *flow.Call, out any) error {
	if fc != nil {
		if err := fc.Record(ctx, out, rq.red.Report()); err != nil {
			return fmt.Errorf("recording the flow label: %w", err)
		}
	}
	rq.outcome, rq.rows = OutcomeOK, countRows(out)
	return nil
}

// audit writes the request's one audit record. Subject and grant ids pass
// through the log redactor: an IdP may use an e-mail address as sub.
// Nothing is built for a level the audit logger drops.
func (s *Server) audit(ctx context.Context, rq *request) {
	level := slog.LevelInfo
	if rq.outcome == OutcomeError || rq.outcome == OutcomeDenied || rq.outcome == OutcomeUnavailable || rq.outcome == OutcomeUnconfirmed {
		level = slog.LevelWarn
	}
	ctx = context.WithoutCancel(ctx)
	if !s.opts.AuditLogger.Enabled(ctx, level) {
		return
	}
	lr := s.logRedactor()
	grants := rq.caller.scope.Grants()
	gs := make([]string, len(grants))
	for i, g := range grants {
		gs[i] = lr.String(g.String())
	}
	attrs := make([]slog.Attr, 0, 15)
	attrs = append(attrs,
		slog.String("call_id", rq.callID),
		slog.String("tool", rq.name),
		slog.String("sub", lr.String(rq.caller.scope.Subject())),
		slog.Any("grants", gs),
		slog.String("outcome", rq.outcome),
		slog.Int("rows", rq.rows),
		slog.Duration("duration", s.opts.Now().Sub(rq.start)),
		slog.Any("redactions", rq.red.Report()),
	)
	optional := func(key, val string, redact bool) {
		if val == "" {
			return
		}
		if redact {
			val = lr.String(val)
		}
		attrs = append(attrs, slog.String(key, val))
	}
	optional("rule", rq.rule, false)
	optional("flow", rq.flow, true)
	optional("witness", rq.witness, false)
	optional("consent", rq.consent, false)
	optional("within", rq.within, true)
	optional("request_state", rq.state, false)
	msg := "tool call"
	if rq.method != methodCallTool {
		msg = rq.method
		attrs = append(attrs, slog.String("method", rq.method))
	}
	s.opts.AuditLogger.LogAttrs(ctx, level, msg, attrs...)
}

// beginFlow starts a flow-checked call: the *flow.Denial that
// [flow.Tool.Begin] returns as its error, or nil. Invariant: any error of
// Begin is a denial here, so a sink never runs after an error, even one
// that is not a *flow.Denial (Begin documents that it always is).
func beginFlow(ctx context.Context, ft *flow.Tool, ci flow.CallInfo) (*flow.Call, *flow.Denial) {
	fc, err := ft.Begin(ctx, ci)
	if err == nil {
		return fc, nil
	}
	var d *flow.Denial
	if errors.As(err, &d) {
		return nil, d
	}
	return nil, &flow.Denial{Rule: flow.RuleTaintStore, Reason: "the flow check failed"}
}
