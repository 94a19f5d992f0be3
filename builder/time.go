package builder

import (
	"fmt"
	"time"

	"github.com/tenantmcp/tenantmcp/internal/sqlast"
)

// Time expressions: the current time, a time plus or minus an interval,
// the difference of two times, truncation (DateTrunc, scalar.go). They are
// built-in functions of the scalar registry (sqlast.Call with a Builtin
// Func), which the guard spells per dialect; every number and time in them
// is a bound value.
//
// All of them work in UTC on every engine: guardedsql sets the session time
// zone of the connections it opens to UTC (PostgreSQL TimeZone, MariaDB and
// MySQL time_zone), a bound time.Time is converted to UTC, and a time
// without a zone (a DATE, a DATETIME, SQLite text) is read as UTC.

// ErrNotTime is wrapped (with ErrType and ErrInvalid) by Build when a time
// expression (Now's arithmetic, an interval, DiffDays, DiffSeconds) is
// given an operand that is not a date or time: a column whose declared
// type is text, a number, a bound value that is neither a time.Time nor a
// date/time string. Declare a date column's type (TableDef.Types
// "date", "timestamp"...) where the engine stores it as text (SQLite).
var ErrNotTime = fmt.Errorf("%w: not a date or time", ErrType)

// Interval is an amount of one calendar or clock unit, added to or
// subtracted from a time with Expr.Add and Expr.Sub:
// t.Col("check_in").Add(builder.Days(3)). Build it with Days, Hours,
// Minutes, Seconds or Months.
type Interval struct {
	unit string
	n    any
	err  error
}

// interval builds an Interval of unit; n is an integer (any Go integer
// type, bound) or an integer Expr (a column: check_in + nights days).
func interval(unit string, n any) Interval {
	if e, ok := n.(Expr); ok {
		if err := e.check(); err != nil {
			return Interval{err: err}
		}
		if k := kindOf(e.x); k != sqlast.AnyKind && k != sqlast.IntVal {
			return Interval{err: fmt.Errorf("%w: an interval of %ss counts with an integer, not %s values", ErrType, unit, k)}
		}
		return Interval{unit: unit, n: e}
	}
	bv, err := bindValue(n)
	if err != nil {
		return Interval{err: err}
	}
	if _, ok := bv.V.(int64); !ok {
		return Interval{err: fmt.Errorf("%w: an interval of %ss counts with an integer, not a %T value", ErrType, unit, n)}
	}
	return Interval{unit: unit, n: bv.V}
}

// Days is n days (n an integer or an integer Expr). A day is a calendar
// day; in UTC every day has 24 hours.
func Days(n any) Interval { return interval("day", n) }

// Hours is n hours.
func Hours(n any) Interval { return interval("hour", n) }

// Minutes is n minutes.
func Minutes(n any) Interval { return interval("minute", n) }

// Seconds is n seconds (whole seconds).
func Seconds(n any) Interval { return interval("second", n) }

// Months is n calendar months. A day past the end of the resulting month
// is clamped to its last day on every engine: January 31 plus one month
// is February 28 (29 in a leap year), March 31 minus one month likewise.
func Months(n any) Interval { return interval("month", n) }

// The built-in time functions; the guard spells each per dialect
// (guardedsql/internal/guard/scalar.go).
var (
	fnNow         = &sqlast.Func{Name: "now", Result: sqlast.TimeVal, Builtin: true}
	fnToday       = &sqlast.Func{Name: "today", Result: sqlast.TimeVal, Builtin: true}
	fnTimeAdd     = &sqlast.Func{Name: "time_add", Args: []sqlast.ValKind{sqlast.TimeVal, sqlast.IntVal}, Result: sqlast.TimeVal, Builtin: true}
	fnDiffDays    = &sqlast.Func{Name: "diff_days", Args: []sqlast.ValKind{sqlast.TimeVal, sqlast.TimeVal}, Result: sqlast.IntVal, Builtin: true}
	fnDiffSeconds = &sqlast.Func{Name: "diff_seconds", Args: []sqlast.ValKind{sqlast.TimeVal, sqlast.TimeVal}, Result: sqlast.IntVal, Builtin: true}
)

func init() {
	for _, fn := range []*sqlast.Func{fnNow, fnToday, fnTimeAdd, fnDiffDays, fnDiffSeconds} {
		builtins[fn.Name] = true
	}
}

// Now is the current time in UTC, to the second: the time the statement
// started on every engine (PostgreSQL statement_timestamp(), not the
// transaction's start; MariaDB/MySQL UTC_TIMESTAMP(); SQLite
// datetime('now')).
func Now() Expr { return Expr{x: &sqlast.Call{Fn: fnNow}} }

// Today is the current date in UTC (PostgreSQL CURRENT_DATE at UTC,
// MariaDB/MySQL UTC_DATE(), SQLite date('now')).
func Today() Expr { return Expr{x: &sqlast.Call{Fn: fnToday}} }

