//lint:file-ignore SA1019 sampling and roots are deprecated by 2026-07-28 (SEP-2577) but remain input requests clients answer during the deprecation window

package server

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tenantmcp/tenantmcp/claims"
	"github.com/tenantmcp/tenantmcp/internal/guardfault"
	"github.com/tenantmcp/tenantmcp/scope"
)

// InputOptions configure multi round-trip requests (MCP SEP-2322): the
// declassification consent of a sink call and the tool author's Input.
type InputOptions struct {
	// Keys sign and verify requestState (HMAC-SHA256). Keys[0] signs,
	// every key verifies (rotation). Each must be at least 32 bytes.
	// Empty: one random key for this process (one replica only).
	Keys [][]byte
	// Replays spends each requestState's nonce once. Nil: in this process
	// (one replica only). Shared stores: server/pgstore.NewReplays,
	// server/redisstore.NewReplays.
	Replays ReplayStore
}

// ReplayStore records spent requestState nonces, shared by every replica
// that verifies the same Keys.
type ReplayStore interface {
	// Spend records nonce as used until `until`; it returns ErrReplayed
	// if it was spent already.
	Spend(ctx context.Context, nonce string, until time.Time) error
}

var (
	// ErrReplayed: a ReplayStore saw the nonce before.
	ErrReplayed = errors.New("server: request state already used")
	// ErrInputRequired is wrapped by the error Input returns on the first
	// pass: the handler must return it (as is or wrapped).
	ErrInputRequired = errors.New("server: input required from the client")
	// ErrInputUnsupported: the client cannot answer this kind of input
	// request (it declared no such capability, or it speaks a protocol
	// version before 2026-07-28 without a session to ask it on).
	ErrInputUnsupported = errors.New("server: the client cannot be asked for input")
)

// OutcomeInputRequired: the request was answered with an input-required
// result (the client is to retry it with the answers).
const OutcomeInputRequired = "input_required"

// minKeyBytes is the least length of an InputOptions key.
const minKeyBytes = 32

// stateVersion prefixes every requestState; a format change bumps it.
const stateVersion = "s1"

// consentID is the input request id of a consent question; Input answers
// never include it.
const consentID = "tenantmcp/consent"

// Kinds of requestState.
const (
	stateConsent = "consent"
	stateInput   = "input"
)

// badState is the one answer to every requestState that fails
// verification, whatever the cause: the cause goes to the audit record only.
var badState = &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "invalid requestState: send the request again without it"}

// stateError is a refused requestState and its precise reason (audit only).
type stateError struct{ reason string }

func (e *stateError) Error() string { return "request state refused: " + e.reason }

// inputRequired is the error Input returns to ask the client.
type inputRequired struct {
	reqs  mcp.InputRequestMap
	state string
}

func (e *inputRequired) Error() string        { return ErrInputRequired.Error() }
func (e *inputRequired) Is(target error) bool { return target == ErrInputRequired }

// requestState is the signed content of a requestState. Invariant: a
// retry is honoured only if every binding equals the retry's own request
// and caller, so a state answers exactly one request of one caller once.
type requestState struct {
	Kind     string `json:"k"`
	Resource string `json:"res"`
	Issuer   string `json:"iss"`
	Subject  string `json:"sub"`
	Grants   string `json:"grants"` // SHA-256 of the canonical grant set
	Method   string `json:"m"`
	Name     string `json:"n"`    // tool or prompt name, resource URI
	Args     string `json:"args"` // SHA-256 of the canonical arguments
	// Rule and Witness: the declassification offered (consent) or
	// already accepted in an earlier round (input), and the SHA-256 of
	// the witness the person saw.
	Rule    string               `json:"rule,omitempty"`
	Witness string               `json:"wit,omitempty"`
	Expiry  int64                `json:"exp"` // Unix milliseconds
	Nonce   string               `json:"nonce"`
	Asked   []string             `json:"asked"`
	Answers mcp.InputResponseMap `json:"answers,omitempty"` // earlier rounds'
}

// binding is what a requestState is bound to, from the request at hand.
type binding struct {
	resource, issuer, subject, grants, method, name, args string
}

