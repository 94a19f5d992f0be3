package postgres

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"

	"github.com/tenantmcp/tenantmcp/guardedsql/internal/engine"
	"github.com/tenantmcp/tenantmcp/internal/guardfault"
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
// The rules of writes need to know which rows, in every tenant, reference
// a row of T, which the application role cannot see: row-level security
// hides the other tenants' rows. The function "<ns>_refs_<T>"(key, claim)
// counts them: SECURITY DEFINER, owned by the role that applied the DDL
// (the owner of the verifying function, of which the application role is
// not a member: Check refuses otherwise), search_path pinned (pg_catalog,
// the tables' schema, pg_temp). It counts, per referring table, every
// referencing row (the owner sees them all: as a role that bypasses
// row-level security, or through the SELECT policy "<ns>_refs" on each
// referring table and on T itself, whose rows it must see to tell an
// unreferenced row from a missing one, which applies to the owner only and only while the function sets
// "<ns>.refprobe", a setting any role can write that admits nothing to a
// role the policy does not name) and, of those, the rows in the caller's
// scope by the referring table's full policy expression, evaluated
// explicitly (the signed scope of the caller's transaction verifies in the
// function too), so that the count does not depend on the owner's own
// row-level security. Without claim it returns 1 when some referencing
// row is outside the caller's scope, else 0 (the caller alone owns the
// row): never how many. With claim it returns 0 when the row exists and no
// row references it, or one in the caller's scope does, and 1 otherwise (a
// missing row answers as another tenant's does); when none in the caller's
// scope references it, it first
// takes a transaction-scoped advisory lock on (T, key) and counts again,
// so that two transactions claiming the same unreferenced row queue and the
// second (in READ COMMITTED, where each statement of the function takes a
// new snapshot) counts the first's committed reference. A write of a row
// that keeps a reference the caller already holds (an update of a
// customer at an address shared with another tenant's customer) takes no
// lock: another tenant's open transaction must not stall it (issue 26). Being a
// function, it is also what lets the referring table's own WITH CHECK test
// the rule (a policy reading its own table recurses). The restrictive
// policies "<ns>_excl_update" and "<ns>_excl_delete" on T make UPDATE and
// DELETE need the row to be the caller's alone under row-level security as
// well. What the function
// returns reveals whether a key is referenced outside the caller's scope,
// never by whom, how often or what: the existence oracle of a shared unique
// key.

// RefFunc is the name of the reference-counting function of t.
func (d Dialect) RefFunc(t *sqlast.Table) string {
	name := d.ns() + "_refs_" + t.Name
	if len(name) > 63 {
		sum := sha256.Sum256([]byte(t.Name))
		name = d.ns() + "_refs_" + hex.EncodeToString(sum[:8])
	}
	return name
}

// ExclPolicy is the name of the restrictive policy of a table owned by
// reference for cmd (UPDATE or DELETE).
func (d Dialect) ExclPolicy(cmd string) string { return d.ns() + "_excl_" + strings.ToLower(cmd) }

// RefProbeSetting is the transaction-local setting under which the probe
// policy admits every row to the counting functions' owner.
func (d Dialect) RefProbeSetting() string { return d.ns() + ".refprobe" }

// RefProbePolicy is the name of the SELECT policy that lets the counting
// functions' owner see every referencing row.
func (d Dialect) RefProbePolicy() string { return d.ns() + "_refs" }

// ForeignRefs implements engine.RefCounter.
func (d Dialect) ForeignRefs(t *sqlast.Table, key engine.Frag) engine.Frag {
	return engine.Frag{SQL: d.Quote(d.RefFunc(t)) + "(" + key.SQL + ", false)", Args: key.Args}
}

// Claimable implements engine.RefCounter.
func (d Dialect) Claimable(t *sqlast.Table, key engine.Frag) engine.Frag {
	return engine.Frag{SQL: "(" + d.claimable(t, key.SQL) + ")", Args: key.Args}
}

