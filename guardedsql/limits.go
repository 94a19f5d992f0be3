package guardedsql

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/tenantmcp/tenantmcp/guardedsql/internal/engine"
)

// ErrBusy: no database connection became free within the wait bound set
// with Options.PoolWait, while the caller's own deadline had not passed.
// Nothing was sent. It is transient: the caller may retry later (package
// server answers it with a retryable "busy" error).
var ErrBusy = engine.ErrBusy

// ErrTimeoutUnsupported: Options.StatementTimeout or LockTimeout was set
// for an engine that cannot bound a statement on the server (MySQL 8 has
// no SET STATEMENT; MariaDB has). Open and guardedsql/mysql.New refuse to start rather
// than run unbounded.
var ErrTimeoutUnsupported = errors.New("guardedsql: statement and lock timeouts need PostgreSQL, MariaDB or SQLite")

// IsTimeout reports whether err is the database stopping a statement at
// Options.StatementTimeout or LockTimeout (or a server-side default of the
// same kind): PostgreSQL SQLSTATE 57014 and 55P03, MariaDB errors 1969 and
// 1205, MySQL 3024, and on SQLite the statement deadline or SQLITE_BUSY
// (the busy timeout ran out waiting for the database lock).
func IsTimeout(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, errStatementDeadline) {
		return true
	}
	for _, e := range registered() { // the engines' driver errors
		if e.Timeout(err) {
			return true
		}
	}
	return false
}

// errStatementDeadline is the cause of a statement context that reached
// Options.StatementTimeout (SQLite).
var errStatementDeadline = errors.New("guardedsql: statement timeout")

// applyLimits installs the wait bound on the pool and, where the engine
// needs help from this side, the statement bounds.
func applyLimits(pool engine.Pool, d engine.Dialect, c *config) (engine.Pool, error) {
	if wb, ok := pool.(engine.WaitBounder); ok && (c.PoolWait > 0 || c.PoolWaitObserver != nil) {
		wb.BoundWait(c.wait())
	}
	if cc, ok := pool.(engine.ConnCounter); ok && !c.PoolFIFO && cc.MaxConns() > 0 {
		g := newFairGate(cc.MaxConns(), c.wait()) // fair.go
		if c.PoolShare > 0 {
			g.share = c.PoolShare
		}
		pool = &fairPool{Pool: pool, g: g}
	}
	if c.StatementTimeout <= 0 && c.LockTimeout <= 0 {
		return pool, nil
	}
	switch d.Name() {
	case "postgres":
		return pool, nil // the dialect sets them with the scope
	case "mysql":
		if !c.setStatement {
			return nil, fmt.Errorf("%w: the server is MySQL, not MariaDB", ErrTimeoutUnsupported)
		}
		return &rewritePool{Pool: pool, rw: mariaDBTimeouts(c.StatementTimeout, c.LockTimeout)}, nil
	case "sqlite":
		if c.StatementTimeout <= 0 {
			return pool, nil
		}
		return &deadlinePool{Pool: pool, d: c.StatementTimeout}, nil
	}
	return nil, fmt.Errorf("%w: engine %s", ErrTimeoutUnsupported, d.Name())
}

// mariaDBTimeouts returns the rewrite that prefixes each data statement
// with SET STATEMENT ... FOR, which scopes the variables to exactly that
// statement: nothing is left set on the pooled connection afterwards.
func mariaDBTimeouts(stmt, lock time.Duration) func(string) string {
	var vars []string
	if stmt > 0 {
		vars = append(vars, "max_statement_time="+strconv.FormatFloat(max(stmt.Seconds(), 0.001), 'f', 3, 64))
	}
	if lock > 0 {
		s := strconv.FormatInt(int64(max(math.Ceil(lock.Seconds()), 1)), 10)
		vars = append(vars, "innodb_lock_wait_timeout="+s, "lock_wait_timeout="+s)
	}
	prefix := "SET STATEMENT " + strings.Join(vars, ", ") + " FOR "
	return func(q string) string {
		switch kindOf(q) {
		case "select", "insert", "update", "delete":
			return prefix + q
		}
		return q
	}
}

