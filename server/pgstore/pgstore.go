// Package pgstore keeps on PostgreSQL what the replicas of a server share:
// the spent requestState nonces of multi round-trip requests (NewReplays,
// a server.ReplayStore), so a consent or an Input answer is honoured once
// on any replica; and the token buckets of server.Limits (NewRates, a
// server.RateStore, see Rates), so N replicas without a Redis enforce one
// budget per tenant and subject, not N. Both have Ping, the server's
// readiness check (server.Pinger). The flow taints of the replicas live
// in package flow/pgtaint.
//
// # Table
//
// One table, "tenantmcp_replay", created on first use with CREATE TABLE
// IF NOT EXISTS (the application role needs CREATE on its schema then, or
// create it ahead with [CreateSQL]):
//
//	nonce text PRIMARY KEY, until timestamptz NOT NULL
//
// It holds random nonces and their expiry only: no subject, tenant or
// token. Spend inserts with ON CONFLICT DO NOTHING, so of two replicas
// spending one nonce at once exactly one succeeds; expired rows are
// deleted now and then by a Spend.
package pgstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/tenantmcp/tenantmcp/server"
)

// Table is the name of the table of spent nonces.
const Table = "tenantmcp_replay"

// CreateSQL creates the table if it does not exist.
const CreateSQL = `CREATE TABLE IF NOT EXISTS ` + Table + ` (nonce text PRIMARY KEY, until timestamptz NOT NULL)`

// pruneEvery is how often a Spend deletes the expired rows.
const pruneEvery = time.Minute

// ErrStore wraps every error Spend returns but server.ErrReplayed, and
// every error of Rates.Take and of Ping.
var ErrStore = errors.New("pgstore: store unavailable")

// Replays is a server.ReplayStore in a PostgreSQL database. It is safe
// for concurrent use.
type Replays struct {
	db *sql.DB

	mu      sync.Mutex
	created bool
	pruned  time.Time
}

var _ server.ReplayStore = (*Replays)(nil)

// NewReplays returns a Replays on db (any database/sql driver for
// PostgreSQL, such as pgx's stdlib; the caller owns and closes db).
func NewReplays(db *sql.DB) *Replays { return &Replays{db: db} }

// Spend implements server.ReplayStore.
func (r *Replays) Spend(ctx context.Context, nonce string, until time.Time) error {
	if err := r.setup(ctx); err != nil {
		return err
	}
	res, err := r.db.ExecContext(ctx, `INSERT INTO `+Table+` (nonce, until) VALUES ($1, $2) ON CONFLICT (nonce) DO NOTHING`, nonce, until)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrStore, err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return fmt.Errorf("%w: %v", ErrStore, err)
	} else if n == 0 {
		return server.ErrReplayed
	}
	return nil
}

// setup creates the table once and prunes expired rows every pruneEvery
// (a failed prune is retried by a later Spend: it only costs space).
func (r *Replays) setup(ctx context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.created {
		if _, err := r.db.ExecContext(ctx, CreateSQL); err != nil {
			// Two replicas creating it at once: one fails, and the table is there.
			var there bool
			if r.db.QueryRowContext(ctx, `SELECT to_regclass($1) IS NOT NULL`, Table).Scan(&there) != nil || !there {
				return fmt.Errorf("%w: creating %s: %v", ErrStore, Table, err)
			}
		}
		r.created = true
	}
	if now := time.Now(); now.Sub(r.pruned) >= pruneEvery {
		if _, err := r.db.ExecContext(ctx, `DELETE FROM `+Table+` WHERE until < now()`); err == nil {
			r.pruned = now
		}
	}
	return nil
}

// Ping implements the server's readiness check (server.Pinger): the
// database answers and the table is there (created if it was not). Its
// error wraps ErrStore.
func (r *Replays) Ping(ctx context.Context) error {
	if err := r.setup(ctx); err != nil {
		return err
	}
	if err := r.db.PingContext(ctx); err != nil {
		return fmt.Errorf("%w: %v", ErrStore, err)
	}
	return nil
}