// round is the multi round-trip part of one request: who and what it
// binds, what the client can answer, and the retry's responses and state.
// Its hashes are computed only when a state is issued or verified, so a
// request that asks nothing pays for none of it.
type round struct {
	s        *Server
	caps     *mcp.ClientCapabilities
	native   bool // the client speaks 2026-07-28: it retries by itself
	stateful bool // a session the go-sdk can send requests on (2025-era clients)

	mu      sync.Mutex // a handler may call Input from several goroutines
	bound   bool
	bind    binding
	rawArgs json.RawMessage
	sc      scope.Scope

	responses mcp.InputResponseMap
	state     string
	opened    bool
	st        *requestState
	err       error
	// consented: the declassification the person accepted in this
	// request (carried into an Input state of the same call).
	consentRule, consentWit string
	// expire ends a 2025-era session's request when its client has not
	// answered within ConsentTimeout (the go-sdk asks it on the request's
	// context); timer is armed by an input-required answer, stopped by
	// the retry.
	expire context.CancelCauseFunc
	timer  *time.Timer
}

// errNoAnswer ends a session request whose client did not answer in time.
var errNoAnswer = errors.New("server: the client did not answer in time")

// limit gives a 2025-era session's request a context that ends
// ConsentTimeout after it asks its client, if the answer has not come.
func (in *round) limit(ctx context.Context) (context.Context, context.CancelFunc) {
	if !in.stateful || in.native {
		return ctx, func() {}
	}
	ctx, in.expire = context.WithCancelCause(ctx)
	return ctx, func() { in.expire(nil) }
}

// unanswered records, after the request, a session client that was asked
// and never answered: the go-sdk's error (or the timeout) reached the client.
func (in *round) unanswered(ctx context.Context, rq *request) {
	if rq.outcome != OutcomeInputRequired {
		return
	}
	timeout := errors.Is(context.Cause(ctx), errNoAnswer)
	rq.outcome = OutcomeError
	if timeout {
		rq.outcome = OutcomeTimeout
	}
	if rq.consent == ConsentRequested {
		rq.consent = ConsentUnsupported
		if timeout {
			rq.consent = ConsentTimeout
		}
	}
}

// newRound derives the round of a request the pipeline serves.
func (s *Server) newRound(req mcp.Request, rq *request) *round {
	in := &round{s: s, sc: rq.caller.scope}
	var version string
	switch r := req.(type) {
	case *mcp.CallToolRequest:
		version, in.caps = r.ProtocolVersion(), r.ClientCapabilities()
		in.bind.name, in.rawArgs = r.Params.Name, r.Params.Arguments
	case *mcp.GetPromptRequest:
		version, in.caps = r.ProtocolVersion(), r.ClientCapabilities()
		in.bind.name, in.rawArgs = r.Params.Name, mustMarshal(r.Params.Arguments)
	case *mcp.ReadResourceRequest:
		version, in.caps = r.ProtocolVersion(), r.ClientCapabilities()
		in.bind.name = r.Params.URI
	}
	in.native = version >= protocol2026
	in.bind.method = rq.method
	in.bind.resource = "stdio:" + s.opts.Name
	stateless := false
	if ex := req.GetExtra(); ex != nil && ex.TokenInfo != nil {
		if c, ok := claims.FromTokenInfo(ex.TokenInfo); ok {
			in.bind.issuer = c.Issuer
		}
		if x := exchangeOf(ex.TokenInfo); x != nil {
			in.bind.resource, stateless = x.resource, x.stateless
		}
	}
	in.stateful = rq.session != nil && !stateless
	return in
}

func mustMarshal(v any) json.RawMessage {
	b, _ := json.Marshal(v)
	return b
}

// binding completes the round's binding (the hashes) once. Call with mu held.
func (in *round) binding() binding {
	if !in.bound {
		g := sha256.Sum256(in.sc.GrantJSON())
		in.bind.subject, in.bind.grants = in.sc.Subject(), hex.EncodeToString(g[:])
		in.bind.args, in.bound = canonicalHash(in.rawArgs), true
	}
	return in.bind
}

