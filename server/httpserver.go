package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tenantmcp/tenantmcp/claims"
	"github.com/tenantmcp/tenantmcp/scope"
)

// Defaults of the HTTP limits (HTTPOptions fields left zero).
const (
	DefaultReadTimeout        = 10 * time.Second
	DefaultIdleTimeout        = 60 * time.Second
	DefaultSessionTimeout     = 30 * time.Minute
	DefaultSessionsPerSubject = 100
	DefaultDrainTimeout       = 10 * time.Second
	// writeSlack is what WriteTimeout adds to the call timeout by default:
	// a response may only be written once its call has finished.
	writeSlack = 10 * time.Second
)

// errClientGone is the cancellation cause of a call whose HTTP request
// ended (the client disconnected) before the call did.
var errClientGone = errors.New("server: the client disconnected")

// exchange is one HTTP request as the pipeline sees it. The token verifier
// creates it with the request's caller (the scope derived once) and hangs
// it on the request's own *auth.TokenInfo, which the go-sdk hands, as
// RequestExtra.TokenInfo, to the messages of that request and of no other;
// the HTTP front adds the admission of a tools/call and the request's
// lifetime. No header carries it, so a client can neither forge nor name
// one. Invariant: an admission's slots are released exactly once, by the
// call that claims them or, if none did, when the request ends.
type exchange struct {
	caller  caller
	mu      sync.Mutex
	reqCtx  context.Context // ends when the client disconnects; nil unless the front admitted a call
	release func()          // the admitted call's slots; nil once claimed or given back
	gone    bool            // the HTTP request has ended

	stateless bool   // served by the stateless handler (a per-request session)
	resource  string // HTTPOptions.ResourceURL
	uri       string // params.uri of a single-message POST: its error may name it (see scrubData)
}

const exchangeKey = "tenantmcp/server.exchange"

func exchangeOf(ti *auth.TokenInfo) *exchange {
	if ti == nil {
		return nil
	}
	x, _ := ti.Extra[exchangeKey].(*exchange)
	return x
}

// claim hands the front's admission to the call, once: the request's
// context (nil if the front admitted nothing), its slots, and whether the
// request is still there.
func (x *exchange) claim() (reqCtx context.Context, release func(), live bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	reqCtx, release = x.reqCtx, x.release
	x.reqCtx, x.release = nil, nil
	return reqCtx, release, !x.gone
}

// end gives back the slots of an admission no call claimed.
func (x *exchange) end() {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.gone = true
	if x.release != nil {
		x.release()
		x.release = nil
	}
}

// rpcMessage is what the HTTP front reads of each JSON-RPC message of a
// POST body.
type rpcMessage struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params struct {
		Name string `json:"name"`
		URI  string `json:"uri"`
	} `json:"params"`
}