// rewritePool rewrites the text of every statement sent through it or its
// transactions.
type rewritePool struct {
	engine.Pool
	rw func(string) string
}

func (p *rewritePool) Query(ctx context.Context, q string, args ...any) (engine.Rows, error) {
	return p.Pool.Query(ctx, p.rw(q), args...)
}

func (p *rewritePool) Exec(ctx context.Context, q string, args ...any) (engine.Result, error) {
	return p.Pool.Exec(ctx, p.rw(q), args...)
}

func (p *rewritePool) Begin(ctx context.Context) (engine.Tx, error) {
	tx, err := p.Pool.Begin(ctx)
	if err != nil {
		return nil, err
	}
	return &rewriteTx{Tx: tx, rw: p.rw}, nil
}

type rewriteTx struct {
	engine.Tx
	rw func(string) string
}

func (t *rewriteTx) Query(ctx context.Context, q string, args ...any) (engine.Rows, error) {
	return t.Tx.Query(ctx, t.rw(q), args...)
}

func (t *rewriteTx) Exec(ctx context.Context, q string, args ...any) (engine.Result, error) {
	return t.Tx.Exec(ctx, t.rw(q), args...)
}

// deadlinePool puts a deadline on each statement's context (SQLite, whose
// driver interrupts a statement when its context ends). The deadline of a
// query lasts until its rows are closed.
type deadlinePool struct {
	engine.Pool
	d time.Duration
}

func (p *deadlinePool) Query(ctx context.Context, q string, args ...any) (engine.Rows, error) {
	return deadlineQuery(ctx, p.d, p.Pool.Query, q, args)
}

func (p *deadlinePool) Exec(ctx context.Context, q string, args ...any) (engine.Result, error) {
	return deadlineExec(ctx, p.d, p.Pool.Exec, q, args)
}

func (p *deadlinePool) Begin(ctx context.Context) (engine.Tx, error) {
	tx, err := p.Pool.Begin(ctx)
	if err != nil {
		return nil, err
	}
	return &deadlineTx{Tx: tx, d: p.d}, nil
}

type deadlineTx struct {
	engine.Tx
	d time.Duration
}

func (t *deadlineTx) Query(ctx context.Context, q string, args ...any) (engine.Rows, error) {
	return deadlineQuery(ctx, t.d, t.Tx.Query, q, args)
}

func (t *deadlineTx) Exec(ctx context.Context, q string, args ...any) (engine.Result, error) {
	return deadlineExec(ctx, t.d, t.Tx.Exec, q, args)
}

func deadlineExec(ctx context.Context, d time.Duration, exec func(context.Context, string, ...any) (engine.Result, error), q string, args []any) (engine.Result, error) {
	sctx, cancel := context.WithTimeoutCause(ctx, d, errStatementDeadline)
	defer cancel()
	r, err := exec(sctx, q, args...)
	return r, deadlineErr(ctx, sctx, err)
}

func deadlineQuery(ctx context.Context, d time.Duration, query func(context.Context, string, ...any) (engine.Rows, error), q string, args []any) (engine.Rows, error) {
	sctx, cancel := context.WithTimeoutCause(ctx, d, errStatementDeadline)
	r, err := query(sctx, q, args...)
	if err != nil {
		cancel()
		return nil, deadlineErr(ctx, sctx, err)
	}
	return &deadlineRows{Rows: r, ctx: ctx, sctx: sctx, cancel: cancel}, nil
}

// deadlineErr marks err as a statement timeout when the statement's own
// deadline (not the caller's) is what ended it.
func deadlineErr(ctx, sctx context.Context, err error) error {
	if err != nil && ctx.Err() == nil && errors.Is(context.Cause(sctx), errStatementDeadline) {
		return fmt.Errorf("%w: %w", errStatementDeadline, err)
	}
	return err
}

type deadlineRows struct {
	engine.Rows
	ctx, sctx context.Context
	cancel    context.CancelFunc
}

func (r *deadlineRows) Err() error { return deadlineErr(r.ctx, r.sctx, r.Rows.Err()) }

func (r *deadlineRows) Close() error {
	err := r.Rows.Close()
	r.cancel()
	return deadlineErr(r.ctx, r.sctx, err)
}
