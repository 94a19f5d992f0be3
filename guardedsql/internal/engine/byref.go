package engine

import "github.com/tenantmcp/tenantmcp/internal/sqlast"

// RefCounter is implemented by a dialect whose guarded statements do not see
// every row of a table (PostgreSQL under row-level security), for the
// tables owned by reference (sqlast.Table.ByRef), through t's Referrers:
// ForeignRefs renders the number of rows outside the caller's scope that
// reference the row of t whose primary key is key; Claimable renders a
// condition true when no row references it or some row in the caller's
// scope does, and first serialises the transactions that claim the same
// key (so that two tenants cannot both find it unreferenced). Other
// dialects let the guard count with plain subqueries.
type RefCounter interface {
	ForeignRefs(t *sqlast.Table, key Frag) Frag
	Claimable(t *sqlast.Table, key Frag) Frag
}
