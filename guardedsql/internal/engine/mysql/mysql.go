// Package mysql is the MySQL / MariaDB dialect of guardedsql, for
// github.com/go-sql-driver/mysql.
//
// MySQL has no row-level security: the guard's predicates are the only
// boundary, which is why they are written so the optimizer can make them
// the plan's driving index path rather than a filter.
//
// # Scope expansion
//
// A level (or a shape of grants confined to ancestors) whose entry in the
// typed scope document holds exactly one id, the common scope of one
// tenant, is tested against that id bound as a typed parameter, as a range
// of one value:
//
//	_tm2.hotel_id BETWEEN ? AND ?                      (int64 12, twice)
//	(_tm2.chain_id BETWEEN CONVERT(? USING utf8mb4) COLLATE utf8mb4_bin AND CONVERT(...)
//	    AND CAST(_tm2.chain_id AS BINARY) = CAST(? AS BINARY))   ("acme")
//
// which MariaDB plans as a constant lookup (ref const), the plan of a
// hand-written h.chain_id = ?; the JSON_TABLE form below costs a
// duplicate weedout through a temporary table on every statement. Why a
// range and not "=", and how the text id stays exact, is told at
// [Dialect.oneEntry]. The form depends on the scope's shape (its levels, one
// id or several), never on the ids; a text level takes it only when the
// character set and collation of its columns are known ([LevelCharsets]).
//
// Several ids: the typed scope document ({"chain":["acme","initech"]}) is
// bound as a parameter of every scope test and expanded with JSON_TABLE at
// the column that carries the level at the end of the foreign-key path:
//
//	b.room_id IN (SELECT _tm1.id FROM rooms AS _tm1 JOIN hotels AS _tm2 ON _tm2.id = _tm1.hotel_id
//	    WHERE (_tm2.chain_id, CAST(_tm2.chain_id AS BINARY)) IN (SELECT _tms.c0, _tms.b0
//	        FROM JSON_TABLE(?, '$."chain"[*]' COLUMNS (c0 VARCHAR(256) PATH '$',
//	            b0 VARBINARY(256) PATH '$')) AS _tms))
//
// MariaDB 10.11 flattens the subquery into a semi-join; EXPLAIN shows
// json_table driving hotels (ref on the chain index), then rooms (ref on
// hotel_id), then bookings (ref on room_id): one statement text for every
// scope size, the join order of a hand-written IN list, with the
// (json_table, hotels) pairs deduplicated by a duplicate weedout.
//
// Integer levels use a BIGINT column. Text levels use two columns of the
// same JSON value, compared with the same entry. The VARCHAR one is
// declared with the character set and collation of the level's columns
// (read from information_schema at start-up, see LevelCharsets): only then
// does the optimizer look the ids up in the columns' index (with a
// different character set MariaDB scans the whole index and joins the
// JSON rows with a block nested loop). The VARBINARY one makes the match
// exact: under a case- or accent-insensitive collation (MariaDB's default
// utf8mb4_general_ci) and the PAD SPACE collations (utf8mb4_bin included),
// "ACME" or "acme " would otherwise select the tenant "acme", and
// JSON_TABLE converts a string it cannot represent in an ascii column to
// '?' with only a warning. Both columns live in one JSON_TABLE, so the
// optimizer plans one semi-join: with a second JSON_TABLE for the binary
// test (the earlier shape) MariaDB joined the two with a block nested loop
// inside a duplicate weedout, a fixed cost on every statement. Prefer a
// binary collation (utf8mb4_bin, ascii_bin) for text tenant keys anyway;
// ids of an ascii or utf8mb4 column compare byte for byte with the JSON
// text, other character sets never match non-ASCII ids.
//
// JSON_TABLE coerces silently ("12abc" becomes 12 in a BIGINT column, with
// only a warning, even with ERROR ON ERROR). The document is therefore
// never built from claim text: engine.EncodeScope writes it from ids
// validated against the level's key type, and the VARCHAR/VARBINARY columns
// are sized to hold the longest id package scope admits, so nothing is
// truncated. The dialect checks the entries again before rendering either
// form: a level whose entries are not all canonical ids of its key kind
// matches nothing.
//
// Grants confined to ancestors ("hotel 12 within chain acme") are tuples
// of the document under a shape key ({"chain/hotel":[["acme",12]]}),
// tested as a row IN over one JSON_TABLE with a column per level ('$[0]',
// '$[1]', typed as above) and, for a text level, its VARBINARY twin.
//
// No WITH prelude is used: MariaDB before 11 does not accept WITH before
// UPDATE or DELETE, so each scope test carries its own parameter.
//
// # MySQL 8
//
// The generated SQL is valid on MySQL 8.0 as well. Differences worth
// knowing: MySQL 8 converts EXISTS into semi-joins only from 8.0.16 and
// single-table UPDATE/DELETE subqueries only from 8.0.21 (MariaDB 10.11
// runs them as dependent subqueries, so a mutation's own WHERE should
// select few rows); MySQL's default collation utf8mb4_0900_ai_ci is NO PAD
// but accent- and case-insensitive, so the VARBINARY check matters there
// too; MySQL writes JSON_TABLE defaults as DEFAULT 'json' ON EMPTY where
// MariaDB also accepts a bare literal (this dialect uses neither); MySQL 8
// has MEMBER OF and LATERAL, which MariaDB lacks and this dialect does not
// use; the one-id form (BETWEEN, CONVERT ... COLLATE, CAST AS BINARY) is
// plain MySQL 8 SQL, but its plan was measured on MariaDB 10.11 only; and
// MySQL before 8.0.14 rejects JSON_TABLE arguments that refer to
// outer columns (not needed here: the argument is always a parameter).
//
// LIKE patterns use '\\' as the escape literal, which is correct unless the
// server runs with sql_mode NO_BACKSLASH_ESCAPES.
package mysql

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	sq "github.com/Masterminds/squirrel"

	"github.com/tenantmcp/tenantmcp/builder"
	"github.com/tenantmcp/tenantmcp/guardedsql/internal/engine"
	"github.com/tenantmcp/tenantmcp/internal/sqlast"
	"github.com/tenantmcp/tenantmcp/scope"
)

