package guardedsql

import (
	"context"
	"fmt"
	"log/slog"
	"regexp"
	"slices"
	"strings"

	"github.com/tenantmcp/tenantmcp/guardedsql/internal/engine"
	"github.com/tenantmcp/tenantmcp/internal/guardfault"
	"github.com/tenantmcp/tenantmcp/internal/sqlast"
	"github.com/tenantmcp/tenantmcp/redact"
	"github.com/tenantmcp/tenantmcp/scope"
)

// Errors the engine raised, as tool code sees them. The engine's own text
// can quote values of any row the statement touched, another tenant's
// included (MariaDB's "Truncated incorrect DOUBLE value: '<a value>'", a
// unique violation's key), so it never leaves the DB: every engine error
// becomes an *EngineError matching one of these, naming the table,
// constraint and columns as the schema declares them and the engine's
// error code, never a value. The engine's text goes to the operational log
// only (Options.Logger), with quoted literals removed and what is left passed
// through package redact.
var (
	// ErrConflict: a unique or primary-key constraint refused the row. A
	// server reports it as "conflict". When the constraint does not
	// include the tenant column it reveals that the value exists in
	// another tenant (see DB.UniqueOracles).
	ErrConflict = fmt.Errorf("guardedsql: conflict")
	// ErrReferenced: a foreign key refused deleting (or re-keying) a row
	// that other rows still reference. A server reports it as "still
	// referenced".
	ErrReferenced = fmt.Errorf("guardedsql: still referenced")
	// ErrInvalidValue: the engine refused a value: a type conversion,
	// range or length, CHECK or NOT NULL violation.
	ErrInvalidValue = fmt.Errorf("guardedsql: invalid value")
	// ErrEngine: any other error the engine raised for a statement.
	ErrEngine = fmt.Errorf("guardedsql: the database refused the statement")
)

// EngineError is an error the engine raised, stripped of its text. It
// matches one of ErrConflict, ErrReferenced, ErrInvalidValue, ErrEngine,
// ErrRetryable (a serialization failure or deadlock), or (for a foreign
// key whose referenced row does not exist, exactly like a row of another
// tenant) ErrNotFound.
type EngineError struct {
	// Kind is the sentinel the error matches.
	Kind error
	// Table, Constraint and Column name what refused the statement, where
	// the engine said so; Table and Column only if the schema has them.
	Table, Constraint, Column string
	// Code is the engine's error code (SQLSTATE, MySQL error number,
	// SQLite extended result code).
	Code string
}

func (e *EngineError) Error() string {
	var b strings.Builder
	b.WriteString(e.Kind.Error())
	var parts []string
	if e.Table != "" {
		parts = append(parts, "table "+e.Table)
	}
	if e.Constraint != "" {
		parts = append(parts, "constraint "+e.Constraint)
	}
	if e.Column != "" {
		parts = append(parts, "column "+e.Column)
	}
	if e.Code != "" {
		parts = append(parts, "code "+e.Code)
	}
	if len(parts) > 0 {
		b.WriteString(" (" + strings.Join(parts, ", ") + ")")
	}
	return b.String()
}

// Is matches the error's kind.
func (e *EngineError) Is(target error) bool { return target == e.Kind }

// engineErrors translates the errors of a pool, its transactions and their
// rows. It sits directly on the driver, below the observers and the
// statement log, so nothing above it ever holds the engine's text.
//
// Invariant: an error classified as the engine's leaves this layer only as
// an *EngineError built from schema names and the error code.
type engineErrors struct {
	c   engine.ErrorClassifier
	g   *sqlast.Schema
	log *slog.Logger
}

// translate returns err as tool code may see it; text is the statement
// that failed.
func (t *engineErrors) translate(ctx context.Context, err error, text string) error {
	// An unreachable or shutting-down server, and a statement or lock
	// timeout, are not refusals of the statement: their errors carry no
	// row data and stay as they are, so IsUnavailable and IsTimeout still
	// tell them apart. A lock timeout is also retryable (see IsRetryable).
	if err == nil || guardfault.EngineErrorsRaw() || IsUnavailable(err) {
		return err
	}
	ee, ok := t.c.Classify(err)
	if IsTimeout(err) {
		if ok && ee.Kind == engine.EngineRetryable {
			return &retryableTimeout{err: err}
		}
		return err
	}
	if !ok {
		return err
	}
	out := &EngineError{Kind: ErrEngine, Code: ee.Code, Constraint: ee.Constraint}
	if ee.Kind == engine.EngineRetryable {
		// A serialization failure or deadlock: the code says all a caller
		// needs; the engine's detail (processes, transactions, the tuple
		// waited for) stays out of the error and the log alike.
		out.Kind = ErrRetryable
		if t.log != nil {
			t.log.LogAttrs(ctx, slog.LevelInfo, "guardedsql: retryable engine error", slog.String("code", ee.Code))
		}
		return out
	}
	kind := ee.Kind
	if kind == engine.EngineReferenced && kindOf(text) == "insert" {
		kind = engine.EngineMissingRef // an insert cannot orphan a reference
	}
	switch kind {
	case engine.EngineUnique:
		out.Kind = ErrConflict
	case engine.EngineReferenced:
		out.Kind = ErrReferenced
	case engine.EngineMissingRef:
		out.Kind = ErrNotFound
	case engine.EngineInvalid:
		out.Kind = ErrInvalidValue
	}
	if tb := t.g.Tables[ee.Table]; tb != nil {
		out.Table = tb.Name
	}
	var cols []string
	for _, c := range ee.Columns {
		if t.hasColumn(out.Table, c) {
			cols = append(cols, c)
		}
	}
	out.Column = strings.Join(cols, ",")
	if t.log != nil {
		t.log.LogAttrs(ctx, slog.LevelWarn, "guardedsql: engine error",
			slog.String("kind", strings.TrimPrefix(out.Kind.Error(), "guardedsql: ")),
			slog.String("code", ee.Code),
			slog.String("table", out.Table), slog.String("constraint", out.Constraint), slog.String("column", out.Column),
			slog.String("engine", logText(ee.Message)))
	}
	return out
}

