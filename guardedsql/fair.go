package guardedsql

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/tenantmcp/tenantmcp/guardedsql/internal/engine"
	"github.com/tenantmcp/tenantmcp/scope"
)

// The tenant-fair connection queue (issue 29 §1). A pool serves its
// waiters in arrival order, so a tenant running heavy statements back to
// back takes a connection as often as everybody else and holds it far
// longer: a quarter of a four-connection pool for one tenant with one call
// in flight. The fair queue charges each root tenant the time it holds
// connections (its cost, not its number of calls), forgotten with a
// half-life of fairHalfLife, and uses that cost twice:
//
//   - order: whenever more statements want a connection than the pool has,
//     the next free one goes to the waiter whose tenant holds and has held
//     the least (work-conserving: a free connection never waits for a
//     cheaper tenant), unless a waiter is overdue (see maxDefer);
//   - budget: while other tenants are active, a tenant whose connection
//     time per second is over its equal share of the budget (its floor)
//     and that is an outlier waits before taking one (budgetWait): a
//     tenant whose time per hold is over fairHeavy times the others'
//     median (heavy statements) until it is back to its floor; one whose
//     rate is over twice the others' median until it is back to the
//     larger of the two. The wait lasts at most fairMaxHold (bounded by
//     the call's context too) and does not count against the pool wait:
//     the budget slows a tenant down, it never refuses a call; a tenant
//     that uses what the others typically use is never held.
//
// A hold of t seconds is charged t + t²/fairLongHold (charge): a long
// statement costs more than its time, a short one its time.
//
// A tenant alone runs as fast as before. A tenant is the set of root
// grants of the call's scope (a grant's outermost ancestor,
// Grant.Within[0], or the grant itself), so a chain's hotels share one
// account. Statements without a scope (health checks, start-up checks)
// bypass the queue and are not charged.

// fairHalfLife is how fast a tenant's connection time is forgiven: long
// enough to remember a stream of reports across the gaps between them,
// short enough that a tenant that stopped is served first again within
// seconds.
const fairHalfLife = 2 * time.Second

// fairMaxHold bounds the budget's wait before a statement (see acquire).
const fairMaxHold = 5 * time.Second

// fairLongHold is the hold time from which a hold is charged double
// (see charge).
const fairLongHold = 250 * time.Millisecond

// charge is what a hold of t seconds costs its tenant: its time plus
// t²/fairLongHold. A short statement (a few milliseconds, tens when the
// database is busy) costs its time; a long one, which keeps a share of the
// database's CPU busy across many of the others' statements, costs more
// (a 250 ms report twice its time, 500 ms three times). Measured in
// connection time alone, a tenant running reports back to back with one
// call in flight uses no more than a busy quiet tenant whose short
// statements' hold times grow with the CPU contention the reports cause,
// and the budget (budgetWait) could not tell it from them.
func charge(t float64) float64 { return t + t*t/fairLongHold.Seconds() }

// fairMaxDefer bounds how long the order may pass a waiter over for
// cheaper ones (see fairGate.maxDefer): exponential forgetting keeps the
// ratio of two tenants' costs, so without it a tenant that had cost a
// little more than the others waits until they have caught up, which,
// with many tenants arriving, takes longer than the pool wait (it was a
// quiet tenant refused "busy" after a second under load while its
// neighbours were served in milliseconds).
const fairMaxDefer = 500 * time.Millisecond

// fairSweepEvery: how many releases between sweeps of idle accounts.
const fairSweepEvery = 256

// fairGate is the tenant-fair queue in front of a pool of n connections.
type fairGate struct {
	wait engine.Wait // Options.PoolWait and its observer
	now  func() time.Time
	size int // the pool's connections
	// maxDefer: a waiter queued this long is overdue, served before any
	// cheaper one (fairMaxDefer, at most half the pool wait).
	maxDefer time.Duration
	share    float64 // the connection time per second whose equal split is each active tenant's floor (Options.PoolShare)
	// sleep waits d or until ctx ends (a test replaces it).
	sleep func(ctx context.Context, d time.Duration)

	mu       sync.Mutex
	free     int
	queue    []*fairWaiter
	accounts map[string]*fairAccount
	releases int
}

// fairAccount is one tenant's connection time.
type fairAccount struct {
	used  float64   // connection-seconds, decayed to at
	holds float64   // holds that ended, decayed to at like used
	at    time.Time // when used was last brought up to date
	// held connections, and the sum of their start times (Unix seconds):
	// what they cost so far is held*now - started.
	held    int
	started float64
	refs    int       // holders and waiters
	last    time.Time // when it last took or gave back a connection
}