// Dialect is the MySQL / MariaDB dialect. The zero value is ready to use.
type Dialect struct {
	// Style overrides the path predicate shape (benchmarks compare both);
	// the default is PathIn.
	Style engine.PathStyle
	// Charsets gives, per text level, the character set and collation of
	// its columns ("CHARACTER SET utf8mb4 COLLATE utf8mb4_bin"), which the
	// JSON_TABLE column must share for the optimizer to look the ids up
	// in the columns' indexes (see LevelCharsets).
	Charsets map[string]Charset
	// MariaDB is set for a MariaDB server, which takes INSERT and DELETE
	// ... RETURNING (writes.go).
	MariaDB bool
}

var _ engine.Dialect = Dialect{}

// Name implements engine.Dialect.
func (Dialect) Name() string { return "mysql" }

// Quote implements engine.Dialect.
func (Dialect) Quote(id string) string { return "`" + strings.ReplaceAll(id, "`", "``") + "`" }

// Placeholders implements engine.Dialect.
func (Dialect) Placeholders() sq.PlaceholderFormat { return sq.Question }

// LikeEscape implements engine.Dialect: '\\' is one backslash in
// MySQL's default sql_mode.
func (Dialect) LikeEscape() string { return `'\\'` }

// DualTable implements engine.Dialect.
func (Dialect) DualTable() string { return "DUAL" }

// PathStyle implements engine.Dialect.
func (d Dialect) PathStyle() engine.PathStyle { return d.Style }

// Prelude implements engine.Dialect: each scope test binds the document.
func (Dialect) Prelude(string) engine.Frag { return engine.Frag{} }

// idWidth holds any id package scope admits (MaxIDLength bytes), so that
// JSON_TABLE never truncates one into another tenant's id.
var idWidth = strconv.Itoa(scope.MaxIDLength)

// matchNothing is the scope test of a level whose entries in the document
// are missing or malformed: no row is in such a scope.
var matchNothing = engine.Frag{SQL: "(1 = 0)"}

// InScope implements engine.Dialect.
func (d Dialect) InScope(x engine.Frag, lvl *sqlast.Level, doc string) engine.Frag {
	sh := engine.Shape{Key: lvl.Name, Levels: []*sqlast.Level{lvl}}
	return d.scopeTest([]engine.Frag{x}, sh, false, doc)
}

// InTuples implements engine.Dialect: a row-value IN over JSON_TABLE rows
// of the shape's tuples, typed like InScope's columns.
func (d Dialect) InTuples(xs []engine.Frag, sh engine.Shape, doc string) engine.Frag {
	return d.scopeTest(xs, sh, true, doc)
}

