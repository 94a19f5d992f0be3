package flow

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"reflect"

	"github.com/tenantmcp/tenantmcp/redact"
	"github.com/tenantmcp/tenantmcp/scope"
)

// Client-supplied metadata the checker reads. The MCP "_meta" object of a
// tools/call request may carry:
const (
	// MetaConversation names the conversation a call belongs to, for
	// stateless HTTP and stdio, where there is no MCP session. A string of
	// 1 to 128 printable ASCII characters; anything else is ignored.
	MetaConversation = "tenantmcp/conversation"
	// MetaDeclassify asks for the declassification rule of that reason
	// (CapShim T-Declassify) on a sink call. It is honoured only when the
	// policy opts in ("declassify_from_meta": true): the client, that is
	// the model's host, writes _meta, so by default a declassification is
	// granted only by the user's explicit consent (CallInfo.Consent).
	MetaDeclassify = "tenantmcp/declassify"
	// HeaderConversation is the HTTP header that may carry the
	// conversation id instead of _meta (the _meta value wins).
	HeaderConversation = "Tenantmcp-Conversation-Id"
)

// CallInfo is what the server knows of a call when it begins.
type CallInfo struct {
	// Subject is the verified subject of the call's own token.
	Subject string
	// SessionID is the MCP session id (stateful streamable HTTP), "" in
	// stateless mode and over stdio.
	SessionID string
	// CallID is the server's correlation id of the call.
	CallID string
	// Meta is the request's _meta object; Header its HTTP header, if any.
	Meta   map[string]any
	Header http.Header
	// Args are the validated arguments.
	Args json.RawMessage
	// Consent is the declassification reason the client's user explicitly
	// accepted for this one call (Denial.Offer, asked through MCP
	// elicitation). Only the server sets it, and only after an accept.
	Consent string
}

// conversation returns the session string of ci: "mcp:<id>" for an MCP
// session, "conv:<id>" for a client conversation id, "" for neither.
func (ci *CallInfo) conversation() string {
	if ci.SessionID != "" {
		return "mcp:" + ci.SessionID
	}
	if v, ok := ci.Meta[MetaConversation].(string); ok && validConversation(v) {
		return "conv:" + v
	}
	if ci.Header != nil {
		if v := ci.Header.Get(HeaderConversation); validConversation(v) {
			return "conv:" + v
		}
	}
	return ""
}

func validConversation(v string) bool {
	if v == "" || len(v) > 128 {
		return false
	}
	for i := 0; i < len(v); i++ {
		if v[i] < 0x21 || v[i] > 0x7e {
			return false
		}
	}
	return true
}

// KeyOf returns the key of the taint a call reads and joins into:
//
//   - ScopeSubject: {Subject, ""} for every call of the subject;
//   - ScopeSession: {Subject, "mcp:<session id>"} in stateful HTTP,
//     {Subject, "conv:<conversation id>"} when the client names a
//     conversation (MetaConversation or HeaderConversation), else
//     {Subject, ""}.
//
// The subject is always the one verified for this call, so a session id
// presented with another subject's token names another taint: it neither
// inherits nor resets the session's.
func (c *Checker) KeyOf(ci CallInfo) Key {
	if c.pol.scope == ScopeSubject {
		return Key{Subject: ci.Subject}
	}
	return Key{Subject: ci.Subject, Session: ci.conversation()}
}

// Call is one tool call in progress. Begin returns it; the server calls
// Record with the result before the client can see it.
type Call struct {
	t       *Tool
	key     Key
	session string
	callID  string
	note    string
	// args are a sink call's arguments: what its result may echo.
	args json.RawMessage
}

// Begin starts a call of t. For a sink it judges the call against the
// caller's taint, read from the checker's Store, and returns an error if
// the policy forbids the flow or the taint cannot be read (RuleTaintStore:
// fail closed); the handler must then not run. The error is always a
// *[Denial] with its witness (errors.As) and matches [ErrDenied].
func (t *Tool) Begin(ctx context.Context, ci CallInfo) (*Call, error) {
	c := t.c
	session := ci.conversation()
	key := Key{Subject: ci.Subject}
	if c.pol.scope == ScopeSession {
		key.Session = session
	}
	call := &Call{t: t, key: key, session: session, callID: ci.CallID}
	if t.sink == nil {
		return call, nil
	}
	call.args = ci.Args
	snap, err := c.load(ctx, call.key)
	if err != nil {
		// Invariant: a sink never runs on a taint that could not be read.
		return nil, &Denial{Rule: RuleTaintStore, Reason: "the caller's taint could not be read",
			Witness: Witness{Rule: RuleTaintStore, Step: -1,
				Sink: SinkView{Tool: t.name, Kind: t.sink.Kind, Arg: t.sink.DestArg}}}
	}
	raw, d, derr := t.destination(ci.Args)
	reason := ci.Consent
	if reason == "" && c.pol.metaDeclassify {
		reason = metaReason(ci.Meta)
	}
	dec := c.decide(t, &snap, &d, derr, reason, ownerFromTaint)
	if dec.denial != nil {
		c.witness(dec.denial, &dec, t, &snap, raw, reason, func(bad catSet, lv rank) (map[int]origin, origin) {
			return c.origins(&snap, bad, lv)
		}, call.session, -1)
		if ci.Consent == "" && derr == nil && (dec.denial.Rule == RuleCategory || dec.denial.Rule == RuleLevel) {
			dec.denial.Offer = c.offer(t, &snap, &d)
		}
		return nil, dec.denial
	}
	switch {
	case dec.declassified != "" && ci.Consent != "":
		call.note = "declassified:" + dec.declassified + " (user consent)"
	case dec.declassified != "":
		call.note = "declassified:" + dec.declassified
	case dec.viaOwner:
		call.note = "owner"
	}
	return call, nil
}