// fairActive is how recently a tenant must have used a connection to
// count as active for the budget (see budgetWait).
const fairActive = time.Second

// cost is the account's decayed connection time at now, with the time of
// the connections it holds so far.
func (a *fairAccount) cost(now time.Time) float64 {
	return a.decayed(now) + float64(a.held)*unixSeconds(now) - a.started
}

// decayed is the connection time of the holds that ended, forgotten with
// fairHalfLife.
func (a *fairAccount) decayed(now time.Time) float64 {
	return a.used * math.Exp2(-now.Sub(a.at).Seconds()/fairHalfLife.Seconds())
}

func unixSeconds(t time.Time) float64 { return float64(t.UnixNano()) / 1e9 }

type fairWaiter struct {
	a       *fairAccount
	ch      chan struct{} // closed when granted
	granted bool          // under fairGate.mu
	start   float64       // when the hold began, once granted
	queued  time.Time     // when it joined the queue
}

func newFairGate(n int, w engine.Wait) *fairGate {
	deferBound := fairMaxDefer
	if w.Timeout > 0 {
		deferBound = min(deferBound, w.Timeout/2)
	}
	return &fairGate{wait: w, now: time.Now, size: n, maxDefer: deferBound, share: float64(n) / 2, free: n, accounts: map[string]*fairAccount{}, sleep: sleepCtx}
}

func sleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// rate is a's connection time per second, estimated from its decayed
// cost: a steady use of u connections costs u*fairHalfLife/ln 2.
func (a *fairAccount) rate(now time.Time) float64 {
	return a.cost(now) * math.Ln2 / fairHalfLife.Seconds()
}

// meanHold is a's charged time per hold, over the holds that ended
// (decayed alike, so recent holds weigh most); 0 before the first.
func (a *fairAccount) meanHold() float64 {
	if a.holds < 1e-9 {
		return 0
	}
	return a.used / a.holds
}

// fairHeavy is how many times the others' typical charged time per hold
// a tenant's must be for it to count as running heavy statements: CPU
// contention lengthens every tenant's statements alike, so the ratio of
// what one hold costs tells a report from a busy quiet tenant where the
// rates alone cannot.
const fairHeavy = 4.0

// fairOutlier is how far above the typical active tenant (the median of
// the others' rates) a tenant's use must be before the budget holds it.
const fairOutlier = 2.0

// budgetWait is how long a must wait before its next connection (under
// g.mu): the budget, which holds back the outliers only. With the rates
// of the tenants active in the last fairActive, a's floor is its equal
// share of the shared budget (share, Options.PoolShare, by default half
// the pool's size, divided by the active tenants) and typical is the
// median of the other active tenants' rates. The invariant:
//
//	a waits only if another tenant is active, its rate is over its
//	floor, and either its time per hold is over fairHeavy x the others'
//	median time per hold (it then waits until its rate has decayed to
//	its floor) or its rate is over fairOutlier x typical (it then waits
//	until its rate has decayed to max(floor, typical)).
//
// Rates are of charged time (charge; a connection still held counts its
// time so far). So a tenant alone gets the whole pool, a tenant that uses
// no more than its floor, or no more than twice what the others typically
// use in holds like theirs, is never held (the quiet tenants, whose hold
// times inflate when the database's CPU is contended, are not throttled
// with the heavy one, and their time per hold grows with the heavy one's),
// and a tenant running heavy statements back to back is held to about its
// floor, or a tenant running many statements to about what a typical tenant
// uses, the bound that matters when the scarce resource is the database's
// CPU, which a pool queue cannot see. The rate a tenant is held to never
// falls below its floor, so a heavy tenant among idle ones is not starved.
func (g *fairGate) budgetWait(a *fairAccount, now time.Time) time.Duration {
	r := a.rate(now)
	// Cheap test first: within the floor it would have among every known
	// tenant, it is within its floor among the active ones.
	if r <= g.share/float64(max(len(g.accounts), 1)) {
		return 0
	}
	var others, means []float64
	for _, x := range g.accounts {
		if x != a && (x.refs > 0 || now.Sub(x.last) < fairActive) {
			others = append(others, x.rate(now))
			if m := x.meanHold(); m > 0 {
				means = append(means, m)
			}
		}
	}
	if len(others) == 0 {
		return 0
	}
	floor := g.share / float64(len(others)+1)
	if r <= floor {
		return 0
	}
	var target float64
	switch typical := median(others); {
	case len(means) > 0 && a.meanHold() > fairHeavy*median(means):
		target = floor // heavy statements: held to its floor
	case r > fairOutlier*typical:
		target = max(floor, typical)
	default:
		return 0
	}
	return time.Duration(fairHalfLife.Seconds()*math.Log2(r/target)*float64(time.Second)) + time.Millisecond
}

