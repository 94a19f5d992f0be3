package guardedsql

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/tenantmcp/tenantmcp/builder"
	"github.com/tenantmcp/tenantmcp/guardedsql/internal/engine"
	"github.com/tenantmcp/tenantmcp/guardedsql/internal/guard"
	"github.com/tenantmcp/tenantmcp/scope"
)

// ExecReturning runs an INSERT, UPDATE or DELETE built with Returning (or an
// upsert, builder.InsertBuilder.OnConflict) under the scope of ctx and
// returns the rows it wrote: the inserted rows, the updated rows with their
// new values, the deleted rows with their old ones. Only rows in scope are
// ever written, so only they are returned. The caller must close the Rows.
//
// The write runs in its own transaction and is complete (committed) when
// ExecReturning returns; its rows are held in memory and scan as
// database/sql scans. It fails, changing nothing, as Exec does (ErrNotFound,
// ErrTooManyRows with ExpectOne, ErrOutOfScope...). A mutation built
// without Returning returns no columns and no rows.
//
// PostgreSQL and SQLite return the rows from the statement itself (RETURNING);
// MariaDB for INSERT and DELETE. Elsewhere (MariaDB's UPDATE, MySQL) the
// rows are read by key in the same transaction: see the package doc.
func (db *DB) ExecReturning(ctx context.Context, m builder.Mutation) (*Rows, error) {
	p, sc, ds, err := db.plan(ctx, m)
	if err != nil {
		return nil, err
	}
	out, err := db.runInTx(ctx, p, sc, ds)
	if err != nil {
		return nil, err
	}
	return bufferedRows(ctx, p.Returns, out.Rows)
}

// ExecReturning is DB.ExecReturning inside the transaction; a failing write
// is undone through a savepoint, as for Tx.Exec.
func (tx *Tx) ExecReturning(ctx context.Context, m builder.Mutation) (*Rows, error) {
	p, err := tx.plan(ctx, m)
	if err != nil {
		return nil, err
	}
	tx.wrote = true
	out, err := tx.savepoint(ctx, p)
	if err != nil {
		return nil, err
	}
	return bufferedRows(ctx, p.Returns, out.Rows)
}

// savepoint runs p inside a savepoint of the transaction.
func (tx *Tx) savepoint(ctx context.Context, p guard.Plan) (guard.Output, error) {
	tx.sp++
	sp := fmt.Sprintf("_tm_sp%d", tx.sp)
	if _, err := tx.tx.Exec(ctx, "SAVEPOINT "+sp); err != nil {
		return guard.Output{}, err
	}
	out, err := runWrites(ctx, tx.tx, p)
	if err != nil {
		_, rerr := tx.tx.Exec(ctx, "ROLLBACK TO SAVEPOINT "+sp)
		_, relErr := tx.tx.Exec(ctx, "RELEASE SAVEPOINT "+sp)
		return guard.Output{}, errors.Join(err, rerr, relErr)
	}
	if _, err := tx.tx.Exec(ctx, "RELEASE SAVEPOINT "+sp); err != nil {
		return guard.Output{}, err
	}
	return out, nil
}

// runWrites runs a plan in q: its Run where it has one (RETURNING,
// upserts), else its steps.
func runWrites(ctx context.Context, q engine.Querier, p guard.Plan) (guard.Output, error) {
	if p.Run != nil {
		return p.Run(ctx, guard.Env{Q: q, TooMany: ErrTooManyRows, Timeout: IsTimeout})
	}
	res, err := runSteps(ctx, q, p)
	return guard.Output{RowsAffected: res.RowsAffected, LastInsertID: res.LastInsertID}, err
}

// bufferedRows serves rows already read, through database/sql so that
// Scan converts exactly as it does for any *sql.Rows (Scanner
// implementations, NULL into pointers, text into numbers...).
func bufferedRows(ctx context.Context, cols []string, rows [][]any) (*Rows, error) {
	memOnce.Do(func() { memDB = sql.OpenDB(memConnector{}) })
	r, err := memDB.QueryContext(ctx, "", &memResult{cols: cols, rows: rows})
	if err != nil {
		return nil, fmt.Errorf("%w: returned rows: %v", ErrInternal, err)
	}
	return &Rows{rows: r}, nil
}

var (
	memOnce sync.Once
	memDB   *sql.DB
)

// memResult is the one argument of a query to memDB: the rows it returns.
type memResult struct {
	cols []string
	rows [][]any
	i    int
}

type memConnector struct{}

func (memConnector) Connect(context.Context) (driver.Conn, error) { return memConn{}, nil }
func (memConnector) Driver() driver.Driver                        { return memDriver{} }

type memDriver struct{}

func (memDriver) Open(string) (driver.Conn, error) { return memConn{}, nil }

type memConn struct{}

func (memConn) Prepare(string) (driver.Stmt, error) {
	return nil, errors.New("guardedsql: memConn.Prepare")
}
func (memConn) Close() error              { return nil }
func (memConn) Begin() (driver.Tx, error) { return nil, errors.New("guardedsql: memConn.Begin") }

// CheckNamedValue lets the *memResult through unconverted.
func (memConn) CheckNamedValue(*driver.NamedValue) error { return nil }

func (memConn) QueryContext(_ context.Context, _ string, args []driver.NamedValue) (driver.Rows, error) {
	if len(args) != 1 {
		return nil, errors.New("guardedsql: memConn: want one argument")
	}
	m, ok := args[0].Value.(*memResult)
	if !ok {
		return nil, errors.New("guardedsql: memConn: argument is not a result")
	}
	return m, nil
}

func (m *memResult) Columns() []string { return m.cols }
func (m *memResult) Close() error      { return nil }
func (m *memResult) Next(dest []driver.Value) error {
	if m.i >= len(m.rows) {
		return io.EOF
	}
	for i, v := range m.rows[m.i] {
		dest[i] = v
	}
	m.i++
	return nil
}

// execWrites is Exec for a plan with a Run: ExecReturning without rows.
func (db *DB) execWrites(ctx context.Context, p guard.Plan, sc scope.Scope, ds engine.Scope) (Result, error) {
	out, err := db.runInTx(ctx, p, sc, ds)
	return Result{RowsAffected: out.RowsAffected, LastInsertID: out.LastInsertID}, err
}

// runInTx runs p in a transaction of its own, committed when it succeeds.
func (db *DB) runInTx(ctx context.Context, p guard.Plan, sc scope.Scope, ds engine.Scope) (guard.Output, error) {
	tx, err := db.pool.Begin(ctx)
	if err != nil {
		return guard.Output{}, err
	}
	if db.d.NeedsTx() {
		if err := db.d.Session(ctx, tx, sc, ds.Doc); err != nil {
			return guard.Output{}, errors.Join(err, tx.Rollback(ctx))
		}
	}
	out, err := runWrites(ctx, tx, p)
	if err != nil {
		return guard.Output{}, errors.Join(err, tx.Rollback(ctx))
	}
	return out, db.commitWrite(ctx, tx)
}
