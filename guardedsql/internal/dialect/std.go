package dialect

import (
	"context"
	"database/sql"
)

// StdPool adapts a *sql.DB to Pool. Close closes db only if owned is true.
func StdPool(db *sql.DB, owned bool) Pool { return &stdPool{db: db, owned: owned} }

type stdPool struct {
	db    *sql.DB
	owned bool
}

func (p *stdPool) Query(ctx context.Context, q string, args ...any) (Rows, error) {
	return p.db.QueryContext(ctx, q, args...)
}

func (p *stdPool) Exec(ctx context.Context, q string, args ...any) (Result, error) {
	return stdResult(p.db.ExecContext(ctx, q, args...))
}

func (p *stdPool) Begin(ctx context.Context) (Tx, error) {
	tx, err := p.db.BeginTx(ctx, nil)
	if err != nil {
		return nil, err
	}
	return stdTx{tx}, nil
}

func (p *stdPool) Close() error {
	if p.owned {
		return p.db.Close()
	}
	return nil
}

type stdTx struct{ tx *sql.Tx }

func (t stdTx) Query(ctx context.Context, q string, args ...any) (Rows, error) {
	return t.tx.QueryContext(ctx, q, args...)
}

func (t stdTx) Exec(ctx context.Context, q string, args ...any) (Result, error) {
	return stdResult(t.tx.ExecContext(ctx, q, args...))
}

func (t stdTx) Commit(context.Context) error   { return t.tx.Commit() }
func (t stdTx) Rollback(context.Context) error { return t.tx.Rollback() }

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
