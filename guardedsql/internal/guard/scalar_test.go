package guard

import (
	"errors"
	"strings"
	"testing"

	"github.com/tenantmcp/tenantmcp/builder"
	"github.com/tenantmcp/tenantmcp/guardedsql/internal/engine"
	"github.com/tenantmcp/tenantmcp/guardedsql/internal/engine/mysql"
	"github.com/tenantmcp/tenantmcp/guardedsql/internal/engine/postgres"
	"github.com/tenantmcp/tenantmcp/guardedsql/internal/engine/sqlite"
	"github.com/tenantmcp/tenantmcp/internal/sqlast"
)

var dialects = []engine.Dialect{sqlite.Dialect{}, postgres.Dialect{}, mysql.Dialect{}}

// TestScalarSpelling: each engine gets its own spelling of casts, JSON
// paths and functions, and values stay parameters.
func TestScalarSpelling(t *testing.T) {
	r := sch.Table("rooms")
	q := builder.Must(builder.Select(builder.Cast(r.Col("number"), builder.AsText), builder.Cast(r.Col("id"), builder.AsInteger),
		builder.JSONText(r.Col("number"), "ua", "os"), builder.Length(r.Col("number")), r.Col("id").Add(41)).From(r).Build())
	want := map[string][]string{
		"sqlite":   {"CAST(\"rooms\".\"number\" AS TEXT)", "AS INTEGER)", "json_extract(\"rooms\".\"number\", '$.ua.os')", "LENGTH(", "+ ?"},
		"postgres": {"CAST(\"rooms\".\"number\" AS text)", "AS bigint)", "(CAST(\"rooms\".\"number\" AS jsonb) #>> '{ua,os}')", "LENGTH(", "+ CAST($"},
		"mysql":    {"CAST(`rooms`.`number` AS CHAR)", "AS SIGNED)", "JSON_UNQUOTE(JSON_EXTRACT(`rooms`.`number`, '$.ua.os'))", "CHAR_LENGTH(", "+ ?"},
	}
	for _, d := range dialects {
		p, err := Render(d, unseal(t, q), chainScope(), Options{})
		if err != nil {
			t.Fatalf("%s: %v", d.Name(), err)
		}
		text := p.Steps[0].SQL
		for _, w := range want[d.Name()] {
			if !strings.Contains(text, w) {
				t.Errorf("%s: %q missing in\n%s", d.Name(), w, text)
			}
		}
		if strings.Contains(text, "41") || !containsArg(p.Steps[0].Args, int64(41)) {
			t.Errorf("%s: the value 41 is not a parameter: %s %v", d.Name(), text, p.Steps[0].Args)
		}
	}
}

func containsArg(args []any, v any) bool {
	for _, a := range args {
		if a == v {
			return true
		}
	}
	return false
}

// TestScalarFailClosed: what builder refuses is refused again at render
// when a statement is tampered with: an expression assigned to a scope
// column, a SET reading another table, a JSON key or function name
// outside the identifier alphabet, a registered function on an engine
// without it (named, with the engine).
func TestScalarFailClosed(t *testing.T) {
	r, h := sch.Table("rooms"), sch.Table("hotels")
	u := builder.Must(builder.UpdateTable(r).SetExpr("number", builder.Lower(r.Col("number"))).Where(r.Col("id").Eq(1)).Build())
	up := *unseal(t, u).(*sqlast.Update)

	scopeCol := up
	scopeCol.Set = []sqlast.Assign{{Col: "hotel_id", X: up.Set[0].X}}
	if _, err := Render(sqlite.Dialect{}, &scopeCol, chainScope(), Options{}); !errors.Is(err, ErrRefused) {
		t.Errorf("expression into a scope column: %v", err)
	}
	other := up
	sub := unseal(t, builder.Must(builder.Select(builder.CountAll()).From(h).Build())).(*sqlast.Select)
	other.Set = []sqlast.Assign{{Col: "number", X: &sqlast.ScalarSub{Sub: sub}}}
	other.Refs = append(append([]*sqlast.Ref(nil), up.Refs...), sub.Refs...)
	if _, err := Render(sqlite.Dialect{}, &other, chainScope(), Options{}); !errors.Is(err, ErrRefused) {
		t.Errorf("SET reading another table: %v", err)
	}

	q := builder.Must(builder.Select(builder.JSONText(r.Col("number"), "k")).From(r).Build())
	sel := *unseal(t, q).(*sqlast.Select)
	sel.Items = []sqlast.Item{{X: &sqlast.JSONPath{X: sel.Items[0].X.(*sqlast.JSONPath).X, Keys: []string{"k'); DROP TABLE rooms; --"}}}}
	if _, err := Render(sqlite.Dialect{}, &sel, chainScope(), Options{}); !errors.Is(err, ErrInvalid) {
		t.Errorf("tampered JSON key: %v", err)
	}
	sel.Items = []sqlast.Item{{X: &sqlast.Call{Fn: &sqlast.Func{Name: "pg_sleep(1)--", Dialects: []string{"sqlite"}}}}}
	if _, err := Render(sqlite.Dialect{}, &sel, chainScope(), Options{}); !errors.Is(err, ErrInvalid) {
		t.Errorf("tampered function name: %v", err)
	}
	sel.Items = []sqlast.Item{{X: &sqlast.Call{Fn: &sqlast.Func{Name: "similarity", Dialects: []string{"postgres"}}}}}
	_, err := Render(mysql.Dialect{}, &sel, chainScope(), Options{})
	if !errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), "similarity") || !strings.Contains(err.Error(), "mysql") {
		t.Errorf("function missing on the engine: %v", err)
	}
}
