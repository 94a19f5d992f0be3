package engine

import (
	"context"
	"database/sql"
	"errors"
	"strings"
)

// StdPool adapts a *sql.DB to Pool. Close closes db only if owned is true.
func StdPool(db *sql.DB, owned bool) Pool { return &stdPool{db: db, owned: owned} }

// CachedStdPool is StdPool running statements through a StmtCache of
// cacheSize prepared statements (none for cacheSize <= 0). Close closes
// the cache, and db if owned.
func CachedStdPool(db *sql.DB, owned bool, cacheSize int) Pool {
	return &stdPool{db: db, owned: owned, stmts: NewStmtCache(db, cacheSize)}
}

// IsolatedStdPool is StdPool whose transactions begin at the isolation
// level iso chooses for a caller that asks none (sql.LevelDefault): see
// package mysql's GuardedIsolation.
func IsolatedStdPool(db *sql.DB, owned bool, iso func(sql.IsolationLevel) sql.IsolationLevel) Pool {
	return &stdPool{db: db, owned: owned, iso: iso}
}

type stdPool struct {
	// iso, when set, chooses the isolation level of Begin's transactions.
	iso   func(sql.IsolationLevel) sql.IsolationLevel
	db    *sql.DB
	owned bool
	wait  Wait
	stmts *StmtCache // nil: every statement prepared per call
}

// BoundWait implements WaitBounder. database/sql ties a statement's rows
// and a transaction to the context they were started with, so with a
// bound the pool first takes a connection under the bounded context
// (sql.DB.Conn) and then runs the statement on it under the caller's.
func (p *stdPool) BoundWait(w Wait) { p.wait = w }

func (p *stdPool) bounded() bool { return p.wait.Timeout > 0 || p.wait.Observe != nil }

func (p *stdPool) conn(ctx context.Context) (*sql.Conn, error) {
	return Acquire(ctx, p.wait, p.db.Conn)
}

func (p *stdPool) Query(ctx context.Context, q string, args ...any) (Rows, error) {
	if !p.bounded() {
		if p.stmts != nil {
			return p.stmts.Query(ctx, q, args...)
		}
		return p.db.QueryContext(ctx, q, args...)
	}
	c, err := p.conn(ctx)
	if err != nil {
		return nil, err
	}
	r, err := c.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, errors.Join(err, c.Close())
	}
	return &connRows{Rows: r, c: c}, nil
}

func (p *stdPool) Exec(ctx context.Context, q string, args ...any) (Result, error) {
	if !p.bounded() {
		if p.stmts != nil {
			return stdResult(p.stmts.Exec(ctx, q, args...))
		}
		return stdResult(p.db.ExecContext(ctx, q, args...))
	}
	c, err := p.conn(ctx)
	if err != nil {
		return Result{}, err
	}
	defer c.Close()
	return stdResult(c.ExecContext(ctx, q, args...))
}

// txOptions are the options of a transaction Begin starts with ctx: the
// level the caller asked for (TxOptions), passed through the pool's own
// default for guarded transactions where it has one, so an explicit level
// wins and no level means the dialect's default.
func (p *stdPool) txOptions(ctx context.Context) *sql.TxOptions {
	opts := TxOptions(ctx)
	if p.iso == nil {
		return opts
	}
	requested := sql.LevelDefault
	if opts != nil {
		requested = opts.Isolation
	}
	return &sql.TxOptions{Isolation: p.iso(requested)}
}

func (p *stdPool) Begin(ctx context.Context) (Tx, error) {
	if !p.bounded() {
		tx, err := p.db.BeginTx(ctx, p.txOptions(ctx))
		if err != nil {
			return nil, err
		}
		return stdTx{tx: tx, stmts: p.stmts}, nil
	}
	c, err := p.conn(ctx)
	if err != nil {
		return nil, err
	}
	tx, err := c.BeginTx(ctx, p.txOptions(ctx))
	if err != nil {
		return nil, errors.Join(err, c.Close())
	}
	return stdTx{tx: tx, c: c}, nil
}

