package postgres

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/tenantmcp/tenantmcp/internal/guardfault"
	"github.com/tenantmcp/tenantmcp/internal/sqlast"
)

// Policy is the generated row-level security policy of one tenant-bound
// table.
type Policy struct {
	Table string
	Name  string
	// Expr is the USING expression: the row lies under a grant.
	Expr string
	// Check is the WITH CHECK expression: Expr, every level column NULL,
	// granted, reached through a row the writer sees, or unchanged
	// (writeCheckExpr), and the other checked keys as the guard tests
	// them (pathsCheckExpr).
	Check string
	// Marker identifies the generated policy (namespace, generator
	// version, hash of setting, table and expression); RLSDDL stores it,
	// with a hash of the installed expressions, as the policy's comment.
	Marker string
}

// Policies returns the policy of every tenant-bound table of g, in table
// name order.
func (d Dialect) Policies(g *sqlast.Schema) []Policy {
	var out []Policy
	for _, name := range g.Names {
		t := g.Tables[name]
		if t.Global {
			continue
		}
		pg := &policyGen{d: d}
		var expr, check string
		if t.ByRef {
			expr, check = pg.byRefExprs(t) // (h4-ref)
		} else {
			expr = pg.tableExpr(t)
			check = pg.pathsCheckExpr(t, pg.writeCheckExpr(t, expr)) // (h4-ref) byref.go
		}
		sum := sha256.Sum256([]byte(d.Setting() + "\x00" + t.Name + "\x00" + expr + "\x00" + check))
		out = append(out, Policy{
			Table:  t.Name,
			Name:   d.PolicyName(),
			Expr:   expr,
			Check:  check,
			Marker: d.ns() + ":v2:" + hex.EncodeToString(sum[:12]),
		})
	}
	return out
}

// RLSDDL returns the statements that install row-level security for the
// tenant-bound tables of g, meant to run in one transaction as the tables'
// owner: for each table ENABLE and FORCE ROW LEVEL SECURITY and the policy
// (dropped and re-created, so the statements can be re-run after a schema
// change), then one DO block that stamps every policy with its marker
// comment. The stamp is the generator's marker plus a hash of the policy
// expressions as PostgreSQL itself deparses them once installed (under
// search_path pg_catalog, so the text does not depend on the session), so
// Check can tell a current policy from one generated for another schema,
// left behind by a failed migration, or altered afterwards. Global tables
// are left alone.
func (d Dialect) RLSDDL(g *sqlast.Schema) []string {
	var out, rels, markers []string
	ps := d.Policies(g)
	if len(ps) > 0 {
		out = append(out, d.signedDDL()...)
		out = append(out, d.byRefDDL(g)...) // (h4-ref): before the policies that call its functions
		out = append(out, d.keepDDL(g)...)  // keep.go: likewise
	}
	for _, p := range ps {
		qt := d.Quote(p.Table)
		qp := d.Quote(p.Name)
		out = append(out,
			"ALTER TABLE "+qt+" ENABLE ROW LEVEL SECURITY",
			"ALTER TABLE "+qt+" FORCE ROW LEVEL SECURITY",
			"DROP POLICY IF EXISTS "+qp+" ON "+qt,
			"CREATE POLICY "+qp+" ON "+qt+" AS PERMISSIVE FOR ALL TO PUBLIC\n  USING ("+p.Expr+")\n  WITH CHECK ("+p.Check+")",
		)
		rels = append(rels, literal(qt))
		markers = append(markers, literal(p.Marker))
	}
	if len(ps) == 0 {
		return out
	}
	out = append(out, `DO $tm$
DECLARE
  prev text := pg_catalog.current_setting('search_path');
  rels pg_catalog.regclass[] := ARRAY[`+strings.Join(rels, ", ")+`]::pg_catalog.regclass[];
  markers text[] := ARRAY[`+strings.Join(markers, ", ")+`];
  h text;
BEGIN
  PERFORM pg_catalog.set_config('search_path', 'pg_catalog', true);
  FOR i IN 1 .. pg_catalog.array_length(rels, 1) LOOP
    SELECT `+deparseHash+` INTO STRICT h
      FROM pg_catalog.pg_policy p WHERE p.polrelid = rels[i] AND p.polname = `+literal(d.PolicyName())+`;
    EXECUTE pg_catalog.format('COMMENT ON POLICY %I ON %s IS %L', `+literal(d.PolicyName())+`, rels[i], markers[i] || ':' || h);
  END LOOP;
  PERFORM pg_catalog.set_config('search_path', prev, true);
END
$tm$`)
	return out
}

