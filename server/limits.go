package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"golang.org/x/time/rate"

	"github.com/tenantmcp/tenantmcp/internal/mint"
	"github.com/tenantmcp/tenantmcp/scope"
)

// CodeLimited is the JSON-RPC error code of a request refused by a limit
// (rate, concurrency, sessions) or because the database had no connection
// free in time. It is retryable: the data carries retry_after_ms. It sits
// in the implementation-defined server range, clear of the go-sdk's and
// MCP's own codes and of CodeDenied.
const CodeLimited = -32050

// Limit rules: the Rule of a LimitError, and the "rule" of its JSON-RPC
// data.
const (
	RuleTenantConcurrency  = "limit.tenant.concurrency"
	RuleTenantRate         = "limit.tenant.rate"
	RuleSubjectConcurrency = "limit.subject.concurrency"
	RuleSubjectRate        = "limit.subject.rate"
	RuleSessions           = "limit.sessions"
	// RuleDBBusy: the database pool had no connection free within
	// guardedsql.Options.PoolWait.
	RuleDBBusy = "db.busy"
	// RuleLimitUnavailable: the shared rate store could not be asked and
	// Limits.FailClosed is set: the call is refused. Without FailClosed
	// (the default) the call is admitted against a bucket of this replica
	// instead (see Limits.Rates).
	RuleLimitUnavailable = "limit.unavailable"
)

// ErrLimited is matched (errors.Is) by every *LimitError.
var ErrLimited = errors.New("server: call limited")

// LimitError refuses a call that a limit (or a saturated database pool)
// does not admit now. On streamable HTTP it is answered with status 429
// and Retry-After (when the HTTP layer decides it, before the call is
// dispatched); everywhere, and on stdio, as a JSON-RPC error with code
// CodeLimited, message "limited: <Rule>" and data {"rule", "method",
// "tool", "retry_after_ms", "retryable": true}. It names no tenant and no
// subject (nor a resource URI, which may hold one).
type LimitError struct {
	Rule string
	// Method is the MCP method refused ("" for a session or pool refusal
	// that belongs to none); Tool the tool of a tools/call.
	Method     string
	Tool       string
	RetryAfter time.Duration
}

func (e *LimitError) Error() string {
	return fmt.Sprintf("server: limited by %s: retry after %s", e.Rule, e.RetryAfter)
}

func (e *LimitError) Is(target error) bool { return target == ErrLimited }

type limitData struct {
	Rule         string `json:"rule"`
	Method       string `json:"method,omitempty"`
	Tool         string `json:"tool,omitempty"`
	RetryAfterMS int64  `json:"retry_after_ms"`
	Retryable    bool   `json:"retryable"`
}

func (e *LimitError) wire() *jsonrpc.Error {
	data, _ := json.Marshal(limitData{Rule: e.Rule, Method: e.Method, Tool: e.Tool, RetryAfterMS: e.RetryAfter.Milliseconds(), Retryable: true})
	return &jsonrpc.Error{Code: CodeLimited, Message: "limited: " + e.Rule, Data: data}
}

// retryAfterSeconds is the Retry-After header value: whole seconds,
// rounded up, at least 1.
func (e *LimitError) retryAfterSeconds() string {
	return strconv.FormatInt(int64(max(math.Ceil(e.RetryAfter.Seconds()), 1)), 10)
}

// Limit bounds the requests of one key: a root tenant or a subject. Zero
// fields mean no bound.
type Limit struct {
	// Concurrent is the most calls in flight at once (per process).
	Concurrent int
	// Rate is the sustained rate in calls per second (token bucket).
	Rate float64
	// Burst is the bucket's size; zero means max(1, ceil(Rate)).
	Burst int
}

func (l Limit) burst() int {
	if l.Burst > 0 {
		return l.Burst
	}
	return max(1, int(math.Ceil(l.Rate)))
}

