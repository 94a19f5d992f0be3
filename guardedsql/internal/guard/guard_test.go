package guard

import (
	"errors"
	"regexp"
	"strings"
	"testing"

	"github.com/tenantmcp/tenantmcp/builder"
	"github.com/tenantmcp/tenantmcp/guardedsql/internal/engine"
	"github.com/tenantmcp/tenantmcp/guardedsql/internal/engine/sqlite"
	"github.com/tenantmcp/tenantmcp/internal/sqlast"
	"github.com/tenantmcp/tenantmcp/scope"
	"github.com/tenantmcp/tenantmcp/scope/scopetest"
)

var sch = builder.MustSchema(builder.SchemaDef{
	Levels: []builder.Level{{Name: "chain", Key: builder.TextKey}, {Name: "hotel", Key: builder.IntKey}},
	Tables: []builder.TableDef{
		{Name: "hotels", Columns: []string{"id", "chain_id"}, PrimaryKey: []string{"id"}, Levels: map[string]string{"id": "hotel", "chain_id": "chain"}},
		{Name: "rooms", Columns: []string{"id", "hotel_id", "number"}, PrimaryKey: []string{"id"},
			ForeignKeys: []builder.ForeignKey{{Columns: []string{"hotel_id"}, RefTable: "hotels"}}},
		{Name: "bookings", Columns: []string{"id", "room_id"}, PrimaryKey: []string{"id"},
			ForeignKeys: []builder.ForeignKey{{Columns: []string{"room_id"}, RefTable: "rooms"}}},
	},
})

func levels() []*sqlast.Level {
	g, _ := sqlast.SchemaOf(sch)
	return g.Levels
}

func chainScope() engine.Scope {
	return engine.EncodeScope(levels(), scopetest.New("t", []scope.Grant{{Level: "chain", ID: "acme"}}))
}

func unseal(t *testing.T, st builder.Statement) sqlast.Stmt {
	s, ok := sqlast.Unseal(st)
	if !ok {
		t.Fatal("unseal")
	}
	return s
}

func TestCoverageCrossCheck(t *testing.T) {
	b := sch.Table("bookings").As("b")
	q := builder.Must(builder.Select(b.Col("id")).From(b).Build())
	sel := *unseal(t, q).(*sqlast.Select)

	// A reference the builder recorded but the renderer never reaches.
	ghost := &sqlast.Ref{Table: sel.From.Table, Alias: "ghost"}
	tampered := sel
	tampered.Refs = append(append([]*sqlast.Ref(nil), sel.Refs...), ghost)
	if _, err := Render(sqlite.Dialect{}, &tampered, chainScope(), Options{}); !errors.Is(err, ErrInternal) {
		t.Fatalf("unrecorded reference: %v", err)
	}
	// A reference rendered but not recorded.
	tampered = sel
	tampered.Refs = nil
	if _, err := Render(sqlite.Dialect{}, &tampered, chainScope(), Options{}); !errors.Is(err, ErrInternal) {
		t.Fatalf("unrendered reference: %v", err)
	}
	// The same reference twice.
	tampered = sel
	tampered.Joins = []sqlast.Join{{Kind: sqlast.InnerJoin, Ref: sel.From, On: &sqlast.And{}}}
	if _, err := Render(sqlite.Dialect{}, &tampered, chainScope(), Options{}); !errors.Is(err, ErrInternal) {
		t.Fatalf("reference rendered twice: %v", err)
	}
	// Untampered renders.
	if _, err := Render(sqlite.Dialect{}, &sel, chainScope(), Options{}); err != nil {
		t.Fatal(err)
	}
	// A bind value the builder would never produce is refused.
	bad := sel
	bad.Where = &sqlast.CmpVal{Op: sqlast.Eq, X: &sqlast.Col{Ref: sel.From, Name: "id"}, V: sqlast.Value{V: engine.Frag{SQL: "1) OR (1=1"}}}
	if _, err := Render(sqlite.Dialect{}, &bad, chainScope(), Options{}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("Sqlizer as a value: %v", err)
	}
}

// pathJoinRE matches the path join the guard adds for bookings b.
var pathJoinRE = regexp.MustCompile(`JOIN "rooms" AS "(_tm\d+)" ON "_tm\d+"\."id" = "b"\."room_id"`)