// scopeTest renders the test of the values xs against the entries of the
// document under sh.Key: single ids (InScope) or tuples (InTuples).
//
// Invariant: the SQL text depends on the scope's shape (its levels, and
// whether the key holds one entry or several), never on the ids, which
// are bound; and no id reaches the engine unless it is a canonical value
// of its level's key kind: a document whose entries under the key are
// missing or malformed matches nothing, whatever the others hold
// (JSON_TABLE and MySQL's comparisons would coerce "12abc" to 12).
//
// One entry (the common scope of one tenant) is compared as typed bound
// values (see [Dialect.oneEntry]); several are expanded with JSON_TABLE
// (see [Dialect.inTable]).
func (d Dialect) scopeTest(xs []engine.Frag, sh engine.Shape, tuples bool, doc string) engine.Frag {
	ents, ok := entries(doc, sh, tuples)
	switch {
	case !ok || len(ents) == 0:
		return matchNothing
	case len(ents) == 1 && d.scalarLevels(sh):
		return d.oneEntry(xs, sh, ents[0])
	}
	path, elem := `'$."`+sh.Key+`"[*]'`, "'$'"
	if tuples {
		elem = ""
	}
	return d.inTable(xs, sh, path, elem, doc)
}

// entries reads the entries under sh.Key of a scope document, each as one
// typed value per level of sh (int64 for an IntKey level, string for a
// TextKey one), and reports false if any entry is not exactly that: an
// integer written canonically (not 1e1, 12.0, "12", 12abc or beyond
// int64), a JSON string, or for a tuple an array of as many of those as
// sh has levels.
func entries(doc string, sh engine.Shape, tuples bool) ([][]any, bool) {
	var m map[string]json.RawMessage
	if json.Unmarshal([]byte(doc), &m) != nil {
		return nil, false
	}
	raw, found := m[sh.Key]
	if !found {
		return nil, true
	}
	var list []json.RawMessage
	if json.Unmarshal(raw, &list) != nil {
		return nil, false
	}
	out := make([][]any, 0, len(list))
	for _, e := range list {
		vals := []json.RawMessage{e}
		if tuples {
			if json.Unmarshal(e, &vals) != nil || len(vals) != len(sh.Levels) {
				return nil, false
			}
		}
		ent := make([]any, len(sh.Levels))
		for i, l := range sh.Levels {
			v, ok := typedID(l, vals[i])
			if !ok {
				return nil, false
			}
			ent[i] = v
		}
		out = append(out, ent)
	}
	return out, true
}

// typedID converts one JSON id of the document to the Go value bound for
// level l, reporting false unless it is a canonical id of l's key kind.
func typedID(l *sqlast.Level, raw json.RawMessage) (any, bool) {
	switch l.Key {
	case sqlast.IntKey:
		return engine.CanonicalInt(string(raw))
	case sqlast.TextKey:
		var s string
		if len(raw) == 0 || raw[0] != '"' || json.Unmarshal(raw, &s) != nil || s == "" || len(s) > scope.MaxIDLength {
			return nil, false
		}
		return s, true
	}
	return nil, false
}

// scalarLevels reports whether every level of sh can be compared with a
// bound value in the way the optimizer turns into a constant index lookup:
// an integer level always; a text level when the character set and
// collation of its columns are known (see [Dialect.oneEntry]).
func (d Dialect) scalarLevels(sh engine.Shape) bool {
	for _, l := range sh.Levels {
		if l.Key == sqlast.TextKey && d.Charsets[l.Name] == (Charset{}) {
			return false
		}
	}
	return true
}

