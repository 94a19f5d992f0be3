package guardedsql

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/tenantmcp/tenantmcp/guardedsql/internal/engine"
	"github.com/tenantmcp/tenantmcp/scope"
	"github.com/tenantmcp/tenantmcp/scope/scopetest"
)

// fakeClock is the gate's clock in these tests: costs are exact.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *fakeClock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func tenantCtx(chain, hotel string) context.Context {
	root := scope.Grant{Level: "chain", ID: chain}
	g := root
	if hotel != "" {
		g = scope.Grant{Level: "hotel", ID: hotel, Within: []scope.Grant{root}}
	}
	return scopetest.NewContext(context.Background(), scopetest.New("u-"+chain+hotel, []scope.Grant{g}))
}

// waitQueued waits until the gate has n waiters.
func waitQueued(t *testing.T, g *fairGate, n int) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		g.mu.Lock()
		q := len(g.queue)
		g.mu.Unlock()
		if q == n {
			return
		}
	}
	t.Fatalf("the gate never had %d waiters", n)
}

// TestFairGateQueuesTheCostlyTenantBehind is the mechanism of issue 29 §1:
// a tenant that has held the pool's connection (a heavy report) and asks
// again is served AFTER a tenant that held nothing, although it asked
// first; a pool serves its waiters in arrival order, which is what let one
// tenant take a connection per call however long it held it.
func TestFairGateQueuesTheCostlyTenantBehind(t *testing.T) {
	clk := &fakeClock{t: time.Unix(1_000_000, 0)}
	g := newFairGate(1, engine.Wait{})
	g.now = clk.now
	heavy, quiet := tenantCtx("c1", ""), tenantCtx("c2", "h2")

	// The heavy tenant alone: served at once, every time (work-conserving).
	for range 3 {
		rel, err := g.acquire(heavy)
		if err != nil {
			t.Fatal(err)
		}
		clk.add(300 * time.Millisecond) // a whole-range report
		rel()
	}
	held, err := g.acquire(heavy) // its next report holds the connection
	if err != nil {
		t.Fatal(err)
	}
	order := make(chan string, 2)
	var wg sync.WaitGroup
	wg.Go(func() { // the heavy tenant's next report asks first...
		rel, err := g.acquire(heavy)
		if err != nil {
			t.Error(err)
			return
		}
		order <- "heavy"
		rel()
	})
	waitQueued(t, g, 1)
	wg.Go(func() { // ...then a quiet tenant's statement
		rel, err := g.acquire(quiet)
		if err != nil {
			t.Error(err)
			return
		}
		order <- "quiet"
		clk.add(5 * time.Millisecond)
		rel()
	})
	waitQueued(t, g, 2)
	clk.add(300 * time.Millisecond)
	held()
	wg.Wait()
	close(order)
	var got []string
	for o := range order {
		got = append(got, o)
	}
	if len(got) != 2 || got[0] != "quiet" {
		t.Fatalf("served %v: the tenant that held the connection for 1.2 s was served before the one that held nothing", got)
	}

	// Its cost is forgotten: after a few half-lives it is first again.
	g.mu.Lock()
	a := g.accounts["chain\x00c1"]
	g.mu.Unlock()
	if a == nil || a.cost(clk.now()) < 1.0 {
		t.Fatalf("the heavy tenant's account: %+v", a)
	}
	clk.add(20 * fairHalfLife)
	if c := a.cost(clk.now()); c > 0.01 {
		t.Fatalf("cost %.3f s after 20 half-lives", c)
	}
}

// TestFairGateBoundsAndBypass: a statement without a scope bypasses the
// queue; a wait is bounded by the pool wait (ErrBusy) and a cancelled wait
// takes no place.
func TestFairGateBoundsAndBypass(t *testing.T) {
	g := newFairGate(1, engine.Wait{Timeout: 50 * time.Millisecond})
	a, b := tenantCtx("a", ""), tenantCtx("b", "")
	held, err := g.acquire(a)
	if err != nil {
		t.Fatal(err)
	}
	// No scope: not queued, nothing taken.
	rel, err := g.acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	rel()
	// Busy after the bound, nothing taken.
	start := time.Now()
	if _, err := g.acquire(b); !errors.Is(err, ErrBusy) {
		t.Fatalf("a wait past the bound: %v, want ErrBusy", err)
	}
	if time.Since(start) > 2*time.Second {
		t.Fatal("the bound did not stop the wait")
	}
	ctx, cancel := context.WithCancel(b)
	cancel()
	if _, err := g.acquire(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("a cancelled wait: %v", err)
	}
	held()
	g.mu.Lock()
	free, q := g.free, len(g.queue)
	g.mu.Unlock()
	if free != 1 || q != 0 {
		t.Fatalf("after the refused waits: %d free, %d queued; want 1, 0", free, q)
	}
}