// timeOperand checks that v can be a time: an Expr whose kind is time or
// unknown, a time.Time, or a string holding an ISO-8601 date or time,
// which is parsed here (as UTC when it has no zone) and bound as a
// time.Time. Anything else is refused with ErrNotTime, naming what.
func timeOperand(v any, what string) (sqlast.Expr, error) {
	if e, ok := v.(Expr); ok {
		if err := e.check(); err != nil {
			return nil, err
		}
		if k := kindOf(e.x); k != sqlast.AnyKind && k != sqlast.TimeVal {
			return nil, fmt.Errorf("%w: %s is %s%s", ErrNotTime, what, k, colName(e.x))
		}
		return e.x, nil
	}
	bv, err := bindValue(v)
	if err != nil {
		return nil, err
	}
	switch x := bv.V.(type) {
	case nil:
	case time.Time:
		bv.V = x.UTC()
	case string:
		t, ok := ParseTime(x)
		if !ok {
			return nil, fmt.Errorf("%w: %s is a string that is not an ISO-8601 date or time", ErrNotTime, what)
		}
		bv.V = t
	default:
		return nil, fmt.Errorf("%w: %s is a %T value", ErrNotTime, what, v)
	}
	return &sqlast.Lit{V: bv}, nil
}

// colName names x for an error when it is a column (" (column t.c)").
func colName(x sqlast.Expr) string {
	if c, ok := x.(*sqlast.Col); ok {
		return fmt.Sprintf(" (column %s.%s)", c.Ref.Table.Name, c.Name)
	}
	return ""
}

// timeLayouts are the text forms of a date or time ParseTime reads.
var timeLayouts = []string{
	time.DateOnly,
	time.DateTime,
	"2006-01-02 15:04:05.999999999",
	"2006-01-02T15:04:05.999999999",
	"2006-01-02 15:04:05.999999999Z07:00",
	time.RFC3339Nano,
}

// ParseTime reads the text forms of dates and times the engines return
// and accept ("2026-01-05", "2026-01-05 10:00:00", "2026-01-05T10:00:00Z",
// with or without a fraction of a second and a zone), as a time in UTC (a
// form without a zone is taken as UTC). It reports false for anything
// else.
func ParseTime(s string) (time.Time, bool) {
	for _, l := range timeLayouts {
		if t, err := time.Parse(l, s); err == nil {
			return t.UTC(), true
		}
	}
	return time.Time{}, false
}

// addInterval is e + sign·iv.
func (e Expr) addInterval(iv Interval, sign int64) Expr {
	if iv.err != nil {
		return Expr{err: iv.err}
	}
	if iv.unit == "" {
		return Expr{err: invalid("zero Interval: build it with Days, Hours, Minutes, Seconds or Months")}
	}
	x, err := timeOperand(e, "the time an interval is added to")
	if err != nil {
		return Expr{err: err}
	}
	var n sqlast.Expr
	switch v := iv.n.(type) {
	case int64:
		n = &sqlast.Lit{V: sqlast.Value{V: sign * v}}
	case Expr:
		n = v.x
		if sign < 0 {
			n = &sqlast.Arith{Op: sqlast.Mul, X: v.x, Y: &sqlast.Lit{V: sqlast.Value{V: int64(-1)}}}
		}
	}
	return Expr{x: &sqlast.Call{Fn: fnTimeAdd, Part: iv.unit, Args: []sqlast.Expr{x, n}}}
}

// DiffDays is the number of calendar days from b to a (a − b, negative
// when a is earlier), counting the UTC dates only: from 2026-01-05 23:59
// to 2026-01-06 00:01 is one day. a and b are time Exprs, time.Time
// values or ISO-8601 strings.
func DiffDays(a, b any) Expr { return diff(fnDiffDays, a, b) }

// DiffSeconds is the number of seconds from b to a (a − b), whole seconds
// truncated toward zero.
func DiffSeconds(a, b any) Expr { return diff(fnDiffSeconds, a, b) }

func diff(fn *sqlast.Func, a, b any) Expr {
	xa, err := timeOperand(a, "the first argument of "+fn.Name)
	if err != nil {
		return Expr{err: err}
	}
	xb, err := timeOperand(b, "the second argument of "+fn.Name)
	if err != nil {
		return Expr{err: err}
	}
	return Expr{x: &sqlast.Call{Fn: fn, Args: []sqlast.Expr{xa, xb}}}
}

// TruncDay is the date of e (its time of day dropped), as a date:
// DateTrunc(PartDay, e).
func TruncDay(e Expr) Expr { return DateTrunc(PartDay, e) }

// TruncMonth is the first day of e's month, as a date:
// DateTrunc(PartMonth, e).
func TruncMonth(e Expr) Expr { return DateTrunc(PartMonth, e) }

// ColumnKinds returns the kind of each result column of q, in order, as
// far as the schema says (KindAny where it does not): package guardedsql
// uses it to read a time column scanned into a *any as a time.Time on
// every engine.
func (q Query) ColumnKinds() []Kind {
	if q.s == nil {
		return nil
	}
	out := make([]Kind, len(q.sel().Items))
	for i, it := range q.sel().Items {
		out[i] = Kind(kindOf(it.X))
	}
	return out
}
