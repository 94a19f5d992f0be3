package hotel_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/tenantmcp/tenantmcp/claims/devtoken"
	"github.com/tenantmcp/tenantmcp/examples/hotel/hotel"
	"github.com/tenantmcp/tenantmcp/internal/rpctest"
	"github.com/tenantmcp/tenantmcp/server"
)

// The load/fault suite of issue 16 §1: one tenant's calls pile up on
// locked rows of a small PostgreSQL pool while eleven other tenants work.
// Bounded and loopback-only: a few seconds per phase in CI; set
// TENANTMCP_LOAD_SECONDS for longer phases, and TENANTMCP_LOAD_BASELINE=1
// to also run the same scenario with every limit off, for comparison
// figures. Timing figures are logged, never asserted tightly: the
// assertions are liveness (every tenant served, no noisy call hangs) and
// isolation (0 foreign rows, 0 lost acknowledged writes).

const (
	envLoadSeconds  = "TENANTMCP_LOAD_SECONDS"
	envLoadBaseline = "TENANTMCP_LOAD_BASELINE"
	noisyCalls      = 16
	clientsPerQuiet = 2
)

// loadScenario is one run: the limits under test, and what it measured.
type loadScenario struct {
	name   string
	index  int // keeps the scenarios' bookings on distinct dates
	limits hotel.Limits
	assert bool // the fixed configuration; the baseline only reports
}

func loadSeconds(t *testing.T) time.Duration {
	if v := os.Getenv(envLoadSeconds); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			t.Fatalf("%s=%q: want a positive number of seconds", envLoadSeconds, v)
		}
		return time.Duration(n) * time.Second
	}
	return 3 * time.Second
}

// TestLoadNoisyTenantPostgres: 16 calls of one chain wait on a row locked
// by another transaction, on a 4-connection pool, while the eleven other
// chains work (reads and writes). With the per-tenant concurrency limit,
// the pool-wait bound and the lock/statement timeouts set with the scope,
// the other chains keep (nearly) their unloaded throughput and the noisy
// chain gets 429/busy/timeout answers, never a hang.
func TestLoadNoisyTenantPostgres(t *testing.T) {
	data := hotel.Generate(16, hotel.Size{Chains: 12, HotelsPerChain: 1, RoomsPerHotel: 6, GuestsPerHotel: 4, BookingsPerRoom: 3})
	pg := provisionPostgres(t, data)
	scenarios := []loadScenario{{name: "limits", assert: true, limits: hotel.Limits{
		PoolSize: 4, PoolWait: time.Second, CallTimeout: 30 * time.Second,
		StatementTimeout: 5 * time.Second, LockTimeout: 500 * time.Millisecond,
		PerTenant: server.Limit{Concurrent: 1}, QueueWait: time.Second, TimeoutPenalty: 2 * time.Second,
	}}}
	if os.Getenv(envLoadBaseline) != "" {
		// No limit at all; a shorter call timeout keeps the run bounded.
		scenarios = append(scenarios, loadScenario{name: "baseline-no-limits", index: 1, limits: hotel.Limits{PoolSize: 4, CallTimeout: 10 * time.Second}})
	}
	for _, sc := range scenarios {
		t.Run(sc.name, func(t *testing.T) { runNoisyTenant(t, pg, data, sc) })
	}
}

