package builder

import (
	"slices"

	"github.com/tenantmcp/tenantmcp/internal/sqlast"
)

// setExpr is the value of a SetExpr assignment in UpdateBuilder.set.
type setExpr struct{ e Expr }

// SetExpr assigns the expression e to column col, computed by the engine
// from the row's current values: SetExpr("hits", t.Col("hits").Add(1)) is
// the atomic SET hits = hits + ?, which loses no increment however many
// callers run it at once.
//
// e may read only the target's own columns and bound values: no other
// table, no subquery, no aggregate or window. col must not be a scope
// column (a level column, or a column of a foreign key on the table's
// scope path): Build refuses that with ErrScopeColumn, because the guard
// checks a scope column's new value, which an expression does not give.
func (b UpdateBuilder) SetExpr(col string, e Expr) UpdateBuilder {
	b.set = append(slices.Clip(b.set), setSpec{col, setExpr{e}})
	return b
}

// assign validates the expression for column col of the target ref.
func (se setExpr) assign(ref *sqlast.Ref, col string) (sqlast.Expr, error) {
	if err := se.e.check(); err != nil {
		return nil, err
	}
	t := ref.Table
	if !t.HasColumn(col) {
		return nil, invalid("table %s has no column %q", t.Name, col)
	}
	if isScopeColumn(t, col) {
		return nil, invalidScope(t.Name, col)
	}
	v := newScopeCheck()
	if err := v.declare(ref); err != nil {
		return nil, err
	}
	if err := v.expr(se.e.x, false); err != nil {
		return nil, err
	}
	if len(v.outer) > 0 || len(v.refs) != 1 {
		return nil, invalid("SetExpr on %s.%s may read only %s's own columns (no other table, no subquery)", t.Name, col, t.Name)
	}
	if k, ck := kindOf(se.e.x), t.ColumnValKind(col); k != sqlast.AnyKind && ck != sqlast.AnyKind && k != ck && !(ck == sqlast.RealVal && k == sqlast.IntVal) {
		return nil, invalid("SetExpr on %s.%s: the column holds %s values, the expression yields %s", t.Name, col, ck, k)
	}
	return se.e.x, nil
}

// isScopeColumn reports whether col of t decides which tenant a row belongs
// to: one of t's level columns or a column of one of its tenant foreign
// keys. Package guardedsql's guard applies the same rule.
func isScopeColumn(t *sqlast.Table, col string) bool {
	if t.LevelOf(col) != nil {
		return true
	}
	for _, fk := range t.TenantFKs() {
		if slices.Contains(fk.Cols, col) {
			return true
		}
	}
	return false
}

func invalidScope(table, col string) error {
	return &scopeColErr{table: table, col: col}
}

type scopeColErr struct{ table, col string }

func (e *scopeColErr) Error() string {
	return ErrScopeColumn.Error() + ": " + e.table + "." + e.col + " decides the row's tenant; assign it a value with Set"
}

func (e *scopeColErr) Unwrap() error { return ErrScopeColumn }
