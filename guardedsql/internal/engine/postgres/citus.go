package postgres

import (
	"context"
	"fmt"
	"strings"

	"github.com/tenantmcp/tenantmcp/guardedsql/internal/engine"
)

// Citus (issue 31).
//
// On a Citus cluster a distributed table's rows live in shards, ordinary
// tables on the worker nodes, and the coordinator sends each shard the
// statement with the shard's name in place of the table's: the shard's
// own row-level security applies there, never the coordinator's. Policies
// created on the coordinator alone (DDL propagation off, or a shard moved
// or added without them) leave every shard open while the coordinator's
// catalogs, which Check reads, show them in force. So on a database where
// the citus extension is installed, checkCitus reads every active shard
// placement of every distributed tenant-bound table back through the
// coordinator (run_command_on_placements), and fails closed with
// ErrRLSPlacement unless each placement carries exactly the coordinator's
// row-level security.
//
// Invariant: on a database with the citus extension, Check passes only if
// every active placement of every distributed tenant-bound table (shards
// of hash-distributed tables, replicas of reference tables) has row-level
// security enabled and forced, the coordinator table's owner, exactly the
// coordinator table's policies (name, permissive, command, roles by name,
// and the expressions as deparsed under search_path pg_catalog), and, on
// its node, a verifying function and key table identical to the
// coordinator's (SECURITY DEFINER, volatility, configuration, body,
// owner, the role not a member of the owner; the key table's row-level
// security flags, policy count and owner). The coordinator's own objects
// are checked against the generator by the rest of Check, so equality
// with them is equality with what RLSDDL generates.
//
// Not verified here (docs/citus.md): which keys a worker's key table holds
// (the application role cannot read it; a placement without the key
// admits no rows, it never widens), and a signed probe through a
// distributed query (that needs a nonce the coordinator and the workers
// share, a Citus mode of the signed scope that does not exist yet).

// ErrRLSPlacement: on a Citus cluster, a shard placement of a distributed
// tenant-bound table, or the verifying function or key table on the node
// holding it, differs from the coordinator's, or could not be read. The
// error names the table, the node (host:port) and the shard id.
var ErrRLSPlacement = fmt.Errorf("%w: on a Citus cluster, a shard placement of a tenant-bound table (or the signed-scope objects on its node) lacks the coordinator's row-level security, or could not be read", ErrRLSUnsafe)

const citusPresentSQL = `SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_extension WHERE extname = 'citus')`

// citusTablesSQL lists the distributed tables (any Citus table with
// shards: hash-distributed, reference, or Citus-managed local) among the
// tenant-bound tables ($1), resolved in the current schema as
// checkTablesSQL resolves them.
const citusTablesSQL = `SELECT t.name, c.oid::int8
FROM pg_catalog.unnest($1::text[]) AS t(name)
JOIN pg_catalog.pg_class c ON c.oid = pg_catalog.to_regclass(pg_catalog.quote_ident(pg_catalog.current_schema()) || '.' || pg_catalog.quote_ident(t.name))
JOIN pg_catalog.pg_dist_partition p ON p.logicalrelid = c.oid
ORDER BY t.name`

// citusSep separates the fields of a placement's state (chr(31), the
// ASCII unit separator, which no identifier here contains).
const citusSep = "\x1f"