// deparseHash is the SQL hash of an installed policy's expressions (alias
// p for pg_policy), to be evaluated under search_path pg_catalog.
const deparseHash = `pg_catalog.encode(pg_catalog.sha256(pg_catalog.convert_to(
      COALESCE(pg_catalog.pg_get_expr(p.polqual, p.polrelid), '') || E'\n' ||
      COALESCE(pg_catalog.pg_get_expr(p.polwithcheck, p.polrelid), ''), 'UTF8')), 'hex')`

// literal quotes s as an SQL string literal. Only generated text (markers)
// is quoted this way.
func literal(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

type policyGen struct {
	d Dialect
	n int
}

func (pg *policyGen) alias() string {
	pg.n++
	return fmt.Sprintf("_p%d", pg.n)
}

func (pg *policyGen) col(alias, c string) string {
	if alias == "" {
		return pg.d.Quote(c)
	}
	return pg.d.Quote(alias) + "." + pg.d.Quote(c)
}

// doc is the scope document the policies read: the one place it is
// obtained, only through the verifying function (see scopeDoc and
// signed.go). An unsigned, forged, replayed or missing setting yields
// NULL, whose id sets and tuple sets are empty.
func (pg *policyGen) doc() string { return pg.d.scopeDoc() }

// mentions is a condition, placed as the WHERE clause of every sublink
// that reads an entry of the verified document, under which PostgreSQL
// calls the verifying function at all: the raw, unverified setting
// contains the entry's key as the signer writes it (JSON-encoded, as
// engine.encodeScope does). The verification costs tens of microseconds
// and each of a table's id sets is an InitPlan of its own (PostgreSQL
// shares none between sublinks), so without it a one-chain booking read
// verified the document seven times, four of them for the hotel and
// chain/hotel entries a chain grant does not have. The condition has no
// column reference, so PostgreSQL tests it once, as the sublink's
// one-time filter, before the function scan.
//
// Invariant: it only ever removes ids, never adds one. When the setting
// does not contain the key, the verified document, a suffix of the
// setting, does not contain it either (as the signer writes keys; one
// spelled with JSON escapes would make its entry empty: fewer rows, never
// more), so the sublink's set was already empty; when it does, the set is
// read from the verifying function's result as before. A forged setting
// can make the test pass, which only costs a verification that yields
// NULL.
func (pg *policyGen) mentions(key string) string {
	needle, _ := json.Marshal(key)
	return "pg_catalog.strpos(pg_catalog.current_setting(" + literal(pg.d.Setting()) + ", true), " +
		literal(string(needle)) + ") OPERATOR(pg_catalog.>) 0"
}

// ids is the level's id set read from the verified document: an
// uncorrelated ARRAY sublink, evaluated once per statement.
func (pg *policyGen) ids(lvl *sqlast.Level) string {
	doc := pg.doc() + " -> " + literal(lvl.Name)
	if lvl.Key == sqlast.IntKey {
		return "ARRAY(SELECT _e::bigint FROM jsonb_array_elements_text(" + doc + ") AS _e WHERE " + pg.mentions(lvl.Name) + ")"
	}
	return "ARRAY(SELECT jsonb_array_elements_text(" + doc + ") WHERE " + pg.mentions(lvl.Name) + ")"
}

// tableExpr is the policy expression of t: true for a row that lies under
// one of the scope's grants, by the same anchors the guard uses (each
// level read at the nearest column that carries it).
func (pg *policyGen) tableExpr(t *sqlast.Table) string {
	if chained(t) {
		// The second, always false, arm keeps the term an OR: PostgreSQL
		// then uses it as a filter (or a bitmap scan of its own) but never
		// adds the array to the index condition of a parameterized scan
		// (the guard's join on the same column), where PostgreSQL 15
		// re-sorts the whole array on every rescan: at ten chains (500
		// rooms) that took a booking read from 10 to 36 ms.
		fk := t.Parent
		sub := pg.alias()
		c := pg.col("", fk.Cols[0])
		return "(" + c + " = ANY (ARRAY(SELECT " + pg.col(sub, fk.RefCols[0]) + " FROM " +
			pg.d.Quote(fk.To.Name) + " AS " + pg.d.Quote(sub) + ")) OR " + c + " = ANY ('{}'))"
	}
	return pg.fullExpr(t)
}

// fullExpr is the policy expression of t along its whole scope path, with
// no reliance on another table's policy (tableExpr's form when t's cannot
// be chained).
func (pg *policyGen) fullExpr(t *sqlast.Table) string {
	deep := 0
	for _, a := range t.Anchors {
		deep = max(deep, len(a.Hops))
	}
	expr := pg.at(t, "", 0, deep)
	shapes := pg.shapeTerms(t)
	if len(shapes) == 0 {
		return expr
	}
	if !strings.HasPrefix(expr, "(") || !strings.HasSuffix(expr, ")") {
		expr = "(" + expr + ")"
	}
	return "(" + expr + " OR " + strings.Join(shapes, " OR ") + ")"
}

// chained reports whether t's policy can defer to its scope parent's:
// "the parent row this row's foreign key references is visible", read
// through the parent's own (forced) row-level security in an uncorrelated
// ARRAY sublink that PostgreSQL evaluates once per statement.
//
// Invariant: for such a table the chained expression admits exactly the
// rows the full expression (at and shapeTerms over t's anchors) admits,
// given the foreign key holds. That is the case when t has no level column
// of its own and its scope parent is a single-column foreign key: then
// every anchor of t is its parent's anchor one hop further
// (builder.resolveAnchors), read at the same value (a shortcut anchor
// reads the foreign-key column, equal to the referenced key), the shape
// terms are the parent's, and a NULL key admits the row in neither form.
// Anywhere the foreign key does not hold (a deferred constraint inside a
// transaction) the chained form admits fewer rows, never more. A table
// with own level columns, or a composite parent key (which MATCH SIMPLE
// leaves unchecked when part of it is NULL), keeps the full expression.
// The parent's policy is then part of the child's: Check and the periodic
// re-check refuse a DB where any tenant-bound table's policy is missing,
// altered or not forced, so a child never relies on an unprotected parent
// while the DB serves.
func chained(t *sqlast.Table) bool {
	fk := t.Parent
	return fk != nil && len(t.LevelCols) == 0 && len(fk.Cols) == 1 && fk.To != t && !fk.To.Global
}

// MaxShapeLevels bounds the anchored levels of a table for which the policy
// enumerates the shapes of grants confined to ancestors (2^n - n - 1 terms);
// grants naming more levels than this admit no rows of such a table under
// row-level security.
const MaxShapeLevels = 6

// shapeTerms returns one term per shape a grant confined to ancestors can
// have on t: every set of two or more of t's anchored levels, in schema
// order. A shape's term is true for a row whose anchors, read all at once,
// equal one of the shape's tuples in the setting (under the key the levels'
// names joined by '/', see dialect.Shape), so every level a grant names
// must agree with the row. The setting holds tuples only for the shapes the
// caller's grants have; the others are empty sets.
func (pg *policyGen) shapeTerms(t *sqlast.Table) []string {
	as := t.Anchors
	if len(as) > MaxShapeLevels {
		as = as[:MaxShapeLevels]
	}
	var out []string
	for mask := 1; mask < 1<<len(as); mask++ {
		var sub []sqlast.Anchor
		for i := range as {
			if mask&(1<<i) != 0 {
				sub = append(sub, as[i])
			}
		}
		if len(sub) < 2 {
			continue
		}
		out = append(out, pg.shapeTerm(t, sub))
	}
	return out
}

// BlindShapes lists, as "table (through hop, which lacks level)", each
// table whose policy cannot admit a row to a grant confined to ancestors:
// its shape term (shapeTerm) reads a table of its scope path, under that
// table's own row-level security, which does not carry one of the shape's
// levels and so is hidden from such a grant (Formbricks: environments
// through projects, which carry the organization but not the environment,
// for "environment 7 within organization 2"). Those grants read nothing
// of the table and of the tables below it: fewer rows, never more. Open
// logs the list so that the limitation is said at start-up, not found by
// the conformance suite's property 21.
func (d Dialect) BlindShapes(g *sqlast.Schema) []string {
	var out []string
	for _, name := range g.Names {
		t := g.Tables[name]
		if t.Global || t.ByRef || chained(t) {
			continue
		}
		as := t.Anchors
		if len(as) > MaxShapeLevels {
			as = as[:MaxShapeLevels]
		}
	pairs:
		for _, a := range as {
			for _, b := range as {
				for i := len(a.Hops); i < len(b.Hops); i++ {
					h := t.Chain[i].To
					if !slices.ContainsFunc(h.Anchors, func(x sqlast.Anchor) bool { return x.Level == a.Level }) {
						out = append(out, t.Name+" (through "+h.Name+", which lacks level "+a.Level.Name+")")
						break pairs
					}
				}
			}
		}
	}
	return out
}

// shapeTerm is the term of one shape (anchors in schema level order).
func (pg *policyGen) shapeTerm(t *sqlast.Table, anchors []sqlast.Anchor) string {
	deep := 0
	names := make([]string, len(anchors))
	for i, a := range anchors {
		deep = max(deep, len(a.Hops))
		names[i] = a.Level.Name
	}
	var vals []string
	for i, a := range anchors {
		v := "_t ->> " + fmt.Sprint(i)
		if a.Level.Key == sqlast.IntKey {
			v = "(" + v + ")::bigint"
		}
		vals = append(vals, v)
	}
	shape := strings.Join(names, "/")
	tuples := "SELECT " + strings.Join(vals, ", ") + " FROM jsonb_array_elements(" + pg.doc() + " -> " +
		literal(shape) + ") AS _t WHERE " + pg.mentions(shape)
	subs := make([]string, deep)
	for i := range subs {
		subs[i] = pg.alias()
	}
	cols := make([]string, len(anchors))
	for i, a := range anchors {
		k := -1
		if deep > 0 {
			k = slices.Index(t.Chain[0].Cols, a.Col)
		}
		switch {
		case len(a.Hops) > 0:
			cols[i] = pg.col(subs[len(a.Hops)-1], a.Col)
		case k >= 0: // a foreign-key column of the first hop: its parent's key, uncorrelated
			cols[i] = pg.col(subs[0], t.Chain[0].RefCols[k])
		case deep > 0: // referred to from inside the path subquery
			cols[i] = pg.col(t.Name, a.Col)
		default:
			cols[i] = pg.col("", a.Col)
		}
	}
	test := "(" + strings.Join(cols, ", ") + ") IN (" + tuples + ")"
	if deep == 0 {
		// The row IN is a hashed SubPlan, which no index can serve; an
		// OR with it would make every read of t a sequential scan. The
		// extra conjunct (the finest level's column among the tuples'
		// ids, an uncorrelated array) is implied by the test and lets
		// the planner look the rows up by that column's index.
		last := len(anchors) - 1
		return "(" + cols[last] + " = ANY (ARRAY(SELECT " + vals[last] + " FROM jsonb_array_elements(" + pg.doc() + " -> " +
			literal(shape) + ") AS _t WHERE " + pg.mentions(shape) + ")) AND " + test + ")"
	}
	from := pg.d.Quote(t.Chain[0].To.Name) + " AS " + pg.d.Quote(subs[0])
	for i := 1; i < deep; i++ {
		h := t.Chain[i]
		var on []string
		for k := range h.Cols {
			on = append(on, pg.col(subs[i], h.RefCols[k])+" = "+pg.col(subs[i-1], h.Cols[k]))
		}
		from += " JOIN " + pg.d.Quote(h.To.Name) + " AS " + pg.d.Quote(subs[i]) + " ON " + strings.Join(on, " AND ")
	}
	fk := t.Chain[0]
	if len(fk.Cols) == 1 {
		return pg.col("", fk.Cols[0]) + " = ANY (ARRAY(SELECT " + pg.col(subs[0], fk.RefCols[0]) + " FROM " + from + " WHERE " + test + "))"
	}
	lhs := make([]string, len(fk.Cols))
	rhs := make([]string, len(fk.RefCols))
	for i := range fk.Cols {
		lhs[i] = pg.col("", fk.Cols[i])
		rhs[i] = pg.col(subs[0], fk.RefCols[i])
	}
	return "(" + strings.Join(lhs, ", ") + ") IN (SELECT " + strings.Join(rhs, ", ") + " FROM " + from + " WHERE " + test + ")"
}

// writeCheckExpr is the WITH CHECK expression of t: expr, and every level
// column of t (its own identity column exempt: a chain writer creates
// hotels whose ids it was not granted) NULL, granted at its level, the
// key of a row the writer sees through a foreign key covering it (all of
// a composite key's columns matched: the key only proves that some row,
// perhaps another tenant's, holds the tuple), the level's id of another
// row the written row references and the writer sees, or the value the
// row already holds (keep.go states the rule and its invariant). This is
// the guard's own write rule (guard.writeChecks), with NULL and the kept
// value admitted because the policy cannot tell INSERT from UPDATE.
func (pg *policyGen) writeCheckExpr(t *sqlast.Table, expr string) string {
	if guardfault.Off(guardfault.NullableFK) {
		return expr
	}
	var terms []string
	for _, lc := range t.LevelCols {
		if lc.Col == t.Identity {
			continue
		}
		c := pg.col("", lc.Col)
		outer := pg.col(t.Name, lc.Col) // inside a subquery, where a column of its own could shadow c
		alts := []string{c + " IS NULL", c + " = ANY (" + pg.ids(lc.Level) + ")"}
		single := false
		for _, fk := range t.TenantFKs() {
			if !slices.Contains(fk.Cols, lc.Col) {
				continue
			}
			if len(fk.Cols) == 1 {
				single = true
				if fk.To != t && !fk.To.ByRef { // keep.go: a row the writer sees
					sub := pg.alias()
					alts = append(alts, "EXISTS (SELECT 1 FROM "+pg.d.Quote(fk.To.Name)+" AS "+pg.d.Quote(sub)+" WHERE "+pg.col(sub, fk.RefCols[0])+" = "+outer+")")
				}
				continue
			}
			if guardfault.Off(guardfault.CompositeLevelCheck) {
				// The behaviour before: a fully non-NULL composite key
				// was trusted, though the tuple may be another tenant's.
				nn := make([]string, len(fk.Cols))
				for i, c := range fk.Cols {
					nn[i] = pg.col("", c) + " IS NOT NULL"
				}
				alts = append(alts, "("+strings.Join(nn, " AND ")+")")
				continue
			}
			if fk.To == t || fk.To.ByRef {
				continue // a policy reading its own table recurses: keep and the guard
			}
			sub := pg.alias()
			on := make([]string, len(fk.Cols))
			for i := range fk.Cols {
				on[i] = pg.col(sub, fk.RefCols[i]) + " = " + pg.col(t.Name, fk.Cols[i])
			}
			alts = append(alts, "EXISTS (SELECT 1 FROM "+pg.d.Quote(fk.To.Name)+" AS "+pg.d.Quote(sub)+" WHERE "+strings.Join(on, " AND ")+")")
		}
		if single && guardfault.Off(guardfault.LevelColumnCheck) {
			continue // the behaviour before keep.go: the foreign key was trusted
		}
		if single {
			// keep.go: the level's id of another row the row references
			// and the writer sees (an issue's workspace, its project's).
			for _, other := range t.TenantFKs() {
				if len(other.Cols) != 1 || other.To.ByRef || other.To == t || other.Cols[0] == lc.Col {
					continue
				}
				for _, olc := range other.To.LevelCols {
					if olc.Level == lc.Level && olc.Col != other.RefCols[0] {
						sub := pg.alias()
						alts = append(alts, "EXISTS (SELECT 1 FROM "+pg.d.Quote(other.To.Name)+" AS "+pg.d.Quote(sub)+" WHERE "+
							pg.col(sub, other.RefCols[0])+" = "+pg.col(t.Name, other.Cols[0])+" AND "+pg.col(sub, olc.Col)+" = "+outer+")")
					}
				}
			}
		}
		if len(t.PK) > 0 {
			alts = append(alts, pg.keepCall(t, lc.Col))
		}
		terms = append(terms, "("+strings.Join(alts, " OR ")+")")
	}
	if len(terms) == 0 {
		return expr
	}
	return "(" + expr + " AND " + strings.Join(terms, " AND ") + ")"
}

// at is the condition for the row of the table reached after depth hops of
// t's chain (t itself at depth 0), under alias.
func (pg *policyGen) at(t *sqlast.Table, alias string, depth, deep int) string {
	var terms []string
	for _, a := range t.Anchors {
		if len(a.Hops) == depth {
			terms = append(terms, pg.col(alias, a.Col)+" = ANY ("+pg.ids(a.Level)+")")
		}
	}
	if depth < deep {
		fk := t.Chain[depth]
		sub := pg.alias()
		cond := pg.at(t, sub, depth+1, deep)
		from := pg.d.Quote(fk.To.Name) + " AS " + pg.d.Quote(sub)
		if len(fk.Cols) == 1 {
			terms = append(terms, pg.col(alias, fk.Cols[0])+" = ANY (ARRAY(SELECT "+pg.col(sub, fk.RefCols[0])+
				" FROM "+from+" WHERE "+cond+"))")
		} else {
			lhs := make([]string, len(fk.Cols))
			rhs := make([]string, len(fk.RefCols))
			for i := range fk.Cols {
				lhs[i] = pg.col(alias, fk.Cols[i])
				rhs[i] = pg.col(sub, fk.RefCols[i])
			}
			terms = append(terms, "("+strings.Join(lhs, ", ")+") IN (SELECT "+strings.Join(rhs, ", ")+
				" FROM "+from+" WHERE "+cond+")")
		}
	}
	if len(terms) == 1 {
		return terms[0]
	}
	return "(" + strings.Join(terms, " OR ") + ")"
}
