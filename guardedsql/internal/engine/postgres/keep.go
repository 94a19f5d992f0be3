package postgres

import (
	"crypto/sha256"
	"encoding/hex"
	"slices"
	"strconv"
	"strings"

	"github.com/tenantmcp/tenantmcp/internal/sqlast"
)

// Level columns under WITH CHECK.
//
// USING admits a row when one of its anchors is in scope, so WITH CHECK
// tests every level column on its own: otherwise a row in scope by one
// level column could carry another tenant's id in another, and that
// tenant would read it. A workspace planted an issue in another
// workspace's project (project_id), a project's member moved its issue to
// another workspace (workspace_id), a hotel's manager moved the hotel to
// another chain (hotels.chain_id), all through raw SQL as the application
// role, where the guard refused the same. The guard tests each level
// column a statement assigns; a policy cannot tell which columns an
// UPDATE assigned, so it admits a level column's value when it is NULL,
// granted at its level, the key of a row the writer sees through a
// foreign key covering the column (through a composite key, a row holding
// the whole tuple: Citus's (org_id, workspace_id) proves only that some
// org's workspace holds it), or the value the row already holds: the keep
// function of the column, SECURITY INVOKER, reads the row by its primary
// key as the caller, so it finds only a row the caller's scope admits (the
// one being updated), never another tenant's.
// The row's own identity column (hotels.id) is exempt, as in the guard.
//
// A checked foreign key up the hierarchy (a project's task, its org-level
// assignee) is tested the same way (pathsCheckExpr): a row the writer
// sees, or the value the row holds. A grant of the task's project never
// sees the org's members, so without the second arm no project member
// could update its tasks; without the test, raw SQL pointed a task at
// another org's member and told that member's id from a missing one.
//
// A key of a table into itself (a document's parent document) is tested
// alike, its visible rows read by the table's sees function, SECURITY
// INVOKER: a subquery on the table in its own policy would recurse.
//
// Invariant: under row-level security a write leaves each level column of
// a row, each key up the hierarchy and each key into its own table NULL,
// unchanged, or naming what the writer's scope reaches.

// KeepFunc is the name of the function that tells whether the row of t
// keyed by its primary key holds the value given for column col.
func (d Dialect) KeepFunc(t *sqlast.Table, col string) string {
	name := d.ns() + "_keep_" + t.Name + "_" + col
	if len(name) > 63 {
		sum := sha256.Sum256([]byte(t.Name + "\x00" + col))
		name = d.ns() + "_keep_" + hex.EncodeToString(sum[:8])
	}
	return name
}

// keepCall is the policy term "col keeps the value the row holds".
func (pg *policyGen) keepCall(t *sqlast.Table, col string) string {
	args := make([]string, 0, len(t.PK)+1)
	for _, k := range t.PK {
		args = append(args, pg.col("", k))
	}
	return pg.d.Quote(pg.d.KeepFunc(t, col)) + "(" + strings.Join(append(args, pg.col("", col)), ", ") + ")"
}

// keepCols returns the columns of t whose keep function the policy of t
// calls: its level columns but its identity (writeCheckExpr), and the
// columns of its checked foreign keys up the hierarchy and into t itself
// (pathsCheckExpr).
func keepCols(t *sqlast.Table) []string {
	var out []string
	for _, lc := range t.LevelCols {
		if lc.Col != t.Identity {
			out = append(out, lc.Col)
		}
	}
	for _, fk := range t.TenantFKs() {
		if fk.To.ByRef || fk.To != t && sqlast.SameTenancy(fk) {
			continue
		}
		for _, c := range fk.Cols {
			if !slices.Contains(out, c) {
				out = append(out, c)
			}
		}
	}
	return out
}

// keepDDL returns the statements that create the keep functions the
// policies of g call (writeCheckExpr), and the sees functions of their
// keys into their own table (pathsCheckExpr), each with its parameters
// typed as the columns are where the DDL runs.
func (d Dialect) keepDDL(g *sqlast.Schema) []string {
	var out []string
	d.eachExistsFunc(g, func(t *sqlast.Table, fn string, cols []string) {
		out = append(out, d.existsFuncDDL(t, fn, cols))
	})
	return out
}

