package guard

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/tenantmcp/tenantmcp/guardedsql/internal/engine"
	"github.com/tenantmcp/tenantmcp/internal/sqlast"
)

// timeFuncInto renders the built-in time functions of builder/time.go:
// now, today, time_add (a time plus an integer count of Part units),
// diff_days and diff_seconds. Like every built-in, the text is a fixed
// spelling per dialect; the unit comes from a fixed list and every time
// and count is a bound value or an expression rendered by exprInto.
//
// Every engine computes in UTC: the sessions guardedsql opens are set to
// UTC (PostgreSQL TimeZone, MariaDB/MySQL time_zone), a bound time.Time is
// sent in UTC, and SQLite's date functions work in UTC.
func (r *renderer) timeFuncInto(f *fb, c *sqlast.Call) error {
	eng := r.d.Name()
	switch c.Fn.Name {
	case "now":
		f.s(map[string]string{
			"sqlite":   "datetime('now')",
			"postgres": "date_trunc('second', statement_timestamp())",
			"mysql":    "UTC_TIMESTAMP()",
		}[eng])
		return nil
	case "today":
		f.s(map[string]string{
			"sqlite":   "date('now')",
			"postgres": "CAST(statement_timestamp() AT TIME ZONE 'UTC' AS date)",
			"mysql":    "UTC_DATE()",
		}[eng])
		return nil
	case "time_add":
		return r.timeAddInto(f, c)
	case "diff_days":
		a, b, err := r.timePair(c)
		if err != nil {
			return err
		}
		switch eng {
		case "sqlite":
			// Julian days of two midnights differ by a whole number,
			// exactly representable.
			f.two("CAST(julianday(date(", a, ")) - julianday(date(", b, ")) AS INTEGER)")
		case "postgres":
			f.two("CAST(CAST(", a, " AS date) - CAST(", b, " AS date) AS bigint)")
		default:
			f.two("DATEDIFF(", a, ", ", b, ")")
		}
		return nil
	case "diff_seconds":
		a, b, err := r.timePair(c)
		if err != nil {
			return err
		}
		switch eng {
		case "sqlite":
			// unixepoch(..., 'subsec') has millisecond precision as a
			// double: rounding to whole milliseconds first keeps 1.000 s
			// from truncating to 0 s; the integer division then truncates
			// toward zero as the other engines do.
			f.two("(CAST(ROUND((unixepoch(", a, ", 'subsec') - unixepoch(", b, ", 'subsec')) * 1000) AS INTEGER) / 1000)")
		case "postgres":
			// EXTRACT(EPOCH ...) of a date or timestamp counts its
			// nominal seconds as UTC, of a timestamptz its instant.
			f.two("CAST(TRUNC(EXTRACT(EPOCH FROM ", a, ") - EXTRACT(EPOCH FROM ", b, ")) AS bigint)")
		default:
			f.two("TIMESTAMPDIFF(SECOND, ", b, ", ", a, ")")
		}
		return nil
	}
	return fmt.Errorf("%w: built-in function %q", ErrInvalid, c.Fn.Name)
}

// timeUnits are the units of time_add, with each dialect's spelling:
// SQLite's modifier word, PostgreSQL's interval and MySQL's INTERVAL unit.
var timeUnits = map[string][3]string{
	"day":    {"days", "1 day", "DAY"},
	"hour":   {"hours", "1 hour", "HOUR"},
	"minute": {"minutes", "1 minute", "MINUTE"},
	"second": {"seconds", "1 second", "SECOND"},
	"month":  {"months", "1 month", "MONTH"},
}

func (r *renderer) timeAddInto(f *fb, c *sqlast.Call) error {
	u, ok := timeUnits[c.Part]
	if !ok || len(c.Args) != 2 {
		return fmt.Errorf("%w: time arithmetic in %q", ErrInvalid, c.Part)
	}
	x, err := r.timeArg(c.Args[0])
	if err != nil {
		return err
	}
	n, err := r.expr(c.Args[1])
	if err != nil {
		return err
	}
	switch r.d.Name() {
	case "sqlite":
		// A date stays a date under whole days and months (as on MySQL;
		// PostgreSQL gives a timestamp at midnight, which scans and
		// compares the same); anything else becomes SQLite's
		// "YYYY-MM-DD HH:MM:SS". 'floor' clamps a month overflow to the
		// month's last day, as PostgreSQL and MySQL do.
		mod := func() {
			f.s("CAST(")
			f.frag(n)
			f.s(" AS TEXT) || ' ", u[0], "'")
			if c.Part == "month" {
				f.s(", 'floor'")
			}
		}
		if c.Part == "day" || c.Part == "month" {
			f.two("CASE WHEN length(", x, ") = 10 THEN date(", x, ", ")
			mod()
			f.s(") ELSE datetime(")
		} else {
			f.s("datetime(")
		}
		f.frag(x)
		f.s(", ")
		mod()
		f.s(")")
		if c.Part == "day" || c.Part == "month" {
			f.s(" END")
		}
	case "postgres":
		f.two("(", x, " + ", n, " * INTERVAL '"+u[1]+"')")
	default:
		f.two("DATE_ADD(", x, ", INTERVAL ", n, " "+u[2]+")")
	}
	return nil
}

