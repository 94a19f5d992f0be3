package guard

import (
	"fmt"

	sq "github.com/Masterminds/squirrel"

	"github.com/tenantmcp/tenantmcp/internal/guardfault"
	"github.com/tenantmcp/tenantmcp/internal/sqlast"
)

// writableGlobal reports whether guarded code may write the global table
// t (issue 25 §3).
//
// Invariant: a global table is read-only through the guard unless its
// declaration gives a reason it may be written (TableDef.GlobalWritable)
// and it does not look tenant-bound (no GlobalReason; builder refuses
// both together), so no write to it can reach or point at a tenant row.
func writableGlobal(t *sqlast.Table) bool {
	return guardfault.Off(guardfault.GlobalReadOnly) || (t.GlobalWritable != "" && t.GlobalReason == "")
}

// globalInsert renders a plain INSERT … VALUES into a writable global
// table: it has no tenant to check.
func (r *renderer) globalInsert(s *sqlast.Insert) (Plan, error) {
	t := s.Ref.Table
	r.seen[s.Ref] = true
	ib := sq.Insert(r.q(t.Name)).Columns(quoteAll(r, s.Cols)...)
	for _, row := range s.Rows {
		vals := make([]any, len(row))
		for i, v := range row {
			if err := checkValue(v); err != nil {
				return Plan{}, err
			}
			vals[i] = v.V
		}
		ib = ib.Values(vals...)
	}
	text, args, err := ib.PlaceholderFormat(r.d.Placeholders()).ToSql()
	if err != nil {
		return Plan{}, fmt.Errorf("%w: %v", ErrInternal, err)
	}
	return Plan{Kind: Insert, Steps: []Step{{SQL: text, Args: args}}, Atomic: len(s.Rows) > 1}, nil
}
