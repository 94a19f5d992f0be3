package guard

import (
	"fmt"
	"reflect"
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

// sch2 has the table names and columns of sch, but rooms carry their own
// chain level: the same query renders a different guard on it.
var sch2 = builder.MustSchema(builder.SchemaDef{
	Levels: []builder.Level{{Name: "chain", Key: builder.TextKey}, {Name: "hotel", Key: builder.IntKey}},
	Tables: []builder.TableDef{
		{Name: "hotels", Columns: []string{"id", "chain_id"}, PrimaryKey: []string{"id"}, Levels: map[string]string{"id": "hotel", "chain_id": "chain"}},
		{Name: "rooms", Columns: []string{"id", "hotel_id", "number"}, PrimaryKey: []string{"id"}, Levels: map[string]string{"hotel_id": "hotel"},
			ForeignKeys: []builder.ForeignKey{{Columns: []string{"hotel_id"}, RefTable: "hotels"}}},
		{Name: "bookings", Columns: []string{"id", "room_id"}, PrimaryKey: []string{"id"},
			ForeignKeys: []builder.ForeignKey{{Columns: []string{"room_id"}, RefTable: "rooms"}}},
	},
})

// sch3 has sch's levels and hotels, but its rooms are global reference
// data: for a scope with no active level (whose level list is the only part
// of the key naming the schema) the same query still renders differently.
var sch3 = builder.MustSchema(builder.SchemaDef{
	Levels: []builder.Level{{Name: "chain", Key: builder.TextKey}, {Name: "hotel", Key: builder.IntKey}},
	Tables: []builder.TableDef{
		{Name: "hotels", Columns: []string{"id", "chain_id"}, PrimaryKey: []string{"id"}, Levels: map[string]string{"id": "hotel", "chain_id": "chain"}},
		{Name: "rooms", Columns: []string{"id", "hotel_id", "number"}, PrimaryKey: []string{"id"}, Global: true},
		{Name: "bookings", Columns: []string{"id", "room_id"}, PrimaryKey: []string{"id"},
			ForeignKeys: []builder.ForeignKey{{Columns: []string{"room_id"}, RefTable: "hotels"}}},
	},
})

// cacheCase is one statement rendered under one scope and options.
type cacheCase struct {
	name string
	st   sqlast.Stmt
	sc   engine.Scope
	opt  Options
}

func scopeOf(s *builder.Schema, grants ...scope.Grant) engine.Scope {
	g, _ := sqlast.SchemaOf(s)
	return engine.EncodeScope(g.Levels, scopetest.New("t", grants))
}

// cacheCases are statements and scopes that differ from each other in one
// thing each: the ids, which levels carry grants, a shape, the schema, an
// identifier, an operator, a literal's position or NULL-ness, the list
// length, LIMIT, the options.
func cacheCases(t *testing.T) []cacheCase {
	t.Helper()
	var cs []cacheCase

	scopes := []struct {
		name string
		s    *builder.Schema
		g    []scope.Grant
	}{
		{"chain acme", sch, []scope.Grant{{Level: "chain", ID: "acme"}}},
		{"chain initech", sch, []scope.Grant{{Level: "chain", ID: "initech"}}},
		{"hotel 12", sch, []scope.Grant{{Level: "hotel", ID: "12"}}},
		{"hotel 13", sch, []scope.Grant{{Level: "hotel", ID: "13"}}},
		{"chain and hotel", sch, []scope.Grant{{Level: "chain", ID: "acme"}, {Level: "hotel", ID: "12"}}},
		{"hotel within chain", sch, []scope.Grant{{Level: "hotel", ID: "12", Within: []scope.Grant{{Level: "chain", ID: "acme"}}}}},
		{"no valid grant", sch, []scope.Grant{{Level: "hotel", ID: "not-a-number"}}},
		{"sch2 chain", sch2, []scope.Grant{{Level: "chain", ID: "acme"}}},
		{"sch2 hotel", sch2, []scope.Grant{{Level: "hotel", ID: "12"}}},
		{"sch2 no valid grant", sch2, []scope.Grant{{Level: "hotel", ID: "not-a-number"}}},
		{"sch3 no valid grant", sch3, []scope.Grant{{Level: "hotel", ID: "not-a-number"}}},
		{"sch3 chain", sch3, []scope.Grant{{Level: "chain", ID: "acme"}}},
	}
	for _, sco := range scopes {
		h, r, b := sco.s.Table("hotels").As("h"), sco.s.Table("rooms").As("r"), sco.s.Table("bookings").As("b")
		r2 := sco.s.Table("rooms").As("r2")
		sts := map[string]builder.Query{
			"rooms":             builder.Must(builder.Select(r.Col("id")).From(r).Build()),
			"rooms number":      builder.Must(builder.Select(r.Col("number")).From(r).Build()),
			"rooms alias":       builder.Must(builder.Select(r2.Col("id")).From(r2).Build()),
			"rooms eq 7":        builder.Must(builder.Select(r.Col("id")).From(r).Where(r.Col("id").Eq(int64(7))).Build()),
			"rooms eq 8":        builder.Must(builder.Select(r.Col("id")).From(r).Where(r.Col("id").Eq(int64(8))).Build()),
			"rooms eq nil":      builder.Must(builder.Select(r.Col("id")).From(r).Where(r.Col("number").Eq(nil)).Build()),
			"rooms lt 7":        builder.Must(builder.Select(r.Col("id")).From(r).Where(r.Col("id").Lt(int64(7))).Build()),
			"rooms number eq":   builder.Must(builder.Select(r.Col("id")).From(r).Where(r.Col("number").Eq("7")).Build()),
			"rooms in 2":        builder.Must(builder.Select(r.Col("id")).From(r).Where(r.Col("id").In(int64(1), int64(2))).Build()),
			"rooms in 3":        builder.Must(builder.Select(r.Col("id")).From(r).Where(r.Col("id").In(int64(1), int64(2), int64(3))).Build()),
			"rooms swapped":     builder.Must(builder.Select(r.Col("id")).From(r).Where(r.Col("number").Eq("7"), r.Col("id").Eq(int64(7))).Build()),
			"rooms two":         builder.Must(builder.Select(r.Col("id")).From(r).Where(r.Col("id").Eq(int64(7)), r.Col("number").Eq("7")).Build()),
			"rooms limit 5":     builder.Must(builder.Select(r.Col("id")).From(r).Limit(5).Build()),
			"rooms limit 6":     builder.Must(builder.Select(r.Col("id")).From(r).Limit(6).Offset(2).Build()),
			"bookings join":     builder.Must(builder.Select(b.Col("id"), h.Col("id")).From(b).Join(r, r.Col("id").EqCol(b.Col("room_id"))).Join(h, h.Col("id").EqCol(r.Col("hotel_id"))).OrderBy(b.Col("id").Desc()).Build()),
			"bookings leftjoin": builder.Must(builder.Select(b.Col("id")).From(b).LeftJoin(r, r.Col("id").EqCol(b.Col("room_id"))).Build()),
			"hotels between":    builder.Must(builder.Select(h.Col("id")).From(h).Where(h.Col("id").Between(int64(1), int64(9))).Build()),
			"rooms like":        builder.Must(builder.Select(r.Col("id")).From(r).Where(r.Col("number").Like("1%")).Build()),
			"rooms count":       builder.Must(builder.Select(builder.CountAll(), builder.CountDistinct(r.Col("number"))).From(r).Build()),
		}

		stmts := map[string]sqlast.Stmt{}
		for name, q := range sts {
			stmts[name] = unseal(t, q)
		}
		// A comparison with NULL as a value (the builder writes IS NULL
		// itself): rendered IS NULL, with no argument.
		eqNull := *stmts["rooms number eq"].(*sqlast.Select)
		eqNull.Where = &sqlast.CmpVal{Op: sqlast.Eq, X: eqNull.Where.(*sqlast.CmpVal).X, V: sqlast.Value{}}
		stmts["rooms number eq NULL"] = &eqNull
		for name, q := range stmts {
			for _, opt := range []Options{{}, {PredicatesOnly: true}} {
				cs = append(cs, cacheCase{name: fmt.Sprintf("%s/%s/%v", sco.name, name, opt.PredicatesOnly), st: q, sc: scopeOf(sco.s, sco.g...), opt: opt})
			}
		}
	}
	return cs
}

// renderCacheMismatches renders every case twice through Render (the first
// fills the cache, the second and every later case of the same shape read
// it) and returns the cases whose result differs from an uncached render.
func renderCacheMismatches(t *testing.T) (bad []string, hits int) {
	t.Helper()
	renderCache.Lock()
	renderCache.m = nil
	renderCache.Unlock()
	cs := cacheCases(t)
	for round := range 2 {
		for _, c := range cs {
			s := c.st
			want, werr := render(sqlite.Dialect{}, s, c.sc, c.opt, nil)
			if werr == nil {
				sqliteTimes(&want)
			}
			if round == 1 && cachedFor(s.(*sqlast.Select), c.sc, c.opt) != nil {
				hits++
			}
			got, gerr := Render(sqlite.Dialect{}, s, c.sc, c.opt)
			if fmt.Sprint(werr) != fmt.Sprint(gerr) || !reflect.DeepEqual(want, got) {
				bad = append(bad, fmt.Sprintf("%s: cached %q %v (%v), uncached %q %v (%v)", c.name, stepSQL(got), stepArgs(got), gerr, stepSQL(want), stepArgs(want), werr))
			}
		}
	}
	return bad, hits
}

func stepSQL(p Plan) string {
	if len(p.Steps) == 0 {
		return ""
	}
	return p.Steps[0].SQL
}

func stepArgs(p Plan) []any {
	if len(p.Steps) == 0 {
		return nil
	}
	return p.Steps[0].Args
}

// cachedFor returns the cache entry s would be rendered from, or nil.
func cachedFor(s *sqlast.Select, sc engine.Scope, opt Options) *cached {
	k := keyBufs.Get().(*keyBuf)
	defer k.release()
	if !k.shapeKey(sqlite.Dialect{}, s, sc, opt) {
		return nil
	}
	renderCache.RLock()
	defer renderCache.RUnlock()
	return renderCache.m[string(k.b)]
}

// TestRenderCacheIsolation: tenants whose scopes differ only in ids, in
// which levels carry grants, in a shape or in the schema, and queries that
// differ in one identifier, operator or literal, each render exactly as
// without the cache, whichever of them filled it.
func TestRenderCacheIsolation(t *testing.T) {
	bad, hits := renderCacheMismatches(t)
	for _, b := range bad {
		t.Error(b)
	}
	if hits == 0 {
		t.Fatal("no render read the cache: the test checks nothing")
	}
	t.Logf("%d renders read the cache", hits)
}

// The dialects whose text depends on the document's content are never
// cached: PostgreSQL binds ids extracted from it, MySQL binds one hotel's id
// but expands two from the document. Rendered through the cache, a
// statement under two hotels, one, and two again must render as uncached.
func TestRenderCacheSkipsContentDialects(t *testing.T) {
	for _, d := range []engine.Dialect{postgres.Dialect{}, mysql.Dialect{}} {
		if _, ok := d.(engine.ShapeRenderer); ok {
			t.Errorf("%s implements engine.ShapeRenderer", d.Name())
		}
		r := sch.Table("rooms").As("r")
		s := unseal(t, builder.Must(builder.Select(r.Col("id")).From(r).Where(r.Col("id").Eq(int64(7))).Build()))
		one := scopeOf(sch, scope.Grant{Level: "hotel", ID: "12"})
		two := scopeOf(sch, scope.Grant{Level: "hotel", ID: "12"}, scope.Grant{Level: "hotel", ID: "13"})
		var renders []Plan
		for _, esc := range []engine.Scope{two, one, two} {
			want, werr := render(d, s, esc, Options{}, nil)
			got, gerr := Render(d, s, esc, Options{})
			if werr != nil || gerr != nil || !reflect.DeepEqual(got.Steps, want.Steps) {
				t.Errorf("%s: cached render %v (%v), want %v (%v)", d.Name(), got.Steps, gerr, want.Steps, werr)
			}
			renders = append(renders, want)
		}
		if reflect.DeepEqual(renders[0].Steps, renders[1].Steps) {
			t.Errorf("%s: one and two hotels render alike: the test checks nothing", d.Name())
		}
	}
}

// TestRenderCacheHoldsNoValues: an entry holds neither the document nor
// any value of the statement that filled it.
func TestRenderCacheHoldsNoValues(t *testing.T) {
	r := sch.Table("rooms").As("r")
	q := builder.Must(builder.Select(r.Col("id")).From(r).Where(r.Col("number").Eq("secret-room-4711")).Build())
	s := unseal(t, q)
	sc := scopeOf(sch, scope.Grant{Level: "chain", ID: "tenant-secret-id"})
	if _, err := Render(sqlite.Dialect{}, s, sc, Options{}); err != nil {
		t.Fatal(err)
	}
	e := cachedFor(s.(*sqlast.Select), sc, Options{})
	if e == nil {
		t.Fatal("not cached")
	}
	for _, v := range []string{"secret-room-4711", "tenant-secret-id"} {
		if contains(e.sql, v) {
			t.Errorf("entry text holds %q: %s", v, e.sql)
		}
	}
	if len(e.layout) != 2 || e.layout[0] != -1 || e.layout[1] != 0 {
		t.Errorf("layout %v, want [-1 0] (document, then the value)", e.layout)
	}
}

func contains(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return true
		}
	}
	return false
}

