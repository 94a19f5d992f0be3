package conformance

import (
	"math/rand/v2"
	"slices"
	"sort"

	"github.com/tenantmcp/tenantmcp/scope"
)

// properties is the property table. Each has a primary criterion on the
// rows returned and on side effects; after every property the runner also
// compares the whole scratch database with the seed (no property may
// leave a change behind).
// register adds properties kept in other files (by their init functions)
// and keeps the table in id order whatever order the files initialise in.
func register(ps ...*property) {
	properties = append(properties, ps...)
	slices.SortStableFunc(properties, func(a, b *property) int { return a.id - b.id })
}

var properties = []*property{
	{id: 1, name: "scoped_read", title: "Scoped read returns only own rows", criterion: "keys = oracle set, every tenant x table", fn: propScopedRead},
	{id: 2, name: "cross_tenant_id", title: "Cross-tenant id in WHERE finds nothing", criterion: "0 rows; QueryRow ErrNotFound; IN list = own only", fn: propCrossTenantID},
	{id: 3, name: "joins", title: "Joins across tenant-bound tables", criterion: "pairs = oracle (inner, left, path, natural)", fn: propJoins},
	{id: 4, name: "subqueries", title: "Subqueries reach no other tenant", criterion: "IN/EXISTS/NOT IN = oracle; foreign IN empty", fn: propSubqueries},
	{id: 5, name: "aggregates", title: "Aggregates leak nothing", criterion: "COUNT/GROUP BY/MIN/MAX/SUM = oracle", fn: propAggregates},
	{id: 6, name: "pagination", title: "Pagination and ordering leak nothing", criterion: "pages partition own rows, in key order", fn: propPagination},
	{id: 7, name: "update_foreign", title: "UPDATE of a foreign row touches 0 rows", criterion: "0 affected; ExpectOne ErrNotFound; db = seed", fn: propUpdateForeign},
	{id: 8, name: "delete_foreign", title: "DELETE of a foreign row touches 0 rows", criterion: "0 affected, no error; db = seed", fn: propDeleteForeign},
	{id: 9, name: "insert_foreign_parent", title: "INSERT under a foreign parent rejected", criterion: "refused, word for word as under a missing parent; no row; own-parent control accepted", fn: propInsertForeignParent},
	{id: 10, name: "insert_foreign_root", title: "INSERT of a foreign root rejected", criterion: "refused; no row; granted control accepted", fn: propInsertForeignRoot},
	{id: 11, name: "hierarchy", title: "Hierarchical grant (chain sees hotels)", criterion: "upper = oracle = union of children; lower = self", fn: propHierarchy},
	{id: 12, name: "siblings", title: "Sibling isolation (hotels of one chain)", criterion: "0 sibling rows read; writes ErrNotFound", fn: propSiblings},
	{id: 13, name: "missing_scope", title: "Missing scope sends no statement", criterion: "ErrNoScope; observer sees 0 statements", fn: propMissingScope},
	{id: 14, name: "concurrent", title: "Concurrent mixed-tenant load", criterion: "0 foreign rows in 320 parallel ops", fn: propConcurrent},
	{id: 15, name: "pooled_context", title: "Pooled connection context never leaks", criterion: "1-conn pool: exact rows; idle conn has no scope", only: Postgres, onlyWhy: pgOnly, fn: propPooledContext},
	{id: 16, name: "rls_raw_sql", title: "RLS enforced for raw SQL as app role", criterion: "no scope: 0 rows; scoped = oracle; writes refused", only: Postgres, onlyWhy: pgOnly, fn: propRLSRaw},
	{id: 17, name: "startup_check", title: "Start-up check refuses bypass/missing policy", criterion: "CheckRLS: specific ErrRLS* (also a view, matview or child around RLS); postgres.New refuses", only: Postgres, onlyWhy: pgOnly, fn: propStartupCheck},
	{id: 59, name: "no_vacuous_pass", title: "No property passes on calls that failed", criterion: "per property and caller: failed <= half of calls; P20 succeeds as every tenant x role set", last: true, fn: propNoVacuous},
	{id: 18, name: "coverage", title: "Every tenant-bound table is covered", criterion: "each table queried, rows of >= 2 tenants", last: true, fn: propCoverage},
	{id: 19, name: "tool_inputs_tenant_free", title: "Tool input schemas are tenant-free", criterion: "no scope key listed; keyed input refused", fn: propToolInputs},
	{id: 20, name: "pii_canaries", title: "PII canaries never in tool output", criterion: "forbidden canaries absent; allowed ones seen", fn: propCanaries},
	{id: 21, name: "path_grants", title: "Path-consistent hierarchical grants", criterion: "own path = oracle; other ancestor/swapped: 0 rows, writes ErrNotFound", fn: propPathGrants},
	{id: 22, name: "grant_roles", title: "Per-grant reveal (roles belong to grants)", criterion: "role on A's grant shows no B canary; controls seen", fn: propGrantRoles},
	{id: 25, name: "nullable_composite_fk", title: "Nullable composite FK cannot move a row", criterion: "UPDATE/INSERT with a NULL key part: 0 foreign rows", fn: propNullableFK},
	{id: 26, name: "path_key_unique", title: "Scope paths reference keys only", criterion: "non-unique target: ErrFKTarget / ErrPathKey at Open", fn: propPathKey},
	{id: 27, name: "catalog_drift", title: "Graph matches the live catalog", criterion: "CheckCatalog clean; wrong global refused at Open", fn: propCatalog},
	{id: 28, name: "collation_exact", title: "Tenant keys compare byte-exactly", criterion: "ci collation refused, or ACME reads 0 acme rows", fn: propCollation},
	{id: 29, name: "typed_values", title: "Values typed by their column", criterion: "ErrType at Build; 7 never matches '7eleven'", fn: propTyped},
	{id: 35, name: "rls_signed_context", title: "RLS holds against raw SQL as the app role that sets its own context", criterion: "unsigned, forged, replayed (setting and exchange): 0 rows; signed controls = oracle", only: Postgres, onlyWhy: pgOnly, fn: propSignedContext},
	{id: 36, name: "engine_errors", title: "No engine error text reaches a client", criterion: "FK refusal = ErrReferenced EngineError; no engine text, no row value", fn: propEngineErrors},
	{id: 37, name: "policy_drift", title: "Policy drift is caught while serving", criterion: "altered policy: ErrRLSUnsafe naming the table within the interval; logged; recovers", only: Postgres, onlyWhy: pgOnly, fn: propPolicyDrift},
	{id: 48, name: "abandoned_recheck", title: "No abandoned call or busy pool stops other tenants", criterion: "cancelled call fails alone; saturated pool: no refusal, rows = oracle; no failed-check log", only: Postgres, onlyWhy: pgOnly, fn: propAbandonedRecheck},
	{id: 51, name: "migration_lock", title: "A migration's lock neither hangs calls nor lets them through unverified", criterion: "table locked: calls fail < 3s, IsUnavailable, none served, the lock named; served after", only: Postgres, onlyWhy: pgOnly, fn: propMigrationLock},
	{id: 38, name: "unique_oracle", title: "A unique key shared by tenants is reported and reveals no value", criterion: "listed by UniqueOracles; collision = ErrConflict without the foreign row's values", fn: propUniqueOracle},
	{id: 44, name: "window_partitions", title: "Window functions and scalar subqueries count own rows only", criterion: "row number, running sum, rank, partition and subquery counts = oracle", fn: propWindows},
}