// connRows returns its connection to the pool when closed.
type connRows struct {
	*sql.Rows
	c *sql.Conn
}

func (r *connRows) Close() error { return errors.Join(r.Rows.Close(), r.c.Close()) }

func (p *stdPool) Close() error {
	err := p.stmts.Close()
	if p.owned {
		return errors.Join(err, p.db.Close())
	}
	return err
}

type stdTx struct {
	tx    *sql.Tx
	c     *sql.Conn  // the connection BoundWait took, returned when the tx ends
	stmts *StmtCache // nil: statements prepared per call
}

func (t stdTx) Query(ctx context.Context, q string, args ...any) (Rows, error) {
	if t.stmts == nil {
		return t.tx.QueryContext(ctx, q, args...)
	}
	return txStmt(ctx, t.stmts, t.tx, q, func(st *sql.Stmt) (*sql.Rows, error) {
		if st == nil {
			return t.tx.QueryContext(ctx, q, args...)
		}
		return st.QueryContext(ctx, args...)
	})
}

func (t stdTx) Exec(ctx context.Context, q string, args ...any) (Result, error) {
	if t.stmts == nil {
		return stdResult(t.tx.ExecContext(ctx, q, args...))
	}
	return stdResult(txStmt(ctx, t.stmts, t.tx, q, func(st *sql.Stmt) (sql.Result, error) {
		if st == nil {
			return t.tx.ExecContext(ctx, q, args...)
		}
		return st.ExecContext(ctx, args...)
	}))
}

func (t stdTx) Commit(context.Context) error   { return t.release(t.tx.Commit()) }
func (t stdTx) Rollback(context.Context) error { return t.release(t.tx.Rollback()) }

func (t stdTx) release(err error) error {
	if t.c == nil {
		return err
	}
	return errors.Join(err, t.c.Close())
}

func stdResult(r sql.Result, err error) (Result, error) {
	if err != nil {
		return Result{}, err
	}
	var out Result
	if out.RowsAffected, err = r.RowsAffected(); err != nil {
		return Result{}, err
	}
	// Not every driver reports an insert id; a missing one is not an error.
	if id, err := r.LastInsertId(); err == nil {
		out.LastInsertID = id
	}
	return out, nil
}

// SplitPool adapts an SQLite file opened twice in WAL mode: reads, a pool
// of query-only connections, runs the SELECTs outside transactions; write,
// a single connection, runs every other statement and every transaction.
// One writer connection means the process's writes queue in database/sql
// instead of racing for SQLite's write lock (where a deferred writer that
// would deadlock gets SQLITE_BUSY without waiting), and WAL lets the
// readers run beside it. Close closes both.
//
// Both keep cacheSize prepared statements (see StmtCache; none for
// cacheSize <= 0).
func SplitPool(read, write *sql.DB, cacheSize int) Pool {
	return &splitPool{stdPool: &stdPool{db: write, owned: true, stmts: NewStmtCache(write, cacheSize)},
		read: read, readStmts: NewStmtCache(read, cacheSize)}
}

// splitPool is the writer's stdPool (Exec, Begin) with reads routed to the
// read pool.
type splitPool struct {
	*stdPool
	read      *sql.DB
	readStmts *StmtCache
}

func (p *splitPool) Query(ctx context.Context, q string, args ...any) (Rows, error) {
	// Only a plain SELECT goes to the readers (which are query_only, so a
	// misrouted write fails instead of bypassing the one writer);
	// INSERT … RETURNING and anything else go to the writer.
	if isSelect(q) {
		if p.readStmts != nil {
			return p.readStmts.Query(ctx, q, args...)
		}
		return p.read.QueryContext(ctx, q, args...)
	}
	return p.stdPool.Query(ctx, q, args...)
}

func (p *splitPool) Close() error {
	return errors.Join(p.readStmts.Close(), p.read.Close(), p.stdPool.Close())
}

func isSelect(q string) bool {
	q = strings.TrimLeft(q, " \t\r\n(")
	return len(q) >= 6 && strings.EqualFold(q[:6], "select")
}
