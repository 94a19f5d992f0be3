package redisstore

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tenantmcp/tenantmcp/flow"
)

// Taints is a flow.Store on Redis, the counterpart of flow/pgtaint for a
// deployment whose database is not PostgreSQL (MariaDB, SQLite) and whose
// replicas share a Redis: the same semantics as flow.NewMemoryStore and
// pgtaint. It is safe for concurrent use.
//
// Each taint is one hash, {t: the taint as JSON, at: its last use in
// microseconds of the caller's clock}, under a key made of SHA-256 digests
// of the subject and the session (no subject in key names); a subject's
// session keys are counted in a sorted set scored by last use, for the
// flow.MaxKeysPerSubject fold. All keys of one subject share a Redis
// Cluster hash tag, so one transaction covers them.
//
// Join is atomic per key: it reads the taint under WATCH, merges with
// flow.Taint.Join and writes it back in MULTI/EXEC, retrying when another
// replica wrote the key in between, so no join is lost and a taint only
// grows. The session count is read, not watched (as in pgtaint): joins of
// new sessions racing at the bound may each start their own, so a subject
// may hold a few more than flow.MaxKeysPerSubject (at most one per
// concurrent join). Load reads and marks used in one Lua script. A taint
// idle past retain (by its stored last use) reads as none and a join
// starts it afresh; Redis drops the key a minute after that (PEXPIRE from
// each use). It needs Redis 6.2 or later (ZADD GT).
//
// Redis has no roles that would keep the application from deleting a key:
// anyone who can reach the Redis (with its password, if any) can erase a
// taint. Reach it only from the servers, with an ACL user of its own
// (keys under Options.Prefix), or keep the taints in PostgreSQL
// (flow/pgtaint), where the application role cannot erase them. A taint
// that does not decode is an error (flow.ErrTaintStore), never an empty
// taint.
type Taints struct {
	c   redis.UniversalClient
	opt Options
}

var _ flow.Store = (*Taints)(nil)

// pinger is server.Pinger, the readiness check every store here has.
type pinger interface {
	Ping(ctx context.Context) error
}

var _ = []pinger{(*Taints)(nil), (*Rates)(nil), (*Replays)(nil)}

// joinAttempts bounds the optimistic retries of one Join under contention;
// past it the Join fails (flow.ErrTaintStore, the result is withheld).
const joinAttempts = 64

// NewTaints returns a Taints using c (a *redis.Client, *redis.ClusterClient
// or ring; the caller owns and closes it). Options.Prefix defaults to
// "tenantmcp:taint:"; Options.Timeout bounds each Load and each Join
// (with its retries). It refuses a nil client and a negative Timeout
// (ErrConfig).
func NewTaints(c redis.UniversalClient, o Options) (*Taints, error) {
	if c == nil {
		return nil, fmt.Errorf("%w: nil Redis client", ErrConfig)
	}
	o, err := o.defaults("tenantmcp:taint:")
	if err != nil {
		return nil, err
	}
	return &Taints{c: c, opt: o}, nil
}

// keys are the Redis keys of a flow.Key.
type keys struct {
	taint, subject, sessions, member string
}

func digest(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:16])
}

func (s *Taints) keys(k flow.Key) keys {
	base := s.opt.Prefix + "{" + digest(k.Subject) + "}:"
	ks := keys{subject: base + "subject", sessions: base + "sessions", taint: base + "subject"}
	if k.Session != "" {
		ks.member = digest(k.Session)
		ks.taint = base + "s:" + ks.member
	}
	return ks
}

func taintErr(op string, err error) error {
	// The error names the Redis address at most, never a key or subject.
	return fmt.Errorf("%w: redisstore: %s: %v", flow.ErrTaintStore, op, err)
}

func micros(t time.Time) int64 { return t.UnixMicro() }

// ttl is how long Redis keeps a key after its last use: retain, plus a
// minute for replicas whose clocks disagree (more taint, never less).
func ttl(retain time.Duration) time.Duration { return retain + time.Minute }

// loadScript reads the live taint of KEYS[1] (a session's, or the
// subject's) and marks it used; for a session without a live taint whose
// subject has MaxKeysPerSubject live sessions, the subject's (KEYS[2]).
// KEYS[3] is the subject's sorted set of sessions. ARGV: now and cutoff
// (microseconds), the bound, the session member ("" for a subject key),
// the TTL in milliseconds.
var loadScript = redis.NewScript(`
local now, cutoff, ttl = tonumber(ARGV[1]), tonumber(ARGV[2]), ARGV[5]
local function touch(k)
  local v = redis.call('HMGET', k, 't', 'at')
  if not v[1] or not v[2] or tonumber(v[2]) < cutoff then return false end
  if now > tonumber(v[2]) then redis.call('HSET', k, 'at', ARGV[1]) end
  redis.call('PEXPIRE', k, ttl)
  return v[1]
end
local t = touch(KEYS[1])
if t then
  if ARGV[4] ~= '' then
    redis.call('ZADD', KEYS[3], 'GT', now, ARGV[4])
    redis.call('PEXPIRE', KEYS[3], ttl)
  end
  return t
end
if ARGV[4] == '' then return false end
if redis.call('ZCOUNT', KEYS[3], cutoff, '+inf') < tonumber(ARGV[3]) then return false end
return touch(KEYS[2])
`)

