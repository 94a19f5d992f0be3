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

// heavyBookings is how many bookings the heavy chain's hotel gets on top
// of the generated ones: enough that one whole-range rank_rooms report
// holds a connection for tens of milliseconds.
const heavyBookings = 20_000

// TestLoadHeavyReportsPostgres is the scenario of issue 29 §1: one chain
// runs whole-range reports (rank_rooms over every date, on a hotel with
// heavyBookings more bookings) back to back while eleven quiet chains
// work, with the hotel's default limits and again with the rate limits
// off. It logs the figures (quiet throughput loaded/unloaded, quiet p99
// loaded/unloaded, and the heavy chain's duty: how often one of its
// reports is running in the database, sampled from pg_stat_activity) and
// asserts liveness (every quiet chain served, the heavy chain not starved,
// no call hung, no quiet call failed: the fair queue's budget never
// refused a quiet chain) and isolation (0 foreign rows or reports, 0 lost
// acknowledged writes). The fairness mechanism itself is asserted by
// guardedsql's TestFairGate* tests; timing bounds here would be noise.
func TestLoadHeavyReportsPostgres(t *testing.T) {
	data := hotel.Generate(29, hotel.Size{Chains: 12, HotelsPerChain: 1, RoomsPerHotel: 6, GuestsPerHotel: 4, BookingsPerRoom: 3})
	pg := provisionPostgres(t, data)
	heavy := data.Chains[0].ID
	hotelID := data.HotelsOf(heavy)[0]
	root := pg.rootOn(t)
	if _, err := root.Exec(`INSERT INTO bookings (room_id, guest_id, check_in, check_out, status, total_cents, created_at)
		SELECT (SELECT id FROM rooms WHERE hotel_id = $1 ORDER BY id OFFSET (i % 6) LIMIT 1),
		       (SELECT id FROM guests WHERE hotel_id = $1 ORDER BY id LIMIT 1),
		       DATE '2020-01-01' + (i % 3650), DATE '2020-01-02' + (i % 3650),
		       CASE WHEN i % 5 = 0 THEN 'cancelled' ELSE 'confirmed' END, 1000 + i % 9000, now()
		FROM generate_series(1, $2) AS i`, hotelID, heavyBookings); err != nil {
		t.Fatal(err)
	}
	if _, err := root.Exec(`ANALYZE bookings`); err != nil {
		t.Fatal(err)
	}
	// The hotel's defaults (examples/hotel/main.go): pool 4, tenant
	// concurrency 1, queue wait 1 s, 50 calls/s per tenant (burst 100).
	defaults := hotel.Limits{
		PoolSize: 4, PoolWait: 2 * time.Second, CallTimeout: 30 * time.Second,
		StatementTimeout: 10 * time.Second, LockTimeout: 500 * time.Millisecond,
		PerTenant: server.Limit{Concurrent: 1, Rate: 50, Burst: 100}, QueueWait: time.Second, TimeoutPenalty: 2 * time.Second,
	}
	noRates := defaults
	noRates.PerTenant.Rate, noRates.PerTenant.Burst = 0, 0
	for _, sc := range []loadScenario{{name: "default-limits", index: 3, limits: defaults, assert: true}, {name: "no-rate-limits", index: 4, limits: noRates, assert: true}} {
		t.Run(sc.name, func(t *testing.T) { runHeavyReports(t, pg, data, sc) })
	}
}