func (r *renderer) timePair(c *sqlast.Call) (a, b engine.Frag, err error) {
	if len(c.Args) != 2 {
		return a, b, fmt.Errorf("%w: %s takes two arguments", ErrInvalid, c.Fn.Name)
	}
	if a, err = r.timeArg(c.Args[0]); err != nil {
		return a, b, err
	}
	b, err = r.timeArg(c.Args[1])
	return a, b, err
}

// timeArg renders an operand of a time function. A bound time.Time is
// sent in UTC with its type said where the engine would otherwise guess:
// SQLite text "YYYY-MM-DD HH:MM:SS[.fraction]" (the form its date
// functions read and write), PostgreSQL timestamptz, MySQL DATETIME(6).
func (r *renderer) timeArg(x sqlast.Expr) (engine.Frag, error) {
	var f fb
	if l, ok := x.(*sqlast.Lit); ok {
		if t, ok := l.V.V.(time.Time); ok {
			switch r.d.Name() {
			case "sqlite":
				f.arg(SQLiteTime(t))
			case "mysql":
				f.s("CAST(")
				f.arg(t.UTC())
				f.s(" AS DATETIME(6))")
			default:
				f.s("CAST(")
				f.arg(t.UTC())
				f.s(" AS timestamptz)")
			}
			return f.done(), nil
		}
	}
	if err := r.exprInto(&f, x); err != nil {
		return engine.Frag{}, err
	}
	return f.done(), nil
}

// SQLiteTime is the text a time.Time is sent as to SQLite in time
// expressions and comparisons: UTC, "YYYY-MM-DD HH:MM:SS" with a fraction
// of a second only when it has one, which orders as text as the times do
// and is what SQLite's datetime() writes.
func SQLiteTime(t time.Time) string {
	return t.UTC().Format("2006-01-02 15:04:05.999999999")
}

// bindTime is v as bound in a condition or an expression: on SQLite a
// time.Time becomes SQLiteTime's text, so that it compares with the text
// SQLite's date functions return (the driver's own form carries a zone
// suffix, "+00:00", that makes equal times compare unequal); on the other
// engines, and for every other value, v itself.
func (r *renderer) bindTime(v any) any {
	if t, ok := v.(time.Time); ok && r.d.Name() == "sqlite" {
		return SQLiteTime(t)
	}
	return v
}

// sqliteTimes makes every time.Time argument of p SQLiteTime's text, in
// its steps and in the statements its Run sends: stored, compared and
// computed, a time is then the same text on SQLite, ordered as the times
// are, instead of the driver's form with a zone suffix.
func sqliteTimes(p *Plan) {
	for i := range p.Steps {
		p.Steps[i].Args = sqliteArgs(p.Steps[i].Args)
	}
	if run := p.Run; run != nil {
		p.Run = func(ctx context.Context, env Env) (Output, error) {
			env.Q = sqliteTimeQuerier{env.Q}
			return run(ctx, env)
		}
	}
}

// sqliteArgs returns args with each time.Time replaced by its SQLiteTime
// text (args itself when it has none).
func sqliteArgs(args []any) []any {
	out := args
	for i, a := range args {
		if t, ok := a.(time.Time); ok {
			if &out[0] == &args[0] {
				out = slices.Clone(args)
			}
			out[i] = SQLiteTime(t)
		}
	}
	return out
}

type sqliteTimeQuerier struct{ q engine.Querier }

func (s sqliteTimeQuerier) Query(ctx context.Context, q string, args ...any) (engine.Rows, error) {
	return s.q.Query(ctx, q, sqliteArgs(args)...)
}

func (s sqliteTimeQuerier) Exec(ctx context.Context, q string, args ...any) (engine.Result, error) {
	return s.q.Exec(ctx, q, sqliteArgs(args)...)
}
