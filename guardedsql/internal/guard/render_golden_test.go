package guard

import (
	"flag"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/tenantmcp/tenantmcp/builder"
	"github.com/tenantmcp/tenantmcp/guardedsql/internal/engine"
	"github.com/tenantmcp/tenantmcp/guardedsql/internal/engine/mysql"
	"github.com/tenantmcp/tenantmcp/guardedsql/internal/engine/postgres"
	"github.com/tenantmcp/tenantmcp/guardedsql/internal/engine/sqlite"
	"github.com/tenantmcp/tenantmcp/internal/sqlast"
	"github.com/tenantmcp/tenantmcp/scope"
	"github.com/tenantmcp/tenantmcp/scope/scopetest"
)

var updateGolden = flag.Bool("update", false, "rewrite testdata/render.golden")

// goldenStatements are statements of every kind the renderer's text
// builders touch: select lists, joins with elided and path-joined guards,
// column and value comparisons, BETWEEN, IN, IS NULL, subqueries,
// GROUP BY, ORDER BY, LIMIT, and the writes.
func goldenStatements(t *testing.T) map[string]builder.Statement {
	h, r, b := sch.Table("hotels").As("h"), sch.Table("rooms").As("r"), sch.Table("bookings").As("b")
	r2, b2 := sch.Table("rooms").As("rm"), sch.Table("bookings").As("bk")
	sub := sch.Table("rooms").As("s")
	ins, err := builder.InsertInto(sch.Table("rooms")).Columns("id", "hotel_id", "number").Values(int64(7), int64(12), "101").Build()
	if err != nil {
		t.Fatal(err)
	}
	ut, dt := sch.Table("rooms"), sch.Table("bookings")
	upd, err := builder.UpdateTable(ut).Set("number", "102").Where(ut.Col("id").Eq(int64(7))).Build()
	if err != nil {
		t.Fatal(err)
	}
	del, err := builder.DeleteFrom(dt).Where(dt.Col("id").Eq(int64(3))).Build()
	if err != nil {
		t.Fatal(err)
	}
	q := func(sb builder.SelectBuilder) builder.Statement { return builder.Must(sb.Build()) }
	return map[string]builder.Statement{
		"one table": q(builder.Select(b.Col("id")).From(b)),
		"joins": q(builder.Select(b.Col("id"), h.Col("id"), r.Col("number"), h.Col("chain_id")).From(b).
			Join(r, r.Col("id").EqCol(b.Col("room_id"))).Join(h, h.Col("id").EqCol(r.Col("hotel_id"))).
			Where(r.Col("number").Ge("100"), r.Col("number").Lt("200"), b.Col("id").Ne(int64(4))).
			OrderBy(r.Col("number").Desc(), b.Col("id").Asc()).Limit(50).Offset(10)),
		"left join and null": q(builder.Select(r2.Col("id"), b2.Col("id")).From(r2).
			LeftJoin(b2, b2.Col("room_id").EqCol(r2.Col("id"))).Where(b2.Col("id").IsNull())),
		"between in subquery": q(builder.Select(b.Col("id")).From(b).Where(
			b.Col("id").Between(int64(1), int64(9)), b.Col("id").In(int64(1), int64(2), int64(3)),
			b.Col("room_id").InQuery(builder.Must(builder.Select(sub.Col("id")).From(sub).Where(sub.Col("number").Eq("101")).Build())))),
		"group by": q(builder.Select(r.Col("hotel_id"), builder.CountAll()).From(r).GroupBy(r.Col("hotel_id"))),
		"insert":   ins,
		"update":   upd,
		"delete":   del,
	}
}

// TestRenderGolden renders goldenStatements for every dialect, for scopes
// of one level, another, two grants and a grant within an ancestor, with
// and without the precomputed quoted names and the join-aware rewrites,
// and compares the SQL and its arguments with testdata/render.golden
// (written by the renderer before its text builders were reworked for
// fewer allocations, so a change of one byte fails). It also checks that
// the quoted names of Options.Quoted change nothing.
func TestRenderGolden(t *testing.T) {
	dialects := []engine.Dialect{sqlite.Dialect{}, postgres.Dialect{}, mysql.Dialect{}}
	scopes := map[string]scope.Scope{
		"chain":      scopetest.New("t", []scope.Grant{{Level: "chain", ID: "acme"}}),
		"hotel":      scopetest.New("t", []scope.Grant{{Level: "hotel", ID: "12"}}),
		"two grants": scopetest.New("t", []scope.Grant{{Level: "chain", ID: "acme"}, {Level: "hotel", ID: "12"}}),
		"within":     scopetest.New("t", []scope.Grant{{Level: "hotel", ID: "12", Within: []scope.Grant{{Level: "chain", ID: "initech"}}}}),
	}
	stmts := goldenStatements(t)
	g, _ := sqlast.SchemaOf(sch)
	var out strings.Builder
	for _, d := range dialects {
		quoted := QuoteNames(d, g)
		for _, sn := range sortedKeys(scopes) {
			sc := engine.EncodeScope(levels(), scopes[sn])
			for _, name := range sortedKeys(stmts) {
				st := unseal(t, stmts[name])
				for _, po := range []bool{false, true} {
					p, err := Render(d, st, sc, Options{PredicatesOnly: po})
					pq, errq := Render(d, st, sc, Options{PredicatesOnly: po, Quoted: quoted})
					if got, gotq := planText(p, err), planText(pq, errq); got != gotq {
						t.Errorf("%s/%s/%s: Options.Quoted changes the rendering:\n%s\n%s", d.Name(), sn, name, got, gotq)
					}
					fmt.Fprintf(&out, "== %s / %s / %s / predicatesOnly=%v\n%s\n", d.Name(), sn, name, po, planText(p, err))
				}
			}
		}
	}
	const file = "testdata/render.golden"
	if *updateGolden {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(file, []byte(out.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if got := out.String(); got != string(want) {
		gl, wl := strings.Split(got, "\n"), strings.Split(string(want), "\n")
		for i := 0; i < len(gl) && i < len(wl); i++ {
			if gl[i] != wl[i] {
				t.Fatalf("rendering differs from %s at line %d:\n got %s\nwant %s", file, i+1, gl[i], wl[i])
			}
		}
		t.Fatalf("rendering differs from %s in length: %d lines, want %d", file, len(gl), len(wl))
	}
	if strings.Count(string(want), "ERROR") == strings.Count(string(want), "== ") {
		t.Fatal("every rendering failed: the golden file checks nothing")
	}
}

func planText(p Plan, err error) string {
	if err != nil {
		return "ERROR " + err.Error()
	}
	var b strings.Builder
	for _, s := range p.Steps {
		fmt.Fprintf(&b, "%s\n  args %#v expect %d\n", s.SQL, s.Args, s.Expect)
	}
	return b.String()
}

func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}
