package builder

import (
	"slices"

	"github.com/tenantmcp/tenantmcp/internal/sqlast"
)

// WindowSpec is the OVER (...) clause of a window function: its partition
// and its order. The zero WindowSpec (or Window()) is one partition of
// every row, unordered. The guard confines the query's tables as always, so
// a window only ever sees rows in scope: a foreign row never shifts a rank
// or a running sum.
type WindowSpec struct {
	part  []Expr
	order []Order
}

// Window starts a window specification.
func Window() WindowSpec { return WindowSpec{} }

// PartitionBy adds partitioning expressions.
func (w WindowSpec) PartitionBy(es ...Expr) WindowSpec {
	w.part = append(slices.Clip(w.part), es...)
	return w
}

// OrderBy adds ordering terms. With an order, an aggregate is a running
// one: over the rows of its partition up to the current row and its peers.
func (w WindowSpec) OrderBy(os ...Order) WindowSpec {
	w.order = append(slices.Clip(w.order), os...)
	return w
}

// RankFunc is a ranking window function awaiting its Over clause.
type RankFunc struct{ fn sqlast.WinFn }

// RowNumber is ROW_NUMBER(): the row's position in its partition.
func RowNumber() RankFunc { return RankFunc{sqlast.RowNumber} }

// Rank is RANK(): 1 + the number of rows ordered strictly before the row.
func Rank() RankFunc { return RankFunc{sqlast.Rank} }

// DenseRank is DENSE_RANK(): RANK without gaps.
func DenseRank() RankFunc { return RankFunc{sqlast.DenseRank} }

// Over applies the ranking function to the window w.
func (f RankFunc) Over(w WindowSpec) Expr {
	if f.fn == "" {
		return Expr{err: invalid("zero RankFunc")}
	}
	return window(&sqlast.Window{Fn: f.fn}, w)
}

// Over turns the aggregate e (Sum, Avg, Count, CountAll, Min, Max) into a
// window function over w: Sum(x).Over(Window().PartitionBy(h).OrderBy(d))
// is a running sum per h. Window functions are allowed in the select list
// and in ORDER BY only; Build refuses them elsewhere.
func (e Expr) Over(w WindowSpec) Expr {
	if err := e.check(); err != nil {
		return Expr{err: err}
	}
	a, ok := e.x.(*sqlast.Agg)
	if !ok {
		return Expr{err: invalid("Over applies to an aggregate (Sum, Count...), not to %T", e.x)}
	}
	return window(&sqlast.Window{Fn: sqlast.WinFn(a.Fn), Arg: a.Arg, Distinct: a.Distinct}, w)
}

func window(x *sqlast.Window, w WindowSpec) Expr {
	if x.Distinct {
		return Expr{err: invalid("DISTINCT in a window aggregate is not supported by PostgreSQL or MySQL")}
	}
	for _, p := range w.part {
		if err := p.check(); err != nil {
			return Expr{err: err}
		}
		x.PartitionBy = append(x.PartitionBy, p.x)
	}
	for _, o := range w.order {
		if o.err != nil {
			return Expr{err: o.err}
		}
		x.OrderBy = append(x.OrderBy, o.o)
	}
	return Expr{x: x}
}
