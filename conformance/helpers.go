package conformance

import (
	"database/sql/driver"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"

	"github.com/tenantmcp/tenantmcp/builder"
	"github.com/tenantmcp/tenantmcp/scope"
)

// ref returns a reference to table under alias.
func (r *runner) ref(table, alias string) builder.TableRef {
	return r.sch.Table(table).As(alias)
}

// keyCols selects the primary-key columns of t from ref.
func keyCols(ref builder.TableRef, t *tinfo) []builder.Selectable {
	out := make([]builder.Selectable, len(t.pk))
	for i, c := range t.pk {
		out[i] = ref.Col(c)
	}
	return out
}

// eqRow is the predicate "cols of ref equal the values of row's cols".
func eqRow(ref builder.TableRef, cols []string, row Row, rowCols []string) builder.Pred {
	ps := make([]builder.Pred, len(cols))
	for i, c := range cols {
		ps[i] = ref.Col(c).Eq(row[rowCols[i]])
	}
	if len(ps) == 1 {
		return ps[0]
	}
	return builder.And(ps...)
}

// pkIs is the predicate "ref's primary key is row's".
func pkIs(ref builder.TableRef, t *tinfo, row Row) builder.Pred {
	return eqRow(ref, t.pk, row, t.pk)
}

// q, i, u and d take a builder's Build result or stop the property: a
// statement the suite cannot build is a bug in the suite or a graph it
// does not support, never a pass.
func (p *pt) q(v builder.Query, err error) builder.Query   { p.built(err); return v }
func (p *pt) i(v builder.Insert, err error) builder.Insert { p.built(err); return v }
func (p *pt) u(v builder.Update, err error) builder.Update { p.built(err); return v }
func (p *pt) d(v builder.Delete, err error) builder.Delete { p.built(err); return v }

func (p *pt) built(err error) {
	if err != nil {
		p.Fatalf("building a statement: %v", err)
	}
}

// pick returns up to n elements of s chosen at random, in s's order.
func pick[T any](rng *rand.Rand, s []T, n int) []T {
	if len(s) <= n {
		return slices.Clone(s)
	}
	idx := rng.Perm(len(s))[:n]
	slices.Sort(idx)
	out := make([]T, n)
	for i, j := range idx {
		out[i] = s[j]
	}
	return out
}

// tuple joins canonical column values into a key.
func tuple(parts ...string) string { return strings.Join(parts, "\x1f") }

// nullKey is the key of a row of n NULL columns (a LEFT JOIN miss).
func nullKey(n int) string {
	parts := make([]string, n)
	for i := range parts {
		parts[i] = canon(nil)
	}
	return tuple(parts...)
}

// number normalises an aggregate's value (int64, float64, decimal text,
// or a driver type such as PostgreSQL's numeric) to canonical text.
func number(v any) string {
	if vr, ok := v.(driver.Valuer); ok {
		dv, err := vr.Value()
		if err == nil {
			v = dv
		}
	}
	switch x := v.(type) {
	case nil:
		return canon(nil)
	case []byte:
		return number(string(x))
	case string:
		if f, err := strconv.ParseFloat(x, 64); err == nil {
			return canonFloat(f)
		}
		return x
	}
	return canon(v)
}

// isInt reports whether every value of col in rows is an integer (the
// suite makes fresh keys for such columns by counting up).
func isInt(rows []Row, col string) bool {
	if len(rows) == 0 {
		return false
	}
	for _, r := range rows {
		switch r[col].(type) {
		case int, int8, int16, int32, int64, uint, uint8, uint16, uint32, uint64:
		default:
			return false
		}
	}
	return true
}

func asInt(v any) int64 {
	n, _ := strconv.ParseInt(canon(v), 10, 64)
	return n
}

func grantsString(gs []scope.Grant) string {
	var parts []string
	for _, g := range gs {
		parts = append(parts, g.String())
	}
	return "{" + strings.Join(parts, " ") + "}"
}

func (tn Tenant) String() string { return fmt.Sprintf("%s %s", tn.Name, grantsString(tn.Grants)) }

// singleFK reports whether f is a one-column foreign key.
func singleFK(f *fkey) bool { return len(f.cols) == 1 }
