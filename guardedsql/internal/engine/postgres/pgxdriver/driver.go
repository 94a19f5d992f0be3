// Package pgxdriver adapts github.com/jackc/pgx/v5 to the engine seam: the
// pool adapter (NewPool), opening DSNs (Open) and reading pgconn errors
// (AsPgError, Unavailable, Timeout). Only the public package
// guardedsql/postgres and guardedsql's own tests import it.
package pgxdriver

import (
	"context"
	"errors"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/puddle/v2"

	"github.com/tenantmcp/tenantmcp/guardedsql/internal/engine"
	"github.com/tenantmcp/tenantmcp/guardedsql/internal/engine/postgres"
)

// DSNError is returned by Open for a DSN it cannot parse (as opposed to a
// server it cannot reach). Its text may quote the DSN: the caller redacts
// it.
type DSNError struct{ Err error }

func (e *DSNError) Error() string { return e.Err.Error() }
func (e *DSNError) Unwrap() error { return e.Err }

// Open opens an owned pool for dsn; maxConns > 0 caps its size. Its
// errors may quote the DSN: the caller redacts them.
func Open(ctx context.Context, dsn string, maxConns int) (engine.Pool, error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, &DSNError{Err: err}
	}
	if maxConns > 0 {
		cfg.MaxConns = int32(min(maxConns, 1<<20))
	}
	// UTC everywhere: the guard's time expressions (builder.Now,
	// DiffDays, DateTrunc...) convert timestamptz values to dates and
	// add calendar intervals in the session time zone, so it is UTC on
	// every connection guardedsql opens, whatever the DSN or the server
	// default says.
	cfg.ConnConfig.RuntimeParams["timezone"] = "UTC"
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, err
	}
	return NewPool(pool, true), nil
}

// AsPgError reads a *pgconn.PgError in err's chain (postgres.AsPgError).
func AsPgError(err error) (*postgres.PgError, bool) {
	var pe *pgconn.PgError
	if !errors.As(err, &pe) {
		return nil, false
	}
	return &postgres.PgError{
		Code: pe.Code, Severity: pe.Severity, Message: pe.Message, Detail: pe.Detail,
		TableName: pe.TableName, ConstraintName: pe.ConstraintName, ColumnName: pe.ColumnName,
	}, true
}

// Unavailable reports a pgx error meaning the server cannot be reached or
// is not accepting work.
func Unavailable(err error) bool {
	var connectErr *pgconn.ConnectError
	if errors.As(err, &connectErr) {
		return true
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch {
		case strings.HasPrefix(pgErr.Code, "08"): // connection exception
			return true
		case pgErr.Code == "57P01", pgErr.Code == "57P02", pgErr.Code == "57P03": // admin/crash shutdown, cannot connect now
			return true
		case pgErr.Code == "53300": // too many connections
			return true
		}
	}
	return false
}

// Timeout reports a statement or lock timeout.
func Timeout(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && (pe.Code == "57014" || pe.Code == "55P03") // query_canceled (statement_timeout), lock_not_available
}

// Beginner is what the administration functions take: *pgxpool.Pool,
// *pgx.Conn and pgx.Tx (which nests as a savepoint) all qualify.
type Beginner interface {
	Begin(ctx context.Context) (pgx.Tx, error)
}

// Begin begins a transaction on a caller's connection (an owner's or an
// administrator's).
type Begin func(ctx context.Context) (engine.Tx, error)

// BeginOn adapts b for the administration code.
func BeginOn(b Beginner) Begin {
	return func(ctx context.Context) (engine.Tx, error) {
		tx, err := b.Begin(ctx)
		if err != nil {
			return nil, err
		}
		return &plainTx{querier{tx}, tx}, nil
	}
}

// plainTx adapts a pgx.Tx (an ordinary transaction, statements sent as
// they come) to engine.Tx.
type plainTx struct {
	querier
	tx pgx.Tx
}

func (t *plainTx) Commit(ctx context.Context) error   { return t.tx.Commit(ctx) }
func (t *plainTx) Rollback(ctx context.Context) error { return t.tx.Rollback(ctx) }

// Closed reports whether err says the pgx pool was closed.
func Closed(err error) bool { return errors.Is(err, puddle.ErrClosedPool) }