// TestFairGateBudget: a tenant that used more than its equal share of the
// pool's connection time waits before its next connection while another
// active tenant uses far less, for at most fairMaxHold; alone, it does not
// wait.
func TestFairGateBudget(t *testing.T) {
	clk := &fakeClock{t: time.Unix(2_000_000, 0)}
	g := newFairGate(2, engine.Wait{Timeout: time.Hour})
	g.now = clk.now
	var slept []time.Duration
	g.sleep = func(_ context.Context, d time.Duration) { slept = append(slept, d); clk.add(d) }
	heavy, quiet := tenantCtx("h", ""), tenantCtx("q", "")
	use := func(ctx context.Context, d time.Duration) {
		t.Helper()
		rel, err := g.acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		clk.add(d)
		rel()
	}
	// Alone: a connection held all the time (rate ~1, over a share of 1
	// of 2 once another tenant shows up), never held back.
	for range 20 {
		use(heavy, 500*time.Millisecond)
	}
	if len(slept) != 0 {
		t.Fatalf("a tenant alone waited %v", slept)
	}
	// A quiet tenant becomes active, well within its share.
	use(quiet, 5*time.Millisecond)
	g.mu.Lock()
	r := g.accounts["chain\x00h"].rate(clk.now())
	g.mu.Unlock()
	if r <= 1 {
		t.Fatalf("heavy rate %.2f, want over its share of 1", r)
	}
	use(heavy, 10*time.Millisecond)
	if len(slept) == 0 {
		t.Fatalf("a tenant at %.2f connections waited nothing while another was active within its share of 1", r)
	}
	// The budget slows it down, never refuses it: at most fairMaxHold
	// (half of the hour's pool wait is longer), then it queues.
	var total time.Duration
	for _, d := range slept {
		total += d
	}
	if total > fairMaxHold {
		t.Fatalf("the budget held a statement %s, over fairMaxHold", total)
	}
}

// sizedPool is a pool that knows its size (as pgxpool does).
type sizedPool struct{ engine.Pool }

func (sizedPool) MaxConns() int { return 4 }

// TestFairQueueOnByDefault: the zero Options put the fair queue in front
// of a pool that knows its size, with half the pool's size as the shared
// budget; PoolFIFO leaves the pool as it is; PoolShare sets the budget and
// a negative one is refused.
func TestFairQueueOnByDefault(t *testing.T) {
	c, err := newConfig(Options{})
	if err != nil {
		t.Fatal(err)
	}
	p, err := applyLimits(sizedPool{}, nil, &c)
	if err != nil {
		t.Fatal(err)
	}
	fp, ok := p.(*fairPool)
	if !ok || fp.g.share != 2 || fp.g.free != 4 {
		t.Fatalf("zero Options: %T %+v, want the fair queue over 4 connections", p, p)
	}
	c, _ = newConfig(Options{PoolShare: 1.5})
	if p, _ := applyLimits(sizedPool{}, nil, &c); p.(*fairPool).g.share != 1.5 {
		t.Fatal("PoolShare not applied")
	}
	c, _ = newConfig(Options{PoolFIFO: true})
	if p, _ := applyLimits(sizedPool{}, nil, &c); func() bool { _, ok := p.(*fairPool); return ok }() {
		t.Fatal("PoolFIFO: the fair queue is still there")
	}
	if _, err := newConfig(Options{PoolShare: -1}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("negative PoolShare: %v", err)
	}
}