// Limits keep one tenant (or one subject) from starving the others. Every
// request that runs a handler or lists the server's items (see admitted)
// is admitted once against the limit of each root tenant of its scope and
// against its subject's limit. A grant's root tenant is its outermost
// ancestor (Grant.Within[0]), or the grant itself if it names none; of
// these, those at the highest of Options.Levels count (all if Levels is
// empty), each once: a chain holding grants for many of its hotels has
// one budget. A request refused is answered with a LimitError and never
// reaches its handler or the database.
type Limits struct {
	PerTenant  Limit
	PerSubject Limit
	// Rates holds the token buckets. Nil means NewLocalRates(): in this
	// process, no server needed. Replicas that must share one budget use a
	// shared store (package server/redisstore, server/pgstore).
	// Concurrency is always counted per process.
	//
	// Rate limits are an availability control, so a shared store that
	// cannot answer (Take returns an error) does not refuse every call:
	// admission falls back to an in-process bucket of the same key, rate
	// and burst (per replica: n replicas then admit up to n times the
	// rate), logs one warning per outage to Options.Logger (no key, no
	// tenant), calls OnDegraded, and readiness reports "rates" in
	// Readiness.Degraded while ready stays true. The first answer of the
	// store ends the outage (one info line, OnDegraded(false)). Set
	// FailClosed to refuse instead.
	Rates RateStore
	// FailClosed refuses every call that needs a rate token while Rates
	// cannot answer (RuleLimitUnavailable, retryable), instead of falling
	// back to per-replica buckets: for deployments where the shared budget
	// matters more than availability.
	FailClosed bool
	// OnDegraded, if set, is called on each transition of the rate store:
	// true when Take first fails (the per-replica fallback is in use),
	// false when it answers again, in the order of the transitions. Wire a
	// gauge to it (for example otelserver's Telemetry.LimitDegraded). It
	// must be fast; calls are serialised, and a call that needs no
	// transition never waits for it.
	OnDegraded func(ctx context.Context, degraded bool)
	// QueueWait is how long a call may wait for a concurrency slot of its
	// tenant or subject before it is refused; zero refuses at once. A short
	// wait smooths a tenant's own bursts; a waiting call holds no database
	// connection.
	QueueWait time.Duration
	// TimeoutPenalty keeps the concurrency slots of a call that timed out
	// (its deadline, or the database's statement or lock timeout) taken
	// this long after it ended. A tenant whose calls keep piling up on
	// locked rows then holds a pooled connection only a fraction of the
	// time instead of all of it; zero releases at once.
	TimeoutPenalty time.Duration
	// RetryAfter is what a concurrency refusal suggests; zero means 1 s.
	RetryAfter time.Duration
	// OnReject, if set, is called for every call a limit refused and every
	// call the database pool answered busy (RuleDBBusy): the hook for
	// metrics. It must be fast and safe for concurrent use.
	OnReject func(ctx context.Context, e *LimitError)
}

// RateStore holds token buckets by key. Take takes one token from the
// bucket key (filled at r tokens per second up to burst, full when new)
// and returns 0, or, if the bucket is empty, how long until a token is
// there (taking nothing). An error means the store could not decide; the
// call is then admitted against a per-replica bucket, or refused with
// RuleLimitUnavailable under Limits.FailClosed. A store that can be
// probed implements Pinger; readiness then reports it degraded while
// Ping fails.
type RateStore interface {
	Take(ctx context.Context, key string, r float64, burst int) (retryAfter time.Duration, err error)
}

// NewLocalRates returns the in-process RateStore (golang.org/x/time/rate
// limiters). Buckets idle long enough to be full again are dropped.
func NewLocalRates() RateStore { return &localRates{m: map[string]*localBucket{}} }

type localRates struct {
	mu    sync.Mutex
	m     map[string]*localBucket
	calls int
}

type localBucket struct {
	lim  *rate.Limiter
	full time.Time // when the bucket is full again if nothing is taken
}

func (s *localRates) Take(_ context.Context, key string, r float64, burst int) (time.Duration, error) {
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls++
	if s.calls%1024 == 0 {
		for k, b := range s.m {
			if now.After(b.full) {
				delete(s.m, k)
			}
		}
	}
	b := s.m[key]
	if b == nil {
		b = &localBucket{lim: rate.NewLimiter(rate.Limit(r), burst)}
		s.m[key] = b
	}
	res := b.lim.ReserveN(now, 1)
	if !res.OK() {
		return time.Second, nil
	}
	if d := res.DelayFrom(now); d > 0 {
		res.CancelAt(now)
		return d, nil
	}
	b.full = now.Add(time.Duration(float64(burst) / r * float64(time.Second)))
	return 0, nil
}

// admitted reports whether a request of method passes admission: every
// one that runs a handler or lists the server's items. ping and
// server/discover stay unlimited: they are answered from the server's own
// description, read no tenant data and cost less than the token check in
// front of them; initialize is bounded by the per-subject session cap.
func admitted(method string) bool {
	switch method {
	case methodCallTool, methodGetPrompt, methodReadResource, methodComplete,
		"tools/list", "prompts/list", "resources/list", "resources/templates/list":
		return true
	}
	return false
}

