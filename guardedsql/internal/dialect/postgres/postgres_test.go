package postgres

import (
	"strings"
	"testing"

	"github.com/tenantmcp/tenantmcp/guardedsql/internal/dialect"
	"github.com/tenantmcp/tenantmcp/internal/sqlast"
)

func TestInScopeBindsTypedArrays(t *testing.T) {
	chain := &sqlast.Level{Name: "chain", Key: sqlast.TextKey}
	hotel := &sqlast.Level{Name: "hotel", Key: sqlast.IntKey}
	doc := `{"chain":["a\"b","acme"],"hotel":[3,12]}`
	f := Dialect{}.InScope(dialect.Frag{SQL: `"h"."chain_id"`}, chain, doc)
	if f.SQL != `"h"."chain_id" = ANY (?::text[])` || len(f.Args) != 1 {
		t.Fatalf("%s %v", f.SQL, f.Args)
	}
	if ids, ok := f.Args[0].([]string); !ok || len(ids) != 2 || ids[0] != `a"b` {
		t.Fatalf("text ids %#v", f.Args[0])
	}
	f = Dialect{}.InScope(dialect.Frag{SQL: "?", Args: []any{int64(7)}}, hotel, doc)
	if f.SQL != `? = ANY (?::bigint[])` || f.Args[0] != int64(7) {
		t.Fatalf("%s %v", f.SQL, f.Args)
	}
	if ids, ok := f.Args[1].([]int64); !ok || len(ids) != 2 || ids[1] != 12 {
		t.Fatalf("int ids %#v", f.Args[1])
	}
	// A level absent from the document: an empty array, never NULL.
	f = Dialect{}.InScope(dialect.Frag{SQL: "x"}, hotel, `{"chain":["acme"]}`)
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
