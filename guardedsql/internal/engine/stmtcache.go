package engine

import (
	"container/list"
	"context"
	"database/sql"
	"errors"
	"sync"
)

// DefaultStmtCacheSize is the number of distinct statement texts whose
// prepared statements an SQLite pool keeps (see StmtCache). A tool server
// sends a few dozen shapes; the bound only matters for callers that build
// statements from unbounded input shapes.
const DefaultStmtCacheSize = 256

// StmtCache keeps prepared statements of one *sql.DB, keyed by their exact
// SQL text, so that running a statement shape again binds and steps an
// already compiled statement instead of parsing and planning it anew (what
// pgx's statement cache does for PostgreSQL). database/sql prepares a
// cached *sql.Stmt lazily on each connection it runs on, and again on a
// new connection after one is lost; SQLite recompiles a prepared statement
// by itself when the schema changed under it (sqlite3_prepare_v2).
//
// Invariant: an entry is found only by the byte-identical SQL text it was
// prepared from, and holds no argument values (they are bound per call), so
// a cached statement runs exactly the SQL the caller passed; nothing
// tenant-specific can be shared through the cache beyond the text itself.
//
// The cache holds at most size statements (least recently used evicted);
// an evicted statement is closed once the last call using it has started
// its query (database/sql keeps it alive until those rows are closed).
// Close closes every cached statement; later calls run unprepared.
type StmtCache struct {
	db   *sql.DB
	size int

	mu     sync.Mutex
	m      map[string]*list.Element // of *stmtEntry
	lru    list.List                // front: most recently used
	closed bool
}

type stmtEntry struct {
	text    string
	st      *sql.Stmt
	users   int  // calls between get and put
	evicted bool // removed from the map; closed by the last put
}

// NewStmtCache returns a cache of at most size prepared statements of db;
// size <= 0 returns nil, which runs every statement unprepared.
func NewStmtCache(db *sql.DB, size int) *StmtCache {
	if size <= 0 {
		return nil
	}
	return &StmtCache{db: db, size: size, m: map[string]*list.Element{}}
}

// get returns the prepared statement for q, preparing it on a miss, and
// registers the caller as a user; put must follow. A nil entry (closed
// cache) means: run q unprepared.
func (c *StmtCache) get(ctx context.Context, q string) (*stmtEntry, error) {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil, nil
	}
	if el, ok := c.m[q]; ok {
		e := el.Value.(*stmtEntry)
		e.users++
		c.lru.MoveToFront(el)
		c.mu.Unlock()
		return e, nil
	}
	c.mu.Unlock()
	// Prepared outside the lock: a slow prepare must not stall the hits of
	// other statements. Two callers missing at once both prepare; the
	// second to insert keeps the first's entry and closes its own.
	st, err := c.db.PrepareContext(ctx, q)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		// Used once, unshared: the caller closes it through put.
		return &stmtEntry{text: q, st: st, users: 1, evicted: true}, nil
	}
	if el, ok := c.m[q]; ok {
		e := el.Value.(*stmtEntry)
		e.users++
		c.lru.MoveToFront(el)
		st.Close()
		return e, nil
	}
	e := &stmtEntry{text: q, st: st, users: 1}
	c.m[q] = c.lru.PushFront(e)
	for c.lru.Len() > c.size {
		c.evict(c.lru.Back())
	}
	return e, nil
}

// evict removes el from the cache; its statement is closed now if no call
// is using it, else by the last put. Called with mu held.
func (c *StmtCache) evict(el *list.Element) {
	e := el.Value.(*stmtEntry)
	c.lru.Remove(el)
	delete(c.m, e.text)
	e.evicted = true
	if e.users == 0 {
		e.st.Close()
	}
}

// put ends a use begun by get. The query or exec has started by then, and
// database/sql keeps the statement alive for its rows.
func (c *StmtCache) put(e *stmtEntry) {
	c.mu.Lock()
	e.users--
	last := e.evicted && e.users == 0
	c.mu.Unlock()
	if last {
		e.st.Close()
	}
}

// Query runs q through its cached statement (on a closed cache, through
// db directly).
func (c *StmtCache) Query(ctx context.Context, q string, args ...any) (*sql.Rows, error) {
	e, err := c.get(ctx, q)
	if err != nil {
		return nil, err
	}
	if e == nil {
		return c.db.QueryContext(ctx, q, args...)
	}
	defer c.put(e)
	return e.st.QueryContext(ctx, args...)
}

// Exec runs q through its cached statement, as Query does.
func (c *StmtCache) Exec(ctx context.Context, q string, args ...any) (sql.Result, error) {
	e, err := c.get(ctx, q)
	if err != nil {
		return nil, err
	}
	if e == nil {
		return c.db.ExecContext(ctx, q, args...)
	}
	defer c.put(e)
	return e.st.ExecContext(ctx, args...)
}

// lookup is get without preparing on a miss (nil entry): inside a
// transaction the only free connection may be the transaction's own (the
// SQLite writer pool has one), so preparing on the pool would wait for it
// forever.
func (c *StmtCache) lookup(q string) *stmtEntry {
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.m[q]
	if !ok || c.closed {
		return nil
	}
	e := el.Value.(*stmtEntry)
	e.users++
	c.lru.MoveToFront(el)
	return e
}

// txStmt runs fn with q's cached statement bound to tx (sql.Tx.StmtContext
// reuses the statement when it is already prepared on the transaction's
// connection, and prepares it there otherwise); when q is not cached, fn
// gets nil and runs q on tx directly (the pool's next call outside a
// transaction caches it).
func txStmt[T any](ctx context.Context, c *StmtCache, tx *sql.Tx, q string, fn func(st *sql.Stmt) (T, error)) (T, error) {
	e := c.lookup(q)
	if e == nil {
		return fn(nil)
	}
	defer c.put(e)
	return fn(tx.StmtContext(ctx, e.st))
}

// Len reports the number of cached statements.
func (c *StmtCache) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lru.Len()
}

// Close closes every cached statement not in use (the others are closed
// by their last user) and makes the cache pass statements through.
func (c *StmtCache) Close() error {
	if c == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	var errs []error
	for el := c.lru.Front(); el != nil; el = c.lru.Front() {
		e := el.Value.(*stmtEntry)
		c.lru.Remove(el)
		delete(c.m, e.text)
		e.evicted = true
		if e.users == 0 {
			errs = append(errs, e.st.Close())
		}
	}
	return errors.Join(errs...)
}