// front is the HTTP half of the pipeline, inside bearer-token
// verification. It routes each request to the stateless handler or, with
// HTTPOptions.Sessions, to the stateful one (an initialize, or any request
// naming a session). It reads and decodes a POST body once (the go-sdk
// reads the same bytes after it) and answers, before anything is
// dispatched, what only HTTP can answer: 403 with the RFC 6750
// insufficient_scope challenge when a scope a token could carry is
// missing (HTTPOptions.RequiredScopes, or a Require of the item a
// tools/call, prompts/get or resources/read names; the pipeline checks
// again: this is the HTTP answer, not the enforcement), 429 with
// Retry-After for a request its limits refuse (every method that passes
// admission), and the per-subject session cap of an initialize.
func (s *Server) front(o HTTPOptions, metaURL string, stateless, stateful http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		x := exchangeOf(auth.TokenInfoFromContext(r.Context()))
		if x == nil {
			stateless.ServeHTTP(w, r)
			return
		}
		// Malformed JSON-RPC is left to the go-sdk, which answers it.
		var msgs []rpcMessage
		single := false
		if r.Method == http.MethodPost && r.Body != nil {
			body, err := io.ReadAll(r.Body)
			if err != nil {
				writeBodyError(w, err)
				return
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
			switch body = bytes.TrimSpace(body); {
			case len(body) > 0 && body[0] == '{':
				msgs = make([]rpcMessage, 1)
				if single = json.Unmarshal(body, &msgs[0]) == nil; !single {
					msgs = nil
				}
			case len(body) > 0 && body[0] == '[':
				if json.Unmarshal(body, &msgs) != nil {
					msgs = nil
				}
			}
		}
		if single {
			x.uri = msgs[0].Params.URI
		}
		sid := r.Header.Get("Mcp-Session-Id")
		// A 2026-07-28 request names its version in the header; its
		// "initialize" is a removed method the stateless handler answers.
		initialize := single && len(msgs[0].ID) > 0 && msgs[0].Method == "initialize" && sid == "" &&
			r.Header.Get("Mcp-Protocol-Version") < protocol2026
		next := stateless
		x.stateless, x.resource = true, o.ResourceURL
		if stateful != nil && (sid != "" || initialize) {
			next, x.stateless = stateful, false
		}
		// The operation's scopes: the required ones the token lacks and its
		// items', or those of the first item a token could be allowed.
		need := missing(o.RequiredScopes, x.caller.oauth)
		switch {
		case len(need) > 0:
			for _, m := range msgs {
				kind, name := s.itemKey(m.Method, m.Params.Name, m.Params.URI)
				need = append(need, s.requireOf(kind, name).Scopes...)
			}
		case x.caller.deny == nil: // (no scope: the pipeline denies each call with its witness)
			need = s.challenge(x.caller, msgs, o.RoleScopes)
		}
		if need = slices.DeleteFunc(need, func(sc string) bool { return sc == offlineAccess }); len(need) > 0 {
			writeChallenge(w, metaURL, need)
			return
		}
		if single && len(msgs[0].ID) > 0 {
			switch m := msgs[0]; {
			case admitted(m.Method):
				s.serveCall(w, r, x, m, next)
				return
			case initialize && !x.stateless:
				s.serveInitialize(w, r, x.caller.scope, m, o, next)
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

// writeBodyError answers a request whose body could not be read: 413 when
// it is longer than MaxRequestBytes, 408 when the client stopped sending
// it before ReadTimeout (the connection's read deadline) ran out, and 400
// otherwise. The connection is closed: its unread rest cannot be skipped.
func writeBodyError(w http.ResponseWriter, err error) {
	w.Header().Set("Connection", "close")
	var tooLarge *http.MaxBytesError
	var ne net.Error
	switch {
	case errors.As(err, &tooLarge):
		http.Error(w, "request body too large", http.StatusRequestEntityTooLarge)
	case errors.Is(err, os.ErrDeadlineExceeded) || errors.As(err, &ne) && ne.Timeout():
		http.Error(w, "request body not received within the read timeout", http.StatusRequestTimeout)
	default:
		http.Error(w, "request body unreadable", http.StatusBadRequest)
	}
}

// writeChallenge answers 403 with the RFC 6750 section 3.1 challenge
// naming scopes, the OAuth scopes of the current operation (SEP-2350;
// never offline_access, which the caller has taken out).
func writeChallenge(w http.ResponseWriter, metaURL string, scopes []string) {
	scope := strings.Join(mergeScopes(scopes, nil), " ")
	reason := "this operation requires the OAuth scopes " + scope
	w.Header().Set("WWW-Authenticate", fmt.Sprintf(`Bearer error="insufficient_scope", scope=%q, error_description=%q, resource_metadata=%q`, scope, reason, metaURL))
	http.Error(w, "insufficient_scope: "+reason, http.StatusForbidden)
}

// serveCall takes a request's limits before it is dispatched (a refusal
// is a 429 with Retry-After and the JSON-RPC error as body) and puts the
// admission and the request's lifetime on its exchange.
func (s *Server) serveCall(w http.ResponseWriter, r *http.Request, x *exchange, m rpcMessage, next http.Handler) {
	release := func() {}
	if s.limiter.active() {
		rel, le := s.limiter.admit(r.Context(), x.caller.scope, m.Method, m.Params.Name)
		if le != nil {
			name := m.Params.Name // the audit names a resource as the pipeline does, never by its URI
			if m.Method == methodReadResource {
				name, _, _, _ = s.itemOf(&mcp.ReadResourceRequest{Params: &mcp.ReadResourceParams{URI: m.Params.URI}})
			}
			rq := s.newRequest(m.Method, name, x.caller)
			wireErr := s.limited(rq, le)
			s.audit(r.Context(), rq)
			writeLimited(w, m.ID, le, wireErr)
			return
		}
		release = rel
	}
	x.mu.Lock()
	x.reqCtx, x.release = r.Context(), release
	x.mu.Unlock()
	defer x.end()
	next.ServeHTTP(w, r)
}

// writeLimited answers a refused call: 429, Retry-After, and the JSON-RPC
// error response.
func writeLimited(w http.ResponseWriter, id json.RawMessage, le *LimitError, wireErr error) {
	body, _ := json.Marshal(struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Error   error           `json:"error"`
	}{"2.0", id, wireErr})
	w.Header().Set("Retry-After", le.retryAfterSeconds())
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusTooManyRequests)
	_, _ = w.Write(body)
}

// sessionCounter counts the stateful sessions of each subject.
type sessionCounter struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *sessionCounter) reserve(subject string, cap int) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == nil {
		c.n = map[string]int{}
	}
	if cap > 0 && c.n[subject] >= cap {
		return false
	}
	c.n[subject]++
	return true
}