// TestFairGateBudgetHoldsOnlyOutliers: among twelve active tenants
// sharing a budget of 0.2 connections (floor 1/60 each), eleven light
// tenants using 0.02 to 0.04 connections each (over their floor, as quiet
// tenants are when the database's CPU is contended, and spread within
// twice the typical use) are never held by the budget; a tenant that would
// hold a connection 30% of the time is held back to about the typical use;
// alone, it runs free.
func TestFairGateBudgetHoldsOnlyOutliers(t *testing.T) {
	clk := &fakeClock{t: time.Unix(3_000_000, 0)}
	g := newFairGate(4, engine.Wait{Timeout: time.Hour})
	g.now = clk.now
	g.share = 0.2
	var slept []time.Duration
	g.sleep = func(_ context.Context, d time.Duration) { slept = append(slept, d); clk.add(d) }
	heavy := tenantCtx("heavy", "")
	var light []context.Context
	for i := range 11 {
		light = append(light, tenantCtx(string(rune('a'+i)), "h"))
	}
	rate := func(ctx context.Context) float64 {
		k, _ := fairKey(ctx)
		g.mu.Lock()
		defer g.mu.Unlock()
		return g.accounts[k].rate(clk.now())
	}
	use := func(ctx context.Context, d time.Duration) {
		t.Helper()
		rel, err := g.acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		clk.add(d)
		rel()
	}
	// The heavy tenant alone, a connection all the time: never held.
	for range 40 {
		use(heavy, 100*time.Millisecond)
	}
	if len(slept) != 0 {
		t.Fatalf("a tenant alone waited %v", slept)
	}
	// Then everybody for 60 s, in rounds of at least 100 ms: light tenant
	// i holds a connection 2+0.2i ms a round, the heavy tenant 30 ms
	// whenever the budget lets it.
	lightSlept, heavyHeld, heavyRan := 0, 0, 0
	start := clk.now()
	for range 600 {
		begin := clk.now()
		for i, ctx := range light {
			n := len(slept)
			use(ctx, 2*time.Millisecond+time.Duration(i)*200*time.Microsecond)
			if len(slept) != n {
				lightSlept++
			}
		}
		// The heavy tenant's wait must not stop the others' rounds: it
		// skips a round while the budget would hold it.
		k, _ := fairKey(heavy)
		g.mu.Lock()
		held := g.budgetWait(g.accounts[k], clk.now())
		g.mu.Unlock()
		if held > 0 {
			heavyHeld++
		} else {
			heavyRan++
			use(heavy, 30*time.Millisecond)
		}
		if d := 100*time.Millisecond - clk.now().Sub(begin); d > 0 {
			clk.add(d)
		}
	}
	if lightSlept != 0 {
		t.Fatalf("light tenants were held by the budget %d times", lightSlept)
	}
	if heavyHeld == 0 || len(slept) != 0 {
		t.Fatalf("the heavy tenant was held %d rounds (waits %v in acquire)", heavyHeld, slept)
	}
	var lr []float64
	for _, ctx := range light {
		lr = append(lr, rate(ctx))
	}
	slices.Sort(lr)
	if lr[0] <= g.share/12 {
		t.Fatalf("light tenants at %.3f-%.3f connections: not over their floor, the test proves nothing", lr[0], lr[10])
	}
	// Over the minute (its first seconds included) the heavy tenant used
	// at most twice the typical use, not the 0.3 it asked for.
	hr := float64(heavyRan) * 0.030 / clk.now().Sub(start).Seconds()
	if hr > fairOutlier*lr[5] {
		t.Fatalf("heavy tenant at %.3f connections, light median %.3f (range %.3f-%.3f): not held to the typical use", hr, lr[5], lr[0], lr[10])
	}
	t.Logf("heavy tenant at %.3f connections (%d rounds held), light median %.3f (range %.3f-%.3f)", hr, heavyHeld, lr[5], lr[0], lr[10])
}

