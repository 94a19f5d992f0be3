package guardedsql

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/tenantmcp/tenantmcp/guardedsql/internal/engine"
	"github.com/tenantmcp/tenantmcp/internal/guardfault"
)

// Write tracking and idempotency keys (issue 29 §2).
//
// A caller (the server, once per tool call) puts a *CallWrites in the
// context with WithCallWrites. Every write transaction guardedsql commits
// under that context is then counted (CallWrites.Committed), so the
// caller knows whether the call changed the database before it answers:
// a result withheld after a committed write is not "nothing happened".
//
// With an IdempotencyClaim, the first write transaction of the call also
// inserts the claim's row into IdempotencyTable, in the same transaction,
// just before COMMIT: the key is recorded if and only if the write is.
// A claim already recorded (by an earlier call with the same key, or a
// concurrent one that committed first) rolls the whole transaction back
// with ErrIdempotencyKeyTaken, so a retry never writes twice.

// ErrIdempotencyKeyTaken is matched (errors.Is) by the error of a write
// transaction that rolled back because its call's idempotency key was
// already recorded by another call: the write was made (by that call) and
// must not be made again. CallWrites.KeyTaken reports it as well, whatever
// the handler did with the error.
var ErrIdempotencyKeyTaken = errors.New("guardedsql: idempotency key already recorded by another call")

// IdempotencyClaim is the row a call's first write transaction records.
// ID identifies the key together with everything it is bound to (the
// caller, the tool); Args identifies the arguments. Both are opaque
// digests the caller computes (at most 64 characters each).
type IdempotencyClaim struct {
	ID   string
	Args string
	// CreatedAt is the time of the claim, Unix milliseconds.
	CreatedAt int64
}

// CallWrites counts the write transactions committed under a context and
// records its idempotency claim, if any, in the first of them. It is safe
// for concurrent use, but a call that runs write transactions concurrently
// with a claim may see the second one refused with ErrIdempotencyKeyTaken.
type CallWrites struct {
	claim *IdempotencyClaim

	mu        sync.Mutex
	committed int
	claimed   bool // the claim's row was committed
	taken     bool // another call had recorded the key
}

type callWritesKey struct{}

// WithCallWrites returns ctx carrying a new CallWrites, which claims
// claim (nil: count only) in the first write transaction under ctx.
func WithCallWrites(ctx context.Context, claim *IdempotencyClaim) (context.Context, *CallWrites) {
	w := &CallWrites{claim: claim}
	return context.WithValue(ctx, callWritesKey{}, w), w
}

func callWritesOf(ctx context.Context) *CallWrites {
	w, _ := ctx.Value(callWritesKey{}).(*CallWrites)
	return w
}

// Committed is the number of write transactions (including single
// writes, each its own transaction) committed under the context so far.
func (w *CallWrites) Committed() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.committed
}

// Claimed reports whether the claim's row was committed with a write.
func (w *CallWrites) Claimed() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.claimed
}

// KeyTaken reports whether a write transaction was rolled back because
// the key was already recorded (ErrIdempotencyKeyTaken).
func (w *CallWrites) KeyTaken() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.taken
}

