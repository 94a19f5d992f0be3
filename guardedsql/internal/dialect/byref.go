package dialect

import "github.com/tenantmcp/tenantmcp/internal/sqlast"

// RefCounter is implemented by a dialect whose guarded statements do not see
// every row of a table (PostgreSQL under row-level security), for the
// tables owned by reference (sqlast.Table.ByRef): RefCount renders the
// number of rows, in every tenant, that reference the row of t whose
// primary key is key, through t's Referrers. With lock, evaluating it
// first serialises the transactions that claim the same key (so that two
// tenants cannot both find it unreferenced). Other dialects let the guard
// count with plain subqueries.
type RefCounter interface {
	RefCount(t *sqlast.Table, key Frag, lock bool) Frag
}
