package postgres

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"

	"github.com/tenantmcp/tenantmcp/guardedsql/internal/dialect"
	"github.com/tenantmcp/tenantmcp/internal/sqlast"
)

// (h4-ref) Row-level security for tables owned by reference (issue 25 §1).
//
// The policy of such a table T admits a row when a row of one of its
// Referrers that the same role sees, under that table's own forced policy,
// references it: one uncorrelated array of visible keys per referrer and
// statement, like the chained policies. Its WITH CHECK admits every row:
// an inserted row is referenced by no one and so visible to no one, and an
// updated row had to pass USING first.
//
// The rules of writes need the number of rows, in every tenant, that
// reference a row of T (is it unreferenced? is every referencing row the
// caller's?), which the application role cannot count: row-level security
// hides the other tenants' rows. The function "<ns>_refs_<T>"(key, lock)
// counts them: SECURITY DEFINER, owned by the role that applied the DDL
// (the owner of the verifying function, of which the application role is
// not a member: Check refuses otherwise), search_path pinned; it sees every
// referencing row through a SELECT policy "<ns>_refs" on each referring
// table that applies to that role only. With lock it first takes a
// transaction-scoped advisory lock on (T, key), so that two transactions
// claiming the same unreferenced row queue, and the second (in READ
// COMMITTED, where each statement of the function takes a new snapshot)
// counts the first's committed reference and is refused. The count reveals
// to any caller whether a key is referenced at all, never by whom: the
// existence oracle of a shared unique key.

// RefFunc is the name of the reference-counting function of t.
func (d Dialect) RefFunc(t *sqlast.Table) string {
	name := d.ns() + "_refs_" + t.Name
	if len(name) > 63 {
		sum := sha256.Sum256([]byte(t.Name))
		name = d.ns() + "_refs_" + hex.EncodeToString(sum[:8])
	}
	return name
}

// RefProbePolicy is the name of the SELECT policy that lets the counting
// functions' owner see every referencing row.
func (d Dialect) RefProbePolicy() string { return d.ns() + "_refs" }

// RefCount implements dialect.RefCounter.
func (d Dialect) RefCount(t *sqlast.Table, key dialect.Frag, lock bool) dialect.Frag {
	l := "false"
	if lock {
		l = "true"
	}
	return dialect.Frag{SQL: d.Quote(d.RefFunc(t)) + "(" + key.SQL + ", " + l + ")", Args: key.Args}
}

// byRefExprs returns the USING and WITH CHECK expressions of t.
func (pg *policyGen) byRefExprs(t *sqlast.Table) (using, check string) {
	var terms []string
	for _, fk := range t.Referrers {
		sub := pg.alias()
		terms = append(terms, pg.col("", fk.RefCols[0])+" = ANY (ARRAY(SELECT "+pg.col(sub, fk.Cols[0])+" FROM "+
			pg.d.Quote(fk.From.Name)+" AS "+pg.d.Quote(sub)+"))")
	}
	if len(terms) == 0 {
		return "false", "true"
	}
	return "(" + strings.Join(terms, " OR ") + ")", "true"
}

// referrerTables returns the distinct tables that reference a table owned
// by reference in g, sorted.
func referrerTables(g *sqlast.Schema) []string {
	var out []string
	for _, n := range g.Names {
		for _, fk := range g.Tables[n].Referrers {
			if !slices.Contains(out, fk.From.Name) {
				out = append(out, fk.From.Name)
			}
		}
	}
	slices.Sort(out)
	return out
}