// oneEntry renders the test of xs against the document's only entry of
// sh, ent (typed by entries), as comparisons with bound values:
//
//	x BETWEEN ? AND ?
//	(x BETWEEN CONVERT(? USING cs) COLLATE coll AND CONVERT(? USING cs) COLLATE coll
//	    AND CAST(x AS BINARY) = CAST(? AS BINARY))
//
// for an integer and a text level, each bound value the id (and their
// conjunction for a tuple). MariaDB plans a range of one value as a lookup
// of a constant (ref const), where the JSON_TABLE semi-join becomes a
// duplicate weedout with a temporary table on every statement.
//
// Why BETWEEN and not "=": the optimizer merges equalities with constants
// across the whole WHERE clause, so x = ? in the guard's own conjunct makes
// the same test true inside the CASE WHEN <scope> THEN <condition> END
// that keeps a caller's condition from being evaluated on other tenants'
// rows (see guard's order.go); on a row read by primary key during
// optimization, the condition would then be evaluated on another tenant's
// row, and its error (an overflow) would tell that row's values. A range
// is not merged; BETWEEN v AND v is the same test as x = v under the
// column's collation, with the same NULL result.
//
// The integer is bound as an int64, never as text, so MySQL compares it as
// an integer. The text id is converted to the columns' character set and
// collation (an id that set cannot hold would otherwise make MySQL refuse
// the comparison as an illegal mix of collations; converted, it becomes
// '?' and only the binary test decides), and compared a second time byte
// for byte, which makes the match exact under case-, accent- and
// pad-insensitive collations as the JSON_TABLE form's VARBINARY column
// does.
func (d Dialect) oneEntry(xs []engine.Frag, sh engine.Shape, ent []any) engine.Frag {
	var conds []string
	var args []any
	for i, l := range sh.Levels {
		x := xs[i]
		if l.Key == sqlast.IntKey {
			conds = append(conds, x.SQL+" BETWEEN ? AND ?")
			args = append(append(args, x.Args...), ent[i], ent[i])
			continue
		}
		cs := d.Charsets[l.Name]
		conv := "CONVERT(? USING " + cs.Set + ") COLLATE " + cs.Collation
		conds = append(conds, x.SQL+" BETWEEN "+conv+" AND "+conv, "CAST("+x.SQL+" AS BINARY) = CAST(? AS BINARY)")
		args = append(append(args, x.Args...), ent[i], ent[i])
		args = append(append(args, x.Args...), ent[i])
	}
	return engine.Frag{SQL: "(" + strings.Join(conds, " AND ") + ")", Args: args}
}

// inTable is the semi-join of several entries: the values xs (one per
// level of sh) as a row IN over one JSON_TABLE of the document's entries
// at path, one column per level ('$[i]' of a tuple, or elem for a single
// id), and for every text level a second, VARBINARY column of the same
// JSON value compared with CAST(x AS BINARY). A row matches only when one
// and the same entry equals it under the column's collation (which the
// optimizer turns into index lookups) and byte for byte (which makes the
// match exact: see the package documentation). One JSON_TABLE, not one per
// comparison, because MariaDB joins a second one with a block nested loop
// inside a duplicate-weedout semi-join, a fixed cost on every statement.
func (d Dialect) inTable(xs []engine.Frag, sh engine.Shape, path, elem, doc string) engine.Frag {
	// path and the column names are built from validated lower-case
	// identifiers, '/' and digits.
	var lhs, cols, sel []string
	var args []any
	add := func(lx, name, typ, jpath string, a []any) {
		lhs = append(lhs, lx)
		args = append(args, a...)
		cols = append(cols, "`"+name+"` "+typ+" PATH "+jpath)
		sel = append(sel, "`_tms`.`"+name+"`")
	}
	for i, l := range sh.Levels {
		jpath := "'$[" + strconv.Itoa(i) + "]'"
		if elem != "" {
			jpath = elem
		}
		n := strconv.Itoa(i)
		if l.Key == sqlast.IntKey {
			add(xs[i].SQL, "c"+n, "BIGINT", jpath, xs[i].Args)
			continue
		}
		typ := "VARCHAR(" + idWidth + ")"
		if cs := d.Charsets[l.Name]; cs != (Charset{}) {
			typ += " " + cs.clause()
		}
		add(xs[i].SQL, "c"+n, typ, jpath, xs[i].Args)
		add("CAST("+xs[i].SQL+" AS BINARY)", "b"+n, "VARBINARY("+idWidth+")", jpath, xs[i].Args)
	}
	args = append(args, doc)
	l, r := strings.Join(lhs, ", "), strings.Join(sel, ", ")
	if len(lhs) > 1 {
		l = "(" + l + ")"
	}
	return engine.Frag{
		SQL:  "(" + l + " IN (SELECT " + r + " FROM JSON_TABLE(?, " + path + " COLUMNS (" + strings.Join(cols, ", ") + ")) AS `_tms`))",
		Args: args,
	}
}

// Charset is the character set and collation shared by the columns of a
// text level, plain catalog names (see [LevelCharsets]).
type Charset struct {
	Set, Collation string
}

// clause declares a column of cs.
func (cs Charset) clause() string {
	return "CHARACTER SET " + cs.Set + " COLLATE " + cs.Collation
}

