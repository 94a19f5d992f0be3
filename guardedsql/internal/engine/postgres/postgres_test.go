package postgres

import (
	"encoding/json"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/tenantmcp/tenantmcp/builder"
	"github.com/tenantmcp/tenantmcp/guardedsql/internal/engine"
	"github.com/tenantmcp/tenantmcp/internal/benchdata"
	"github.com/tenantmcp/tenantmcp/internal/sqlast"
	"github.com/tenantmcp/tenantmcp/scope"
	"github.com/tenantmcp/tenantmcp/scope/scopetest"
)

// mentionsSQL is the one-time filter of a sublink reading the entry whose
// JSON-encoded key is needle (policyGen.mentions).
func mentionsSQL(needle string) string {
	return `pg_catalog.strpos(pg_catalog.current_setting('tenantmcp.scope', true), '` + needle + `') OPERATOR(pg_catalog.>) 0`
}

// entryRead matches a read of an entry of the verified document and the
// sublink's one-time filter after it.
var entryRead = regexp.MustCompile(`"tenantmcp_scope_doc"\(\) -> '([^']+)'\)(?: AS _[et])? WHERE pg_catalog\.strpos\(pg_catalog\.current_setting\('tenantmcp\.scope', true\), '([^']+)'\)`)

// TestPolicyEntryReadsGuarded: every read of the verified document in the
// policies (USING and WITH CHECK) is behind the one-time filter on its own
// key, and each filter's needle occurs in the document the signer writes
// for grants at every level and shape of the schema, so the filter never
// hides an entry that is there (which would make rows disappear).
func TestPolicyEntryReadsGuarded(t *testing.T) {
	g, ok := sqlast.SchemaOf(builder.MustSchema(benchdata.SchemaDef()))
	if !ok {
		t.Fatal("schema")
	}
	sc := scopetest.New("tester", []scope.Grant{
		{Level: "chain", ID: "c1"},
		{Level: "hotel", ID: "5"},
		{Level: "hotel", ID: "7", Within: []scope.Grant{{Level: "chain", ID: "c2"}}},
	})
	doc := engine.EncodeScope(g.Levels, sc).Doc
	keys := map[string]bool{}
	for _, p := range (Dialect{}).Policies(g) {
		for _, expr := range []string{p.Expr, p.Check} {
			reads := strings.Count(expr, `"tenantmcp_scope_doc"()`)
			ms := entryRead.FindAllStringSubmatch(expr, -1)
			if len(ms) != reads {
				t.Errorf("%s: %d reads of the document, %d behind their filter:\n%s", p.Table, reads, len(ms), expr)
			}
			for _, m := range ms {
				want, _ := json.Marshal(m[1])
				if m[2] != string(want) {
					t.Errorf("%s: entry %s filtered on %s", p.Table, m[1], m[2])
				}
				keys[m[1]] = true
			}
		}
	}
	for _, k := range []string{"chain", "hotel", "chain/hotel"} {
		if !keys[k] {
			t.Errorf("no policy reads entry %s", k)
		}
		want, _ := json.Marshal(k)
		if !strings.Contains(doc, string(want)) {
			t.Errorf("document %s lacks %s", doc, want)
		}
	}
}

func TestInScopeBindsTypedArrays(t *testing.T) {
	chain := &sqlast.Level{Name: "chain", Key: sqlast.TextKey}
	hotel := &sqlast.Level{Name: "hotel", Key: sqlast.IntKey}
	doc := `{"chain":["a\"b","acme"],"hotel":[3,12]}`
	f := Dialect{}.InScope(engine.Frag{SQL: `"h"."chain_id"`}, chain, doc)
	if f.SQL != `"h"."chain_id" = ANY (?::text[])` || len(f.Args) != 1 {
		t.Fatalf("%s %v", f.SQL, f.Args)
	}
	if ids, ok := f.Args[0].([]string); !ok || len(ids) != 2 || ids[0] != `a"b` {
		t.Fatalf("text ids %#v", f.Args[0])
	}
	f = Dialect{}.InScope(engine.Frag{SQL: "?", Args: []any{int64(7)}}, hotel, doc)
	if f.SQL != `? = ANY (?::bigint[])` || f.Args[0] != int64(7) {
		t.Fatalf("%s %v", f.SQL, f.Args)
	}
	if ids, ok := f.Args[1].([]int64); !ok || len(ids) != 2 || ids[1] != 12 {
		t.Fatalf("int ids %#v", f.Args[1])
	}
	// A level absent from the document: an empty array, never NULL.
	f = Dialect{}.InScope(engine.Frag{SQL: "x"}, hotel, `{"chain":["acme"]}`)
	if ids, ok := f.Args[0].([]int64); !ok || ids == nil || len(ids) != 0 {
		t.Fatalf("absent level %#v", f.Args[0])
	}
}

func TestNamespace(t *testing.T) {
	d := Dialect{Namespace: "acme_app"}
	if d.Setting() != "acme_app.scope" || d.PolicyName() != "acme_app_scope" {
		t.Fatal(d.Setting(), d.PolicyName())
	}
	if (Dialect{}).Setting() != "tenantmcp.scope" {
		t.Fatal("default namespace")
	}
	for _, bad := range []string{"", "A", "1x", "x.y", "x-y", "x'y", strings.Repeat("x", 41)} {
		if ValidNamespace(bad) {
			t.Errorf("%q accepted", bad)
		}
	}
}

