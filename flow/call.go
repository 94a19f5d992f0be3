package flow

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"

	"github.com/tenantmcp/tenantmcp/redact"
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
}

// Begin starts a call of t. For a sink it judges the call against the
// caller's taint and returns a *Denial (with its witness) if the policy
// forbids the flow; the handler must then not run.
func (t *Tool) Begin(ci CallInfo) (*Call, *Denial) {
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
	now := c.now().UnixNano()
	snap := c.store.snapshot(call.key, now)
	raw, d, derr := t.destination(ci.Args)
	reason := ci.Consent
	if reason == "" && c.pol.metaDeclassify {
		reason = metaReason(ci.Meta)
	}
	dec := c.decide(t, &snap, &d, derr, reason, ownerFromTaint)
	if dec.denial != nil {
		c.witness(dec.denial, &dec, t, &snap, raw, reason, func(bad catSet, lv rank) (map[int]origin, origin) {
			return c.store.origins(call.key, bad, lv)
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
func (call *Call) Record(out any, rep redact.Report) {
	c := call.t.c
	l := call.t.lab
	for i, r := range c.rcats {
		if !call.t.echoOnly && rep.Redacted(r)+rep.Revealed(r) > 0 {
			if ix := c.piiCat[i]; ix >= 0 {
				l.cats |= 1 << uint(ix)
			}
		}
	}
	l = c.withCatLevels(l)
	var who []string
	bad := false
	if l.cats != 0 {
		who, bad = owners(out, rep)
	}
	c.store.join(call.key, c.now().UnixNano(), l, who, bad, origin{tool: call.t.name, callID: call.callID, session: call.session})
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