// median of xs (sorted in place); xs is not empty.
func median(xs []float64) float64 {
	slices.Sort(xs)
	m := xs[len(xs)/2]
	if len(xs)%2 == 0 {
		m = (m + xs[len(xs)/2-1]) / 2
	}
	return m
}

// fairKey is the account of ctx's scope: its root grants, sorted, each
// once; false without a scope. The key holds tenant ids: it never leaves
// the gate.
func fairKey(ctx context.Context) (string, bool) {
	sc, ok := scope.FromContext(ctx)
	if !ok {
		return "", false
	}
	var roots []string
	for _, g := range sc.Grants() {
		if len(g.Within) > 0 {
			g = g.Within[0]
		}
		roots = append(roots, g.Level+"\x00"+g.ID)
	}
	slices.Sort(roots)
	return strings.Join(slices.Compact(roots), "\x01"), true
}

// acquire takes a place for one connection, waiting (at most the pool
// wait bound) behind the waiters of tenants that cost less, and returns
// its release, which charges the tenant the time held. It never fails
// without a scope in ctx (no place is then taken).
func (g *fairGate) acquire(ctx context.Context) (func(), error) {
	key, ok := fairKey(ctx)
	if !ok {
		return func() {}, nil
	}
	g.mu.Lock()
	a := g.accounts[key]
	if a == nil {
		a = &fairAccount{at: g.now()}
		g.accounts[key] = a
	}
	a.refs++
	begin := time.Now()
	if d := g.budgetWait(a, g.now()); d > 0 {
		// An outlier: wait until its cost has decayed within its budget,
		// at most fairMaxHold, then queue: the
		// budget slows a tenant down, it never refuses a call. The
		// others' rates move meanwhile, so the budget is computed again.
		limit := fairMaxHold
		held := g.now()
		for d > 0 {
			left := limit - g.now().Sub(held)
			if left <= 0 {
				break
			}
			g.mu.Unlock()
			g.sleep(ctx, min(d, left))
			g.mu.Lock()
			if err := ctx.Err(); err != nil {
				a.refs--
				g.mu.Unlock()
				return nil, err
			}
			d = g.budgetWait(a, g.now())
		}
		begin = time.Now() // the pool wait starts after the budget's
	}
	if g.free > 0 && len(g.queue) == 0 {
		g.free--
		start := g.hold(a)
		g.mu.Unlock()
		return g.releaser(a, start), nil
	}
	w := &fairWaiter{a: a, ch: make(chan struct{}), queued: g.now()}
	g.queue = append(g.queue, w)
	g.mu.Unlock()

	var timeout <-chan time.Time
	if g.wait.Timeout > 0 {
		t := time.NewTimer(max(g.wait.Timeout-time.Since(begin), 0))
		defer t.Stop()
		timeout = t.C
	}
	var err error
	select {
	case <-w.ch:
	case <-ctx.Done():
		err = ctx.Err()
	case <-timeout:
		err = fmt.Errorf("%w (waited %s)", ErrBusy, g.wait.Timeout)
	}
	g.mu.Lock()
	if w.granted {
		err = nil // granted while giving up: take it
	} else {
		g.queue = slices.DeleteFunc(g.queue, func(x *fairWaiter) bool { return x == w })
		a.refs--
	}
	start := w.start
	g.mu.Unlock()
	g.observe(ctx, begin, err)
	if err != nil {
		return nil, err
	}
	return g.releaser(a, start), nil
}

// observe reports a wait that blocked or failed to the pool-wait
// observer.
func (g *fairGate) observe(ctx context.Context, begin time.Time, err error) {
	if g.wait.Observe != nil {
		if waited := time.Since(begin); err != nil || waited > time.Millisecond {
			g.wait.Observe(ctx, waited, err != nil && ctx.Err() == nil)
		}
	}
}

// hold counts a connection held by a from now (under g.mu) and returns its
// start.
func (g *fairGate) hold(a *fairAccount) float64 {
	now := g.now()
	s := unixSeconds(now)
	a.last = now
	a.held++
	a.started += s
	return s
}

