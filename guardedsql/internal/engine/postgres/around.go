package postgres

import (
	"context"
	"fmt"
	"strings"

	"github.com/tenantmcp/tenantmcp/guardedsql/internal/engine"
	"github.com/tenantmcp/tenantmcp/internal/guardfault"
)

// Relations around the policies.
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
// Invariant: Check passes only if the connected role has no privilege on
// any relation (in a schema it can use) that reaches a tenant-bound
// table's rows around its policies: a partition or inheritance child not
// itself declared, a materialized view over one, or a view over one that
// is neither security_invoker nor owned by a role subject to row-level
// security — followed through views of views at any depth.
//
// Not followed (docs/security.md): functions (a SECURITY DEFINER function
// reading a tenant-bound table as a bypassing owner is invisible to the
// catalog's dependencies) and foreign tables.

// ErrRLSBypassRelation: the connected role can read or write a relation
// that reaches a tenant-bound table's rows around its row-level security
// (a partition or inheritance child, a view run with a bypassing owner's
// rights, a materialized view). The error names the relation and the
// table, never a row.
var ErrRLSBypassRelation = fmt.Errorf("%w: the role can use a relation that reaches a tenant-bound table's rows around its row-level security", ErrRLSUnsafe)

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

// checkAround refuses, with ErrRLSBypassRelation, a role that holds a
// privilege on a relation reaching one of the tenant-bound tables (oids)
// around its policies; it names the first such relation and how many
// there are.
func checkAround(ctx context.Context, q engine.Querier, user string, oids []int64) error {
	if guardfault.Off(guardfault.BypassRelations) {
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
	if len(all) == 0 {
		return nil
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
	more := ""
	if len(all) > 1 {
		more = fmt.Sprintf("; %d more relation(s) like it", len(all)-1)
	}
	return fmt.Errorf("%w (role %q can use %s, which reaches table %q %s%s)", ErrRLSBypassRelation, user, f.rel, f.table, how, more)
}
