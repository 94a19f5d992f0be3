package builder_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/tenantmcp/tenantmcp/builder"
)

// TestScopeCheckManyRefs checks the reference checks of Build on both sides
// of the size at which they switch from lists to maps (16 references):
// a statement with n distinct aliases builds, a repeated alias, a reference
// used twice and a column of a table joined later are refused, whatever n.
func TestScopeCheckManyRefs(t *testing.T) {
	sch := builder.MustSchema(hotelDef())
	for _, n := range []int{1, 2, 8, 9, 16, 17, 40} {
		chain := func(n int) (builder.SelectBuilder, []builder.TableRef) {
			refs := make([]builder.TableRef, n)
			for i := range refs {
				refs[i] = sch.Table("countries").As(fmt.Sprintf("c%d", i))
			}
			q := builder.Select(refs[0].Col("code")).From(refs[0])
			for i := 1; i < n; i++ {
				q = q.Join(refs[i], refs[i].Col("code").EqCol(refs[i-1].Col("code")))
			}
			return q, refs
		}
		q, refs := chain(n)
		if _, err := q.Build(); err != nil {
			t.Fatalf("n=%d: %v", n, err)
		}
		dup := sch.Table("countries").As("c0")
		if _, err := q.Join(dup, dup.Col("code").EqCol(refs[n-1].Col("code"))).Build(); err == nil || !strings.Contains(err.Error(), `alias "c0" used twice`) {
			t.Errorf("n=%d, repeated alias: %v", n, err)
		}
		last := refs[n-1]
		if _, err := q.Join(last, last.Col("name").EqCol(last.Col("code"))).Build(); err == nil || !strings.Contains(err.Error(), "used twice") {
			t.Errorf("n=%d, reference used twice: %v", n, err)
		}
		late := sch.Table("countries").As("late")
		next := sch.Table("countries").As("next")
		if _, err := q.Join(next, next.Col("code").EqCol(late.Col("code"))).Join(late, late.Col("code").EqCol(refs[0].Col("code"))).Build(); err == nil || !strings.Contains(err.Error(), "used before late is joined") {
			t.Errorf("n=%d, column used before its join: %v", n, err)
		}
	}
}

// TestColumnNodesShared checks that Build accepts a column of a reference
// named several times in one statement (its node is made once with the
// reference and shared by every use) and still reports an unknown column.
func TestColumnNodesShared(t *testing.T) {
	sch := builder.MustSchema(hotelDef())
	h := sch.Table("hotels").As("h")
	q, err := builder.Select(h.Col("name"), h.Col("name")).From(h).
		Where(h.Col("name").Eq("x"), h.Col("id").Gt(int64(1))).
		OrderBy(h.Col("name").Asc()).Build()
	if err != nil {
		t.Fatal(err)
	}
	if q == (builder.Query{}) {
		t.Fatal("Build returned the zero Query without an error")
	}
	if _, err := builder.Select(h.Col("nope")).From(h).Build(); err == nil || !strings.Contains(err.Error(), `no column "nope"`) {
		t.Errorf("unknown column: %v", err)
	}
}
