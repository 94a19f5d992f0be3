// Package redisrate is a shared server.RateStore on Redis: the token
// buckets of server.Limits kept where every replica of a server reads and
// takes from the same ones, so N replicas behind a load balancer enforce
// one budget per tenant and subject, not N.
//
// Each bucket is one Redis string holding its theoretical arrival time
// (the generic cell rate algorithm, equivalent to a token bucket of the
// same rate and burst), updated by one Lua script that reads the clock
// of the Redis server itself, so replicas whose clocks disagree still
// share one timeline. A key expires once its bucket would be full again,
// so idle tenants cost nothing. Bucket keys are SHA-256 digests of the
// limit keys: no tenant id or subject is stored in Redis.
//
// Errors (Redis unreachable, a timeout) reach server.Limits as errors,
// and the server refuses the call (limits fail closed); keep the store's
// Timeout well under the call timeout.
package redisrate

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

// DefaultTimeout bounds one Take when Options.Timeout is zero.
const DefaultTimeout = 250 * time.Millisecond

// ErrStore wraps every error Take returns.
var ErrStore = errors.New("redisrate: rate store unavailable")

// Options configures a Store.
type Options struct {
	// Prefix namespaces the keys; default "tenantmcp:rate:".
	Prefix string
	// Timeout bounds one Take; zero means DefaultTimeout, and a negative
	// value is refused (a bound on Take cannot be switched off).
	Timeout time.Duration
}

// Store is a server.RateStore on a Redis client. It is safe for
// concurrent use.
type Store struct {
	c   redis.Scripter
	opt Options
}

var _ server.RateStore = (*Store)(nil)

// ErrConfig is wrapped by the error New returns for options it refuses.
var ErrConfig = errors.New("redisrate: invalid configuration")

// New returns a Store using c (a *redis.Client, *redis.ClusterClient or
// ring; the caller owns and closes it). It refuses a nil client and a
// negative Timeout (ErrConfig): a bound on Take cannot be switched off.
func New(c redis.Scripter, o Options) (*Store, error) {
	if c == nil {
		return nil, fmt.Errorf("%w: nil Redis client", ErrConfig)
	}
	if o.Timeout < 0 {
		return nil, fmt.Errorf("%w: Options.Timeout is negative (%v); zero means DefaultTimeout", ErrConfig, o.Timeout)
	}
	if o.Prefix == "" {
		o.Prefix = "tenantmcp:rate:"
	}
	if o.Timeout == 0 {
		o.Timeout = DefaultTimeout
	}
	return &Store{c: c, opt: o}, nil
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
func (s *Store) Take(ctx context.Context, key string, r float64, burst int) (time.Duration, error) {
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
