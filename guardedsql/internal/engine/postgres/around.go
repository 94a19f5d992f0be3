package postgres

import (
	"context"
	"fmt"
	"strings"

	"github.com/tenantmcp/tenantmcp/guardedsql/internal/engine"
	"github.com/tenantmcp/tenantmcp/internal/guardfault"
)

// Relations and functions around the policies.
//
// A tenant-bound table's policies apply to statements that name the
// table. Three kinds of relation reach its rows without them: a partition
// or inheritance child, read directly (its own row-level security, not
// the parent's, applies, and a new partition has none); a view that is
// not security_invoker, whose tables are read with its owner's rights,
// which skip every policy when the owner is a superuser or has BYPASSRLS
// (the usual owner of a schema loaded as postgres); and a materialized
// view, which holds a copy of the rows with no row-level security at all.
// A migration's `GRANT … ON ALL TABLES IN SCHEMA` hands all three to the
// application role.
//
// A fourth kind is a function: one that is SECURITY DEFINER runs with its
// owner's rights, so when the owner is a superuser or has BYPASSRLS it
// reads every tenant's rows (Pagila's rewards_report(), which PUBLIC may
// execute, returns every store's customers). A function's body is not in
// the catalog's dependencies unless it is a SQL-standard body, so a
// function counts as reaching a table when it depends on it or its source
// names it as a whole word.
//
// Invariant: Check passes only if the connected role has no privilege on
// any relation (in a schema it can use) that reaches a tenant-bound
// table's rows around its policies: a partition or inheritance child not
// itself declared, a materialized view over one, or a view over one that
// is neither security_invoker nor owned by a role subject to row-level
// security — followed through views of views at any depth; and it can
// execute no SECURITY DEFINER function owned by a superuser or BYPASSRLS
// role (outside extensions and the library's own) that depends on or
// names a tenant-bound table.
//
// Not followed (docs/engines.md): a function that builds a table's name at
// run time (dynamic SQL), and foreign tables.

// ErrRLSBypassPath: the connected role can use a relation or execute a
// function that reaches a tenant-bound table's rows around its row-level
// security (a partition or inheritance child, a view run with a bypassing
// owner's rights, a materialized view, a SECURITY DEFINER function of a
// bypassing owner). The error names the relation or function and the
// table, never a row.
var ErrRLSBypassPath = fmt.Errorf("%w: the role can use a relation or function that reaches a tenant-bound table's rows around its row-level security", ErrRLSUnsafe)

// definerSQL lists the SECURITY DEFINER functions the current role can
// execute, in schemas it can use, not members of an extension and not the
// library's own in the current schema ($2: the verifying and exchange
// functions; $3: the prefix of the reference-counting functions, which
// RLSDDL generates per table owned by reference, of this graph or another
// applied in the same schema), which read tenant-bound tables by design
// and which the rest of Check verifies, whose
// owner is a superuser or has BYPASSRLS, with the first tenant-bound table
// ($1, oids) each depends on or names as a whole word in its source.
const definerSQL = `SELECT f.oid::pg_catalog.regprocedure::text, pg_catalog.pg_get_userbyid(f.proowner)::text, t.rel
FROM pg_catalog.pg_proc f
JOIN pg_catalog.pg_roles o ON o.oid = f.proowner AND (o.rolsuper OR o.rolbypassrls)
CROSS JOIN LATERAL (
  SELECT c.oid::pg_catalog.regclass::text AS rel FROM pg_catalog.pg_class c
  WHERE c.oid::int8 = ANY ($1::int8[])
    AND (f.prosrc ~* ('\m' || pg_catalog.regexp_replace(c.relname::text, '([^[:alnum:]_])', '\\\1', 'g') || '\M')
         OR EXISTS (SELECT 1 FROM pg_catalog.pg_depend d WHERE d.classid = 'pg_catalog.pg_proc'::pg_catalog.regclass
                    AND d.objid = f.oid AND d.refclassid = 'pg_catalog.pg_class'::pg_catalog.regclass AND d.refobjid = c.oid))
  ORDER BY c.relname LIMIT 1) t
WHERE f.prosecdef AND f.pronamespace <> 'pg_catalog'::pg_catalog.regnamespace
  AND NOT (f.pronamespace = pg_catalog.to_regnamespace(pg_catalog.current_schema())
           AND (f.proname::text = ANY ($2::text[]) OR pg_catalog.starts_with(f.proname::text, $3::text)))
  AND pg_catalog.has_function_privilege(f.oid, 'EXECUTE') AND pg_catalog.has_schema_privilege(f.pronamespace, 'USAGE')
  AND NOT EXISTS (SELECT 1 FROM pg_catalog.pg_depend e WHERE e.classid = 'pg_catalog.pg_proc'::pg_catalog.regclass
                  AND e.objid = f.oid AND e.deptype = 'e')
ORDER BY 1`