// LevelCharsets reads from information_schema the character set and
// collation of every text level column of g in the current database and
// returns it for each level whose columns all agree. A level whose
// columns disagree gets none: its ids are still matched exactly (by the
// binary comparison), but always through JSON_TABLE, and the optimizer
// may not use the columns' indexes for them.
func LevelCharsets(ctx context.Context, q engine.Querier, g *sqlast.Schema) (map[string]Charset, error) {
	rows, err := q.Query(ctx, `SELECT table_name, column_name, character_set_name, collation_name
FROM information_schema.columns
WHERE table_schema = DATABASE() AND character_set_name IS NOT NULL AND collation_name IS NOT NULL`)
	if err != nil {
		return nil, fmt.Errorf("mysql: reading column collations: %w", err)
	}
	cols := map[[2]string]Charset{}
	for rows.Next() {
		var t, c string
		var v Charset
		if err := rows.Scan(&t, &c, &v.Set, &v.Collation); err != nil {
			rows.Close()
			return nil, err
		}
		cols[[2]string{t, c}] = v
	}
	if err := rows.Err(); err != nil {
		rows.Close()
		return nil, err
	}
	if err := rows.Close(); err != nil {
		return nil, err
	}
	seen := map[string]Charset{}
	mixed := map[string]bool{}
	for _, name := range g.Names {
		t := g.Tables[name]
		for _, lc := range t.LevelCols {
			if lc.Level.Key != sqlast.TextKey {
				continue
			}
			v, ok := cols[[2]string{t.Name, lc.Col}]
			if !ok {
				continue
			}
			if prev, ok := seen[lc.Level.Name]; ok && prev != v {
				mixed[lc.Level.Name] = true
			}
			seen[lc.Level.Name] = v
		}
	}
	out := map[string]Charset{}
	for lvl, v := range seen {
		if mixed[lvl] || !ident(v.Set) || !ident(v.Collation) {
			continue
		}
		out[lvl] = v
	}
	return out, nil
}

// ident reports whether s is a plain catalog name (letters, digits, '_').
func ident(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_') {
			return false
		}
	}
	return true
}

// NeedsTx implements engine.Dialect.
func (Dialect) NeedsTx() bool { return false }

// Session implements engine.Dialect.
func (Dialect) Session(context.Context, engine.Querier, scope.Scope, string) error { return nil }

// Introspect implements engine.Dialect for the connection's current
// database.
func (Dialect) Introspect(ctx context.Context, q engine.Querier) ([]builder.TableDef, error) {
	var db *string
	if err := scalar(ctx, q, `SELECT DATABASE()`, &db); err != nil {
		return nil, fmt.Errorf("mysql: current database: %w", err)
	}
	if db == nil {
		return nil, fmt.Errorf("mysql: no database selected (name one in the DSN)")
	}
	return engine.InformationSchema(ctx, q, sq.Question, engine.FlavorMySQL, *db)
}

// Catalog implements engine.CatalogChecker. Text level columns need no
// collation check here: InScope compares them a second time as binary
// strings. Path-key columns compare in their own collation on both sides
// of a foreign key (InnoDB requires the same one), which is also the
// collation their unique key is enforced in, so a join still finds at
// most the one row the key admits.
func (d Dialect) Catalog(ctx context.Context, q engine.Querier, _ [][2]string) ([]builder.TableDef, []string, error) {
	defs, err := d.Introspect(ctx, q)
	return defs, nil, err
}

// FKEnforced implements engine.CatalogChecker from the session's
// foreign_key_checks.
func (Dialect) FKEnforced(ctx context.Context, q engine.Querier) (bool, string, error) {
	var v int64
	if err := scalar(ctx, q, `SELECT @@SESSION.foreign_key_checks`, &v); err != nil {
		return false, "", fmt.Errorf("mysql: foreign_key_checks: %w", err)
	}
	if v != 1 {
		return false, "foreign_key_checks is off", nil
	}
	return true, "", nil
}

// scalar scans the first column of query's first row (if any) into dest.
func scalar(ctx context.Context, q engine.Querier, query string, dest any) error {
	rows, err := q.Query(ctx, query)
	if err != nil {
		return err
	}
	if rows.Next() {
		err = rows.Scan(dest)
	}
	if err == nil {
		err = rows.Err()
	}
	if cerr := rows.Close(); err == nil {
		err = cerr
	}
	return err
}
