package guardedsql_test

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tenantmcp/tenantmcp/builder"
	"github.com/tenantmcp/tenantmcp/guardedsql"
	"github.com/tenantmcp/tenantmcp/guardedsql/postgres"
	"github.com/tenantmcp/tenantmcp/scope"
)

// TestPlansGenericPlanIsolation: a guarded statement is prepared once per
// connection (pgx's statement cache) and, after PostgreSQL's five custom
// plans (plan_cache_mode auto), runs on one generic plan for every tenant:
// nothing in the policies (the verified scope is read by a STABLE function
// in InitPlans at execution time) or in the guard's predicates (one typed
// array parameter per level) ties a plan to a tenant. With that one plan
// shared, and with a generic plan from the first execution
// (force_generic_plan, planned before any tenant's values were seen), each
// of two tenants whose ids interleave in every table sees exactly its own
// rows, through the guard and the policies (guarded) and through the
// policies alone (rls-only); and in the cached plan the verifying function
// is still evaluated once per statement, never per row (scopeReadOnce).
func TestPlansGenericPlanIsolation(t *testing.T) {
	h := newPostgresHotel(t, enginePostgres.dsn(t), seedModel(2, 3, 4, 3))
	ctx := context.Background()
	tenants := []scope.Grant{chainG("acme"), chainG("globex")}
	bk := h.sch.Table("bookings")
	ht := h.sch.Table("hotels")
	queries := map[string]struct {
		q    builder.Query
		want func(v visible) map[any]bool
	}{
		"bookings": {builder.Must(builder.Select(bk.Col("id")).From(bk).OrderBy(bk.Col("id").Asc()).Build()), func(v visible) map[any]bool { return v.bookings }},
		"hotels":   {builder.Must(builder.Select(ht.Col("id")).From(ht).OrderBy(ht.Col("id").Asc()).Build()), func(v visible) map[any]bool { return v.hotels }},
	}
	// The two tenants' ids interleave (seedModel deals hotels, rooms and
	// bookings round-robin), so a plan that kept one tenant's id range
	// would show it.
	a, g := keysOf(queries["bookings"].want(h.m.visible(tenants[:1]))), keysOf(queries["bookings"].want(h.m.visible(tenants[1:])))
	if len(a) < 2 || len(g) < 2 || !interleaved(a, g) {
		t.Fatalf("the tenants' bookings do not interleave: %v %v", a, g)
	}
	const calls = 12
	for _, mode := range []string{"auto", "force_generic_plan"} {
		for _, rlsOnly := range []bool{false, true} {
			name := mode + "/guarded"
			if rlsOnly {
				name = mode + "/rls-only"
			}
			t.Run(name, func(t *testing.T) {
				cfg := h.appCfg.Copy()
				cfg.MaxConns = 1 // every call on the one connection: its statement cache, its plans
				cfg.ConnConfig.RuntimeParams["plan_cache_mode"] = mode
				pool := pgConnect(t, cfg)
				defer pool.Close()
				db, err := postgres.New(ctx, pool, h.sch, guardedsql.Options{Engine: postgres.Options{Key: h.key, RLSOnly: rlsOnly}})
				if err != nil {
					t.Fatal(err)
				}
				for qname, qc := range queries {
					for i := range calls {
						grant := tenants[i%2]
						rows, err := db.Query(grantCtx(grant), qc.q)
						if err != nil {
							t.Fatal(err)
						}
						got, err := guardedsql.CollectRows(rows, guardedsql.Scalar[int64])
						if err != nil {
							t.Fatal(err)
						}
						var ids []string
						for _, id := range got {
							ids = append(ids, fmt.Sprint(id))
						}
						slices.Sort(ids)
						if want := keysOf(qc.want(h.m.visible([]scope.Grant{grant}))); len(ids) == 0 || !slices.Equal(ids, want) {
							t.Fatalf("%s call %d as %s: got %v, want %v", qname, i+1, grant.ID, ids, want)
						}
					}
					text, args, err := db.Render(grantCtx(tenants[0]), qc.q)
					if err != nil {
						t.Fatal(err)
					}
					var generic, custom int64
					err = pool.QueryRow(ctx, `SELECT generic_plans, custom_plans FROM pg_prepared_statements WHERE statement = $1`,
						pgx.QueryExecModeSimpleProtocol, text).Scan(&generic, &custom)
					if err != nil {
						t.Fatalf("%s: the guarded statement is not prepared on the connection: %v", qname, err)
					}
					// auto: five custom plans, then the generic plan for
					// every later call, whichever tenant makes it; a
					// statement without parameters (rls-only: the scope is
					// only in the policies) is generic from the start.
					wantCustom := int64(5)
					if mode == "force_generic_plan" || len(args) == 0 {
						wantCustom = 0
					}
					if custom != wantCustom || generic != calls-wantCustom {
						t.Errorf("%s: %d generic and %d custom plans over %d calls, want %d and %d", qname, generic, custom, calls, calls-wantCustom, wantCustom)
					}
					scopeReadOnce(t, pool, h.key, encodeDoc(guardedsql.SchemaLevelsForTest(h.sch), tenants[1:]), text, args)
				}
			})
		}
	}
}