// Load implements flow.Store.
func (s *Taints) Load(ctx context.Context, k flow.Key, now time.Time, retain time.Duration) (flow.Taint, error) {
	ctx, cancel := context.WithTimeout(ctx, s.opt.Timeout)
	defer cancel()
	ks := s.keys(k)
	raw, err := loadScript.Run(ctx, s.c, []string{ks.taint, ks.subject, ks.sessions},
		micros(now), micros(now.Add(-retain)), flow.MaxKeysPerSubject, ks.member, ttl(retain).Milliseconds()).Text()
	if errors.Is(err, redis.Nil) {
		return flow.Taint{}, nil
	}
	if err != nil {
		return flow.Taint{}, taintErr("load", err)
	}
	t, err := decodeTaint([]byte(raw))
	if err != nil {
		return flow.Taint{}, taintErr("load", err)
	}
	return t, nil
}

// Join implements flow.Store: it returns once the merged taint is written
// (Redis acknowledged the EXEC; with replication or AOF, durability is
// Redis's configuration).
func (s *Taints) Join(ctx context.Context, k flow.Key, now time.Time, retain time.Duration, add flow.Taint) error {
	ctx, cancel := context.WithTimeout(ctx, s.opt.Timeout)
	defer cancel()
	ks := s.keys(k)
	nowUS, cutoff := micros(now), micros(now.Add(-retain))
	life := ttl(retain)
	txf := func(tx *redis.Tx) error {
		key, member := ks.taint, ks.member
		t, live, at, err := read(ctx, tx, key, cutoff)
		if err != nil {
			return err
		}
		if member != "" && !live {
			n, err := tx.ZCount(ctx, ks.sessions, strconv.FormatInt(cutoff, 10), "+inf").Result()
			if err != nil {
				return err
			}
			if n >= flow.MaxKeysPerSubject {
				// Past the bound: the subject's taint, watched too.
				key, member = ks.subject, ""
				if err := tx.Watch(ctx, key).Err(); err != nil {
					return err
				}
				if t, live, at, err = read(ctx, tx, key, cutoff); err != nil {
					return err
				}
			}
		}
		if !live {
			t, at = flow.Taint{}, 0 // idle past retain: dropped whole
		}
		t.Join(add)
		enc, err := json.Marshal(t)
		if err != nil {
			return err
		}
		at = max(at, nowUS)
		_, err = tx.TxPipelined(ctx, func(p redis.Pipeliner) error {
			p.HSet(ctx, key, "t", enc, "at", at)
			p.PExpire(ctx, key, life)
			if member != "" {
				p.ZAdd(ctx, ks.sessions, redis.Z{Score: float64(at), Member: member})
				p.ZRemRangeByScore(ctx, ks.sessions, "-inf", "("+strconv.FormatInt(cutoff, 10))
				p.PExpire(ctx, ks.sessions, life)
			}
			return nil
		})
		return err
	}
	for range joinAttempts {
		err := s.c.Watch(ctx, txf, ks.taint)
		if errors.Is(err, redis.TxFailedErr) {
			continue // another replica wrote the key: read it again
		}
		if err != nil {
			return taintErr("join", err)
		}
		return nil
	}
	return taintErr("join", errors.New("too much contention on one taint"))
}

// read returns the taint under key, whether it is live (used at or after
// cutoff) and its last use.
func read(ctx context.Context, tx *redis.Tx, key string, cutoff int64) (flow.Taint, bool, int64, error) {
	v, err := tx.HMGet(ctx, key, "t", "at").Result()
	if err != nil {
		return flow.Taint{}, false, 0, err
	}
	raw, ok1 := v[0].(string)
	atS, ok2 := v[1].(string)
	if !ok1 && !ok2 {
		return flow.Taint{}, false, 0, nil
	}
	at, err := strconv.ParseInt(atS, 10, 64)
	if !ok1 || !ok2 || err != nil {
		return flow.Taint{}, false, 0, errors.New("stored taint is incomplete")
	}
	t, err := decodeTaint([]byte(raw))
	if err != nil {
		return flow.Taint{}, false, 0, err
	}
	return t, at >= cutoff, at, nil
}

// decodeTaint reads a stored taint. A value that is not a JSON object of
// the taint's fields, or names an unknown level, is an error, never an
// empty taint: an altered key fails closed.
func decodeTaint(raw []byte) (flow.Taint, error) {
	var t flow.Taint
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if len(raw) == 0 || raw[0] != '{' || dec.Decode(&t) != nil {
		return flow.Taint{}, errors.New("stored taint does not decode")
	}
	if t.Level != "" && !t.Level.Valid() {
		return flow.Taint{}, errors.New("stored taint has an unknown level")
	}
	for _, o := range t.From {
		if o.Level != "" && !o.Level.Valid() {
			return flow.Taint{}, errors.New("stored taint has an unknown level")
		}
	}
	return t, nil
}

// Ping implements the server's readiness check (server.Pinger): it
// answers whether Redis does. Its error wraps flow.ErrTaintStore.
func (s *Taints) Ping(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, s.opt.Timeout)
	defer cancel()
	if err := s.c.Ping(ctx).Err(); err != nil {
		return taintErr("ping", err)
	}
	return nil
}
