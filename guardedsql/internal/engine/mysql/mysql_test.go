package mysql

import (
	"strings"
	"testing"

	"github.com/tenantmcp/tenantmcp/guardedsql/internal/engine"
	"github.com/tenantmcp/tenantmcp/internal/sqlast"
)

func TestInScope(t *testing.T) {
	chain := &sqlast.Level{Name: "chain", Key: sqlast.TextKey}
	hotel := &sqlast.Level{Name: "hotel", Key: sqlast.IntKey}
	doc := `{"chain":["acme"],"hotel":[7]}`
	d := Dialect{Charsets: map[string]string{"chain": "CHARACTER SET utf8mb4 COLLATE utf8mb4_bin"}}
	// A bound value on the left keeps its arguments before the document's.
	f := d.InScope(engine.Frag{SQL: "?", Args: []any{"acme"}}, chain, doc)
	if strings.Count(f.SQL, "?") != len(f.Args) || len(f.Args) != 3 ||
		f.Args[0] != "acme" || f.Args[1] != "acme" || f.Args[2] != doc {
		t.Fatalf("%s %v", f.SQL, f.Args)
	}
	// One JSON_TABLE: the collation match and the exact (binary) match
	// are made against the same entry, in one semi-join.
	want := "((?, CAST(? AS BINARY)) IN (SELECT `_tms`.`c0`, `_tms`.`b0` FROM JSON_TABLE(?, '$.\"chain\"[*]' COLUMNS (" +
		"`c0` VARCHAR(256) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin PATH '$', `b0` VARBINARY(256) PATH '$')) AS `_tms`))"
	if f.SQL != want {
		t.Errorf("got  %s\nwant %s", f.SQL, want)
	}
	f = d.InScope(engine.Frag{SQL: "`h`.`id`"}, hotel, doc)
	if f.SQL != "(`h`.`id` IN (SELECT `_tms`.`c0` FROM JSON_TABLE(?, '$.\"hotel\"[*]' COLUMNS (`c0` BIGINT PATH '$')) AS `_tms`))" || len(f.Args) != 1 {
		t.Fatalf("%s %v", f.SQL, f.Args)
	}
}

func TestInTuples(t *testing.T) {
	chain := &sqlast.Level{Name: "chain", Key: sqlast.TextKey}
	hotel := &sqlast.Level{Name: "hotel", Key: sqlast.IntKey}
	doc := `{"chain/hotel":[["acme",7]]}`
	d := Dialect{}
	f := d.InTuples([]engine.Frag{{SQL: "`h`.`chain_id`"}, {SQL: "?", Args: []any{int64(7)}}},
		engine.Shape{Key: "chain/hotel", Levels: []*sqlast.Level{chain, hotel}}, doc)
	want := "((`h`.`chain_id`, CAST(`h`.`chain_id` AS BINARY), ?) IN (SELECT `_tms`.`c0`, `_tms`.`b0`, `_tms`.`c1` FROM JSON_TABLE(?, '$.\"chain/hotel\"[*]' COLUMNS (" +
		"`c0` VARCHAR(256) PATH '$[0]', `b0` VARBINARY(256) PATH '$[0]', `c1` BIGINT PATH '$[1]')) AS `_tms`))"
	if f.SQL != want || len(f.Args) != 2 || f.Args[0] != int64(7) || f.Args[1] != doc {
		t.Fatalf("got  %s %v\nwant %s", f.SQL, f.Args, want)
	}
}

func TestIdent(t *testing.T) {
	for s, want := range map[string]bool{"utf8mb4_bin": true, "ascii": true, "": false, "x y": false, "x'y": false, "x;--": false} {
		if ident(s) != want {
			t.Errorf("ident(%q) = %v", s, !want)
		}
	}
}