func TestRefModes(t *testing.T) {
	b := sch.Table("bookings").As("b")
	r := sch.Table("rooms").As("r")
	h := sch.Table("hotels").As("h")
	render := func(q builder.Query, opt Options) string {
		p, err := Render(sqlite.Dialect{}, unseal(t, q), chainScope(), opt)
		if err != nil {
			t.Fatal(err)
		}
		return p.Steps[0].SQL
	}
	// b and r are both elided: each is inner-joined to its parent on the
	// foreign key; only h carries the predicate.
	q := builder.Must(builder.Select(b.Col("id")).From(b).
		Join(r, r.Col("id").EqCol(b.Col("room_id"))).
		Join(h, h.Col("id").EqCol(r.Col("hotel_id"))).Build())
	sql := render(q, Options{})
	if strings.Count(sql, `"_tm_scope"`) != 2 || strings.Contains(sql, `"_tm1"`) || !strings.Contains(sql, `"h"."chain_id" IN (SELECT`) {
		t.Fatalf("elision:\n%s", sql)
	}
	// With a LEFT join the parent may be missing: no elision.
	q = builder.Must(builder.Select(b.Col("id")).From(b).LeftJoin(r, r.Col("id").EqCol(b.Col("room_id"))).Build())
	sql = render(q, Options{})
	if !pathJoinRE.MatchString(sql) || !strings.Contains(sql, `LEFT JOIN "rooms" AS "r" ON ("r"."id" = "b"."room_id") AND (`) {
		t.Fatalf("left join:\n%s", sql)
	}
	// An equality under OR proves nothing: no elision.
	q = builder.Must(builder.Select(b.Col("id")).From(b).Join(r, builder.Or(r.Col("id").EqCol(b.Col("room_id")), r.Col("number").Eq("1"))).Build())
	sql = render(q, Options{})
	if !pathJoinRE.MatchString(sql) {
		t.Fatalf("OR join:\n%s", sql)
	}
	// A join on another column than the foreign key proves nothing.
	q = builder.Must(builder.Select(b.Col("id")).From(b).Join(r, r.Col("id").EqCol(b.Col("id"))).Build())
	sql = render(q, Options{})
	if !pathJoinRE.MatchString(sql) {
		t.Fatalf("wrong column:\n%s", sql)
	}
	// PredicatesOnly: every reference gets its own IN predicate.
	q = builder.Must(builder.Select(b.Col("id")).From(b).Join(r, r.Col("id").EqCol(b.Col("room_id"))).Build())
	sql = render(q, Options{PredicatesOnly: true})
	if !strings.Contains(sql, `"b"."room_id" IN (SELECT "_tm`) || !strings.Contains(sql, `"r"."hotel_id" IN (SELECT "_tm`) {
		t.Fatalf("predicates only:\n%s", sql)
	}
}

func TestWriteChecks(t *testing.T) {
	rooms := sch.Table("rooms")
	ins := builder.Must(builder.InsertInto(rooms).Columns("hotel_id", "number").Values(3, "101").Build())
	p, err := Render(sqlite.Dialect{}, unseal(t, ins), chainScope(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	want := `INSERT INTO "rooms" ("hotel_id","number") SELECT ?, ? WHERE EXISTS (SELECT 1 FROM "hotels" AS "_tm1" WHERE "_tm1"."id" = ? AND ("_tm1"."chain_id" IN (SELECT "id" FROM "_tm_scope" WHERE "lvl" = 'chain')))`
	if got := p.Steps[0].SQL; !strings.HasSuffix(got, want) || p.Steps[0].Expect != ExpectOne || !errors.Is(p.Steps[0].Fail, ErrNotFound) {
		t.Fatalf("insert:\n%s", got)
	}
	if args := p.Steps[0].Args; len(args) != 4 || args[0] != `{"chain":["acme"]}` || args[1] != int64(3) || args[3] != int64(3) {
		t.Fatalf("args %v", args)
	}
	up := builder.Must(builder.UpdateTable(rooms).Set("hotel_id", 4).Where(rooms.Col("id").Eq(1)).Build())
	p, err = Render(sqlite.Dialect{}, unseal(t, up), chainScope(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(p.Steps[0].SQL, `AND EXISTS (SELECT 1 FROM "hotels" AS "_tm2" WHERE "_tm2"."id" = ?`) {
		t.Fatalf("update:\n%s", p.Steps[0].SQL)
	}
}

// The precomputed quoted names change nothing in the text: a statement
// with schema names, user aliases and guard aliases renders the same with
// and without Options.Quoted, under a scope that needs the path joins.
func TestQuotedNamesSameText(t *testing.T) {
	g, _ := sqlast.SchemaOf(sch)
	b, r := sch.Table("bookings").As("b"), sch.Table("rooms").As("r")
	q := builder.Must(builder.Select(b.Col("id"), r.Col("number")).From(b).
		LeftJoin(r, r.Col("id").EqCol(b.Col("room_id"))).Where(b.Col("id").Gt(3)).Build())
	for _, sc := range []engine.Scope{chainScope(), engine.EncodeScope(levels(), scopetest.New("t", []scope.Grant{{Level: "hotel", ID: "12"}}))} {
		plain, err := Render(sqlite.Dialect{}, unseal(t, q), sc, Options{})
		if err != nil {
			t.Fatal(err)
		}
		memo, err := Render(sqlite.Dialect{}, unseal(t, q), sc, Options{Quoted: QuoteNames(sqlite.Dialect{}, g)})
		if err != nil {
			t.Fatal(err)
		}
		if plain.Steps[0].SQL != memo.Steps[0].SQL || !strings.Contains(plain.Steps[0].SQL, `"_tm1"`) {
			t.Fatalf("texts differ or no guard alias:\n%s\n%s", plain.Steps[0].SQL, memo.Steps[0].SQL)
		}
	}
}