func (c *sessionCounter) release(subject string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n[subject]--; c.n[subject] <= 0 {
		delete(c.n, subject)
	}
}

// serveInitialize enforces the per-subject session cap: a slot is reserved
// before the session exists and given back when it ends (closed by the
// client, by the idle timeout or at shutdown) or was never created.
func (s *Server) serveInitialize(w http.ResponseWriter, r *http.Request, sc scope.Scope, msg rpcMessage, o HTTPOptions, next http.Handler) {
	subject := sc.Subject()
	if !s.sessions.reserve(subject, o.sessionCap()) {
		le := s.limiter.reject(r.Context(), &LimitError{Rule: RuleSessions, RetryAfter: s.limiter.l.RetryAfter})
		writeLimited(w, msg.ID, le, le.wire())
		return
	}
	next.ServeHTTP(w, r)
	sid := w.Header().Get("Mcp-Session-Id")
	var ss *mcp.ServerSession
	if sid != "" {
		for x := range s.mcp.Sessions() {
			if x.ID() == sid {
				ss = x
				break
			}
		}
	}
	if ss == nil {
		s.sessions.release(subject)
		return
	}
	go func() {
		_ = ss.Wait()
		s.sessions.release(subject)
	}()
}

// deadlines bounds the reading of a request's body (ReadTimeout, cleared
// once the body is read so that a long call can still notice its client
// leaving) and the writing of a non-streaming response (WriteTimeout). A
// GET is the SSE stream: no write deadline, the session's idle timeout
// and shutdown end it.
func (o HTTPOptions) deadlines(callTimeout time.Duration, next http.Handler) http.Handler {
	read, write := o.readTimeout(), o.writeTimeout(callTimeout)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rc := http.NewResponseController(w)
		if read > 0 && r.Body != nil && r.Body != http.NoBody {
			if rc.SetReadDeadline(time.Now().Add(read)) == nil {
				r.Body = &deadlineBody{ReadCloser: r.Body, rc: rc}
			}
		}
		if write > 0 && r.Method != http.MethodGet {
			_ = rc.SetWriteDeadline(time.Now().Add(write))
		}
		next.ServeHTTP(w, r)
	})
}

// deadlineBody clears the connection's read deadline once the body has
// been read to its end.
type deadlineBody struct {
	io.ReadCloser
	rc   *http.ResponseController
	done bool
}

func (b *deadlineBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF && !b.done {
		b.done = true
		_ = b.rc.SetReadDeadline(time.Time{})
	}
	return n, err
}