// limiter admits calls against Limits.
type limiter struct {
	l      Limits
	levels []string

	mu   sync.Mutex
	sems map[string]*slots

	// log receives the fallback's warning (Options.Logger; set by New).
	log *slog.Logger
	// fallback holds the per-replica buckets used while Rates fails.
	fallback RateStore
	// degraded: Rates failed on its last Take. Transitions (and their
	// log line and hook call) happen under tmu, in order.
	degraded atomic.Bool
	tmu      sync.Mutex
}

// slots is the concurrency semaphore of one key. users counts holders and
// waiters; the semaphore is dropped when it reaches zero.
type slots struct {
	ch    chan struct{}
	users int
}

func newLimiter(l Limits, levels []string) (*limiter, error) {
	for _, x := range []Limit{l.PerTenant, l.PerSubject} {
		if x.Concurrent < 0 || x.Rate < 0 || x.Burst < 0 || math.IsNaN(x.Rate) || math.IsInf(x.Rate, 0) {
			return nil, fmt.Errorf("%w: limits must not be negative", ErrConfig)
		}
	}
	if l.RetryAfter < 0 || l.QueueWait < 0 || l.TimeoutPenalty < 0 {
		return nil, fmt.Errorf("%w: Limits.RetryAfter, QueueWait and TimeoutPenalty must not be negative", ErrConfig)
	}
	if l.RetryAfter == 0 {
		l.RetryAfter = time.Second
	}
	if l.Rates == nil && (l.PerTenant.Rate > 0 || l.PerSubject.Rate > 0) {
		l.Rates = NewLocalRates()
	}
	return &limiter{l: l, levels: levels, sems: map[string]*slots{}, fallback: NewLocalRates(), log: slog.Default()}, nil
}

// keys are the limit keys of sc: its root tenants (see Limits), sorted and
// each once, then its subject. Invariant: grants within one root share its
// one key, so no set of grants buys a tenant more than its root's budget.
// Keys are never logged or sent: they hold tenant ids.
func (lm *limiter) keys(sc scope.Scope) (tenants []string, subject string) {
	var roots []scope.Grant
	for _, g := range sc.Grants() {
		if len(g.Within) > 0 {
			g = g.Within[0]
		}
		roots = append(roots, g)
	}
	top := ""
	for _, lvl := range lm.levels {
		if slices.ContainsFunc(roots, func(r scope.Grant) bool { return r.Level == lvl }) {
			top = lvl
			break
		}
	}
	for _, r := range roots {
		if top == "" || r.Level == top {
			tenants = append(tenants, "t\x00"+r.Level+":"+r.ID)
		}
	}
	slices.Sort(tenants)
	return slices.Compact(tenants), "s\x00" + sc.Subject()
}

// acquire takes a slot of key, waiting until deadline at most, and
// returns its semaphore, or nil.
func (lm *limiter) acquire(ctx context.Context, key string, n int, deadline time.Time) *slots {
	lm.mu.Lock()
	sm := lm.sems[key]
	if sm == nil {
		sm = &slots{ch: make(chan struct{}, n)}
		lm.sems[key] = sm
	}
	sm.users++
	lm.mu.Unlock()
	select {
	case sm.ch <- struct{}{}:
		return sm
	default:
	}
	if wait := time.Until(deadline); wait > 0 {
		t := time.NewTimer(wait)
		defer t.Stop()
		select {
		case sm.ch <- struct{}{}:
			return sm
		case <-t.C:
		case <-ctx.Done():
		}
	}
	lm.drop(key, sm, false)
	return nil
}

// drop gives back a slot (held) or a wait, and forgets the semaphore when
// nobody uses it.
func (lm *limiter) drop(key string, sm *slots, held bool) {
	if held {
		<-sm.ch
	}
	lm.mu.Lock()
	if sm.users--; sm.users == 0 {
		delete(lm.sems, key)
	}
	lm.mu.Unlock()
}