// claiming reports whether the next write transaction must insert the
// claim: it must then run as an explicit transaction.
func (w *CallWrites) claiming() bool {
	if w == nil || w.claim == nil {
		return false
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return !w.claimed
}

// beforeCommit runs in a write transaction q just before its COMMIT: it
// inserts the claim if none is recorded yet. It reports whether it did
// (afterCommit's inserted).
func (w *CallWrites) beforeCommit(ctx context.Context, d engine.Dialect, q engine.Querier) (bool, error) {
	if !w.claiming() || guardfault.Off(guardfault.IdempotencyClaim) {
		return false, nil
	}
	n, err := insertClaim(ctx, d, q, w.claim)
	if err != nil {
		return false, err
	}
	if n == 0 {
		w.mu.Lock()
		w.taken = true
		w.mu.Unlock()
		return false, ErrIdempotencyKeyTaken
	}
	return true, nil
}

// afterCommit counts a write transaction whose COMMIT returned err.
func (w *CallWrites) afterCommit(inserted bool, err error) {
	if w == nil || err != nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.committed++
	if inserted {
		w.claimed = true
	}
}

// commitWrite commits a write transaction under ctx, inserting the call's
// idempotency claim first (rolling back on its error) and counting it.
func (db *DB) commitWrite(ctx context.Context, tx engine.Tx) error {
	w := callWritesOf(ctx)
	inserted, err := w.beforeCommit(ctx, db.d, tx)
	if err != nil {
		return errors.Join(err, tx.Rollback(ctx))
	}
	err = tx.Commit(ctx)
	w.afterCommit(inserted, err)
	return err
}

// IdempotencyTable is the table of idempotency keys: one row per key
// recorded with a committed write. It carries no tenant column and no
// tenant id: a row is found only by its ID, a digest of the key and what
// it is bound to; its result is whatever the caller stored (the server
// stores it encrypted under a key derived from the client's idempotency
// key, which is never stored).
const IdempotencyTable = "tenantmcp_idempotency"

// IdempotencyDDL returns the statements that create IdempotencyTable on
// engine ("sqlite", "postgres", "mysql"), to run as the schema owner;
// on PostgreSQL, with appRole non-empty, also the grant the application
// role needs (SELECT, INSERT, UPDATE; DELETE only for pruning, see
// PruneIdempotency). Each statement is idempotent.
func IdempotencyDDL(engineName, appRole string) ([]string, error) {
	switch engineName {
	case "sqlite":
		return []string{`CREATE TABLE IF NOT EXISTS ` + IdempotencyTable + ` (id TEXT PRIMARY KEY, args TEXT NOT NULL, created_at INTEGER NOT NULL, result TEXT)`}, nil
	case "postgres":
		s := []string{`CREATE TABLE IF NOT EXISTS ` + IdempotencyTable + ` (id VARCHAR(64) PRIMARY KEY, args VARCHAR(64) NOT NULL, created_at BIGINT NOT NULL, result TEXT)`}
		if appRole != "" {
			if !plainIdent(appRole) {
				return nil, fmt.Errorf("%w: role %q is not a plain identifier", ErrInvalid, appRole)
			}
			s = append(s, `GRANT SELECT, INSERT, UPDATE, DELETE ON `+IdempotencyTable+` TO `+appRole)
		}
		return s, nil
	case "mysql":
		return []string{`CREATE TABLE IF NOT EXISTS ` + IdempotencyTable + ` (id VARCHAR(64) NOT NULL PRIMARY KEY, args VARCHAR(64) NOT NULL, created_at BIGINT NOT NULL, result LONGTEXT NULL) CHARACTER SET ascii COLLATE ascii_bin`}, nil
	}
	return nil, fmt.Errorf("%w: no idempotency table for engine %q", ErrInvalid, engineName)
}

func plainIdent(s string) bool {
	if s == "" || len(s) > 63 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c == '_' || i > 0 && c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

// idemSQL spells a statement on the idempotency table with '?'
// placeholders in the engine's format.
func idemSQL(d engine.Dialect, text string) string {
	s, err := d.Placeholders().ReplacePlaceholders(text)
	if err != nil {
		return text
	}
	return s
}

func insertClaim(ctx context.Context, d engine.Dialect, q engine.Querier, c *IdempotencyClaim) (int64, error) {
	var text string
	switch d.Name() {
	case "postgres":
		text = `INSERT INTO ` + IdempotencyTable + ` (id, args, created_at) VALUES (?, ?, ?) ON CONFLICT (id) DO NOTHING`
	case "mysql":
		text = `INSERT IGNORE INTO ` + IdempotencyTable + ` (id, args, created_at) VALUES (?, ?, ?)`
	default:
		text = `INSERT OR IGNORE INTO ` + IdempotencyTable + ` (id, args, created_at) VALUES (?, ?, ?)`
	}
	r, err := q.Exec(ctx, idemSQL(d, text), c.ID, c.Args, c.CreatedAt)
	if err != nil {
		return 0, fmt.Errorf("guardedsql: recording the idempotency key: %w", err)
	}
	return r.RowsAffected, nil
}

// IdempotencyRecord is a recorded key: its arguments' digest and the
// result stored for it ("" while none is).
type IdempotencyRecord struct {
	Args   string
	Result string
}

// LookupIdempotency reads the record of id; found is false if no write
// recorded it. It needs no scope: the row holds no tenant column, only
// what the caller put there.
func (db *DB) LookupIdempotency(ctx context.Context, id string) (rec IdempotencyRecord, found bool, err error) {
	rows, err := db.pool.Query(ctx, idemSQL(db.d, `SELECT args, result FROM `+IdempotencyTable+` WHERE id = ?`), id)
	if err != nil {
		return rec, false, err
	}
	defer rows.Close()
	if rows.Next() {
		var res *string
		if err := rows.Scan(&rec.Args, &res); err != nil {
			return rec, false, err
		}
		if res != nil {
			rec.Result = *res
		}
		found = true
	}
	return rec, found, errors.Join(rows.Err(), rows.Close())
}

// StoreIdempotencyResult stores the result of the call that recorded id
// (once: a result already stored is kept).
func (db *DB) StoreIdempotencyResult(ctx context.Context, id, result string) error {
	_, err := db.pool.Exec(ctx, idemSQL(db.d, `UPDATE `+IdempotencyTable+` SET result = ? WHERE id = ? AND result IS NULL`), result, id)
	return err
}

// CheckIdempotency verifies that IdempotencyTable exists and is readable
// by the connected role: ErrInvalid naming IdempotencyDDL otherwise.
func (db *DB) CheckIdempotency(ctx context.Context) error {
	rows, err := db.pool.Query(ctx, `SELECT id, args, created_at, result FROM `+IdempotencyTable+` WHERE 1 = 0`)
	if err == nil {
		err = errors.Join(rows.Err(), rows.Close())
	}
	if err != nil {
		return fmt.Errorf("%w: the idempotency table %s is missing or unreadable (create it with guardedsql.IdempotencyDDL): %w", ErrInvalid, IdempotencyTable, err)
	}
	return nil
}

// PruneIdempotency deletes the keys recorded before (Unix milliseconds)
// and returns how many it deleted. A key pruned no longer protects a
// retry: prune only keys older than any client retries.
func (db *DB) PruneIdempotency(ctx context.Context, beforeMillis int64) (int64, error) {
	r, err := db.pool.Exec(ctx, idemSQL(db.d, `DELETE FROM `+IdempotencyTable+` WHERE created_at < ?`), beforeMillis)
	return r.RowsAffected, err
}