// placementStateSQL is the state of one relation (@REL@, a regclass
// expression) and of the signed-scope objects in its schema, as one text
// value: the same query runs on the coordinator for the logical table and
// on every placement for its shard, and the two values must be equal. The
// expressions are deparsed under search_path pg_catalog (set in the
// lateral join's outer side, so before anything is deparsed), as the
// stamp in RLSDDL does, so the text does not depend on the session.
func (d Dialect) placementStateSQL() string {
	return `SELECT x.v FROM (SELECT pg_catalog.set_config('search_path', 'pg_catalog', true) AS sp) AS s
CROSS JOIN LATERAL (
SELECT pg_catalog.concat_ws(pg_catalog.chr(31),
  'rls=' || c.relrowsecurity::text,
  'forced=' || c.relforcerowsecurity::text,
  'owner=' || pg_catalog.pg_get_userbyid(c.relowner)::text,
  'policies=' || (SELECT pg_catalog.count(*) FROM pg_catalog.pg_policy p WHERE p.polrelid = c.oid)::text,
  'policy-digest=' || coalesce((SELECT pg_catalog.encode(pg_catalog.sha256(pg_catalog.convert_to(pg_catalog.string_agg(
      p.polname::text || ':' || p.polpermissive::text || ':' || p.polcmd::text || ':' ||
      coalesce((SELECT pg_catalog.string_agg(CASE WHEN r.oid = 0 THEN 'public' ELSE pg_catalog.pg_get_userbyid(r.oid)::text END, ',' ORDER BY 1)
                FROM pg_catalog.unnest(p.polroles) AS r(oid)), '') || ':' ||
      ` + deparseHash + `, E'\n' ORDER BY p.polname), 'UTF8')), 'hex')
    FROM pg_catalog.pg_policy p WHERE p.polrelid = c.oid), 'none'),
  'function=' || coalesce((SELECT pg_catalog.concat_ws(',', f.prosecdef::text, f.provolatile::text,
      coalesce(pg_catalog.array_to_string(f.proconfig, ';'), ''),
      pg_catalog.encode(pg_catalog.sha256(pg_catalog.convert_to(f.prosrc, 'UTF8')), 'hex'),
      pg_catalog.pg_get_userbyid(f.proowner)::text,
      pg_catalog.pg_has_role(current_user, f.proowner, 'MEMBER')::text)
    FROM pg_catalog.pg_proc f
    WHERE f.oid = pg_catalog.to_regprocedure(pg_catalog.quote_ident(n.nspname) || '.' || pg_catalog.quote_ident(` + literal(d.ScopeFunc()) + `) || '()')), 'missing'),
  'key-table=' || coalesce((SELECT pg_catalog.concat_ws(',', k.relrowsecurity::text, k.relforcerowsecurity::text,
      (SELECT pg_catalog.count(*) FROM pg_catalog.pg_policy kp WHERE kp.polrelid = k.oid)::text,
      pg_catalog.pg_get_userbyid(k.relowner)::text,
      pg_catalog.pg_has_role(current_user, k.relowner, 'MEMBER')::text)
    FROM pg_catalog.pg_class k
    WHERE k.oid = pg_catalog.to_regclass(pg_catalog.quote_ident(n.nspname) || '.' || pg_catalog.quote_ident(` + literal(d.KeyTable()) + `))), 'missing'))
FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
WHERE c.oid = @REL@ AND s.sp IS NOT NULL) AS x(v)`
}

// placementsSQL runs the state query on every active placement of one
// distributed table ($1, its oid) through the coordinator; $2 is the
// command, with %s where Citus puts the shard's qualified name.
const placementsSQL = `SELECT r.nodename, r.nodeport::int8, r.shardid, r.success, coalesce(r.result, '')
FROM pg_catalog.run_command_on_placements($1::int8::pg_catalog.oid::pg_catalog.regclass, $2, true) AS r
ORDER BY r.shardid, r.nodename, r.nodeport`

