package engine

import (
	"context"
	"database/sql"
)

// Isolation is the isolation level a transaction asks for. The zero
// value, IsoDefault, leaves the choice to the pool and the dialect (the
// engine's default, or a dialect's own default for guarded transactions).
type Isolation int

const (
	IsoDefault Isolation = iota
	IsoReadCommitted
	IsoRepeatableRead
	IsoSerializable
)

// SQL is the level as SQL spells it after ISOLATION LEVEL, or "" for
// IsoDefault.
func (l Isolation) SQL() string {
	switch l {
	case IsoReadCommitted:
		return "READ COMMITTED"
	case IsoRepeatableRead:
		return "REPEATABLE READ"
	case IsoSerializable:
		return "SERIALIZABLE"
	}
	return ""
}

// Std is the level as database/sql names it (sql.LevelDefault for
// IsoDefault).
func (l Isolation) Std() sql.IsolationLevel {
	switch l {
	case IsoReadCommitted:
		return sql.LevelReadCommitted
	case IsoRepeatableRead:
		return sql.LevelRepeatableRead
	case IsoSerializable:
		return sql.LevelSerializable
	}
	return sql.LevelDefault
}

type isoKey struct{}

// WithIsolation returns ctx carrying the isolation level for the
// transaction a Pool's Begin starts with it. It travels in the context,
// not in the Pool interface, so that every wrapping pool (error
// translation, observers, statement bounds) passes it through untouched;
// only the pools that talk to a driver read it. Statements run inside the
// transaction never see it: they get the caller's own context.
func WithIsolation(ctx context.Context, l Isolation) context.Context {
	if l == IsoDefault {
		return ctx
	}
	return context.WithValue(ctx, isoKey{}, l)
}

// IsolationOf returns the level WithIsolation put in ctx, or IsoDefault.
// A dialect or pool with its own default for guarded transactions applies
// that default only when this returns IsoDefault: an explicit level wins.
func IsolationOf(ctx context.Context) Isolation {
	l, _ := ctx.Value(isoKey{}).(Isolation)
	return l
}

// TxOptions returns the database/sql options for a transaction begun with
// ctx, or nil for the driver's defaults.
func TxOptions(ctx context.Context) *sql.TxOptions {
	if l := IsolationOf(ctx); l != IsoDefault {
		return &sql.TxOptions{Isolation: l.Std()}
	}
	return nil
}

// BeginSQL is the BEGIN statement for a transaction begun with ctx.
func BeginSQL(ctx context.Context) string {
	if l := IsolationOf(ctx); l != IsoDefault {
		return "BEGIN ISOLATION LEVEL " + l.SQL()
	}
	return "BEGIN"
}