// scopeReadOnce checks, on the plan the connection of pool has cached for
// the statement text (the generic plan, after the calls above), executed
// once more with args under a scope signed for doc, that the verifying
// function is evaluated once per statement: it appears only in the output
// of nodes under an InitPlan or a hashed SubPlan, each executed at most
// once, never in a filter or an index condition (evaluated per row).
func scopeReadOnce(t *testing.T, pool *pgxpool.Pool, key postgres.Key, doc, text string, args []any) {
	t.Helper()
	ctx := context.Background()
	conn, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	var name string
	if err := conn.QueryRow(ctx, `SELECT name FROM pg_prepared_statements WHERE statement = $1`, pgx.QueryExecModeSimpleProtocol, text).Scan(&name); err != nil {
		t.Fatal(err)
	}
	exec := "EXECUTE " + name
	if len(args) > 0 {
		var ps []string
		for _, a := range args {
			ps = append(ps, sqlLiteral(a))
		}
		exec += "(" + strings.Join(ps, ", ") + ")"
	}
	out := explainIn(t, conn.Conn(), key, doc, "EXPLAIN (ANALYZE, VERBOSE, FORMAT JSON) "+exec)
	var plans []struct {
		Plan planNode `json:"Plan"`
	}
	if err := json.Unmarshal([]byte(out), &plans); err != nil || len(plans) != 1 {
		t.Fatalf("EXPLAIN JSON: %v\n%s", err, out)
	}
	const fn = "tenantmcp_scope_doc(" // the default namespace's verifying function
	// A hashed SubPlan is named so only where it is used: "(hashed SubPlan 4)".
	hashed := map[string]bool{}
	var conds func(n planNode)
	conds = func(n planNode) {
		for _, e := range []string{n.Filter, n.JoinFilter, n.IndexCond, n.RecheckCond, n.HashCond} {
			for _, m := range hashedSubPlan.FindAllStringSubmatch(e, -1) {
				hashed[m[1]] = true
			}
		}
		for _, c := range n.Plans {
			conds(c)
		}
	}
	conds(plans[0].Plan)
	seen := 0
	var walk func(n planNode, once bool)
	walk = func(n planNode, once bool) {
		once = once || n.ParentRelationship == "InitPlan" || hashed[n.SubplanName]
		for cond, e := range map[string]string{"Filter": n.Filter, "Join Filter": n.JoinFilter, "Index Cond": n.IndexCond, "Recheck Cond": n.RecheckCond, "Hash Cond": n.HashCond} {
			if strings.Contains(e, fn) {
				t.Errorf("%s in the %s of a %s node: evaluated per row", fn, cond, n.NodeType)
			}
		}
		if strings.Contains(fmt.Sprint(n.Output, n.FunctionCall), fn) {
			seen++
			if !once || n.ActualLoops > 1 {
				t.Errorf("%s evaluated by a %s node %d times, outside an InitPlan or hashed SubPlan (%s %s)", fn, n.NodeType, int(n.ActualLoops), n.ParentRelationship, n.SubplanName)
			}
		}
		for _, c := range n.Plans {
			walk(c, once)
		}
	}
	walk(plans[0].Plan, false)
	if seen == 0 {
		t.Fatalf("%s not found in the plan of %s", fn, text)
	}
}

var hashedSubPlan = regexp.MustCompile(`hashed (SubPlan \d+)`)

// planNode is the part of a node of EXPLAIN (FORMAT JSON) scopeReadOnce
// reads.
type planNode struct {
	NodeType           string     `json:"Node Type"`
	ParentRelationship string     `json:"Parent Relationship"`
	SubplanName        string     `json:"Subplan Name"`
	ActualLoops        float64    `json:"Actual Loops"`
	Output             []string   `json:"Output"`
	FunctionCall       string     `json:"Function Call"`
	Filter             string     `json:"Filter"`
	JoinFilter         string     `json:"Join Filter"`
	IndexCond          string     `json:"Index Cond"`
	RecheckCond        string     `json:"Recheck Cond"`
	HashCond           string     `json:"Hash Cond"`
	Plans              []planNode `json:"Plans"`
}

// interleaved reports whether neither sorted id list lies wholly before
// the other (ids compared as numbers).
func interleaved(a, b []string) bool {
	num := func(s []string) (lo, hi int64) {
		lo, hi = 1<<62, -1
		for _, x := range s {
			var v int64
			fmt.Sscan(x, &v)
			lo, hi = min(lo, v), max(hi, v)
		}
		return lo, hi
	}
	alo, ahi := num(a)
	blo, bhi := num(b)
	return alo < bhi && blo < ahi
}