// aroundSQL lists, for the tenant-bound tables ($1, oids), every relation
// the current role holds a privilege on that reaches their rows around
// the policies, with the table it reaches and why: 'child' (a partition or
// inheritance child, or a view reading one), 'matview', or 'view', the
// view's name and its owner, separated by citusSep (a view run with the
// rights of that superuser or BYPASSRLS owner). The reason is the first
// one on the way from the table.
const aroundSQL = `WITH RECURSIVE
bound AS (SELECT b::oid AS oid FROM pg_catalog.unnest($1::int8[]) AS b),
kids(oid, top) AS (
  SELECT i.inhrelid, i.inhparent FROM pg_catalog.pg_inherits i JOIN bound b ON b.oid = i.inhparent
  UNION
  SELECT i.inhrelid, k.top FROM pg_catalog.pg_inherits i JOIN kids k ON k.oid = i.inhparent),
reach(oid, top, why) AS (
  SELECT b.oid, b.oid, ''::text FROM bound b
  UNION
  SELECT k.oid, k.top, 'child'::text FROM kids k WHERE k.oid NOT IN (SELECT oid FROM bound)
  UNION
  SELECT v.oid, r.top, CASE
      WHEN r.why <> '' THEN r.why
      WHEN v.relkind = 'm' THEN 'matview'
      WHEN NOT coalesce((SELECT pg_catalog.bool_or(o.option_value::boolean) FROM pg_catalog.pg_options_to_table(v.reloptions) o
                         WHERE o.option_name = 'security_invoker'), false)
       AND coalesce((SELECT a.rolsuper OR a.rolbypassrls FROM pg_catalog.pg_roles a WHERE a.oid = v.relowner), true)
        THEN 'view' || pg_catalog.chr(31) || (v.oid::pg_catalog.regclass::text COLLATE "default") || pg_catalog.chr(31)
             || (pg_catalog.pg_get_userbyid(v.relowner)::text COLLATE "default")
      ELSE '' END
  FROM reach r
  JOIN pg_catalog.pg_depend d ON d.refclassid = 'pg_catalog.pg_class'::pg_catalog.regclass AND d.refobjid = r.oid
       AND d.classid = 'pg_catalog.pg_rewrite'::pg_catalog.regclass
  JOIN pg_catalog.pg_rewrite w ON w.oid = d.objid
  JOIN pg_catalog.pg_class v ON v.oid = w.ev_class AND v.oid <> r.oid AND v.relkind IN ('v', 'm'))
SELECT DISTINCT ON (r.oid) r.oid::pg_catalog.regclass::text, r.top::pg_catalog.regclass::text, r.why
FROM reach r JOIN pg_catalog.pg_class c ON c.oid = r.oid
WHERE r.why <> '' AND pg_catalog.has_schema_privilege(c.relnamespace, 'USAGE')
  AND (pg_catalog.has_table_privilege(r.oid, 'SELECT, INSERT, UPDATE, DELETE')
       OR pg_catalog.has_any_column_privilege(r.oid, 'SELECT, INSERT, UPDATE'))
ORDER BY r.oid, r.why`

// checkAround refuses, with ErrRLSBypassPath, a role that holds a
// privilege on a relation reaching one of the tenant-bound tables (oids)
// around its policies; it names the first such relation and how many
// there are.
func (d Dialect) checkAround(ctx context.Context, q engine.Querier, user string, oids []int64) error {
	if guardfault.Off(guardfault.BypassPaths) {
		return nil
	}
	type found struct{ rel, table, why string }
	var all []found
	err := eachBounded(ctx, q, aroundSQL, []any{oids}, func(r engine.Rows) error {
		var f found
		if err := r.Scan(&f.rel, &f.table, &f.why); err != nil {
			return err
		}
		all = append(all, f)
		return nil
	})
	if err != nil {
		return fmt.Errorf("guardedsql: reading relations that reach tenant-bound tables: %w", err)
	}
	var fns []found
	ours := []string{d.ScopeFunc(), d.OpenFunc(), d.ExchangeFunc()}
	err = eachBounded(ctx, q, definerSQL, []any{oids, ours, d.ns() + "_refs_"}, func(r engine.Rows) error {
		var f found
		if err := r.Scan(&f.rel, &f.why, &f.table); err != nil {
			return err
		}
		fns = append(fns, f)
		return nil
	})
	if err != nil {
		return fmt.Errorf("guardedsql: reading SECURITY DEFINER functions: %w", err)
	}
	if len(all)+len(fns) == 0 {
		return nil
	}
	more := ""
	if n := len(all) + len(fns) - 1; n > 0 {
		more = fmt.Sprintf("; %d more relation(s) or function(s) like it", n)
	}
	if len(all) == 0 {
		f := fns[0]
		return fmt.Errorf("%w (role %q can execute function %s, SECURITY DEFINER and owned by %q, a superuser or BYPASSRLS role, which reads table %q with every policy skipped: "+
			"REVOKE EXECUTE ON FUNCTION %s FROM PUBLIC and from the role, or make it SECURITY INVOKER%s)", ErrRLSBypassPath, user, f.rel, f.why, f.table, f.rel, more)
	}
	f := all[0]
	var how string
	switch view, isView := strings.CutPrefix(f.why, "view"+citusSep); {
	case isView:
		name, owner, _ := strings.Cut(view, citusSep)
		how = fmt.Sprintf("through view %s, which is not security_invoker and is owned by %q, a superuser or BYPASSRLS role: make that view security_invoker (ALTER VIEW … SET (security_invoker = true)), give it an owner subject to row-level security, or revoke the role's privileges on %s", name, owner, f.rel)
	case f.why == "matview":
		how = "through a materialized view (itself or one it reads), which holds a copy of the rows without row-level security: revoke the role's privileges on it"
	default:
		how = "through a partition or inheritance child, whose own row-level security applies when it is named directly: revoke the role's privileges on it (the guard reads it through its parent), or declare it"
	}
	return fmt.Errorf("%w (role %q can use %s, which reaches table %q %s%s)", ErrRLSBypassPath, user, f.rel, f.table, how, more)
}
