package guard

import (
	"errors"
	"strings"
	"testing"

	"github.com/tenantmcp/tenantmcp/builder"
	"github.com/tenantmcp/tenantmcp/guardedsql/internal/engine/mysql"
	"github.com/tenantmcp/tenantmcp/guardedsql/internal/engine/postgres"
	"github.com/tenantmcp/tenantmcp/guardedsql/internal/engine/sqlite"
)

// TestSetOpUnsupported: on an engine without INTERSECT/EXCEPT the guard
// refuses them, naming the engine; UNION still renders.
func TestSetOpUnsupported(t *testing.T) {
	branches := func() (builder.Query, builder.Query) {
		r1, r2 := sch.Table("rooms").As("r1"), sch.Table("rooms").As("r2")
		return builder.Must(builder.Select(r1.Col("id")).From(r1).Build()), builder.Must(builder.Select(r2.Col("id")).From(r2).Build())
	}
	opt := Options{NoIntersectExcept: true}
	for _, mk := range []func(a, b builder.Query) builder.SetBuilder{
		func(a, b builder.Query) builder.SetBuilder { return builder.Intersect(a, b) },
		builder.Except,
	} {
		q := builder.Must(mk(branches()).Build())
		_, err := Render(mysql.Dialect{}, unseal(t, q), chainScope(), opt)
		if !errors.Is(err, ErrSetOpUnsupported) || !strings.Contains(err.Error(), "mysql") {
			t.Errorf("err = %v, want ErrSetOpUnsupported naming mysql", err)
		}
	}
	q := builder.Must(builder.Union(branches()).Build())
	if _, err := Render(mysql.Dialect{}, unseal(t, q), chainScope(), opt); err != nil {
		t.Errorf("UNION: %v", err)
	}
}

// TestLockClause: PostgreSQL locks only the query's own tables (FOR UPDATE
// OF), not the parents the guard path-joins; MariaDB/MySQL lock what they
// read; SQLite adds nothing (its transactions hold the write lock).
func TestLockClause(t *testing.T) {
	b := sch.Table("bookings").As("b")
	r := sch.Table("rooms").As("r")
	q := builder.Must(builder.Select(b.Col("id")).From(b).Join(r, r.Col("id").EqCol(b.Col("room_id"))).ForUpdate().Build())
	for _, tc := range []struct {
		d    interface{ Name() string }
		want string
	}{
		{postgres.Dialect{}, `FOR UPDATE OF "b", "r"`},
		{mysql.Dialect{}, "FOR UPDATE"},
		{sqlite.Dialect{}, ""},
	} {
		var p Plan
		var err error
		switch d := tc.d.(type) {
		case postgres.Dialect:
			p, err = Render(d, unseal(t, q), chainScope(), Options{})
		case mysql.Dialect:
			p, err = Render(d, unseal(t, q), chainScope(), Options{})
		case sqlite.Dialect:
			p, err = Render(d, unseal(t, q), chainScope(), Options{})
		}
		if err != nil {
			t.Fatal(err)
		}
		text := p.Steps[0].SQL
		if tc.want == "" {
			if strings.Contains(text, "FOR ") {
				t.Errorf("%s: %s", tc.d.Name(), text)
			}
		} else if !strings.HasSuffix(text, tc.want) {
			t.Errorf("%s: %s, want suffix %s", tc.d.Name(), text, tc.want)
		}
		if tc.d.Name() == "postgres" && !strings.Contains(text, `"_tm`) {
			t.Errorf("postgres: expected the guard's path join, got %s", text)
		}
	}
}

// TestUndeclaredCTERefused: a CTE read by a statement that does not
// declare it is refused by the guard (it would otherwise be a bare name).
func TestUndeclaredCTERefused(t *testing.T) {
	r := sch.Table("rooms").As("r")
	c := builder.With("c", builder.Must(builder.Select(r.Col("id")).From(r).Build()))
	x := c.Ref()
	q := builder.Must(builder.Select(x.Col("id")).From(x).Build())
	if _, err := Render(sqlite.Dialect{}, unseal(t, q), chainScope(), Options{}); !errors.Is(err, ErrInvalid) {
		t.Errorf("err = %v, want ErrInvalid", err)
	}
}