// retry takes the inputResponses and requestState of the request the
// handler runs for (a 2025-era session's go-sdk retry reuses the round).
func (in *round) retry(responses mcp.InputResponseMap, state string) {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.responses, in.state, in.opened, in.st, in.err = responses, state, false, nil, nil
	if in.timer != nil {
		in.timer.Stop()
	}
}

// can reports whether the client can answer an input request of this type.
func (in *round) can(r mcp.InputRequest) error {
	c := in.caps
	var name string
	var declared bool
	switch r.(type) {
	case *mcp.ElicitParams:
		name, declared = "elicitation", c != nil && c.Elicitation != nil
	case *mcp.CreateMessageParams, *mcp.CreateMessageWithToolsParams:
		name, declared = "sampling", c != nil && c.Sampling != nil
	case *mcp.ListRootsParams:
		name, declared = "roots", c != nil && c.RootsV2 != nil
	default:
		return fmt.Errorf("%w: unknown input request %T", ErrInputUnsupported, r)
	}
	switch {
	case !in.native && !in.stateful:
		return &capabilityError{name: name, why: "a client before 2026-07-28 without a session"}
	case !declared:
		return &capabilityError{name: name, why: "no " + name + " capability"}
	}
	return nil
}

// capabilityError is ErrInputUnsupported naming the client capability the
// input request needs: the -32021 error's data.requiredCapabilities.
type capabilityError struct{ name, why string }

func (e *capabilityError) Error() string { return ErrInputUnsupported.Error() + ": " + e.why }
func (e *capabilityError) Unwrap() error { return ErrInputUnsupported }

// open verifies the round's requestState, once: signature, version,
// every binding, expiry, then spends its nonce. Any failure is one
// *stateError.
func (in *round) open(ctx context.Context) (*requestState, error) {
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.opened {
		return in.st, in.err
	}
	in.opened = true
	in.st, in.err = in.s.verifyState(ctx, in.binding(), in.state)
	return in.st, in.err
}

// issue signs a new requestState for this round's request.
func (in *round) issue(kind, rule, wit string, asked []string, answers mcp.InputResponseMap) (string, error) {
	var n [16]byte
	if _, err := rand.Read(n[:]); err != nil {
		return "", fmt.Errorf("request state nonce: %w", err)
	}
	sort.Strings(asked)
	in.mu.Lock()
	b := in.binding()
	in.mu.Unlock()
	st := requestState{Kind: kind, Resource: b.resource, Issuer: b.issuer, Subject: b.subject,
		Grants: b.grants, Method: b.method, Name: b.name, Args: b.args, Rule: rule, Witness: wit,
		Expiry: in.s.opts.Now().Add(in.s.opts.ConsentTimeout).UnixMilli(), Nonce: base64.RawURLEncoding.EncodeToString(n[:]),
		Asked: asked, Answers: answers}
	body, err := json.Marshal(st)
	if err != nil {
		return "", fmt.Errorf("request state: %w", err)
	}
	payload := stateVersion + "." + base64.RawURLEncoding.EncodeToString(body)
	return payload + "." + base64.RawURLEncoding.EncodeToString(in.s.mac(in.s.keys[0], payload)), nil
}

func (s *Server) mac(key []byte, payload string) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(payload))
	return m.Sum(nil)
}