// releaser returns the release of one place of a taken at start: it
// charges a the time held and hands the place to the waiter of the tenant
// that costs least (the earliest among equals), or frees it. More calls
// are harmless.
func (g *fairGate) releaser(a *fairAccount, start float64) func() {
	var once sync.Once
	return func() {
		once.Do(func() {
			g.mu.Lock()
			defer g.mu.Unlock()
			now := g.now()
			keep := math.Exp2(-now.Sub(a.at).Seconds() / fairHalfLife.Seconds())
			a.used = a.used*keep + charge(max(unixSeconds(now)-start, 0))
			a.holds = a.holds*keep + 1
			a.at, a.last = now, now
			a.held--
			a.started -= start
			a.refs--
			g.handOff(now)
			if g.releases++; g.releases%fairSweepEvery == 0 {
				g.sweep(now)
			}
		})
	}
}

// handOff gives a freed place to the cheapest waiter (under g.mu). The
// invariant: no waiter is passed over for a cheaper one once it has
// waited maxDefer; the overdue are served in arrival order (the queue's
// order), so the fair order delays a statement by at most maxDefer plus
// the holds of the overdue ahead of it, never up to the pool wait.
func (g *fairGate) handOff(now time.Time) {
	if len(g.queue) == 0 {
		g.free++
		return
	}
	best := 0
	if now.Sub(g.queue[0].queued) < g.maxDefer {
		bestCost := g.queue[0].a.cost(now)
		for i, w := range g.queue[1:] {
			if c := w.a.cost(now); c < bestCost {
				best, bestCost = i+1, c
			}
		}
	}
	w := g.queue[best]
	g.queue = slices.Delete(g.queue, best, best+1)
	w.granted = true
	// The hold starts now; acquire reads its start under the same lock.
	w.start = unixSeconds(now)
	w.a.last = now
	w.a.held++
	w.a.started += w.start
	close(w.ch)
}

// sweep forgets accounts nobody uses whose cost has decayed to nothing.
func (g *fairGate) sweep(now time.Time) {
	for k, a := range g.accounts {
		if a.refs == 0 && a.cost(now) < 1e-3 {
			delete(g.accounts, k)
		}
	}
}

// fairPool puts a fairGate in front of a pool's transactions and
// statements.
type fairPool struct {
	engine.Pool
	g *fairGate
}

func (p *fairPool) Begin(ctx context.Context) (engine.Tx, error) {
	return p.begin(ctx, p.Pool.Begin)
}

// BeginSingle keeps the pool's one-round-trip transactions.
func (p *fairPool) BeginSingle(ctx context.Context) (engine.Tx, error) {
	if sb, ok := p.Pool.(engine.SingleBeginner); ok {
		return p.begin(ctx, sb.BeginSingle)
	}
	return p.Begin(ctx)
}

func (p *fairPool) begin(ctx context.Context, begin func(context.Context) (engine.Tx, error)) (engine.Tx, error) {
	release, err := p.g.acquire(ctx)
	if err != nil {
		return nil, err
	}
	tx, err := begin(ctx)
	if err != nil {
		release()
		return nil, err
	}
	return &fairTx{Tx: tx, release: release}, nil
}

func (p *fairPool) Query(ctx context.Context, q string, args ...any) (engine.Rows, error) {
	release, err := p.g.acquire(ctx)
	if err != nil {
		return nil, err
	}
	r, err := p.Pool.Query(ctx, q, args...)
	if err != nil {
		release()
		return nil, err
	}
	return &fairRows{Rows: r, release: release}, nil
}

func (p *fairPool) Exec(ctx context.Context, q string, args ...any) (engine.Result, error) {
	release, err := p.g.acquire(ctx)
	if err != nil {
		return engine.Result{}, err
	}
	defer release()
	return p.Pool.Exec(ctx, q, args...)
}

// fairTx gives its place back when the transaction ends.
type fairTx struct {
	engine.Tx
	release func()
}

func (t *fairTx) Commit(ctx context.Context) error {
	defer t.release()
	return t.Tx.Commit(ctx)
}

func (t *fairTx) Rollback(ctx context.Context) error {
	defer t.release()
	return t.Tx.Rollback(ctx)
}

// UnwrapTx lets a dialect reach the driver's transaction (see errorTx).
func (t *fairTx) UnwrapTx() engine.Tx { return t.Tx }

type fairRows struct {
	engine.Rows
	release func()
}

func (r *fairRows) Close() error {
	defer r.release()
	return r.Rows.Close()
}