// admit takes a concurrency slot and a rate token for every key of sc, or
// none (a refusal gives back what it took), for one request of method on
// the item name. The returned release must be called when the request
// ends (more calls are harmless).
func (lm *limiter) admit(ctx context.Context, sc scope.Scope, method, name string) (func(), *LimitError) {
	refused := func(rule string, after time.Duration) *LimitError {
		e := &LimitError{Rule: rule, Method: method, RetryAfter: after}
		if method == methodCallTool {
			e.Tool = name // only a tool's name: a resource URI may hold a tenant id, and OnReject may label metrics with it
		}
		// The scope rides in OnReject's context so that a metrics hook can
		// label the refused tenant (otelserver.Options.TenantTopN); the
		// LimitError itself names none.
		return lm.reject(mint.NewContext(ctx, sc), e)
	}
	tenants, subject := lm.keys(sc)
	type limited struct {
		key string
		lim Limit
	}
	var all []limited
	for _, k := range tenants {
		all = append(all, limited{k, lm.l.PerTenant})
	}
	all = append(all, limited{subject, lm.l.PerSubject})

	// Concurrency first: a slot can be given back, a rate token cannot.
	// Keys are taken in one order (tenants sorted by the scope, then the
	// subject), and every wait is bounded, so waits cannot deadlock.
	deadline := time.Now().Add(lm.l.QueueWait)
	type slot struct {
		key string
		sm  *slots
	}
	var held []slot
	release := func() {
		for _, h := range held {
			lm.drop(h.key, h.sm, true)
		}
		held = nil
	}
	for _, h := range all {
		if h.lim.Concurrent <= 0 {
			continue
		}
		sm := lm.acquire(ctx, h.key, h.lim.Concurrent, deadline)
		if sm == nil {
			release()
			return nil, refused(ruleFor(h.key, true), lm.l.RetryAfter)
		}
		held = append(held, slot{h.key, sm})
	}
	for _, h := range all {
		if h.lim.Rate <= 0 {
			continue
		}
		wait, err := lm.take(ctx, h.key, h.lim.Rate, h.lim.burst())
		if err != nil {
			release()
			return nil, refused(RuleLimitUnavailable, lm.l.RetryAfter)
		}
		if wait > 0 {
			release()
			return nil, refused(ruleFor(h.key, false), wait)
		}
	}
	var once sync.Once
	return func() { once.Do(release) }, nil
}

// take takes a token from Rates or, while Rates fails (and FailClosed is
// not set), from the per-replica bucket of the same key: an error only
// under FailClosed. Invariant: a failing store never admits a call
// unmetered; the fallback applies the same rate and burst per replica.
func (lm *limiter) take(ctx context.Context, key string, r float64, burst int) (time.Duration, error) {
	wait, err := lm.l.Rates.Take(ctx, key, r, burst)
	if err == nil {
		lm.setDegraded(ctx, false, nil)
		return wait, nil
	}
	if ctx.Err() != nil {
		return 0, err // the caller gave up: not an outage of the store
	}
	lm.setDegraded(ctx, true, err)
	if lm.l.FailClosed {
		return 0, err
	}
	return lm.fallback.Take(ctx, key, r, burst)
}

// setDegraded records the rate store's state; on a transition it logs
// once and calls OnDegraded. The error is logged by kind only: a store's
// error may quote its address, never a key (keys hold tenant ids and are
// not in its errors).
func (lm *limiter) setDegraded(ctx context.Context, d bool, err error) {
	if lm.degraded.Load() == d {
		return // the hot path: no transition
	}
	// Transitions are serialised, hook included, so that OnDegraded hears
	// them in the order they happened (a gauge never sticks at the wrong
	// value).
	lm.tmu.Lock()
	defer lm.tmu.Unlock()
	if lm.degraded.Load() == d {
		return
	}
	lm.degraded.Store(d)
	switch {
	case d && lm.l.FailClosed:
		lm.log.Warn("rate-limit store unavailable: refusing calls that need a rate token until it answers (Limits.FailClosed)", "error_type", fmt.Sprintf("%T", err))
	case d:
		lm.log.Warn("rate-limit store unavailable: falling back to per-replica rate limits until it answers", "error_type", fmt.Sprintf("%T", err))
	default:
		lm.log.Info("rate-limit store answering again: shared rate limits restored")
	}
	if lm.l.OnDegraded != nil {
		lm.l.OnDegraded(context.WithoutCancel(ctx), d)
	}
}

// isDegraded reports whether the rate store failed on its last Take.
func (lm *limiter) isDegraded() bool { return lm.degraded.Load() }

// finish releases a call's slots, after the TimeoutPenalty if it timed
// out.
func (lm *limiter) finish(release func(), outcome string) {
	if outcome == OutcomeTimeout && lm.l.TimeoutPenalty > 0 {
		time.AfterFunc(lm.l.TimeoutPenalty, release)
		return
	}
	release()
}

func (lm *limiter) reject(ctx context.Context, e *LimitError) *LimitError {
	if lm.l.OnReject != nil {
		lm.l.OnReject(ctx, e)
	}
	return e
}

func ruleFor(key string, concurrency bool) string {
	switch {
	case key[0] == 't' && concurrency:
		return RuleTenantConcurrency
	case key[0] == 't':
		return RuleTenantRate
	case concurrency:
		return RuleSubjectConcurrency
	}
	return RuleSubjectRate
}