// Properties lists the property table: number, subtest name, title and
// primary criterion, in order.
func Properties() []PropertyInfo {
	out := make([]PropertyInfo, len(properties))
	for i, p := range properties {
		out[i] = PropertyInfo{ID: p.id, Name: p.subtestName(), Title: p.title, Criterion: p.criterion, Only: p.only}
	}
	return out
}

// PropertyInfo describes one property of the table.
type PropertyInfo struct {
	ID        int
	Name      string // subtest name, e.g. "P07_update_foreign"
	Title     string
	Criterion string
	Only      Engine // "" for every engine
}

func propertyByID(id int) *property {
	for _, p := range properties {
		if p.id == id {
			return p
		}
	}
	return nil
}

func newRand(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, 0x5eed)) }

// deriveTenants picks tenants from the data when the Target names none:
// up to four ids of the root level, two sibling ids of each lower level,
// and one scope uniting a root id with a lower id of another root.
func deriveTenants(g *graph, o *oracle) []Tenant {
	ids := o.levelIDs()
	var out []Tenant
	root := g.levels[0].Name
	roots := ids[root]
	for _, id := range roots[:min(4, len(roots))] {
		out = append(out, Tenant{Name: root + " " + id, Grants: []scope.Grant{{Level: root, ID: id}}})
	}
	for i := 1; i < len(g.levels); i++ {
		upper, lower := g.levels[i-1].Name, g.levels[i].Name
		kids := map[string]map[string]bool{}
		for _, name := range g.bound {
			for _, lv := range o.lv[name] {
				u, okU := lv[upper]
				l, okL := lv[lower]
				if okU && okL {
					if kids[u] == nil {
						kids[u] = map[string]bool{}
					}
					kids[u][l] = true
				}
			}
		}
		ups := make([]string, 0, len(kids))
		for u := range kids {
			ups = append(ups, u)
		}
		sort.Strings(ups)
		for _, u := range ups {
			ls := sortedKeys(kids[u])
			if len(ls) < 2 {
				continue
			}
			for _, l := range ls[:2] {
				out = append(out, Tenant{Name: lower + " " + l, Grants: []scope.Grant{{Level: lower, ID: l}}})
			}
			// A union: this lower id plus another root id.
			if i == 1 && len(roots) > 1 {
				other := roots[0]
				if other == u {
					other = roots[1]
				}
				out = append(out, Tenant{Name: "union", Grants: []scope.Grant{{Level: root, ID: other}, {Level: lower, ID: ls[0]}}})
			}
			break
		}
	}
	// A schema of one level (or whose lower levels gave no union) still
	// gets a scope of two tenants, with a third left out so that it has
	// foreign rows to miss.
	if !slices.ContainsFunc(out, func(t Tenant) bool { return len(t.Grants) > 1 }) && len(roots) >= 3 {
		out = append(out, Tenant{Name: "union", Grants: []scope.Grant{{Level: root, ID: roots[0]}, {Level: root, ID: roots[2]}}})
	}
	return slices.Clip(out)
}