// verifyState checks raw against b; see requestState's invariant.
func (s *Server) verifyState(ctx context.Context, b binding, raw string) (*requestState, error) {
	i := strings.LastIndexByte(raw, '.')
	if i < 0 || !strings.HasPrefix(raw, stateVersion+".") {
		return nil, &stateError{"malformed"}
	}
	sig, err := base64.RawURLEncoding.DecodeString(raw[i+1:])
	if err != nil {
		return nil, &stateError{"malformed signature"}
	}
	ok := false
	for _, k := range s.keys {
		ok = ok || hmac.Equal(sig, s.mac(k, raw[:i]))
	}
	if !ok {
		return nil, &stateError{"bad signature"}
	}
	body, err := base64.RawURLEncoding.DecodeString(raw[len(stateVersion)+1 : i])
	if err != nil {
		return nil, &stateError{"malformed body"}
	}
	var st requestState
	if err := json.Unmarshal(body, &st); err != nil {
		return nil, &stateError{"malformed body"}
	}
	for _, f := range []struct{ what, got, want string }{
		{"resource", st.Resource, b.resource}, {"issuer", st.Issuer, b.issuer}, {"subject", st.Subject, b.subject},
		{"grants", st.Grants, b.grants}, {"method", st.Method, b.method}, {"name", st.Name, b.name}, {"arguments", st.Args, b.args},
	} {
		if f.got != f.want && !guardfault.Off(guardfault.StateBindings) {
			return nil, &stateError{f.what + " mismatch"}
		}
	}
	exp := time.UnixMilli(st.Expiry)
	if !s.opts.Now().Before(exp) {
		return nil, &stateError{"expired"}
	}
	if st.Nonce == "" {
		return nil, &stateError{"no nonce"}
	}
	if guardfault.Off(guardfault.StateReplay) {
		return &st, nil
	}
	if err := s.replays.Spend(ctx, st.Nonce, exp); errors.Is(err, ErrReplayed) {
		return nil, &stateError{"replayed"}
	} else if err != nil {
		// The store's error goes to the operational log, redacted; the
		// audit record gets a fixed reason (a driver's text is no audit value).
		s.opts.Logger.Error("request state: replay store failed", slog.String("error", s.logRedactor().Error(err)))
		return nil, &stateError{"replay store unavailable"}
	}
	return &st, nil
}

