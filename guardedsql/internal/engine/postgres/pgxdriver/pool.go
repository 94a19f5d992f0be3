package pgxdriver

import (
	"context"
	"errors"
	"sync"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tenantmcp/tenantmcp/guardedsql/internal/engine"
	"github.com/tenantmcp/tenantmcp/guardedsql/internal/engine/postgres"
)

// NewPool adapts a pgxpool.Pool to engine.Pool. Close closes p only if
// owned is true.
//
// Transactions are begun lazily: Begin reserves a connection and sends
// nothing; BEGIN, the statements queued with Tx.Defer and the signed scope
// (Tx.DeferExchange) travel in one pipelined batch with the first real
// statement, and COMMIT follows when the transaction ends: two round
// trips where a naive BEGIN / set_config / statement / COMMIT takes four.
// BeginSingle does better for a transaction of one statement: the
// deferred statements, the scope and the statement go as one batch
// without BEGIN, which PostgreSQL runs as one implicit transaction ending
// at the batch's Sync, so the transaction-local setting covers exactly
// that statement, in one round trip. The scope is signed for the
// backend's next exchange counter (postgres.Dialect.SignedExchange),
// which the connection remembers (pgconn's CustomData, shared by every
// adapter of the pool); only a connection whose counter is not known (a
// new one, or one whose last exchange failed) costs one more round trip,
// to open it. A connection released while a transaction
// is open is destroyed by pgxpool, never reused.
func NewPool(p *pgxpool.Pool, owned bool) engine.Pool {
	return &pool{querier: querier{p}, p: p, owned: owned}
}

var (
	_ engine.SingleBeginner = (*pool)(nil)
	_ engine.WaitBounder    = (*pool)(nil)
	_ engine.ConnCounter    = (*pool)(nil)
)

type pool struct {
	querier
	p     *pgxpool.Pool
	owned bool
	wait  engine.Wait
	// onNew, if set, vets every connection the first time this pool
	// hands it out (by backend pid); a connection it refuses is not used.
	onNew func(ctx context.Context, conn engine.Pool) error
	mu    sync.Mutex
	seen  map[uint32]struct{}
}

// BoundWait implements engine.WaitBounder: Begin and BeginSingle wait at
// most w.Timeout for a connection (pgxpool's Acquire uses its context
// only for the wait, so the bound ends with it).
func (p *pool) BoundWait(w engine.Wait) { p.wait = w }

// MaxConns implements engine.ConnCounter: the pool's size.
func (p *pool) MaxConns() int { return int(p.p.Config().MaxConns) }

func (p *pool) acquireWait(ctx context.Context) (*pgxpool.Conn, error) {
	return engine.Acquire(ctx, p.wait, p.p.Acquire)
}

// maxSeen bounds the set of vetted backend pids; when it is full it is
// emptied, and every connection is vetted again on its next use.
const maxSeen = 4096

var _ postgres.NewConnChecker = (*pool)(nil)

func (p *pool) SetNewConnCheck(fn func(ctx context.Context, conn engine.Pool) error) {
	p.onNew = fn
	p.seen = map[uint32]struct{}{}
}

// acquire takes a connection from the pool, vetting it if it is new.
func (p *pool) acquire(ctx context.Context) (*pgxpool.Conn, error) {
	c, err := p.acquireWait(ctx)
	if err != nil || p.onNew == nil {
		return c, err
	}
	pid := c.Conn().PgConn().PID()
	p.mu.Lock()
	_, ok := p.seen[pid]
	p.mu.Unlock()
	if ok {
		return c, nil
	}
	if err := p.onNew(ctx, &connPool{querier{c}, c}); err != nil {
		c.Release()
		return nil, err
	}
	p.mu.Lock()
	if len(p.seen) >= maxSeen {
		clear(p.seen)
	}
	p.seen[pid] = struct{}{}
	p.mu.Unlock()
	return c, nil
}

// WithConn runs fn on one connection of the pool, acquired once (within
// the wait bound, vetted if new) and released when fn returns.
func (p *pool) WithConn(ctx context.Context, fn func(engine.Pool) error) error {
	c, err := p.acquire(ctx)
	if err != nil {
		return err
	}
	defer c.Release()
	return fn(&connPool{querier{c}, c})
}

// connPool is a engine.Pool of one acquired connection, which it never
// releases (its owner does).
type connPool struct {
	querier
	c *pgxpool.Conn
}

func (p *connPool) Begin(ctx context.Context) (engine.Tx, error) {
	return &Tx{conn: p.c, pending: []stmt{{sql: engine.BeginSQL(ctx)}}, keep: true}, nil
}

func (p *connPool) Close() error { return nil }

// querier adapts what *pgxpool.Pool, *pgxpool.Conn and pgx.Tx have in
// common, statements sent as they come, to engine.Querier.
type querier struct {
	q interface {
		Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
		Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	}
}