// destination extracts and parses the sink's destination from args.
func (t *Tool) destination(args json.RawMessage) (string, Destination, error) {
	if t.sink.Dest != "" {
		return t.sink.Dest, t.dest, t.destErr
	}
	raw, err := t.destArg(args)
	if err != nil {
		return "", Destination{Kind: t.sink.Kind}, err
	}
	d, err := ParseDestination(t.sink.Kind, raw)
	return raw, d, err
}

// destArg decodes args into the sink's input type, as the handler will,
// and returns the destination field.
func (t *Tool) destArg(args json.RawMessage) (string, error) {
	v := reflect.New(t.in)
	if err := json.Unmarshal(args, v.Interface()); err != nil {
		return "", fmt.Errorf("%w: the arguments do not decode: %v", ErrDestination, err)
	}
	raw := v.Elem().FieldByIndex(t.destField).String()
	if raw == "" {
		return "", fmt.Errorf("%w: argument %q is missing or empty", ErrDestination, t.sink.DestArg)
	}
	return raw, nil
}

// Note summarises the decision for the audit record: "declassified:<reason>"
// for a flow a declassification allowed, "owner" for one allowed because
// the destination is the data subject, "" otherwise.
func (call *Call) Note() string { return call.note }

// Record joins the label of a result the client is about to receive into
// the caller's taint: the tool's static label, plus the categories (and
// their levels) of any personal data package redact found in the result's
// free text (rep is the redaction report of exactly this result). For a
// result with categories it also records its data subjects ($owner).
//
// A sink's result that echoes its own arguments (the destination it sent
// to) adds only the categories found in the result more often than in
// the arguments: what the caller sent does not taint it again.
//
// The label is durably held by the Store when Record returns nil: joined
// by this call; or public with no category, which changes no decision; or
// already held by a taint this process joined, or a sink check read, at
// most retain/1024 and 250 ms earlier (held.go). In the last two cases
// Record makes no store call. On an error
// (wrapping ErrTaintStore) the server must withhold the result: a result
// whose label was not recorded could later leave through a sink.
func (call *Call) Record(ctx context.Context, out any, rep redact.Report) error {
	c := call.t.c
	l := call.t.lab
	var argRep *redact.Report
	for i, r := range c.rcats {
		n := rep.Redacted(r) + rep.Revealed(r)
		if call.t.echoOnly || n == 0 {
			continue
		}
		if call.t.sink != nil {
			if argRep == nil {
				argRep = new(redact.Report)
				*argRep = argsReport(call.args)
			}
			if n <= argRep.Redacted(r)+argRep.Revealed(r) {
				continue
			}
		}
		if ix := c.piiCat[i]; ix >= 0 {
			l.cats |= 1 << uint(ix)
		}
	}
	l = c.withCatLevels(l)
	if l.cats == 0 && l.level <= rPublic {
		// Public data with no category changes no decision: nothing to
		// record, nothing to retain.
		return nil
	}
	now := c.now()
	held := c.held.covers(call.key, l, nil, false, false, now)
	var who []string
	bad := false
	if l.cats != 0 && held != heldYes {
		// The data subjects count for the check or the join.
		who, bad = owners(out, rep)
	}
	if held == heldIfOwners {
		held = c.held.covers(call.key, l, who, bad, true, now)
	}
	if held == heldYes {
		return nil
	}
	add := c.stored(l, who, bad, TaintOrigin{Tool: call.t.name, CallID: call.callID, Session: call.session})
	if err := c.store.Join(ctx, call.key, now, c.retain, add); err != nil {
		if !errors.Is(err, ErrTaintStore) {
			err = fmt.Errorf("%w: %w", ErrTaintStore, err)
		}
		return err
	}
	c.held.note(call.key, l.level, l.cats, who, bad, now)
	return nil
}

// argsReport counts the personal data the detectors find in a sink's
// arguments, as they find it in results: every string value, redacted with
// the default policy.
func argsReport(args json.RawMessage) redact.Report {
	red := redact.Default().ForScope(scope.Scope{})
	var v any
	if json.Unmarshal(args, &v) == nil {
		_, _ = red.JSON(v)
	}
	return red.Report()
}

type ctxKey struct{}

// NewContext returns ctx carrying call, for tools that need the caller's
// taint (the plan check).
func NewContext(ctx context.Context, call *Call) context.Context {
	return context.WithValue(ctx, ctxKey{}, call)
}

// FromContext returns the call ctx carries.
func FromContext(ctx context.Context) (*Call, bool) {
	c, ok := ctx.Value(ctxKey{}).(*Call)
	return c, ok
}