// retryableTimeout is a lock timeout (PostgreSQL 55P03, MariaDB/MySQL
// 1205, SQLite SQLITE_BUSY): left as the driver raised it, like every
// timeout (its text carries no row data), and marked retryable.
type retryableTimeout struct{ err error }

func (e *retryableTimeout) Error() string { return e.err.Error() }

func (e *retryableTimeout) Unwrap() error { return e.err }

func (e *retryableTimeout) Is(target error) bool { return target == ErrRetryable }

// hasColumn reports whether the schema has column c, in table if given,
// else in any table.
func (t *engineErrors) hasColumn(table, c string) bool {
	if tb := t.g.Tables[table]; tb != nil {
		return slices.Contains(tb.Columns, c)
	}
	for _, tb := range t.g.Tables {
		if slices.Contains(tb.Columns, c) {
			return true
		}
	}
	return false
}

// quoted matches a quoted literal of an engine message, '...' or "..."
// (with doubled or backslash-escaped quotes inside), and PostgreSQL's
// "=(...)" value lists.
var quoted = regexp.MustCompile(`'(?:[^'\\]|''|\\.)*'|"(?:[^"\\]|""|\\.)*"|=\([^)]*\)`)

// logRedactor redacts the engine text that reaches the operational log.
var logRedactor = redact.Default().ForScope(scope.Scope{})

// logText is an engine message fit for the operational log: quoted
// literals (where engines put values) are replaced by '…', and the rest
// goes through package redact, for values an engine prints unquoted.
func logText(msg string) string {
	return logRedactor.String(quoted.ReplaceAllString(msg, "'…'"))
}

// errorPool translates the errors of every call.
type errorPool struct {
	engine.Pool
	t *engineErrors
}

func (p *errorPool) Query(ctx context.Context, q string, args ...any) (engine.Rows, error) {
	r, err := p.Pool.Query(ctx, q, args...)
	if err != nil {
		return nil, p.t.translate(ctx, err, q)
	}
	return &errorRows{Rows: r, t: p.t, ctx: ctx, text: q}, nil
}

func (p *errorPool) Exec(ctx context.Context, q string, args ...any) (engine.Result, error) {
	r, err := p.Pool.Exec(ctx, q, args...)
	return r, p.t.translate(ctx, err, q)
}

func (p *errorPool) Begin(ctx context.Context) (engine.Tx, error) {
	tx, err := p.Pool.Begin(ctx)
	if err != nil {
		return nil, p.t.translate(ctx, err, "BEGIN")
	}
	return &errorTx{Tx: tx, t: p.t}, nil
}

// BeginSingle keeps the pool's one-round-trip transactions.
func (p *errorPool) BeginSingle(ctx context.Context) (engine.Tx, error) {
	sb, ok := p.Pool.(engine.SingleBeginner)
	if !ok {
		return p.Begin(ctx)
	}
	tx, err := sb.BeginSingle(ctx)
	if err != nil {
		return nil, p.t.translate(ctx, err, "BEGIN")
	}
	return &errorTx{Tx: tx, t: p.t}, nil
}

type errorTx struct {
	engine.Tx
	t *engineErrors
}

// UnwrapTx lets a dialect reach the driver's transaction for what it
// queues there (the signed scope statement); errors still come back
// through this layer with the next statement.
func (x *errorTx) UnwrapTx() engine.Tx { return x.Tx }

func (x *errorTx) Query(ctx context.Context, q string, args ...any) (engine.Rows, error) {
	r, err := x.Tx.Query(ctx, q, args...)
	if err != nil {
		return nil, x.t.translate(ctx, err, q)
	}
	return &errorRows{Rows: r, t: x.t, ctx: ctx, text: q}, nil
}

func (x *errorTx) Exec(ctx context.Context, q string, args ...any) (engine.Result, error) {
	r, err := x.Tx.Exec(ctx, q, args...)
	return r, x.t.translate(ctx, err, q)
}

func (x *errorTx) Commit(ctx context.Context) error {
	return x.t.translate(ctx, x.Tx.Commit(ctx), "COMMIT")
}

func (x *errorTx) Rollback(ctx context.Context) error {
	return x.t.translate(ctx, x.Tx.Rollback(ctx), "ROLLBACK")
}

// errorRows translates errors raised while rows stream (a conversion
// error on the thousandth row arrives here, not at Query).
type errorRows struct {
	engine.Rows
	t    *engineErrors
	ctx  context.Context
	text string
	// rawText and out: the last error translated (by its text: errors
	// need not be comparable), so that Err and Close reporting the same
	// one log it once.
	rawText string
	out     error
}

func (r *errorRows) Err() error { return r.once(r.Rows.Err()) }

func (r *errorRows) Close() error { return r.once(r.Rows.Close()) }

func (r *errorRows) once(err error) error {
	if err == nil {
		return nil
	}
	if r.out == nil || err.Error() != r.rawText {
		r.rawText, r.out = err.Error(), r.t.translate(r.ctx, err, r.text)
	}
	return r.out
}