func (q querier) Query(ctx context.Context, sql string, args ...any) (engine.Rows, error) {
	r, err := q.q.Query(ctx, sql, args...)
	if err != nil {
		return nil, err
	}
	return &rows{r: r}, nil
}

func (q querier) Exec(ctx context.Context, sql string, args ...any) (engine.Result, error) {
	tag, err := q.q.Exec(ctx, sql, args...)
	if err != nil {
		return engine.Result{}, err
	}
	return engine.Result{RowsAffected: tag.RowsAffected()}, nil
}

func (p *pool) Begin(ctx context.Context) (engine.Tx, error) {
	c, err := p.acquire(ctx)
	if err != nil {
		return nil, err
	}
	// The isolation level travels in BEGIN itself (BEGIN ISOLATION LEVEL
	// …), in the same batch as the first statement: no extra round trip.
	return &Tx{conn: c, pending: []stmt{{sql: engine.BeginSQL(ctx)}}}, nil
}

// BeginSingle begins a transaction that runs exactly one statement (plus
// the deferred ones before it) as one implicit transaction; Commit and
// Rollback then only release the connection. A second statement fails
// with ErrSingleUsed.
func (p *pool) BeginSingle(ctx context.Context) (engine.Tx, error) {
	c, err := p.acquire(ctx)
	if err != nil {
		return nil, err
	}
	return &Tx{conn: c, single: true}, nil
}

func (p *pool) Close() error {
	if p.owned {
		p.p.Close()
	}
	return nil
}

type stmt struct {
	sql  string
	args []any
}

// ErrTxDone is returned by a Tx used after Commit or Rollback.
var ErrTxDone = errors.New("postgres: transaction already committed or rolled back")

// ErrSingleUsed is returned by a transaction from BeginSingle asked to run
// a second statement.
var ErrSingleUsed = errors.New("postgres: single-statement transaction already ran its statement")

// ErrCommitRolledBack is returned by Commit when the server rolled the
// transaction back instead (a statement in it had failed).
var ErrCommitRolledBack = errors.New("postgres: commit unexpectedly resulted in rollback")

// Tx is a lazily begun transaction on one pooled connection. It is not
// safe for concurrent use.
type Tx struct {
	conn    *pgxpool.Conn
	pending []stmt
	begun   bool // BEGIN has been sent
	done    bool
	single  bool // implicit transaction of one statement (BeginSingle)
	sent    bool // the single statement has been sent
	// exchange, when set, is the scope to send ahead of the next
	// statement (DeferExchange).
	exchange *exchange
	keep     bool // the connection is not the Tx's to release (connPool)
}

type exchange struct {
	open string
	key  string // the connection's CustomData key of the counter (counterKey + open)
	sign func(pid uint32, counter int64) (string, []any)
}

// Defer queues a statement whose result is not needed; it is sent, in one
// batch, ahead of the next statement run through Query or Exec, and any
// error it raises is reported by that call.
func (t *Tx) Defer(sql string, args ...any) { t.pending = append(t.pending, stmt{sql, args}) }

// DeferExchange queues the scope statement sign returns for the backend's
// pid and its exchange counter's next value: it travels after the pending
// statements and before the next statement, in the same batch. open is
// the query that returns the counter's next value (creating it), run
// first, in a round trip of its own, when the connection does not know
// it.
func (t *Tx) DeferExchange(open string, sign func(pid uint32, counter int64) (sql string, args []any)) {
	t.exchange = &exchange{open: open, key: counterKey + open, sign: sign}
}