// eachExistsFunc calls f with each keep and sees function of g: its
// table, name and columns.
func (d Dialect) eachExistsFunc(g *sqlast.Schema, f func(t *sqlast.Table, fn string, cols []string)) {
	for _, n := range g.Names {
		t := g.Tables[n]
		if t.Global || t.ByRef || len(t.PK) == 0 {
			continue
		}
		for _, col := range keepCols(t) {
			f(t, d.KeepFunc(t, col), append(append([]string{}, t.PK...), col))
		}
		for _, fk := range selfKeys(t) {
			f(t, d.SeesFunc(t, fk), fk.RefCols)
		}
	}
}

// existsFuncDDL creates the function fn(cols...) that tells whether a row
// of t the caller sees holds those values in cols: SECURITY INVOKER, so
// the caller's policy confines what it reads.
func (d Dialect) existsFuncDDL(t *sqlast.Table, fn string, cols []string) string {
	var names []string
	for _, c := range cols {
		names = append(names, literal(c))
	}
	body := d.existsFuncBody(t, cols)
	f := literal(fn)
	return `DO $tm$
DECLARE
  cols text[] := ARRAY[` + strings.Join(names, ", ") + `];
  typs text[];
  sig text;
BEGIN
  SELECT pg_catalog.array_agg(pg_catalog.format_type(a.atttypid, a.atttypmod) ORDER BY x.n) INTO typs
    FROM pg_catalog.unnest(cols) WITH ORDINALITY AS x(name, n)
    JOIN pg_catalog.pg_attribute a ON a.attrelid = pg_catalog.to_regclass(` + literal(d.Quote(t.Name)) + `) AND a.attname = x.name AND NOT a.attisdropped;
  IF pg_catalog.cardinality(typs) IS DISTINCT FROM pg_catalog.cardinality(cols) THEN
    RAISE EXCEPTION USING ERRCODE = 'undefined_column', MESSAGE = 'tenantmcp: '||` + literal(t.Name) + `||' lacks one of the columns '||` + literal(strings.Join(cols, ", ")) + `;
  END IF;
  sig := pg_catalog.array_to_string(typs, ', ');
  EXECUTE pg_catalog.format($f$CREATE OR REPLACE FUNCTION %I(%s) RETURNS boolean
LANGUAGE plpgsql STABLE SECURITY INVOKER PARALLEL RESTRICTED
SET search_path = pg_catalog, pg_temp
AS %L$f$, ` + f + `, sig, pg_catalog.replace(` + literal(body) + `, '@SCHEMA@', pg_catalog.quote_ident(pg_catalog.current_schema())));
  EXECUTE pg_catalog.format('REVOKE ALL ON FUNCTION %I(%s) FROM PUBLIC', ` + f + `, sig);
  EXECUTE pg_catalog.format('GRANT EXECUTE ON FUNCTION %I(%s) TO PUBLIC', ` + f + `, sig);
END
$tm$`
}

// existsFuncBody is the body of existsFuncDDL's function, @SCHEMA@
// standing for the tables' schema.
func (d Dialect) existsFuncBody(t *sqlast.Table, cols []string) string {
	var where []string
	for i, c := range cols {
		where = append(where, "o."+d.Quote(c)+" = $"+strconv.Itoa(i+1))
	}
	return "\nBEGIN\n  RETURN EXISTS (SELECT 1 FROM @SCHEMA@." + d.Quote(t.Name) + " AS o WHERE " + strings.Join(where, " AND ") + ");\nEND\n"
}

// selfKeys returns t's checked foreign keys into t itself (a document's
// parent document, a comment's parent comment).
func selfKeys(t *sqlast.Table) []*sqlast.FK {
	var out []*sqlast.FK
	for _, fk := range t.TenantFKs() {
		if fk.To == t {
			out = append(out, fk)
		}
	}
	return out
}

// SeesFunc is the name of the function that tells whether the caller sees
// the row of t that fk, a key of t into t, references.
func (d Dialect) SeesFunc(t *sqlast.Table, fk *sqlast.FK) string {
	name := d.ns() + "_sees_" + t.Name + "_" + strings.Join(fk.Cols, "_")
	if len(name) > 63 {
		sum := sha256.Sum256([]byte(t.Name + "\x00" + strings.Join(fk.Cols, "\x00")))
		name = d.ns() + "_sees_" + hex.EncodeToString(sum[:8])
	}
	return name
}
