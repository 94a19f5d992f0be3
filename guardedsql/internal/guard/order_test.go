package guard

import (
	"errors"
	"strings"
	"testing"

	"github.com/tenantmcp/tenantmcp/builder"
	"github.com/tenantmcp/tenantmcp/guardedsql/internal/engine/mysql"
	"github.com/tenantmcp/tenantmcp/guardedsql/internal/engine/sqlite"
)

// typedSch is sch with declared column types.
var typedSch = builder.MustSchema(builder.SchemaDef{
	Levels: []builder.Level{{Name: "chain", Key: builder.TextKey}, {Name: "hotel", Key: builder.IntKey}},
	Tables: []builder.TableDef{
		{Name: "hotels", Columns: []string{"id", "chain_id"}, PrimaryKey: []string{"id"}, Levels: map[string]string{"id": "hotel", "chain_id": "chain"}},
		{Name: "rooms", Columns: []string{"id", "hotel_id", "number", "rate"}, PrimaryKey: []string{"id"},
			Types:       map[string]string{"id": "bigint", "number": "text", "rate": "bigint"},
			ForeignKeys: []builder.ForeignKey{{Columns: []string{"hotel_id"}, RefTable: "hotels"}}},
	},
})

// TestGuardDecidesFirst (issue 26 §2): a condition of the caller that
// could raise an engine error (arithmetic, a CAST) is rendered under
// CASE WHEN <tenant test> THEN ... END, in UPDATE, DELETE and SELECT, on
// SQLite and MySQL; a plain comparison stays a plain, indexable conjunct;
// and a comparison of columns of different kinds is refused
// (ErrConversion, ErrRefused).
func TestGuardDecidesFirst(t *testing.T) {
	r := typedSch.Table("rooms")
	risky := r.Col("rate").Mul(int64(1) << 62).Gt(0)
	cast := builder.Cast(r.Col("number"), builder.AsInteger).Eq(7)
	stmts := map[string]builder.Statement{
		"update": builder.Must(builder.UpdateTable(r).Set("number", "x").Where(builder.And(r.Col("id").Eq(5), risky)).Build()),
		"delete": builder.Must(builder.DeleteFrom(r).Where(builder.And(r.Col("id").Eq(5), cast)).Build()),
		"select": builder.Must(builder.Select(r.Col("id")).From(r).Where(builder.And(r.Col("id").Eq(5), risky)).Build()),
	}
	for _, d := range []struct {
		name string
		d    interface{}
	}{{"sqlite", sqlite.Dialect{}}, {"mysql", mysql.Dialect{}}} {
		for name, st := range stmts {
			var p Plan
			var err error
			switch dd := d.d.(type) {
			case sqlite.Dialect:
				p, err = Render(dd, unseal(t, st), chainScope(), Options{})
			case mysql.Dialect:
				p, err = Render(dd, unseal(t, st), chainScope(), Options{})
			}
			if err != nil {
				t.Fatalf("%s %s: %v", d.name, name, err)
			}
			text := p.Steps[0].SQL
			i := strings.Index(text, "CASE WHEN")
			j := strings.Index(text, "THEN ((")
			if i < 0 || j < i || !strings.Contains(text[j:], "CAST(") && !strings.Contains(text[j:], "*") {
				t.Errorf("%s %s: the risky condition is not under CASE WHEN <guard>:\n%s", d.name, name, text)
			}
			// The plain comparison on the key stays outside the CASE.
			if k := strings.Index(text, "id` = ?"); d.name == "mysql" && (k < 0 || k > i) {
				t.Errorf("%s %s: id = ? is not a plain conjunct before the CASE:\n%s", d.name, name, text)
			}
		}
	}
	// Two columns of different kinds: refused, on every statement kind.
	bad := r.Col("number").EqCol(r.Col("rate"))
	sel, err := builder.Select(r.Col("id")).From(r).Where(bad).Build()
	if err != nil {
		t.Fatal(err)
	}
	upd, err := builder.UpdateTable(r).Set("number", "x").Where(bad).Build()
	if err != nil {
		t.Fatal(err)
	}
	for name, st := range map[string]builder.Statement{"select": sel, "update": upd} {
		_, err = Render(sqlite.Dialect{}, unseal(t, st), chainScope(), Options{})
		if !errors.Is(err, ErrConversion) || !errors.Is(err, ErrRefused) {
			t.Errorf("%s: text = integer column: err = %v, want ErrConversion", name, err)
		}
	}
}
