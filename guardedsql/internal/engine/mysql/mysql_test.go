package mysql

import (
	"slices"
	"strings"
	"testing"

	"github.com/tenantmcp/tenantmcp/guardedsql/internal/engine"
	"github.com/tenantmcp/tenantmcp/internal/sqlast"
)

func TestInScope(t *testing.T) {
	chain := &sqlast.Level{Name: "chain", Key: sqlast.TextKey}
	hotel := &sqlast.Level{Name: "hotel", Key: sqlast.IntKey}
	doc := `{"chain":["acme","initech"],"hotel":[7,9]}`
	d := Dialect{Charsets: map[string]Charset{"chain": {Set: "utf8mb4", Collation: "utf8mb4_bin"}}}
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

// TestInScopeOneID: a level holding one id is compared with typed bound
// values, and the text does not depend on the id.
func TestInScopeOneID(t *testing.T) {
	chain := &sqlast.Level{Name: "chain", Key: sqlast.TextKey}
	hotel := &sqlast.Level{Name: "hotel", Key: sqlast.IntKey}
	d := Dialect{Charsets: map[string]Charset{"chain": {Set: "ascii", Collation: "ascii_bin"}}}
	f := d.InScope(engine.Frag{SQL: "`h`.`id`"}, hotel, `{"chain":["acme"],"hotel":[7]}`)
	if f.SQL != "(`h`.`id` BETWEEN ? AND ?)" || len(f.Args) != 2 || f.Args[0] != int64(7) || f.Args[1] != int64(7) {
		t.Fatalf("%s %#v", f.SQL, f.Args)
	}
	g := d.InScope(engine.Frag{SQL: "`h`.`id`"}, hotel, `{"hotel":[-9000000000000000000]}`)
	if g.SQL != f.SQL || g.Args[0] != int64(-9000000000000000000) || g.Args[1] != int64(-9000000000000000000) {
		t.Fatalf("%s %#v", g.SQL, g.Args)
	}
	f = d.InScope(engine.Frag{SQL: "?", Args: []any{"x"}}, chain, `{"chain":["acme"]}`)
	want := "(? BETWEEN CONVERT(? USING ascii) COLLATE ascii_bin AND CONVERT(? USING ascii) COLLATE ascii_bin AND CAST(? AS BINARY) = CAST(? AS BINARY))"
	if f.SQL != want || !slices.Equal(f.Args, []any{"x", "acme", "acme", "x", "acme"}) {
		t.Fatalf("got  %s %#v\nwant %s", f.SQL, f.Args, want)
	}
	// A text level whose columns' collation is unknown keeps JSON_TABLE:
	// a bound id the column's character set cannot hold would be refused.
	f = Dialect{}.InScope(engine.Frag{SQL: "`h`.`chain_id`"}, chain, `{"chain":["acme"]}`)
	if !strings.Contains(f.SQL, "JSON_TABLE") {
		t.Fatalf("%s", f.SQL)
	}
}

// TestScopeTestMalformed: an entry that is not a canonical id of its
// level's kind, or a key that is not a list, matches nothing in either
// form, instead of reaching JSON_TABLE's or MySQL's coercions.
func TestScopeTestMalformed(t *testing.T) {
	chain := &sqlast.Level{Name: "chain", Key: sqlast.TextKey}
	hotel := &sqlast.Level{Name: "hotel", Key: sqlast.IntKey}
	d := Dialect{Charsets: map[string]Charset{"chain": {Set: "ascii", Collation: "ascii_bin"}}}
	for _, doc := range []string{
		`{"hotel":["12"]}`, `{"hotel":["12abc"]}`, `{"hotel":[1e1]}`, `{"hotel":[12.0]}`, `{"hotel":[[12]]}`,
		`{"hotel":[99999999999999999999]}`, `{"hotel":[012]}`, `{"hotel":[-0]}`, `{"hotel":[null]}`, `{"hotel":12}`,
		`{"hotel":[1,"2"]}`, `{"hotel":[]}`, `{}`, `not json`, `{"hotel":[12,{"a":1}]}`,
	} {
		if f := d.InScope(engine.Frag{SQL: "`h`.`id`"}, hotel, doc); f.SQL != matchNothing.SQL || len(f.Args) != 0 {
			t.Errorf("%s: %s %v", doc, f.SQL, f.Args)
		}
	}
	for _, doc := range []string{`{"chain":[7]}`, `{"chain":[["acme"]]}`, `{"chain":[""]}`, `{"chain":[null]}`, `{"chain":["a",true]}`} {
		if f := d.InScope(engine.Frag{SQL: "`h`.`chain_id`"}, chain, doc); f.SQL != matchNothing.SQL {
			t.Errorf("%s: %s", doc, f.SQL)
		}
	}
	sh := engine.Shape{Key: "chain/hotel", Levels: []*sqlast.Level{chain, hotel}}
	for _, doc := range []string{`{"chain/hotel":[["acme"]]}`, `{"chain/hotel":[["acme","7"]]}`, `{"chain/hotel":[["acme",7,8]]}`, `{"chain/hotel":["acme"]}`} {
		if f := d.InTuples([]engine.Frag{{SQL: "a"}, {SQL: "b"}}, sh, doc); f.SQL != matchNothing.SQL {
			t.Errorf("%s: %s", doc, f.SQL)
		}
	}
}

func TestInTuples(t *testing.T) {
	chain := &sqlast.Level{Name: "chain", Key: sqlast.TextKey}
	hotel := &sqlast.Level{Name: "hotel", Key: sqlast.IntKey}
	sh := engine.Shape{Key: "chain/hotel", Levels: []*sqlast.Level{chain, hotel}}
	doc := `{"chain/hotel":[["acme",7],["acme",8]]}`
	d := Dialect{}
	f := d.InTuples([]engine.Frag{{SQL: "`h`.`chain_id`"}, {SQL: "?", Args: []any{int64(7)}}}, sh, doc)
	want := "((`h`.`chain_id`, CAST(`h`.`chain_id` AS BINARY), ?) IN (SELECT `_tms`.`c0`, `_tms`.`b0`, `_tms`.`c1` FROM JSON_TABLE(?, '$.\"chain/hotel\"[*]' COLUMNS (" +
		"`c0` VARCHAR(256) PATH '$[0]', `b0` VARBINARY(256) PATH '$[0]', `c1` BIGINT PATH '$[1]')) AS `_tms`))"
	if f.SQL != want || len(f.Args) != 2 || f.Args[0] != int64(7) || f.Args[1] != doc {
		t.Fatalf("got  %s %v\nwant %s", f.SQL, f.Args, want)
	}
	// One tuple: typed comparisons, one per level (two for text).
	d.Charsets = map[string]Charset{"chain": {Set: "utf8mb4", Collation: "utf8mb4_bin"}}
	f = d.InTuples([]engine.Frag{{SQL: "`h`.`chain_id`"}, {SQL: "`h`.`id`"}}, sh, `{"chain/hotel":[["acme",7]]}`)
	want = "(`h`.`chain_id` BETWEEN CONVERT(? USING utf8mb4) COLLATE utf8mb4_bin AND CONVERT(? USING utf8mb4) COLLATE utf8mb4_bin" +
		" AND CAST(`h`.`chain_id` AS BINARY) = CAST(? AS BINARY) AND `h`.`id` BETWEEN ? AND ?)"
	if f.SQL != want || !slices.Equal(f.Args, []any{"acme", "acme", "acme", int64(7), int64(7)}) {
		t.Fatalf("got  %s %#v\nwant %s", f.SQL, f.Args, want)
	}
}

func TestIdent(t *testing.T) {
	for s, want := range map[string]bool{"utf8mb4_bin": true, "ascii": true, "": false, "x y": false, "x'y": false, "x;--": false} {
		if ident(s) != want {
			t.Errorf("ident(%q) = %v", s, !want)
		}
	}
}