// TestFairGateBudgetHoldsHeavyStatements: when the database's CPU is
// contended every tenant's hold times grow, so a tenant running reports
// can sit within twice the others' rate, where the rate rule holds
// nobody. What one of its holds costs still tells it apart: it is held
// to its floor, and the light tenants, however busy, are never held.
func TestFairGateBudgetHoldsHeavyStatements(t *testing.T) {
	clk := &fakeClock{t: time.Unix(4_000_000, 0)}
	g := newFairGate(4, engine.Wait{Timeout: time.Hour})
	g.now = clk.now
	now := clk.now()
	// acct is an account whose decayed rate and time per hold are the
	// given ones.
	acct := func(name string, rate, perHold float64) *fairAccount {
		used := rate * fairHalfLife.Seconds() / math.Ln2
		a := &fairAccount{used: used, holds: used / perHold, at: now, last: now}
		k, _ := fairKey(tenantCtx(name, ""))
		g.accounts[k] = a
		return a
	}
	var light []*fairAccount
	for i := range 11 {
		light = append(light, acct(string(rune('a'+i)), 0.28+0.01*float64(i%3), 0.012))
	}
	heavy := acct("heavy", 0.45, 0.2)
	g.mu.Lock()
	defer g.mu.Unlock()
	floor := g.share / 12
	if r := heavy.rate(now); r <= floor || r >= fairOutlier*0.28 {
		t.Fatalf("heavy rate %.3f: not between its floor %.3f and the rate rule's bound: the test proves nothing", r, floor)
	}
	for i, a := range light {
		if d := g.budgetWait(a, now); d != 0 {
			t.Fatalf("light tenant %d (rate %.3f, 12 ms a hold) held %s", i, a.rate(now), d)
		}
	}
	d := g.budgetWait(heavy, now)
	if d <= 0 {
		t.Fatal("a tenant holding connections 200 ms at a time, the others 12 ms, was not held")
	}
	if r := heavy.rate(now.Add(d)); r > floor*1.01 {
		t.Fatalf("held %s, after which its rate is %.3f: want its floor %.3f", d, r, floor)
	}
	// The same rate with the others' time per hold: not held.
	heavy.holds = heavy.used / 0.012
	if d := g.budgetWait(heavy, now); d != 0 {
		t.Fatalf("a tenant within twice the others' rate, with their time per hold, was held %s", d)
	}
}

// TestFairGateServesTheOverdue: a tenant that cost a little more than the
// others is passed over for cheaper waiters only until it has waited
// maxDefer; then it is served before any newcomer. Without the bound, a
// stream of cheaper tenants kept it waiting past the pool wait (a quiet
// tenant refused "busy" in the noisy-tenant load test while its
// neighbours were served in milliseconds).
func TestFairGateServesTheOverdue(t *testing.T) {
	if got := newFairGate(1, engine.Wait{Timeout: 200 * time.Millisecond}).maxDefer; got != 100*time.Millisecond {
		t.Fatalf("maxDefer with a 200 ms pool wait: %s, want half of it", got)
	}
	clk := &fakeClock{t: time.Unix(4_000_000, 0)}
	g := newFairGate(1, engine.Wait{Timeout: time.Hour})
	g.now = clk.now
	if g.maxDefer != fairMaxDefer {
		t.Fatalf("maxDefer %s, want %s", g.maxDefer, fairMaxDefer)
	}
	acquired := func(ctx context.Context) <-chan func() {
		ch := make(chan func(), 1)
		go func() {
			rel, err := g.acquire(ctx)
			if err != nil {
				t.Error(err)
				close(ch)
				return
			}
			ch <- rel
		}()
		return ch
	}
	dear := tenantCtx("dear", "")
	rel := <-acquired(dear)
	clk.add(200 * time.Millisecond) // it has used the pool a little
	rel()
	held := <-acquired(tenantCtx("c0", ""))
	dearServed := acquired(dear)
	waitQueued(t, g, 1)
	const hold = 100 * time.Millisecond
	for i := 1; ; i++ {
		// A tenant that cost nothing yet queues behind it; the holder
		// gives its connection back a hold later.
		next := acquired(tenantCtx(fmt.Sprintf("c%d", i), ""))
		waitQueued(t, g, 2)
		clk.add(hold)
		held()
		select {
		case rel := <-dearServed:
			waited := time.Duration(i) * hold
			if waited < g.maxDefer {
				t.Fatalf("served after %s, before it was overdue: the cheaper waiter should have gone first", waited)
			}
			if waited > g.maxDefer+hold {
				t.Fatalf("served after %s, over maxDefer %s plus one hold", waited, g.maxDefer)
			}
			rel()
			(<-next)()
			return
		case held = <-next:
			if i > 20 {
				t.Fatalf("passed over for %s by %d cheaper tenants", time.Duration(i)*hold, i)
			}
		}
	}
}