// byRefDDL returns the probe policies and counting functions of g's
// tables owned by reference.
func (d Dialect) byRefDDL(g *sqlast.Schema) []string {
	var out []string
	probe := d.Quote(d.RefProbePolicy())
	for _, r := range referrerTables(g) {
		qr := d.Quote(r)
		out = append(out,
			"DROP POLICY IF EXISTS "+probe+" ON "+qr,
			"CREATE POLICY "+probe+" ON "+qr+" AS PERMISSIVE FOR SELECT TO CURRENT_USER USING (true)")
	}
	for _, n := range g.Names {
		t := g.Tables[n]
		if !t.ByRef || len(t.Referrers) == 0 {
			continue
		}
		fn := d.RefFunc(t)
		var counts []string
		for _, fk := range t.Referrers {
			counts = append(counts, "(SELECT pg_catalog.count(*) FROM @SCHEMA@."+d.Quote(fk.From.Name)+" WHERE "+d.Quote(fk.Cols[0])+" = k)")
		}
		body := `
BEGIN
  IF lk THEN
    PERFORM pg_catalog.pg_advisory_xact_lock(pg_catalog.hashtextextended(` + literal(d.ns()+":"+t.Name+":") + ` || k::text, 0));
  END IF;
  RETURN ` + strings.Join(counts, " + ") + `;
END`
		// The key's type is the column's, read where the DDL runs, so that a
		// bound parameter takes it (and the referring columns' indexes serve
		// the counts).
		out = append(out, `DO $tm$
DECLARE
  typ text;
BEGIN
  SELECT pg_catalog.format_type(a.atttypid, a.atttypmod) INTO STRICT typ
    FROM pg_catalog.pg_attribute a
   WHERE a.attrelid = pg_catalog.to_regclass(`+literal(d.Quote(t.Name))+`) AND a.attname = `+literal(t.PK[0])+` AND NOT a.attisdropped;
  EXECUTE pg_catalog.format($f$CREATE OR REPLACE FUNCTION %I(k %s, lk boolean) RETURNS bigint
LANGUAGE plpgsql VOLATILE SECURITY DEFINER PARALLEL RESTRICTED
SET search_path = pg_catalog, pg_temp
AS %L$f$, `+literal(fn)+`, typ, pg_catalog.replace(`+literal(body)+`, '@SCHEMA@', pg_catalog.quote_ident(pg_catalog.current_schema())));
  EXECUTE pg_catalog.format('REVOKE ALL ON FUNCTION %I(%s, boolean) FROM PUBLIC', `+literal(fn)+`, typ);
  EXECUTE pg_catalog.format('GRANT EXECUTE ON FUNCTION %I(%s, boolean) TO PUBLIC', `+literal(fn)+`, typ);
END
$tm$`)
	}
	return out
}

// checkByRefSQL lists, for the counting functions named $1 and the probe
// policy named $2 on the tables $3, what is installed: each function with
// whether it is SECURITY DEFINER and owned by the verifying function's
// owner, and each table with whether that owner's probe policy is on it.
const checkByRefSQL = `WITH o AS (SELECT p.proowner FROM pg_catalog.pg_proc p WHERE p.oid = pg_catalog.to_regproc($4))
SELECT 'f', f.name, EXISTS (SELECT 1 FROM pg_catalog.pg_proc p, o WHERE p.proname = f.name AND p.prosecdef AND p.proowner = o.proowner
                              AND p.pronamespace = pg_catalog.to_regnamespace(pg_catalog.current_schema()))
FROM pg_catalog.unnest($1::text[]) AS f(name)
UNION ALL
SELECT 't', t.name, EXISTS (SELECT 1 FROM pg_catalog.pg_policy p, o WHERE p.polrelid = pg_catalog.to_regclass(pg_catalog.quote_ident(t.name))
                              AND p.polname = $2 AND p.polcmd = 'r' AND p.polroles = ARRAY[o.proowner])
FROM pg_catalog.unnest($3::text[]) AS t(name)`

// checkByRef verifies that the counting functions and probe policies of
// g's tables owned by reference are installed: without the probe policy a
// function would count only the caller's rows and call another tenant's
// row unreferenced.
func (d Dialect) checkByRef(ctx context.Context, q dialect.Querier, g *sqlast.Schema) error {
	var fns []string
	for _, n := range g.Names {
		if t := g.Tables[n]; t.ByRef && len(t.Referrers) > 0 {
			fns = append(fns, d.RefFunc(t))
		}
	}
	if len(fns) == 0 {
		return nil
	}
	var missing []string
	err := each(ctx, q, checkByRefSQL, []any{fns, d.RefProbePolicy(), referrerTables(g), d.Quote(d.ScopeFunc())}, func(r dialect.Rows) error {
		var kind, name string
		var ok bool
		if err := r.Scan(&kind, &name, &ok); err != nil {
			return err
		}
		if !ok && kind == "f" {
			missing = append(missing, "function "+name)
		} else if !ok {
			missing = append(missing, "policy "+d.RefProbePolicy()+" on "+name)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("guardedsql: reading the reference-counting functions: %w", err)
	}
	if len(missing) > 0 {
		return fmt.Errorf("%w (tables owned by reference: %s missing or not owned by the verifying function's owner; re-apply guardedsql.RLSDDL)", ErrRLSPolicyMissing, strings.Join(missing, ", "))
	}
	return nil
}