func runNoisyTenant(t *testing.T, pg livePostgres, d *hotel.Data, sc loadScenario) {
	dur := loadSeconds(t)
	h := startWith(t, hotel.Options{DB: pg.app, RLSKey: pg.key, Limits: sc.limits}, d)
	endpoint := h.app.HTTP.ResourceURL
	token := func(sub, chain string) string {
		tok, err := h.app.Issuer.Mint(devtoken.Token{Subject: sub, Groups: []string{"/tenants/" + chain}, Roles: []string{"manager"}, TTL: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	noisy := d.Chains[0].ID
	var quiet []string
	for _, c := range d.Chains[1:] {
		quiet = append(quiet, c.ID)
	}
	var locked int64
	for _, b := range d.Bookings {
		if d.ChainOfHotel(d.HotelOfBooking(b.ID)) == noisy {
			locked = b.ID
			break
		}
	}

	// Each quiet client books its own room, on dates no other client uses.
	type client struct {
		chain, tok  string
		room, guest int64
	}
	var clients []client
	for _, chain := range quiet {
		hotelID := d.HotelsOf(chain)[0]
		var rooms, guests []int64
		for _, r := range d.Rooms {
			if r.HotelID == hotelID {
				rooms = append(rooms, r.ID)
			}
		}
		for _, g := range d.Guests {
			if g.HotelID == hotelID {
				guests = append(guests, g.ID)
			}
		}
		for i := range clientsPerQuiet {
			clients = append(clients, client{chain: chain, tok: token(fmt.Sprintf("%s-user-%d", chain, i), chain), room: rooms[i], guest: guests[0]})
		}
	}

	var mu sync.Mutex
	var acked []int64 // acknowledged writes
	foreign, quietLimited, quietErrors := 0, 0, map[string]int{}
	round := 10 * sc.index // date offset: every phase books fresh dates
	quietPhase := func(ctx context.Context) map[string]int {
		ok := map[string]int{}
		var wg sync.WaitGroup
		round++
		for ci, c := range clients {
			wg.Go(func() {
				day := time.Date(2031+round, 1, 1, 0, 0, 0, 0, time.UTC)
				for i := 0; ctx.Err() == nil; i++ {
					var r rpctest.Reply
					var err error
					if i%4 == 3 {
						in := day.AddDate(0, 0, 2*i)
						r, err = rpctest.Call(ctx, endpoint, c.tok, "create_booking", map[string]any{"room_id": c.room, "guest_id": c.guest,
							"check_in": in.Format(time.DateOnly), "check_out": in.AddDate(0, 0, 1).Format(time.DateOnly)})
					} else {
						r, err = rpctest.Call(ctx, endpoint, c.tok, "list_bookings", map[string]any{"from": "2026-01-01", "to": "2040-01-01", "limit": 50, "offset": (ci * 7) % 10})
					}
					if ctx.Err() != nil {
						return // the phase ended mid-call: not counted
					}
					mu.Lock()
					switch {
					case r.Status == http.StatusTooManyRequests:
						// Its own tenant's slot stayed taken past the queue
						// wait (two clients share one slot): retryable.
						quietLimited++
					case err != nil || r.Status != http.StatusOK || r.Err != nil || r.IsError:
						quietErrors[fmt.Sprintf("%d %v %s %v", r.Status, r.Err, r.Text, err)]++
					case i%4 == 3:
						var out hotel.CreatedOut
						if json.Unmarshal(r.Structured, &out) == nil && out.ID != 0 {
							acked = append(acked, out.ID)
						}
						ok[c.chain]++
					default:
						var out hotel.BookingsOut
						if err := json.Unmarshal(r.Structured, &out); err != nil {
							quietErrors["undecodable list"]++
							break
						}
						for _, b := range out.Bookings {
							if d.ChainOfHotel(b.HotelID) != c.chain {
								foreign++
							}
						}
						ok[c.chain]++
					}
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		return ok
	}

	type noisyResult struct {
		outcome string
		took    time.Duration
	}
	noisyOut := make(chan noisyResult, 1<<16)
	// loadedPhase runs the quiet clients while another transaction holds
	// the noisy chain's row and noisyCalls clients of that chain keep
	// trying to update it.
	loadedPhase := func() map[string]int {
		lockConn, err := sql.Open("pgx", pg.admin)
		if err != nil {
			t.Fatal(err)
		}
		defer lockConn.Close()
		lockTx, err := lockConn.Begin()
		if err != nil {
			t.Fatal(err)
		}
		defer lockTx.Rollback()
		if _, err := lockTx.Exec(`SELECT 1 FROM bookings WHERE id = $1 FOR UPDATE`, locked); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), dur)
		defer cancel()
		var nwg sync.WaitGroup
		for i := range noisyCalls {
			tok := token(fmt.Sprintf("%s-noisy-%d", noisy, i), noisy)
			nwg.Go(func() {
				for ctx.Err() == nil {
					start := time.Now()
					// Not tied to the phase: a call that hangs must show as such.
					r, err := rpctest.Call(context.Background(), endpoint, tok, "cancel_booking", map[string]any{"id": locked})
					o := "other"
					switch {
					case err != nil:
						o = "transport error"
					case r.Status == http.StatusTooManyRequests:
						o = "429 " + ruleOf(r.Err)
					case r.Err != nil && r.Err.Code == server.CodeLimited:
						o = "busy " + ruleOf(r.Err)
					case r.IsError && strings.Contains(r.Text, "timed out"):
						o = "timeout"
					case r.Status == http.StatusOK && !r.IsError && r.Err == nil:
						o = "ok"
					default:
						o = fmt.Sprintf("other %d %v %q", r.Status, r.Err, r.Text)
					}
					noisyOut <- noisyResult{o, time.Since(start)}
					// A client told to come back later does so (Retry-After);
					// otherwise it retries at once.
					pause := 10 * time.Millisecond
					if s, err := strconv.Atoi(r.RetryAfter); err == nil {
						pause = time.Duration(s) * time.Second
					}
					select {
					case <-ctx.Done():
					case <-time.After(pause):
					}
				}
			})
		}
		ok := quietPhase(ctx)
		// The noisy calls still waiting end at their timeouts; the lock is
		// released only then, so none of them can succeed.
		nwg.Wait()
		if err := lockTx.Rollback(); err != nil {
			t.Fatal(err)
		}
		return ok
	}

	warm, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	quietPhase(warm)
	cancel()
	// Unloaded and loaded phases alternate, so that a burst of other work
	// on the machine weighs on both alike.
	unloaded, loaded := map[string]int{}, map[string]int{}
	for range 2 {
		ctx, cancel := context.WithTimeout(context.Background(), dur)
		for k, v := range quietPhase(ctx) {
			unloaded[k] += v
		}
		cancel()
		for k, v := range loadedPhase() {
			loaded[k] += v
		}
	}
	close(noisyOut)

	// Figures.
	var sumU, sumL int
	var lines []string
	minRatio := 1e9
	for _, chain := range quiet {
		u, l := unloaded[chain], loaded[chain]
		sumU, sumL = sumU+u, sumL+l
		ratio := 0.0
		if u > 0 {
			ratio = float64(l) / float64(u)
		}
		minRatio = min(minRatio, ratio)
		lines = append(lines, fmt.Sprintf("  %-10s unloaded %5d  loaded %5d  ratio %.2f", chain, u, l, ratio))
	}
	outcomes := map[string]int{}
	var maxNoisy time.Duration
	var noisyN int
	for r := range noisyOut {
		outcomes[r.outcome]++
		maxNoisy = max(maxNoisy, r.took)
		noisyN++
	}
	agg := float64(sumL) / float64(max(sumU, 1))
	var oc []string
	for k, v := range outcomes {
		oc = append(oc, fmt.Sprintf("%s=%d", k, v))
	}
	slices.Sort(oc)
	t.Logf("%s: %d quiet clients of %d chains, %d noisy calls of chain %s on one locked row, pool %d, 2 x %s unloaded and loaded, alternating\n"+
		"quiet successful calls per chain:\n%s\n"+
		"aggregate loaded/unloaded %.2f (min per chain %.2f); %.0f calls/s unloaded, %.0f calls/s loaded\n"+
		"noisy calls: %d, outcomes %s, longest %s\n"+
		"quiet calls refused by their own tenant's limit: %d; quiet errors: %v; foreign rows: %d; acknowledged writes: %d",
		sc.name, len(clients), len(quiet), noisyCalls, noisy, sc.limits.PoolSize, dur,
		strings.Join(lines, "\n"), agg, minRatio, float64(sumU)/(2*dur.Seconds()), float64(sumL)/(2*dur.Seconds()),
		noisyN, strings.Join(oc, " "), maxNoisy.Round(time.Millisecond), quietLimited, quietErrors, foreign, len(acked))

	// Isolation holds in every configuration.
	if foreign != 0 {
		t.Errorf("%d foreign rows returned", foreign)
	}
	var found int
	if err := pg.rootOn(t).QueryRow(`SELECT count(*) FROM bookings WHERE id = ANY($1)`, acked).Scan(&found); err != nil {
		t.Fatal(err)
	}
	if found != len(acked) {
		t.Errorf("%d of %d acknowledged bookings are missing", len(acked)-found, len(acked))
	}
	if !sc.assert {
		return
	}
	// Liveness, with generous bounds (the figures above are the result).
	for _, chain := range quiet {
		if loaded[chain] == 0 {
			t.Errorf("chain %s got no successful call while %s was noisy", chain, noisy)
		}
	}
	// The target is 90% (see the figures); the assertion is only that
	// the quiet chains are not starved, as they are without limits.
	if agg < 0.25 {
		t.Errorf("quiet chains kept %.0f%% of their unloaded throughput", 100*agg)
	}
	if maxNoisy > 20*time.Second {
		t.Errorf("a noisy call took %s: it hung instead of being refused or timed out", maxNoisy)
	}
	if outcomes["ok"] > 0 {
		t.Errorf("%d noisy calls updated the locked row while it was locked", outcomes["ok"])
	}
	if len(quietErrors) > 0 {
		t.Errorf("quiet chains' calls failed: %v", quietErrors)
	}
}

func ruleOf(e *jsonrpc.Error) string {
	if e == nil {
		return ""
	}
	var d struct {
		Rule string `json:"rule"`
	}
	_ = json.Unmarshal(e.Data, &d)
	return d.Rule
}

// rootOn opens the test database as the superuser.
func (pg livePostgres) rootOn(t *testing.T) *sql.DB {
	t.Helper()
	db, err := sql.Open("pgx", pg.admin)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}