// checkCitus is Check's part for Citus clusters (see the invariant
// above); tables are the tenant-bound tables' names. It returns nil at
// once where the citus extension is not installed.
func (d Dialect) checkCitus(ctx context.Context, q engine.Querier, tables []string) error {
	var citus bool
	if err := eachBounded(ctx, q, citusPresentSQL, nil, func(r engine.Rows) error { return r.Scan(&citus) }); err != nil {
		return fmt.Errorf("guardedsql: reading whether Citus is installed: %w", err)
	}
	if !citus {
		return nil
	}
	type distTable struct {
		name string
		oid  int64
	}
	var dist []distTable
	err := eachBounded(ctx, q, citusTablesSQL, []any{tables}, func(r engine.Rows) error {
		var t distTable
		if err := r.Scan(&t.name, &t.oid); err != nil {
			return err
		}
		dist = append(dist, t)
		return nil
	})
	if err != nil {
		return fmt.Errorf("guardedsql: reading the Citus distributed tables: %w", err)
	}
	state := d.placementStateSQL()
	local := strings.Replace(state, "@REL@", "$1::int8::pg_catalog.oid", 1)
	// The placement command goes through format(): every '%' but the
	// shard name's placeholder is doubled.
	remote := strings.Replace(strings.ReplaceAll(state, "%", "%%"), "@REL@", "'%s'::pg_catalog.regclass", 1)
	for _, t := range dist {
		var want string
		found := false
		if err := eachBounded(ctx, q, local, []any{t.oid}, func(r engine.Rows) error {
			found = true
			return r.Scan(&want)
		}); err != nil {
			return fmt.Errorf("guardedsql: reading table %q's row-level security on the coordinator: %w", t.name, err)
		}
		if !found {
			return fmt.Errorf("%w (table %q: not found on the coordinator)", ErrRLSPlacement, t.name)
		}
		n := 0
		var bad error
		err := eachBounded(ctx, q, placementsSQL, []any{t.oid, remote}, func(r engine.Rows) error {
			var (
				node        string
				port, shard int64
				ok          bool
				got         string
			)
			if err := r.Scan(&node, &port, &shard, &ok, &got); err != nil {
				return err
			}
			n++
			if bad != nil {
				return nil
			}
			where := fmt.Sprintf("table %q, shard %d on node %s:%d", t.name, shard, node, port)
			switch {
			case !ok:
				// The result is the node's error text: not repeated
				// here (it may name roles and hosts of the cluster's
				// configuration); the node's log has it.
				bad = fmt.Errorf("%w (%s: the placement could not be read as the application role)", ErrRLSPlacement, where)
			case got != want:
				bad = fmt.Errorf("%w (%s: %s; re-apply postgres.RLSDDL on every node and shard, see docs/citus.md)", ErrRLSPlacement, where, placementDiff(want, got))
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("guardedsql: reading table %q's shard placements: %w", t.name, err)
		}
		if bad != nil {
			return bad
		}
		if n == 0 {
			return fmt.Errorf("%w (table %q: Citus reported no active placement)", ErrRLSPlacement, t.name)
		}
	}
	return nil
}

// placementDiff names the fields of a placement's state that differ from
// the coordinator's. It names objects and flags only: digests and owners
// are compared, never printed.
func placementDiff(want, got string) string {
	w, g := strings.Split(want, citusSep), strings.Split(got, citusSep)
	var why []string
	for i, wf := range w {
		name, _, _ := strings.Cut(wf, "=")
		gf := ""
		if i < len(g) {
			gf = g[i]
		}
		if gf == wf {
			continue
		}
		_, gv, _ := strings.Cut(gf, "=")
		switch name {
		case "rls":
			why = append(why, "row-level security "+onOff(gv)+" (coordinator: "+onOff(strings.TrimPrefix(wf, "rls="))+")")
		case "forced":
			why = append(why, "row-level security forced "+onOff(gv)+" (coordinator: "+onOff(strings.TrimPrefix(wf, "forced="))+")")
		case "policies":
			why = append(why, gv+" policies (coordinator: "+strings.TrimPrefix(wf, "policies=")+")")
		case "policy-digest":
			why = append(why, "the policies differ from the coordinator's")
		case "function":
			if gv == "missing" {
				why = append(why, "the verifying function is missing on the node")
			} else {
				why = append(why, "the verifying function differs from the coordinator's")
			}
		case "key-table":
			if gv == "missing" {
				why = append(why, "the key table is missing on the node")
			} else {
				why = append(why, "the key table differs from the coordinator's")
			}
		default:
			why = append(why, name+" differs from the coordinator's")
		}
	}
	if len(why) == 0 || len(g) != len(w) {
		why = append(why, "its state could not be compared")
	}
	return strings.Join(why, ", ")
}

func onOff(v string) string {
	if v == "true" {
		return "on"
	}
	return "off"
}
