package server

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
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

// callTicketHeader carries, from the HTTP layer to the tool call it
// admitted, the id of the call's ticket (its admission and its request's
// lifetime). The HTTP layer deletes any value a client sent before setting
// its own, and ids are 128-bit random, so a client can neither forge one
// nor name another request's.
const callTicketHeader = "X-Tenantmcp-Call-Ticket"

// errClientGone is the cancellation cause of a call whose HTTP request
// ended (the client disconnected) before the call did.
var errClientGone = errors.New("server: the client disconnected")

// ticket is an HTTP request's admission of one tools/call.
type ticket struct {
	subject string
	reqCtx  context.Context // ends when the client disconnects
	release func()          // gives back the limit slots
}

// tickets hands tickets from the HTTP layer to the call. Invariant: a
// ticket is released exactly once, by the call that claimed it, or by the
// HTTP layer if no call did (the request failed before dispatch).
type tickets struct {
	mu sync.Mutex
	m  map[string]*ticket
}

func (t *tickets) add(tk *ticket) string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	id := hex.EncodeToString(b[:])
	t.mu.Lock()
	if t.m == nil {
		t.m = map[string]*ticket{}
	}
	t.m[id] = tk
	t.mu.Unlock()
	return id
}

// claim removes and returns the ticket id, or nil.
func (t *tickets) claim(id string) *ticket {
	t.mu.Lock()
	defer t.mu.Unlock()
	tk := t.m[id]
	delete(t.m, id)
	return tk
}

// admitCall admits one tool call: through the ticket its HTTP request got
// (whose limits were taken before dispatch), or, without one (stdio),
// against the limits here. The returned context ends when the client's
// HTTP request does; done must be called when the call ends, with the
// call's outcome (a timeout keeps the slots for Limits.TimeoutPenalty).
func (s *Server) admitCall(ctx context.Context, req *mcp.CallToolRequest, sc scope.Scope, tool string) (context.Context, func(outcome string), *LimitError) {
	none := func(string) {}
	if req.Extra != nil && req.Extra.Header != nil {
		if id := req.Extra.Header.Get(callTicketHeader); id != "" {
			tk := s.tickets.claim(id)
			cctx, cancel := context.WithCancelCause(ctx)
			if tk == nil || tk.subject != sc.Subject() {
				// The request is already gone (or the header is not
				// ours): run nothing for it.
				cancel(errClientGone)
				if tk != nil {
					tk.release()
				}
				return cctx, none, nil
			}
			stop := context.AfterFunc(tk.reqCtx, func() { cancel(errClientGone) })
			return cctx, func(outcome string) { stop(); cancel(nil); s.limiter.finish(tk.release, outcome) }, nil
		}
	}
	if !s.limiter.active() {
		return ctx, none, nil
	}
	release, err := s.limiter.admit(ctx, sc, tool)
	if err != nil {
		return ctx, none, err.(*LimitError)
	}
	return ctx, func(outcome string) { s.limiter.finish(release, outcome) }, nil
}

// limited records a limit refusal for the audit log and returns its wire
// form.
func (s *Server) limited(a *auditRecord, e *LimitError) error {
	a.outcome = OutcomeLimited
	a.rule = e.Rule
	return e.wire()
}

// jsonrpcCall is what the HTTP layer reads of a POST body: enough to know
// a tools/call (or initialize) and answer it with its id.
type jsonrpcCall struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params struct {
		Name string `json:"name"`
	} `json:"params"`
}

// limitHTTP runs inside bearer-token verification: for a POST carrying a
// tools/call it takes the call's limits before anything is dispatched (a
// refusal is a 429 with Retry-After and the JSON-RPC error as body) and
// hands the admission and the request's lifetime to the call through a
// ticket; for an initialize it enforces the per-subject session cap.
func (s *Server) limitHTTP(o HTTPOptions, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.Header.Del(callTicketHeader)
		if r.Method != http.MethodPost {
			next.ServeHTTP(w, r)
			return
		}
		body, err := io.ReadAll(r.Body)
		if err != nil {
			var mb *http.MaxBytesError
			if errors.As(err, &mb) {
				http.Error(w, "request body too large", http.StatusRequestEntityTooLarge)
				return
			}
			http.Error(w, "reading request body failed", http.StatusBadRequest)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		var msg jsonrpcCall
		if bytes.HasPrefix(bytes.TrimSpace(body), []byte("{")) && json.Unmarshal(body, &msg) == nil && len(msg.ID) > 0 {
			sc, ok := claims.ScopeFromTokenInfo(auth.TokenInfoFromContext(r.Context()))
			switch {
			case !ok:
				// No scope: the call path denies it with its witness.
			case msg.Method == "tools/call":
				s.serveCall(w, r, sc, msg, next)
				return
			case msg.Method == "initialize" && !o.Stateless && r.Header.Get("Mcp-Session-Id") == "":
				s.serveInitialize(w, r, sc, msg, o, next)
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

func (s *Server) serveCall(w http.ResponseWriter, r *http.Request, sc scope.Scope, msg jsonrpcCall, next http.Handler) {
	release := func() {}
	if s.limiter.active() {
		rel, err := s.limiter.admit(r.Context(), sc, msg.Params.Name)
		if err != nil {
			le := err.(*LimitError)
			a := auditRecord{tool: msg.Params.Name, callID: newCorrelationID(), scope: sc}
			wireErr := s.limited(&a, le)
			s.audit(r.Context(), &a)
			writeLimited(w, msg.ID, le, wireErr)
			return
		}
		release = rel
	}
	id := s.tickets.add(&ticket{subject: sc.Subject(), reqCtx: r.Context(), release: release})
	r.Header.Set(callTicketHeader, id)
	defer func() {
		if tk := s.tickets.claim(id); tk != nil {
			tk.release() // never dispatched
		}
	}()
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
func (s *Server) serveInitialize(w http.ResponseWriter, r *http.Request, sc scope.Scope, msg jsonrpcCall, o HTTPOptions, next http.Handler) {
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

// tokenVerifier is the Verifier's, with the MaxTokenLifetime check.
func (s *Server) tokenVerifier() auth.TokenVerifier {
	tv := s.opts.Verifier.TokenVerifier()
	if s.opts.MaxTokenLifetime <= 0 {
		return tv
	}
	return func(ctx context.Context, token string, r *http.Request) (*auth.TokenInfo, error) {
		ti, err := tv(ctx, token, r)
		if err != nil {
			return nil, err
		}
		if err := s.checkLifetime(ti.Expiration); err != nil {
			return nil, err
		}
		return ti, nil
	}
}

// ErrTokenLifetime: a token's expiry lies further in the future than
// Options.MaxTokenLifetime. It matches auth.ErrInvalidToken (HTTP 401).
var ErrTokenLifetime = fmt.Errorf("%w: token lifetime exceeds the server's maximum", auth.ErrInvalidToken)

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
	case o.Stateless || o.MaxSessionsPerSubject < 0:
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