func runHeavyReports(t *testing.T, pg livePostgres, d *hotel.Data, sc loadScenario) {
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
	heavy := d.Chains[0].ID
	var quiet []string
	for _, c := range d.Chains[1:] {
		quiet = append(quiet, c.ID)
	}
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
	var acked []int64
	foreign, quietLimited, quietErrors := 0, 0, map[string]int{}
	round := 10 * sc.index
	// quietPhase runs the quiet clients until ctx ends: successful calls
	// per chain, and their latencies.
	quietPhase := func(ctx context.Context) (map[string]int, []time.Duration) {
		ok := map[string]int{}
		var lat []time.Duration
		var wg sync.WaitGroup
		round++
		for ci, c := range clients {
			wg.Go(func() {
				day := time.Date(2031+round, 1, 1, 0, 0, 0, 0, time.UTC)
				for i := 0; ctx.Err() == nil; i++ {
					var r rpctest.Reply
					var err error
					start := time.Now()
					if i%4 == 3 {
						in := day.AddDate(0, 0, 2*i)
						r, err = rpctest.Call(ctx, endpoint, c.tok, "create_booking", map[string]any{"room_id": c.room, "guest_id": c.guest,
							"check_in": in.Format(time.DateOnly), "check_out": in.AddDate(0, 0, 1).Format(time.DateOnly)})
					} else {
						r, err = rpctest.Call(ctx, endpoint, c.tok, "list_bookings", map[string]any{"from": "2026-01-01", "to": "2040-01-01", "limit": 50, "offset": (ci * 7) % 10})
					}
					took := time.Since(start)
					if ctx.Err() != nil {
						return // the phase ended mid-call: not counted
					}
					mu.Lock()
					switch {
					case r.Status == http.StatusTooManyRequests:
						quietLimited++ // its own tenant's slot or bucket: retryable
					case err != nil || r.Status != http.StatusOK || r.Err != nil || r.IsError:
						quietErrors[fmt.Sprintf("%d %v %s %v", r.Status, r.Err, r.Text, err)]++
					case i%4 == 3:
						var out hotel.CreatedOut
						if json.Unmarshal(r.Structured, &out) == nil && out.ID != 0 {
							acked = append(acked, out.ID)
						}
						ok[c.chain]++
						lat = append(lat, took)
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
						lat = append(lat, took)
					}
					mu.Unlock()
					if r.Status == http.StatusTooManyRequests {
						pause := 10 * time.Millisecond
						if s, err := strconv.Atoi(r.RetryAfter); err == nil {
							pause = time.Duration(s) * time.Second
						}
						select {
						case <-ctx.Done():
						case <-time.After(pause):
						}
					}
				}
			})
		}
		wg.Wait()
		return ok, lat
	}

	const heavyClients = 2
	root := pg.rootOn(t)
	var dutyOn, dutyAll int
	heavyOut := map[string]int{}
	var heavyLongest time.Duration
	// loadedPhase runs the quiet clients while heavyClients clients of the
	// heavy chain run whole-range reports back to back (a refused one is
	// retried after 10 ms: a heavy user does not wait politely).
	loadedPhase := func() (map[string]int, []time.Duration) {
		ctx, cancel := context.WithTimeout(context.Background(), dur)
		defer cancel()
		var hwg sync.WaitGroup
		for i := range heavyClients {
			tok := token(fmt.Sprintf("%s-reports-%d", heavy, i), heavy)
			hwg.Go(func() {
				for ctx.Err() == nil {
					start := time.Now()
					r, err := rpctest.Call(context.Background(), endpoint, tok, "rank_rooms", map[string]any{"from": "1990-01-01", "to": "2100-01-01"})
					took := time.Since(start)
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
					case r.OK():
						o = "ok"
						var out hotel.RankRoomsOut
						if json.Unmarshal(r.Structured, &out) != nil || len(out.Rooms) == 0 {
							o = "empty report"
						}
						for _, x := range out.Rooms {
							if d.ChainOfHotel(x.HotelID) != heavy {
								o = "foreign report"
							}
						}
					default:
						o = fmt.Sprintf("other %d %v %q", r.Status, r.Err, r.Text)
					}
					mu.Lock()
					heavyOut[o]++
					heavyLongest = max(heavyLongest, took)
					mu.Unlock()
					if o != "ok" {
						select {
						case <-ctx.Done():
						case <-time.After(10 * time.Millisecond):
						}
					}
				}
			})
		}
		// Sample how often a report is running in the database: the heavy
		// chain's share of connection time (its duty).
		swg := sampleDuty(ctx, t, root, &dutyOn, &dutyAll)
		ok, lat := quietPhase(ctx)
		hwg.Wait()
		swg.Wait()
		return ok, lat
	}

	warm, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	quietPhase(warm)
	cancel()
	// One report alone, for the figures: what a report costs.
	reportStart := time.Now()
	if r, err := rpctest.Call(context.Background(), endpoint, token(heavy+"-probe", heavy), "rank_rooms", map[string]any{"from": "1990-01-01", "to": "2100-01-01"}); err != nil || !r.OK() {
		t.Fatalf("a report alone: %v %+v", err, r)
	}
	reportAlone := time.Since(reportStart)
	unloaded, loaded := map[string]int{}, map[string]int{}
	var latU, latL []time.Duration
	// refill lets every tenant's token bucket fill up before a phase: the
	// quiet clients run closed-loop slightly above their own rate limit,
	// so without it the phase that runs first spends the burst and the
	// ratio would measure the quiet tenant's own limiter, not its
	// neighbour.
	refill := func() {
		if r := sc.limits.PerTenant; r.Rate > 0 {
			time.Sleep(time.Duration(float64(r.Burst)/r.Rate*float64(time.Second)) + 100*time.Millisecond)
		}
	}
	for range 2 { // alternating, so that other work on the machine weighs on both alike
		refill()
		ctx, cancel := context.WithTimeout(context.Background(), dur)
		ok, lat := quietPhase(ctx)
		cancel()
		for k, v := range ok {
			unloaded[k] += v
		}
		latU = append(latU, lat...)
		refill()
		ok, lat = loadedPhase()
		for k, v := range ok {
			loaded[k] += v
		}
		latL = append(latL, lat...)
	}

	var sumU, sumL int
	minRatio := 1e9
	for _, chain := range quiet {
		sumU, sumL = sumU+unloaded[chain], sumL+loaded[chain]
		if u := unloaded[chain]; u > 0 {
			minRatio = min(minRatio, float64(loaded[chain])/float64(u))
		}
	}
	agg := float64(sumL) / float64(max(sumU, 1))
	p99 := func(l []time.Duration) time.Duration {
		if len(l) == 0 {
			return 0
		}
		slices.Sort(l)
		return l[min(len(l)-1, len(l)*99/100)]
	}
	duty := float64(dutyOn) / float64(max(dutyAll, 1))
	p99U, p99L := p99(latU), p99(latL)
	p99Ratio := float64(p99L) / float64(max(p99U, 1))
	var ho []string
	for k, v := range heavyOut {
		ho = append(ho, fmt.Sprintf("%s=%d", k, v))
	}
	slices.Sort(ho)
	t.Logf("%s: %d quiet clients of %d chains; %d clients of chain %s running whole-range reports (%d extra bookings; one report alone %s), pool %d, rate %.0f/s, 2 x %s unloaded and loaded, alternating\n"+
		"FIGURES %s: quiet throughput loaded/unloaded %.3f (min per chain %.2f; %.0f calls/s unloaded, %.0f loaded); quiet p99 unloaded %s loaded %s ratio %.2f\n"+
		"heavy chain's duty (reports running in the database, of %d samples) %.2f; heavy outcomes %s (longest %s); quiet calls refused by their own tenant's limits: %d; quiet errors: %v; foreign rows: %d; acknowledged writes: %d",
		sc.name, len(clients), len(quiet), heavyClients, heavy, heavyBookings, reportAlone.Round(time.Millisecond), sc.limits.PoolSize, sc.limits.PerTenant.Rate, dur,
		sc.name, agg, minRatio, float64(sumU)/(2*dur.Seconds()), float64(sumL)/(2*dur.Seconds()),
		p99U.Round(time.Millisecond), p99L.Round(time.Millisecond), p99Ratio,
		dutyAll, duty, strings.Join(ho, " "), heavyLongest.Round(time.Millisecond), quietLimited, quietErrors, foreign, len(acked))

	// Isolation.
	if foreign != 0 || heavyOut["foreign report"] != 0 {
		t.Errorf("%d foreign rows, %d foreign reports", foreign, heavyOut["foreign report"])
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
	// Liveness: every quiet chain served, the heavy chain not starved, no
	// call hung.
	for _, chain := range quiet {
		if loaded[chain] == 0 {
			t.Errorf("chain %s got no successful call while %s ran reports", chain, heavy)
		}
	}
	if heavyOut["ok"] == 0 {
		t.Errorf("the heavy chain got no report at all: %v", heavyOut)
	}
	if heavyLongest > 20*time.Second {
		t.Errorf("a report took %s", heavyLongest)
	}
	if len(quietErrors) > 0 {
		t.Errorf("quiet chains' calls failed: %v", quietErrors)
	}
	// Fairness is not asserted here: on a two-core machine the ratios
	// move with whatever else runs (a bound loose enough not to flake
	// would not tell the mechanisms apart), and the mechanism is asserted
	// exactly by guardedsql's TestFairGate* tests. Measured with
	// TENANTMCP_LOAD_SECONDS=6 on an otherwise idle machine (load average
	// under 1), 3 runs each, default limits / no rate limits: the quiet
	// chains kept 0.86 / 0.90 of their throughput with the rate-only
	// outlier budget (heavy duty 0.32-0.34, quiet p99 x1.63 / x2.05); with
	// the time-per-hold rule (heavy statements held to their floor, the
	// hold not counted against the pool wait) 0.88-0.97 / 0.95-1.05, heavy
	// duty 0.11-0.16, quiet p99 x1.27-1.97 / x1.12-1.50. In arrival order
	// (PoolFIFO, before issue 29) they kept 0.66-0.77, duty 0.56-0.59.
}

// sampleDuty samples pg_stat_activity of the test database every 20 ms
// until ctx ends: how often a report (the only statement with RANK()) is
// running.
func sampleDuty(ctx context.Context, t *testing.T, root *sql.DB, on, all *int) *sync.WaitGroup {
	var wg sync.WaitGroup
	wg.Go(func() {
		for ctx.Err() == nil {
			var n int
			err := root.QueryRowContext(ctx, `SELECT count(*) FROM pg_stat_activity
				WHERE datname = current_database() AND state = 'active' AND query ILIKE '%rank()%over%' AND pid <> pg_backend_pid()`).Scan(&n)
			if err != nil {
				if ctx.Err() == nil {
					t.Errorf("sampling pg_stat_activity: %v", err)
				}
				return
			}
			*all++
			if n > 0 {
				*on++
			}
			select {
			case <-ctx.Done():
			case <-time.After(20 * time.Millisecond):
			}
		}
	})
	return &wg
}