// TestRenderCacheKeyCoversFields fails when a field is added to a type whose
// every field shapeKey writes (or deliberately leaves out, as the Values
// it records instead): the key must then be extended, or the new field
// could tell two renders apart that share an entry.
func TestRenderCacheKeyCoversFields(t *testing.T) {
	for _, c := range []struct {
		v    any
		want string
	}{
		{Options{}, "PredicatesOnly EngineEnforcesReads NoIntersectExcept Quoted"},
		{sqlite.Dialect{}, "Style"},
		// each (Scope.Grants) is read only by writes under several
		// grants (pairing.go), which are never cached.
		{engine.Scope{}, "Doc Active Shapes each"},
		{engine.Shape{}, "Key Levels"},
		{sqlast.Select{}, "Distinct Items From Joins Where GroupBy Having OrderBy Limit Offset With Lock Refs Outer"},
		{sqlast.Ref{}, "Table Alias Derived CTE cols"},
		{sqlast.Item{}, "X As"},
		{sqlast.Join{}, "Kind Ref On"},
		{sqlast.Order{}, "X Desc"},
		{sqlast.Col{}, "Ref Name"},
		{sqlast.Agg{}, "Fn Arg Distinct"},
		{sqlast.CmpVal{}, "Op X V"},
		{sqlast.CmpExpr{}, "Op X Y"},
		{sqlast.Between{}, "X Lo Hi"},
		{sqlast.InList{}, "X Vals Not"},
		{sqlast.Like{}, "X Pattern Not"},
		{sqlast.IsNull{}, "X Not"},
		{sqlast.And{}, "Ps"},
		{sqlast.Or{}, "Ps"},
		{sqlast.Not{}, "P"},
		{sqlast.Value{}, "V"},
	} {
		typ := reflect.TypeOf(c.v)
		var names []string
		for i := range typ.NumField() {
			names = append(names, typ.Field(i).Name)
		}
		if got := fmt.Sprint(names); got != "["+c.want+"]" {
			t.Errorf("%s has fields %s, the render cache key covers [%s]: extend shapeKey (cache.go) and this list", typ, got, c.want)
		}
	}
}

// TestRenderCacheConcurrent renders the cases from several goroutines at
// once, filling and reading the cache concurrently, each result compared
// with an uncached render (run it with -race).
func TestRenderCacheConcurrent(t *testing.T) {
	cs := cacheCases(t)
	wants := make([]Plan, len(cs))
	for i, c := range cs {
		p, err := render(sqlite.Dialect{}, c.st, c.sc, c.opt, nil)
		if err == nil {
			sqliteTimes(&p)
		}
		wants[i] = p
	}
	done := make(chan []string)
	for g := range 4 {
		go func() {
			var bad []string
			for round := range 3 {
				for j := range cs {
					i := (j*7 + g*13 + round) % len(cs)
					got, _ := Render(sqlite.Dialect{}, cs[i].st, cs[i].sc, cs[i].opt)
					if !reflect.DeepEqual(got, wants[i]) {
						bad = append(bad, cs[i].name)
					}
				}
			}
			done <- bad
		}()
	}
	for range 4 {
		for _, b := range <-done {
			t.Errorf("%s: concurrent render differs from an uncached one", b)
		}
	}
}