// send runs the pending statements, the exchange if one is queued, and
// then sql, in one batch. With nothing to send first it returns nil
// BatchResults and the caller runs sql directly.
func (t *Tx) send(ctx context.Context, sql string, args []any) (pgx.BatchResults, error) {
	if t.done {
		return nil, ErrTxDone
	}
	if t.single {
		if t.sent {
			return nil, ErrSingleUsed
		}
		t.sent = true
	}
	pending := t.pending
	t.pending = nil
	ex := t.exchange
	t.exchange = nil
	if len(pending) == 0 && ex == nil {
		return nil, nil
	}
	// opens: the batch's BEGIN starts the transaction, so a failed
	// exchange leaves nothing of it to keep.
	opens := !t.single && !t.begun
	if !t.single {
		t.begun = true
	}
	pc := t.conn.Conn().PgConn()
	for retried := false; ; retried = true {
		b := &pgx.Batch{}
		for _, s := range pending {
			b.Queue(s.sql, s.args...)
		}
		n := len(pending)
		var counter int64
		if ex != nil {
			var known bool
			// Taken, not read: whatever goes wrong before the
			// exchange has run leaves the counter unknown, and the
			// next transaction opens it again.
			counter, known = pc.CustomData()[ex.key].(int64)
			delete(pc.CustomData(), ex.key)
			if !known {
				if err := t.conn.QueryRow(ctx, ex.open).Scan(&counter); err != nil {
					return nil, err
				}
			}
			xsql, xargs := ex.sign(pc.PID(), counter)
			b.Queue(xsql, xargs...)
			n++
		}
		b.Queue(sql, args...)
		br := t.conn.SendBatch(ctx, b)
		var err error
		for range n {
			if _, err = br.Exec(); err != nil {
				break
			}
		}
		if err == nil {
			if ex != nil {
				pc.CustomData()[ex.key] = counter + 1
			}
			return br, nil
		}
		err = errors.Join(err, br.Close())
		if ex == nil || retried || (!opens && !t.single) || !exchangeFailed(err) {
			return nil, err
		}
		// The backend had no counter (DISCARD dropped its pg_temp), or
		// another user of the connection consumed the value this one
		// was signed for: nothing but the pending statements ran, and
		// their transaction failed. Undo it and send everything again
		// after opening the counter.
		if opens {
			if _, err := t.conn.Exec(ctx, "ROLLBACK"); err != nil {
				return nil, err
			}
		}
	}
}

// counterKey prefixes, in a connection's CustomData, the key of the next
// value of its exchange counter (an int64), followed by the query that
// opens it (which names the namespace).
const counterKey = "tenantmcp.exchange "

// exchangeFailed reports the exchange's own errors.
func exchangeFailed(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && (pe.Code == postgres.ErrCodeNoCounter || pe.Code == postgres.ErrCodeNotVerified)
}

// Query implements engine.Querier.
func (t *Tx) Query(ctx context.Context, sql string, args ...any) (engine.Rows, error) {
	br, err := t.send(ctx, sql, args)
	if err != nil {
		return nil, err
	}
	if br == nil {
		r, err := t.conn.Query(ctx, sql, args...)
		if err != nil {
			return nil, err
		}
		return &rows{r: r}, nil
	}
	r, err := br.Query()
	if err != nil {
		return nil, errors.Join(err, br.Close())
	}
	return &rows{r: r, after: br.Close}, nil
}

// Exec implements engine.Querier.
func (t *Tx) Exec(ctx context.Context, sql string, args ...any) (engine.Result, error) {
	br, err := t.send(ctx, sql, args)
	if err != nil {
		return engine.Result{}, err
	}
	if br == nil {
		tag, err := t.conn.Exec(ctx, sql, args...)
		if err != nil {
			return engine.Result{}, err
		}
		return engine.Result{RowsAffected: tag.RowsAffected()}, nil
	}
	tag, err := br.Exec()
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return engine.Result{}, err
	}
	return engine.Result{RowsAffected: tag.RowsAffected()}, nil
}

// Commit implements engine.Tx. A transaction that never sent a statement
// has nothing to commit.
func (t *Tx) Commit(ctx context.Context) error {
	if t.done {
		return ErrTxDone
	}
	defer t.release()
	if !t.begun {
		return nil
	}
	tag, err := t.conn.Exec(ctx, "COMMIT")
	if err != nil {
		return err
	}
	if tag.String() == "ROLLBACK" {
		return ErrCommitRolledBack
	}
	return nil
}

// Rollback implements engine.Tx.
func (t *Tx) Rollback(ctx context.Context) error {
	if t.done {
		return ErrTxDone
	}
	defer t.release()
	if !t.begun {
		return nil
	}
	_, err := t.conn.Exec(ctx, "ROLLBACK")
	return err
}

// release returns the connection to the pool; pgxpool destroys it if a
// transaction is still open on it (a failed ROLLBACK, a cancelled context).
func (t *Tx) release() {
	t.done = true
	t.pending = nil
	if !t.keep {
		t.conn.Release()
	}
}

// rows adapts pgx.Rows to engine.Rows.
type rows struct {
	r      pgx.Rows
	after  func() error // closes the batch the rows came from
	closed bool
	err    error
}

func (r *rows) Columns() ([]string, error) {
	fds := r.r.FieldDescriptions()
	out := make([]string, len(fds))
	for i, fd := range fds {
		out[i] = fd.Name
	}
	return out, nil
}

func (r *rows) Next() bool             { return r.r.Next() }
func (r *rows) Scan(dest ...any) error { return r.r.Scan(dest...) }

func (r *rows) Err() error {
	if r.err != nil {
		return r.err
	}
	return r.r.Err()
}

func (r *rows) Close() error {
	if r.closed {
		return r.err
	}
	r.closed = true
	r.r.Close()
	err := r.r.Err()
	if r.after != nil {
		if aerr := r.after(); err == nil {
			err = aerr
		}
	}
	r.err = err
	return err
}