// TestChainedPolicies: a table without level columns of its own whose
// scope parent is a single-column foreign key defers to its parent's
// policy (one uncorrelated array of the visible parent keys); every other
// table keeps the full expression.
func TestChainedPolicies(t *testing.T) {
	g, ok := sqlast.SchemaOf(builder.MustSchema(benchdata.SchemaDef()))
	if !ok {
		t.Fatal("schema")
	}
	got := map[string]string{}
	for _, p := range (Dialect{}).Policies(g) {
		got[p.Table] = p.Expr
	}
	for table, want := range map[string]string{
		"rooms":    `("hotel_id" = ANY (ARRAY(SELECT "_p1"."id" FROM "hotels" AS "_p1")) OR "hotel_id" = ANY ('{}'))`,
		"bookings": `("room_id" = ANY (ARRAY(SELECT "_p1"."id" FROM "rooms" AS "_p1")) OR "room_id" = ANY ('{}'))`,
		"payments": `("booking_id" = ANY (ARRAY(SELECT "_p1"."id" FROM "bookings" AS "_p1")) OR "booking_id" = ANY ('{}'))`,
	} {
		if got[table] != want {
			t.Errorf("%s: got %s, want %s", table, got[table], want)
		}
	}
	// hotels carries both levels itself: the full expression, whose shape
	// term leads with an indexable conjunct on the finest level's column.
	h := got["hotels"]
	for _, want := range []string{
		`"chain_id" = ANY (ARRAY(SELECT jsonb_array_elements_text("tenantmcp_scope_doc"() -> 'chain') WHERE ` + mentionsSQL(`"chain"`) + `))`,
		`"id" = ANY (ARRAY(SELECT _e::bigint FROM jsonb_array_elements_text("tenantmcp_scope_doc"() -> 'hotel') AS _e WHERE ` + mentionsSQL(`"hotel"`) + `))`,
		`("id" = ANY (ARRAY(SELECT (_t ->> 1)::bigint FROM jsonb_array_elements("tenantmcp_scope_doc"() -> 'chain/hotel') AS _t WHERE ` + mentionsSQL(`"chain/hotel"`) + `)) AND ("chain_id", "id") IN (`,
	} {
		if !strings.Contains(h, want) {
			t.Errorf("hotels policy lacks %s:\n%s", want, h)
		}
	}
	if strings.Contains(h, `FROM "`) {
		t.Errorf("hotels policy reads another table: %s", h)
	}

	level := &sqlast.Level{Name: "chain", Key: sqlast.TextKey}
	parent := sqlast.NewTable("parent", []string{"id", "chain_id"})
	child := func(mod func(c *sqlast.Table)) *sqlast.Table {
		c := sqlast.NewTable("child", []string{"id", "parent_id", "chain_id"})
		c.Parent = &sqlast.FK{From: c, Cols: []string{"parent_id"}, To: parent, RefCols: []string{"id"}}
		if mod != nil {
			mod(c)
		}
		return c
	}
	if !chained(child(nil)) {
		t.Error("plain child not chained")
	}
	for name, c := range map[string]*sqlast.Table{
		"own level column": child(func(c *sqlast.Table) {
			c.LevelCols = []sqlast.LevelCol{{Col: "chain_id", Level: level}}
		}),
		"composite parent key": child(func(c *sqlast.Table) {
			c.Parent.Cols, c.Parent.RefCols = []string{"chain_id", "parent_id"}, []string{"chain_id", "id"}
		}),
		"no parent":   child(func(c *sqlast.Table) { c.Parent = nil }),
		"self parent": child(func(c *sqlast.Table) { c.Parent.To = c }),
		"global parent": child(func(c *sqlast.Table) {
			c.Parent.To = sqlast.NewTable("global", []string{"id"})
			c.Parent.To.Global = true
		}),
	} {
		if chained(c) {
			t.Errorf("%s: chained", name)
		}
	}
}

// TestBlindShapes: a table whose shape term reads a path table that does
// not carry one of the shape's levels is listed (Formbricks' environments,
// through projects, for "environment within organization"); the hotel's
// tables, whose path tables carry every level of their shapes, and tables
// chained to such a table's policy are not.
func TestBlindShapes(t *testing.T) {
	hotel, ok := sqlast.SchemaOf(builder.MustSchema(benchdata.SchemaDef()))
	if !ok {
		t.Fatal("schema")
	}
	if got := (Dialect{}).BlindShapes(hotel); len(got) != 0 {
		t.Errorf("hotel: %v, want none", got)
	}
	fk := func(col, ref string) []builder.ForeignKey {
		return []builder.ForeignKey{{Columns: []string{col}, RefTable: ref}}
	}
	layered, ok := sqlast.SchemaOf(builder.MustSchema(builder.SchemaDef{
		Levels: []builder.Level{{Name: "organization", Key: builder.IntKey}, {Name: "environment", Key: builder.IntKey}},
		Tables: []builder.TableDef{
			{Name: "organizations", Columns: []string{"id"}, PrimaryKey: []string{"id"}, Levels: map[string]string{"id": "organization"}},
			{Name: "projects", Columns: []string{"id", "organization_id"}, PrimaryKey: []string{"id"},
				Levels: map[string]string{"organization_id": "organization"}, ForeignKeys: fk("organization_id", "organizations")},
			{Name: "environments", Columns: []string{"id", "project_id"}, PrimaryKey: []string{"id"}, Levels: map[string]string{"id": "environment"},
				Parent: "project_id", ForeignKeys: fk("project_id", "projects")},
			{Name: "surveys", Columns: []string{"id", "environment_id"}, PrimaryKey: []string{"id"},
				Parent: "environment_id", ForeignKeys: fk("environment_id", "environments")},
		},
	}))
	if !ok {
		t.Fatal("schema")
	}
	want := []string{"environments (through projects, which lacks level environment)"}
	if got := (Dialect{}).BlindShapes(layered); !slices.Equal(got, want) {
		t.Errorf("layered: %q, want %q", got, want)
	}
}