// claimable is the condition "no row references the row of t keyed by
// key, or a row in scope does", with the claim lock taken.
func (d Dialect) claimable(t *sqlast.Table, key string) string {
	return d.Quote(d.RefFunc(t)) + "(" + key + ", true) = 0"
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

// probeTables returns, sorted, the tables the counting functions' owner
// reads under the probe policy: every table that references a table owned
// by reference, and each such referenced table (whose rows the function
// must see to tell a claimable row from a missing one).
func probeTables(g *sqlast.Schema) []string {
	var out []string
	add := func(n string) {
		if !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	for _, n := range g.Names {
		t := g.Tables[n]
		if t.ByRef && len(t.Referrers) > 0 {
			add(t.Name)
		}
		for _, fk := range t.Referrers {
			add(fk.From.Name)
		}
	}
	slices.Sort(out)
	return out
}

// byRefDDL returns the probe policies and counting functions of g's
// tables owned by reference.
func (d Dialect) byRefDDL(g *sqlast.Schema) []string {
	var out, excl []string
	probe := d.Quote(d.RefProbePolicy())
	for _, r := range probeTables(g) {
		qr := d.Quote(r)
		out = append(out,
			"DROP POLICY IF EXISTS "+probe+" ON "+qr,
			"CREATE POLICY "+probe+" ON "+qr+" AS PERMISSIVE FOR SELECT TO CURRENT_USER USING (pg_catalog.current_setting("+
				literal(d.RefProbeSetting())+", true) = 'on')")
	}
	for _, n := range g.Names {
		t := g.Tables[n]
		if !t.ByRef || len(t.Referrers) == 0 {
			continue
		}
		// After the function exists: the policies call it.
		qt := d.Quote(t.Name)
		for _, cmd := range []string{"UPDATE", "DELETE"} {
			name := d.Quote(d.ExclPolicy(cmd))
			excl = append(excl, "DROP POLICY IF EXISTS "+name+" ON "+qt,
				"CREATE POLICY "+name+" ON "+qt+" AS RESTRICTIVE FOR "+cmd+" TO PUBLIC USING ("+
					d.Quote(d.RefFunc(t))+"("+d.Quote(t.PK[0])+", false) = 0)")
		}
		fn := d.RefFunc(t)
		body := d.refFuncBody(t)
		// The key's type is the column's, read where the DDL runs, so that a
		// bound parameter takes it (and the referring columns' indexes serve
		// the counts). A referring column of another type (an integer key
		// referenced from a bigint column) could not call the function: the
		// DDL stops with a message naming both columns rather than the
		// engine's "function does not exist".
		var same strings.Builder
		for _, fk := range t.Referrers {
			fmt.Fprintf(&same, `
  SELECT a.atttypid, pg_catalog.format_type(a.atttypid, a.atttypmod) INTO STRICT roid, rtyp
    FROM pg_catalog.pg_attribute a
   WHERE a.attrelid = pg_catalog.to_regclass(%s) AND a.attname = %s AND NOT a.attisdropped;
  IF roid <> koid AND NOT EXISTS (SELECT 1 FROM pg_catalog.pg_cast c WHERE c.castsource = roid AND c.casttarget = koid AND c.castcontext = 'i') THEN
    RAISE EXCEPTION USING ERRCODE = 'invalid_table_definition', MESSAGE = pg_catalog.format(
      'tenantmcp: %%s.%%s is %%s but %%s.%%s, the key of a table owned by reference, is %%s: give the referencing column the key''s type (ALTER TABLE … ALTER COLUMN … TYPE)',
      %s, %s, rtyp, %s, %s, typ);
  END IF;`, literal(d.Quote(fk.From.Name)), literal(fk.Cols[0]), literal(fk.From.Name), literal(fk.Cols[0]), literal(t.Name), literal(t.PK[0]))
		}
		out = append(out, `DO $tm$
DECLARE
  typ text;
  rtyp text;
  koid oid;
  roid oid;
BEGIN
  SELECT a.atttypid, pg_catalog.format_type(a.atttypid, a.atttypmod) INTO STRICT koid, typ
    FROM pg_catalog.pg_attribute a
   WHERE a.attrelid = pg_catalog.to_regclass(`+literal(d.Quote(t.Name))+`) AND a.attname = `+literal(t.PK[0])+` AND NOT a.attisdropped;`+same.String()+`
  EXECUTE pg_catalog.format($f$CREATE OR REPLACE FUNCTION %I(k %s, lk boolean) RETURNS bigint
LANGUAGE plpgsql VOLATILE SECURITY DEFINER PARALLEL RESTRICTED
SET search_path = pg_catalog, %I, pg_temp
AS %L$f$, `+literal(fn)+`, typ, pg_catalog.current_schema(), pg_catalog.replace(`+literal(body)+`, '@SCHEMA@', pg_catalog.quote_ident(pg_catalog.current_schema())));
  EXECUTE pg_catalog.format('REVOKE ALL ON FUNCTION %I(%s, boolean) FROM PUBLIC', `+literal(fn)+`, typ);
  EXECUTE pg_catalog.format('GRANT EXECUTE ON FUNCTION %I(%s, boolean) TO PUBLIC', `+literal(fn)+`, typ);
END
$tm$`)
	}
	return append(out, excl...)
}

// refFuncBody is the body of t's counting function, @SCHEMA@ standing
// for the tables' schema.
func (d Dialect) refFuncBody(t *sqlast.Table) string {
	// Per referring table, the referencing rows (every tenant's: the
	// owner sees them all, as a role that bypasses row-level security
	// or through the probe policy) and those in the caller's scope, by
	// the referring table's own full policy expression evaluated
	// explicitly, so that the count does not depend on whether the
	// function's owner is subject to row-level security.
	var sel []string
	for i, fk := range t.Referrers {
		pg := &policyGen{d: d, n: 100 * (i + 1)}
		r := d.Quote(fk.From.Name)
		sel = append(sel, "(SELECT pg_catalog.count(*), pg_catalog.count(*) FILTER (WHERE "+pg.fullExpr(fk.From)+")"+
			" FROM @SCHEMA@."+r+" AS "+r+" WHERE "+d.Quote(fk.Cols[0])+" = k)")
	}
	probe := literal(d.RefProbeSetting())
	var sums strings.Builder
	for _, q := range sel {
		fmt.Fprintf(&sums, "  SELECT t.a, t.b INTO ta, tb FROM %s AS t(a, b);\n  total := total + ta;\n  vis := vis + tb;\n", q)
	}
	// An unreferenced key is claimable only if its row exists: refused
	// here, a missing row is refused exactly as another tenant's is,
	// before the database's foreign key could tell the two apart.
	exists := "  IF lk AND total = 0 THEN\n    present := EXISTS (SELECT 1 FROM @SCHEMA@." + d.Quote(t.Name) + " AS " + d.Quote(t.Name) +
		" WHERE " + d.Quote(t.PK[0]) + " = k);\n  END IF;\n"
	if guardfault.Off(guardfault.ByRefExists) {
		exists = "  present := true;\n"
	}
	return `
DECLARE
  vis bigint := 0;
  total bigint := 0;
  ta bigint;
  tb bigint;
  present boolean := true;
BEGIN
  PERFORM pg_catalog.set_config(` + probe + `, 'on', true);
` + sums.String() + `  IF lk AND vis = 0 THEN
    PERFORM pg_catalog.pg_advisory_xact_lock(pg_catalog.hashtextextended(` + literal(d.ns()+":"+t.Name+":") + ` || k::text, 0));
    total := 0;
    vis := 0;
` + sums.String() + `  END IF;
` + exists + `  PERFORM pg_catalog.set_config(` + probe + `, 'off', true);
  IF lk THEN
    RETURN CASE WHEN total = 0 AND NOT present THEN 1 WHEN total = 0 OR vis > 0 THEN 0 ELSE 1 END;
  END IF;
  RETURN CASE WHEN total > vis THEN 1 ELSE 0 END;
END`
}

// checkByRefSQL lists, for the counting functions named $1 and the probe
// policy named $2 on the tables $3 (probeTables), what is installed: each function with
// whether it is SECURITY DEFINER and owned by the verifying function's
// owner, and each table with whether that owner's probe policy is on it.
const checkByRefSQL = `WITH o AS (SELECT p.proowner FROM pg_catalog.pg_proc p WHERE p.oid = pg_catalog.to_regproc($4))
SELECT 'f', f.name, EXISTS (SELECT 1 FROM pg_catalog.pg_proc p, o WHERE p.proname = f.name AND p.prosecdef AND p.proowner = o.proowner
                              AND p.pronamespace = pg_catalog.to_regnamespace(pg_catalog.current_schema()))
FROM pg_catalog.unnest($1::text[]) AS f(name)
UNION ALL
SELECT 't', t.name, EXISTS (SELECT 1 FROM pg_catalog.pg_policy p, o WHERE p.polrelid = pg_catalog.to_regclass(pg_catalog.quote_ident(t.name))
                              AND p.polname = $2 AND p.polcmd = 'r' AND p.polroles = ARRAY[o.proowner])
FROM pg_catalog.unnest($3::text[]) AS t(name)
UNION ALL
SELECT 'x', t.name, (SELECT pg_catalog.count(*) FROM pg_catalog.pg_policy p WHERE p.polrelid = pg_catalog.to_regclass(pg_catalog.quote_ident(t.name))
                              AND NOT p.polpermissive AND (p.polname, p.polcmd) IN (($6, 'w'), ($7, 'd'))) = 2
FROM pg_catalog.unnest($5::text[]) AS t(name)`

// checkByRef verifies that the counting functions and probe policies of
// g's tables owned by reference are installed: without the probe policy a
// function would count only the caller's rows and call another tenant's
// row unreferenced.
func (d Dialect) checkByRef(ctx context.Context, q engine.Querier, g *sqlast.Schema) error {
	var fns, byref []string
	for _, n := range g.Names {
		if t := g.Tables[n]; t.ByRef && len(t.Referrers) > 0 {
			fns = append(fns, d.RefFunc(t))
			byref = append(byref, t.Name)
		}
	}
	if len(fns) == 0 {
		return nil
	}
	var missing []string
	err := each(ctx, q, checkByRefSQL, []any{fns, d.RefProbePolicy(), probeTables(g), d.Quote(d.ScopeFunc()), byref, d.ExclPolicy("UPDATE"), d.ExclPolicy("DELETE")}, func(r engine.Rows) error {
		var kind, name string
		var ok bool
		if err := r.Scan(&kind, &name, &ok); err != nil {
			return err
		}
		switch {
		case ok:
		case kind == "f":
			missing = append(missing, "function "+name)
		case kind == "x":
			missing = append(missing, "restrictive policies "+d.ExclPolicy("UPDATE")+", "+d.ExclPolicy("DELETE")+" on "+name)
		default:
			missing = append(missing, "policy "+d.RefProbePolicy()+" on "+name)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("guardedsql: reading the reference-counting functions: %w", err)
	}
	if len(missing) > 0 {
		return fmt.Errorf("%w (tables owned by reference: %s missing or not owned by the verifying function's owner; re-apply postgres.RLSDDL)", ErrRLSPolicyMissing, strings.Join(missing, ", "))
	}
	return nil
}

// pathsCheckExpr adds to check, the WITH CHECK expression of the
// tenant-bound table t, the guard's rules for t's other foreign keys
// (issue 25 §2): every consistency path (a checked tenant foreign key
// besides the scope parent) references a row the role sees, or none (a
// NULL part); a key into a table owned by reference references a row that
// nothing references yet or that the role sees; a key into t itself, a row
// the role sees through a function (selfKeyCheck: a policy reading its own
// table recurses). One made of t's own level columns alone is
// writeCheckExpr's, which wants a row the writer sees holding the whole
// tuple.
func (pg *policyGen) pathsCheckExpr(t *sqlast.Table, check string) string {
	var terms []string
	for _, fk := range t.TenantFKs() {
		// The scope parent is the USING expression's, unless t has level
		// columns of its own: a row is in scope when one of them is, so
		// the parent must be tested here too, or a row in scope by its
		// level column could point at another tenant's parent.
		ownLevels := len(t.LevelCols) > 0 && !guardfault.Off(guardfault.LevelParentCheck)
		if fk.To == t {
			if len(t.PK) > 0 && !guardfault.Off(guardfault.SelfKeyCheck) {
				terms = append(terms, pg.selfKeyCheck(t, fk))
			}
			continue
		}
		if fk == t.Parent && !ownLevels {
			continue
		}
		if !slices.ContainsFunc(fk.Cols, func(c string) bool { return t.LevelOf(c) == nil }) {
			continue // t's own level columns: the USING expression tests them
		}
		up := !fk.To.ByRef && !sqlast.SameTenancy(fk)
		if up && (guardfault.Off(guardfault.UpKeyCheck) || len(t.PK) == 0) {
			continue // up the hierarchy: left to the guard's value checks
		}
		var nulls []string
		for _, c := range fk.Cols {
			nulls = append(nulls, pg.col("", c)+" IS NULL")
		}
		sub := pg.alias()
		from := pg.d.Quote(fk.To.Name) + " AS " + pg.d.Quote(sub)
		var in string
		switch {
		case fk.To.ByRef:
			// Not "visible through the referrers' policies": t is one of
			// them, and a policy reading its own table recurses.
			in = pg.d.claimable(fk.To, pg.col("", fk.Cols[0]))
		case len(fk.Cols) == 1:
			in = pg.col("", fk.Cols[0]) + " = ANY (ARRAY(SELECT " + pg.col(sub, fk.RefCols[0]) + " FROM " + from + "))"
		default:
			lhs := make([]string, len(fk.Cols))
			rhs := make([]string, len(fk.Cols))
			for i := range fk.Cols {
				lhs[i] = pg.col("", fk.Cols[i])
				rhs[i] = pg.col(sub, fk.RefCols[i])
			}
			in = "(" + strings.Join(lhs, ", ") + ") IN (SELECT " + strings.Join(rhs, ", ") + " FROM " + from + ")"
		}
		if up {
			// keep.go: a grant of the row's finer level never sees the
			// referenced row (a project's task, its org's assignee), so
			// the key may also stay what the row holds.
			keeps := make([]string, len(fk.Cols))
			for i, c := range fk.Cols {
				keeps[i] = pg.keepCall(t, c)
			}
			in = "(" + in + " OR (" + strings.Join(keeps, " AND ") + "))"
		}
		terms = append(terms, "("+strings.Join(nulls, " OR ")+" OR "+in+")")
	}
	if len(terms) == 0 {
		return check
	}
	return "(" + check + " AND " + strings.Join(terms, " AND ") + ")"
}

// selfKeyCheck is the WITH CHECK term of fk, a key of t into t itself (a
// document's parent document): NULL in part, a row the writer sees (read
// by the sees function, SECURITY INVOKER, as the caller: a subquery on t
// in t's own policy would recurse), or the value the row already holds
// (a grant of a finer level may not see its row's parent). Without it,
// raw SQL as the application role filed a team's document under another
// team's, and told that team's ids from missing ones (Outline probe).
func (pg *policyGen) selfKeyCheck(t *sqlast.Table, fk *sqlast.FK) string {
	nulls := make([]string, len(fk.Cols))
	args := make([]string, len(fk.Cols))
	keeps := make([]string, len(fk.Cols))
	for i, c := range fk.Cols {
		nulls[i] = pg.col("", c) + " IS NULL"
		args[i] = pg.col("", c)
		keeps[i] = pg.keepCall(t, c)
	}
	return "(" + strings.Join(nulls, " OR ") + " OR " + pg.d.Quote(pg.d.SeesFunc(t, fk)) + "(" + strings.Join(args, ", ") + ") OR (" + strings.Join(keeps, " AND ") + "))"
}
