// Package redisstore keeps on Redis what the replicas of a server share:
// the token buckets of server.Limits (NewRates, a server.RateStore), so
// N replicas behind a load balancer enforce one budget per tenant and
// subject, not N; the spent requestState nonces of multi round-trip
// requests (NewReplays, a server.ReplayStore), so a consent is honoured
// once on any replica; and the information-flow taints of a flow.Checker
// (NewTaints, a flow.Store, see Taints), so a subject that reads guest data
// on one replica cannot send it from another, on a deployment without
// PostgreSQL (MariaDB, SQLite) — with PostgreSQL prefer flow/pgtaint,
// which the application's own credentials cannot erase.
//
// Each bucket is one Redis string holding its theoretical arrival time
// (the generic cell rate algorithm, equivalent to a token bucket of the
// same rate and burst), updated by one Lua script that reads the clock
// of the Redis server itself, so replicas whose clocks disagree still
// share one timeline. A key expires once its bucket would be full again,
// so idle tenants cost nothing. Bucket keys are SHA-256 digests of the
// limit keys: no tenant id or subject is stored in Redis.
//
// Errors (Redis unreachable, a timeout) reach server.Limits as errors
// (see server.Limits for what admission does then), a replay store that
// cannot answer refuses the retry, and a taint store that cannot answer
// makes the checker fail closed (flow.ErrTaintStore: sink calls denied,
// results withheld); keep the store's Timeout well under the call
// timeout. Every store has Ping, the server's readiness check
// (server.Pinger).
package redisstore

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tenantmcp/tenantmcp/server"
)

// DefaultTimeout bounds one Take or Spend when Options.Timeout is zero.
const DefaultTimeout = 250 * time.Millisecond

// ErrStore wraps every error Take and Spend return but ErrReplayed.
var ErrStore = errors.New("redisstore: store unavailable")

// Options configures a Store.
type Options struct {
	// Prefix namespaces the keys; default "tenantmcp:rate:" (NewRates),
	// "tenantmcp:replay:" (NewReplays).
	Prefix string
	// Timeout bounds one Take; zero means DefaultTimeout, and a negative
	// value is refused (a bound on Take cannot be switched off).
	Timeout time.Duration
}

// Rates is a server.RateStore on a Redis client. It is safe for
// concurrent use.
type Rates struct {
	c   redis.Scripter
	opt Options
}

var _ server.RateStore = (*Rates)(nil)

// ErrConfig is wrapped by the error New returns for options it refuses.
var ErrConfig = errors.New("redisstore: invalid configuration")

// NewRates returns a Rates using c (a *redis.Client, *redis.ClusterClient
// or ring; the caller owns and closes it). It refuses a nil client and a
// negative Timeout (ErrConfig): a bound on Take cannot be switched off.
func NewRates(c redis.Scripter, o Options) (*Rates, error) {
	if c == nil {
		return nil, fmt.Errorf("%w: nil Redis client", ErrConfig)
	}
	o, err := o.defaults("tenantmcp:rate:")
	if err != nil {
		return nil, err
	}
	return &Rates{c: c, opt: o}, nil
}

func (o Options) defaults(prefix string) (Options, error) {
	if o.Timeout < 0 {
		return o, fmt.Errorf("%w: Options.Timeout is negative (%v); zero means DefaultTimeout", ErrConfig, o.Timeout)
	}
	if o.Prefix == "" {
		o.Prefix = prefix
	}
	if o.Timeout == 0 {
		o.Timeout = DefaultTimeout
	}
	return o, nil
}

// Replays is a server.ReplayStore on a Redis client: one key per spent
// nonce, set only if absent (SET NX), expiring with the state it spends.
type Replays struct {
	c   redis.Cmdable
	opt Options
}

var _ server.ReplayStore = (*Replays)(nil)

// NewReplays returns a Replays using c (the caller owns and closes it),
// with NewRates's checks.
func NewReplays(c redis.Cmdable, o Options) (*Replays, error) {
	if c == nil {
		return nil, fmt.Errorf("%w: nil Redis client", ErrConfig)
	}
	o, err := o.defaults("tenantmcp:replay:")
	if err != nil {
		return nil, err
	}
	return &Replays{c: c, opt: o}, nil
}

// Spend implements server.ReplayStore.
func (r *Replays) Spend(ctx context.Context, nonce string, until time.Time) error {
	ctx, cancel := context.WithTimeout(ctx, r.opt.Timeout)
	defer cancel()
	err := r.c.SetArgs(ctx, r.opt.Prefix+nonce, 1, redis.SetArgs{Mode: "NX", ExpireAt: until}).Err()
	switch {
	case errors.Is(err, redis.Nil):
		return server.ErrReplayed
	case err != nil:
		return fmt.Errorf("%w: %v", ErrStore, err)
	}
	return nil
}

// gcra takes one cell. KEYS[1] is the bucket; ARGV[1] the emission
// interval T and ARGV[2] the burst tolerance tau = T*burst, both in
// microseconds. It returns 0 (taken) or the microseconds until a cell is
// free (nothing taken).
var gcra = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local T = tonumber(ARGV[1])
local tau = tonumber(ARGV[2])
local tat = tonumber(redis.call('GET', KEYS[1]) or '0')
if tat < now then tat = now end
local new = tat + T
local wait = new - tau - now
if wait > 0 then return wait end
redis.call('SET', KEYS[1], new, 'PX', math.max(1, math.ceil((new - now) / 1000)))
return 0
`)

// Take implements server.RateStore.
func (s *Rates) Take(ctx context.Context, key string, r float64, burst int) (time.Duration, error) {
	if r <= 0 || burst <= 0 || math.IsInf(r, 0) || math.IsNaN(r) {
		return 0, fmt.Errorf("%w: invalid rate %v or burst %d", ErrStore, r, burst)
	}
	ctx, cancel := context.WithTimeout(ctx, s.opt.Timeout)
	defer cancel()
	sum := sha256.Sum256([]byte(key))
	T := int64(math.Max(1, 1e6/r))
	wait, err := gcra.Run(ctx, s.c, []string{s.opt.Prefix + hex.EncodeToString(sum[:])}, T, T*int64(burst)).Int64()
	if err != nil {
		// The error names the Redis address at most, never the key.
		return 0, fmt.Errorf("%w: %v", ErrStore, err)
	}
	return time.Duration(wait) * time.Microsecond, nil
}

// Ping implements the server's readiness check (server.Pinger): it runs a
// trivial script, the path every Take takes. Its error wraps ErrStore.
func (s *Rates) Ping(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, s.opt.Timeout)
	defer cancel()
	if err := s.c.Eval(ctx, "return 1", nil).Err(); err != nil {
		return fmt.Errorf("%w: %v", ErrStore, err)
	}
	return nil
}

// Ping implements the server's readiness check (server.Pinger). Its error
// wraps ErrStore.
func (r *Replays) Ping(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, r.opt.Timeout)
	defer cancel()
	if err := r.c.Ping(ctx).Err(); err != nil {
		return fmt.Errorf("%w: %v", ErrStore, err)
	}
	return nil
}