// canonicalHash is the hex SHA-256 of raw JSON re-encoded with sorted
// keys (numbers kept as written); absent or null is "{}".
func canonicalHash(raw json.RawMessage) string {
	var v any = map[string]any{}
	if len(bytes.TrimSpace(raw)) > 0 {
		d := json.NewDecoder(bytes.NewReader(raw))
		d.UseNumber()
		if d.Decode(&v) != nil || v == nil {
			v = map[string]any{} // invalid arguments are refused before anything is asked
		}
	}
	b, _ := json.Marshal(v) // maps encode with sorted keys
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

// Input asks the person behind the client for input (elicitation,
// sampling, roots) from inside a tool handler, prompt handler or resource
// handler, through MCP multi round-trip requests. On the first pass it
// returns an error wrapping ErrInputRequired: the handler must return it
// (as is or wrapped); the server answers with an input-required result
// whose requestState is signed and bound to the caller and the request.
// When the client retries with inputResponses and that requestState,
// Input verifies it and returns the responses for exactly these ids.
// Earlier rounds' answers are carried in the (signed) state, so a handler
// may call Input again with other ids (multi-round). A client that cannot
// answer this kind of request (capability not declared) gets
// ErrInputUnsupported.
//
// A 2025-era client in a session is asked by the server on the same
// session (the go-sdk fulfils the requests and runs the handler once
// more, so such a client gets one round), and one handler serves both.
// Answers sent with no requestState, unasked, count for the first round
// only (conformance expects it; the same client would give them when
// asked): a handler must not take an answer as proof that the person saw
// anything. The answers are the client's word: validate them as any other
// input.
func Input(ctx context.Context, reqs mcp.InputRequestMap) (mcp.InputResponseMap, error) {
	rq := requestOf(ctx)
	if rq == nil || rq.in == nil {
		return nil, fmt.Errorf("%w: Input outside a tool, prompt or resource handler", ErrInputUnsupported)
	}
	in := rq.in
	for id, r := range reqs {
		if id == consentID {
			return nil, fmt.Errorf("server: input request id %q is reserved", id)
		}
		if err := in.can(r); err != nil {
			return nil, err
		}
	}
	answers := mcp.InputResponseMap{}
	switch {
	case in.state != "":
		st, err := in.open(ctx)
		if err != nil {
			return nil, err
		}
		for id, a := range st.Answers {
			answers[id] = a
		}
		if st.Kind == stateInput {
			for _, id := range st.Asked {
				if a, ok := in.responses[id]; ok {
					answers[id] = a
				}
			}
		}
	default:
		// No state: the first round. Answers the client sent unasked are
		// taken as answers to this round (SEP-2322: the same client would
		// give them when asked); unknown ids are ignored.
		for id, a := range in.responses {
			if id != consentID {
				answers[id] = a
			}
		}
	}
	out, missing := mcp.InputResponseMap{}, mcp.InputRequestMap{}
	for id, r := range reqs {
		if a, ok := answers[id]; ok && fits(r, a) {
			out[id] = a
		} else {
			missing[id] = r
			delete(answers, id)
		}
	}
	if len(missing) == 0 {
		return out, nil
	}
	asked := make([]string, 0, len(missing))
	for id := range missing {
		asked = append(asked, id)
	}
	state, err := in.issue(stateInput, in.consentRule, in.consentWit, asked, answers)
	if err != nil {
		return nil, err
	}
	return nil, &inputRequired{reqs: missing, state: state}
}

// fits reports whether a is a response of the type request r asks for.
func fits(r mcp.InputRequest, a mcp.InputResponse) bool {
	switch r.(type) {
	case *mcp.ElicitParams:
		_, ok := a.(*mcp.ElicitResult)
		return ok
	case *mcp.CreateMessageParams, *mcp.CreateMessageWithToolsParams:
		switch a.(type) {
		case *mcp.CreateMessageResult, *mcp.CreateMessageWithToolsResult:
			return true
		}
	case *mcp.ListRootsParams:
		_, ok := a.(*mcp.ListRootsResult)
		return ok
	}
	return false
}

// mrtrAnswer turns a handler's multi round-trip error into its answer:
// the input requests and state of an input-required result, or the wire
// error of a refused state or of a client that cannot be asked. ok is
// false for any other error.
func (s *Server) mrtrAnswer(rq *request, err error) (ir *inputRequired, wire error, ok bool) {
	var se *stateError
	switch {
	case errors.As(err, &ir):
		rq.outcome = OutcomeInputRequired
		if in := rq.in; in.expire != nil {
			in.mu.Lock()
			in.timer = time.AfterFunc(s.opts.ConsentTimeout, func() { in.expire(errNoAnswer) })
			in.mu.Unlock()
		}
		return ir, nil, true
	case errors.As(err, &se):
		rq.outcome, rq.state = OutcomeInvalid, se.reason
		return nil, badState, true
	case errors.Is(err, ErrInputUnsupported):
		rq.outcome = OutcomeInvalid
		wire := &jsonrpc.Error{Code: mcp.CodeMissingRequiredClientCapabilities, Message: "the client cannot be asked for the input this request needs"}
		if ce := (*capabilityError)(nil); errors.As(err, &ce) {
			wire.Data, _ = json.Marshal(map[string]any{"requiredCapabilities": map[string]any{ce.name: struct{}{}}})
		}
		return nil, wire, true
	}
	return nil, nil, false
}

// memReplays is the in-process ReplayStore: spent nonces until they
// expire, pruned as it goes.
type memReplays struct {
	mu    sync.Mutex
	spent map[string]time.Time
	now   func() time.Time
	next  time.Time // next prune
}

// NewMemoryReplays returns a ReplayStore private to this process (the
// default): share one value between Servers in one process, use a shared
// store between processes.
func NewMemoryReplays() ReplayStore { return &memReplays{spent: map[string]time.Time{}, now: time.Now} }

func (m *memReplays) Spend(_ context.Context, nonce string, until time.Time) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.now()
	if now.After(m.next) {
		for n, t := range m.spent {
			if now.After(t) {
				delete(m.spent, n)
			}
		}
		m.next = now.Add(time.Minute)
	}
	if _, ok := m.spent[nonce]; ok {
		return ErrReplayed
	}
	m.spent[nonce] = until
	return nil
}

// keys validates o's keys, or makes one random key.
func (o InputOptions) keys() ([][]byte, error) {
	for i, k := range o.Keys {
		if len(k) < minKeyBytes {
			return nil, fmt.Errorf("%w: Input.Keys[%d] is %d bytes, at least %d are needed", ErrConfig, i, len(k), minKeyBytes)
		}
	}
	if len(o.Keys) > 0 {
		return o.Keys, nil
	}
	k := make([]byte, minKeyBytes)
	if _, err := rand.Read(k); err != nil {
		return nil, fmt.Errorf("server: input key: %w", err)
	}
	return [][]byte{k}, nil
}
