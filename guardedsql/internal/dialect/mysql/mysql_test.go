package mysql

import (
	"strings"
	"testing"

	"github.com/tenantmcp/tenantmcp/guardedsql/internal/dialect"
	"github.com/tenantmcp/tenantmcp/internal/sqlast"
)

func TestInScope(t *testing.T) {
	chain := &sqlast.Level{Name: "chain", Key: sqlast.TextKey}
	hotel := &sqlast.Level{Name: "hotel", Key: sqlast.IntKey}
	doc := `{"chain":["acme"],"hotel":[7]}`
	d := Dialect{Charsets: map[string]string{"chain": "CHARACTER SET utf8mb4 COLLATE utf8mb4_bin"}}
	// A bound value on the left keeps its argument before the document's.
	f := d.InScope(dialect.Frag{SQL: "?", Args: []any{"acme"}}, chain, doc)
	if strings.Count(f.SQL, "?") != len(f.Args) || len(f.Args) != 4 ||
		f.Args[0] != "acme" || f.Args[1] != doc || f.Args[2] != "acme" || f.Args[3] != doc {
		t.Fatalf("%s %v", f.SQL, f.Args)
	}
	for _, want := range []string{
		"JSON_TABLE(?, '$.\"chain\"[*]' COLUMNS (`id` VARCHAR(256) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin PATH '$'))",
		"CAST(? AS BINARY) IN (SELECT `_tms`.`id` FROM JSON_TABLE(?, '$.\"chain\"[*]' COLUMNS (`id` VARBINARY(256) PATH '$'))",
	} {
		if !strings.Contains(f.SQL, want) {
			t.Errorf("missing %s in %s", want, f.SQL)
		}
	}
	f = d.InScope(dialect.Frag{SQL: "`h`.`id`"}, hotel, doc)
	if f.SQL != "`h`.`id` IN (SELECT `_tms`.`id` FROM JSON_TABLE(?, '$.\"hotel\"[*]' COLUMNS (`id` BIGINT PATH '$')) AS `_tms`)" || len(f.Args) != 1 {
		t.Fatalf("%s %v", f.SQL, f.Args)
	}
}

func TestIdent(t *testing.T) {
	for s, want := range map[string]bool{"utf8mb4_bin": true, "ascii": true, "": false, "x y": false, "x'y": false, "x;--": false} {
		if ident(s) != want {
			t.Errorf("ident(%q) = %v", s, !want)
		}
	}
}
