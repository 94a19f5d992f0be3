package pgstore

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tenantmcp/tenantmcp/server"
)

// RatesTable is the name of the table of token buckets.
const RatesTable = "tenantmcp_rate"

// RatesCreateSQL creates the table of token buckets if it does not exist.
// It is UNLOGGED: a bucket is an availability control, lost at a crash
// (every bucket full again), and not worth a WAL write per call.
const RatesCreateSQL = `CREATE UNLOGGED TABLE IF NOT EXISTS ` + RatesTable + ` (key bytea PRIMARY KEY, tat bigint NOT NULL, wait bigint NOT NULL DEFAULT 0)`

// DefaultTimeout bounds one Take when Options.Timeout is zero.
const DefaultTimeout = 250 * time.Millisecond

// Options configures a Rates.
type Options struct {
	// Timeout bounds one Take; zero means DefaultTimeout, and a negative
	// value is refused (a bound on Take cannot be switched off).
	Timeout time.Duration
}

// ErrConfig is wrapped by the error NewRates returns for options it
// refuses.
var ErrConfig = fmt.Errorf("pgstore: invalid configuration")

// Rates is a server.RateStore in a PostgreSQL table, for replicas that
// share a PostgreSQL database but no Redis: one bucket per row, keyed by
// the SHA-256 digest of the limit key (no tenant id or subject is
// stored), holding its theoretical arrival time in microseconds of the
// database's clock. Each Take is one statement (an INSERT … ON CONFLICT DO
// UPDATE that takes a token or computes the wait under the row's lock),
// with the generic cell rate algorithm of redisstore.Rates: the same
// emission interval, burst tolerance and waits, so a deployment can move
// between the two. Replicas whose clocks disagree share the database's.
// Rows of buckets full again are deleted at most once a minute per
// process (an extra statement then). It is safe for concurrent use.
type Rates struct {
	db  *sql.DB
	opt Options

	mu      sync.Mutex
	created atomic.Bool
	pruned  atomic.Int64 // unix nanoseconds of the last prune
}

var _ server.RateStore = (*Rates)(nil)

// pinger is server.Pinger, the readiness check every store here has.
type pinger interface {
	Ping(ctx context.Context) error
}

var _ = []pinger{(*Rates)(nil), (*Replays)(nil)}

// NewRates returns a Rates on db (any database/sql driver for PostgreSQL,
// such as pgx's stdlib; the caller owns and closes db). The table is
// created on first use (the role needs CREATE on its schema then, or
// create it ahead with RatesCreateSQL). It refuses a nil db and a
// negative Timeout (ErrConfig).
func NewRates(db *sql.DB, o Options) (*Rates, error) {
	if db == nil {
		return nil, fmt.Errorf("%w: nil database", ErrConfig)
	}
	if o.Timeout < 0 {
		return nil, fmt.Errorf("%w: Options.Timeout is negative (%v); zero means DefaultTimeout", ErrConfig, o.Timeout)
	}
	if o.Timeout == 0 {
		o.Timeout = DefaultTimeout
	}
	return &Rates{db: db, opt: o}, nil
}

// takeSQL takes one cell of bucket $1: $2 is the emission interval T and
// $3 the burst tolerance tau = T*burst, in microseconds. A new bucket is
// full: its first cell is taken (tat = now + T). Otherwise, with cur =
// max(tat, now), the wait is cur + T - tau - now; if positive nothing is
// taken and the wait is returned, else tat becomes cur + T and the wait is
// 0. EXCLUDED.tat is now + T.
const takeSQL = `INSERT INTO ` + RatesTable + ` AS b (key, tat, wait)
VALUES ($1, (extract(epoch FROM clock_timestamp()) * 1000000)::bigint + $2, 0)
ON CONFLICT (key) DO UPDATE SET
	tat = CASE WHEN GREATEST(b.tat + $2 - EXCLUDED.tat, 0) + $2 - $3 > 0 THEN b.tat ELSE GREATEST(b.tat + $2, EXCLUDED.tat) END,
	wait = GREATEST(GREATEST(b.tat + $2 - EXCLUDED.tat, 0) + $2 - $3, 0)
RETURNING wait`

// Take implements server.RateStore. Its errors wrap ErrStore and never
// name the key.
func (s *Rates) Take(ctx context.Context, key string, r float64, burst int) (time.Duration, error) {
	if r <= 0 || burst <= 0 || math.IsInf(r, 0) || math.IsNaN(r) {
		return 0, fmt.Errorf("%w: invalid rate %v or burst %d", ErrStore, r, burst)
	}
	ctx, cancel := context.WithTimeout(ctx, s.opt.Timeout)
	defer cancel()
	if err := s.setup(ctx); err != nil {
		return 0, err
	}
	sum := sha256.Sum256([]byte(key))
	T := int64(math.Max(1, 1e6/r))
	var wait int64
	if err := s.db.QueryRowContext(ctx, takeSQL, sum[:], T, T*int64(burst)).Scan(&wait); err != nil {
		return 0, fmt.Errorf("%w: %v", ErrStore, err)
	}
	s.prune(ctx)
	return time.Duration(wait) * time.Microsecond, nil
}

// setup creates the table once.
func (s *Rates) setup(ctx context.Context) error {
	if s.created.Load() {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.created.Load() {
		return nil
	}
	if _, err := s.db.ExecContext(ctx, RatesCreateSQL); err != nil {
		var there bool
		if s.db.QueryRowContext(ctx, `SELECT to_regclass($1) IS NOT NULL`, RatesTable).Scan(&there) != nil || !there {
			return fmt.Errorf("%w: creating %s: %v", ErrStore, RatesTable, err)
		}
	}
	s.created.Store(true)
	return nil
}

// prune deletes the rows of buckets full again, at most every pruneEvery
// per process; a failed prune only costs space and is retried later.
func (s *Rates) prune(ctx context.Context) {
	now, last := time.Now().UnixNano(), s.pruned.Load()
	if now-last < int64(pruneEvery) || !s.pruned.CompareAndSwap(last, now) {
		return
	}
	_, _ = s.db.ExecContext(ctx, `DELETE FROM `+RatesTable+` WHERE tat < (extract(epoch FROM clock_timestamp()) * 1000000)::bigint`)
}

// Ping implements the server's readiness check (server.Pinger): the
// database answers and the table is there (created if it was not). Its
// error wraps ErrStore.
func (s *Rates) Ping(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, s.opt.Timeout)
	defer cancel()
	if err := s.setup(ctx); err != nil {
		return err
	}
	if err := s.db.PingContext(ctx); err != nil {
		return fmt.Errorf("%w: %v", ErrStore, err)
	}
	return nil
}