// checkOrigin refuses (403) a request whose Origin header names an origin
// other than the endpoint's own and those in AllowedOrigins. Requests
// without Origin (non-browser clients) pass; browsers always send it on
// cross-origin requests, so a page elsewhere cannot drive the server with
// a user's ambient credentials or through DNS rebinding.
func (o HTTPOptions) checkOrigin(next http.Handler) (http.Handler, error) {
	allowed := map[string]bool{}
	self, err := url.Parse(o.ResourceURL)
	if err != nil {
		return nil, err
	}
	allowed[strings.ToLower(self.Scheme+"://"+self.Host)] = true
	for _, a := range o.AllowedOrigins {
		u, err := url.Parse(a)
		if err != nil || u.Scheme == "" || u.Host == "" || (u.Path != "" && u.Path != "/") {
			return nil, fmt.Errorf("%w: AllowedOrigins entry %q is not an origin (scheme://host[:port])", ErrConfig, a)
		}
		allowed[strings.ToLower(u.Scheme+"://"+u.Host)] = true
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if origin := r.Header.Get("Origin"); origin != "" && !allowed[strings.ToLower(origin)] {
			http.Error(w, "origin not allowed", http.StatusForbidden)
			return
		}
		next.ServeHTTP(w, r)
	}), nil
}

// tokenVerifier is the Verifier's, with the MaxTokenLifetime check; it
// derives the request's caller, once, into the request's exchange.
//
// A refusal that is the token's fault is charged to the client address's
// failed-token bucket (ft, nil when HTTPOptions.FailedTokens is disabled).
func (s *Server) tokenVerifier(ft *failedTokens) auth.TokenVerifier {
	tv := s.opts.Verifier.TokenVerifier()
	return func(ctx context.Context, token string, r *http.Request) (*auth.TokenInfo, error) {
		ti, err := tv(ctx, token, r)
		if err == nil {
			err = s.checkLifetime(ti.Expiration)
		}
		if err != nil {
			ft.charge(r, err)
			return nil, err
		}
		if ti.Extra == nil {
			ti.Extra = map[string]any{}
		}
		ti.Extra[exchangeKey] = &exchange{caller: tokenCaller(ti)}
		return ti, nil
	}
}

// ErrTokenLifetime: a token's expiry lies further in the future than
// Options.MaxTokenLifetime, or the Verifier's own bound
// (claims.Options.MaxTokenLifetime, 24 hours by default) refused it. It is
// claims.ErrLifetime, so either refusal matches it, and it matches
// auth.ErrInvalidToken (HTTP 401).
var ErrTokenLifetime = claims.ErrLifetime

func (s *Server) checkLifetime(exp time.Time) error {
	if limit := s.opts.MaxTokenLifetime; limit > 0 && exp.Sub(s.opts.Now()) > limit+s.opts.Verifier.Leeway() {
		return ErrTokenLifetime
	}
	return nil
}

// drain waits, up to d, for the tool calls in flight to finish, and then
// closes every session, which ends their SSE streams.
func (s *Server) drain(d time.Duration) {
	deadline := time.Now().Add(d)
	for s.inflight.Load() > 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	for ss := range s.mcp.Sessions() {
		_ = ss.Close()
	}
}

func (o HTTPOptions) readTimeout() time.Duration { return orDefault(o.ReadTimeout, DefaultReadTimeout) }
func (o HTTPOptions) idleTimeout() time.Duration { return orDefault(o.IdleTimeout, DefaultIdleTimeout) }
func (o HTTPOptions) drainTimeout() time.Duration {
	return orDefault(o.DrainTimeout, DefaultDrainTimeout)
}
func (o HTTPOptions) sessionCap() int {
	switch {
	case !o.Sessions || o.MaxSessionsPerSubject < 0:
		return 0
	case o.MaxSessionsPerSubject == 0:
		return DefaultSessionsPerSubject
	}
	return o.MaxSessionsPerSubject
}

func (o HTTPOptions) sessionTimeout() time.Duration {
	return orDefault(o.SessionTimeout, DefaultSessionTimeout)
}

func (o HTTPOptions) writeTimeout(callTimeout time.Duration) time.Duration {
	return orDefault(o.WriteTimeout, callTimeout+writeSlack)
}

// orDefault: zero means def, negative means none (0).
func orDefault(d, def time.Duration) time.Duration {
	switch {
	case d < 0:
		return 0
	case d == 0:
		return def
	}
	return d
}

func (lm *limiter) active() bool {
	return lm.l.PerTenant != (Limit{}) || lm.l.PerSubject != (Limit{})
}

// protocol2026 is the first MCP revision without sessions (2026-07-28):
// requests at or after it carry their version and capabilities in _meta.
const protocol2026 = "2026-07-28"
