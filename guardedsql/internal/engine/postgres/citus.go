package postgres

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strconv"
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
// coordinator (one command per node holding placements, sent with
// master_run_on_worker, on which Citus builds run_command_on_placements;
// as the application role), and fails closed with ErrRLSPlacement unless
// each placement carries exactly the coordinator's row-level security.
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
const citusSep = "\x1f" // also around.go

// placementStateSQL returns, for each relation of rels (an SQL row
// source of (key text, rel oid)), the key and the state of that relation
// and of the signed-scope objects in its schema, as one text value
// ('missing' where rel is NULL or not a relation). The same query runs on
// the coordinator for the logical tables and on every node for its
// shards, and the values must be equal. The expressions are deparsed under
// search_path pg_catalog (set on the outer side of the lateral join, so
// before anything is deparsed), as the stamp in RLSDDL does, so the text
// does not depend on the session.
func (d Dialect) placementStateSQL(rels string) string {
	return `SELECT r.key, x.v FROM (SELECT pg_catalog.set_config('search_path', 'pg_catalog', true) AS sp) AS s
CROSS JOIN ` + rels + ` AS r(key, rel)
CROSS JOIN LATERAL (SELECT coalesce((
SELECT pg_catalog.concat_ws(pg_catalog.chr(31),
  'rls=' || c.relrowsecurity::text,
  'forced=' || c.relforcerowsecurity::text,
  'owner=' || pg_catalog.pg_get_userbyid(c.relowner)::text,
  'policies=' || (SELECT pg_catalog.count(*) FROM pg_catalog.pg_policy p WHERE p.polrelid = c.oid)::text,
  'policy-digest=' || coalesce((SELECT pg_catalog.encode(pg_catalog.sha256(pg_catalog.convert_to(pg_catalog.string_agg(
      p.polname::text || ':' || p.polpermissive::text || ':' || p.polcmd::text || ':' ||
      coalesce((SELECT pg_catalog.string_agg(CASE WHEN ro.oid = 0 THEN 'public' ELSE pg_catalog.pg_get_userbyid(ro.oid)::text END, ',' ORDER BY 1)
                FROM pg_catalog.unnest(p.polroles) AS ro(oid)), '') || ':' ||
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
WHERE c.oid = r.rel AND s.sp IS NOT NULL), 'missing')) AS x(v)`
}

// placementsSQL lists the active placements of the distributed tables
// ($1, their oids) on primary nodes, by node: host, port, shard id, the
// shard's qualified name, and its table's oid.
const placementsSQL = `SELECT n.nodename, n.nodeport::int8, s.shardid, pg_catalog.shard_name(s.logicalrelid, s.shardid), s.logicalrelid::int8
FROM pg_catalog.pg_dist_shard s
JOIN pg_catalog.pg_dist_placement pl ON pl.shardid = s.shardid
JOIN pg_catalog.pg_dist_node n ON n.groupid = pl.groupid
WHERE s.logicalrelid::int8 = ANY ($1::int8[]) AND pl.shardstate = 1 AND n.noderole = 'primary'
ORDER BY n.nodename, n.nodeport, s.shardid`

// runOnNodesSQL runs one command per node ($1 hosts, $2 ports, $3
// commands) through the coordinator, in parallel, each on a connection of
// its own as the current role (Citus's master_run_on_worker, on which
// run_command_on_placements is built).
const runOnNodesSQL = `SELECT r.node_name, r.node_port::int8, r.success, coalesce(r.result, '')
FROM pg_catalog.master_run_on_worker($1::text[], $2::int4[], $3::text[], true) AS r`

// Separators of a node's answer: shards by chr(29), a shard's id and
// state by chr(30).
const citusShardSep, citusKeySep = "\x1d", "\x1e"

type citusPlacement struct {
	oid, shard int64 // the table's oid and the shard's id
	name       string
}

// checkCitus is Check's part for Citus clusters (see the invariant
// above), run only where the citus extension is installed (Check reads
// that with the connected role, in the same query); tables are the
// tenant-bound tables' names. It costs one
// connection to each node holding placements, per check.
func (d Dialect) checkCitus(ctx context.Context, q engine.Querier, tables []string) error {
	names := map[int64]string{}
	var oids []int64
	err := eachBounded(ctx, q, citusTablesSQL, []any{tables}, func(r engine.Rows) error {
		var name string
		var oid int64
		if err := r.Scan(&name, &oid); err != nil {
			return err
		}
		names[oid] = name
		oids = append(oids, oid)
		return nil
	})
	if err != nil {
		return fmt.Errorf("guardedsql: reading the Citus distributed tables: %w", err)
	}
	if len(oids) == 0 {
		return nil
	}
	// What every placement must equal: the coordinator's tables.
	want := map[string]string{}
	local := d.placementStateSQL(`(SELECT o::text, o::pg_catalog.oid FROM pg_catalog.unnest($1::int8[]) AS o)`)
	err = eachBounded(ctx, q, local, []any{oids}, func(r engine.Rows) error {
		var key, v string
		if err := r.Scan(&key, &v); err != nil {
			return err
		}
		want[key] = v
		return nil
	})
	if err != nil {
		return fmt.Errorf("guardedsql: reading the distributed tables' row-level security on the coordinator: %w", err)
	}
	// The placements, by node.
	byNode := map[string][]citusPlacement{}
	var hosts []string
	var ports []int32
	placed := map[int64]bool{}
	err = eachBounded(ctx, q, placementsSQL, []any{oids}, func(r engine.Rows) error {
		var host, name string
		var port, shard, oid int64
		if err := r.Scan(&host, &port, &shard, &name, &oid); err != nil {
			return err
		}
		node := fmt.Sprintf("%s:%d", host, port)
		if _, ok := byNode[node]; !ok {
			hosts, ports = append(hosts, host), append(ports, int32(port))
		}
		byNode[node] = append(byNode[node], citusPlacement{oid: oid, shard: shard, name: name})
		placed[oid] = true
		return nil
	})
	if err != nil {
		return fmt.Errorf("guardedsql: reading the Citus shard placements: %w", err)
	}
	for _, oid := range oids {
		if !placed[oid] {
			return fmt.Errorf("%w (table %q: Citus lists no active placement)", ErrRLSPlacement, names[oid])
		}
	}
	commands := make([]string, len(hosts))
	for i := range hosts {
		node := fmt.Sprintf("%s:%d", hosts[i], ports[i])
		var rels []string
		for _, p := range byNode[node] {
			rels = append(rels, "("+literal(strconv.FormatInt(p.shard, 10))+", pg_catalog.to_regclass("+literal(p.name)+")::pg_catalog.oid)")
		}
		commands[i] = `SELECT pg_catalog.string_agg(q.key || pg_catalog.chr(30) || q.v, pg_catalog.chr(29) ORDER BY q.key) FROM (` +
			d.placementStateSQL("(VALUES "+strings.Join(rels, ", ")+")") + `) AS q`
	}
	// Every mismatch is collected; the one reported is the first by
	// table name, node and shard, so the error does not depend on which
	// node answered first.
	type mismatch struct {
		table, node string
		shard       int64
		err         error
	}
	var bad []mismatch
	answered := map[string]bool{}
	err = eachBounded(ctx, q, runOnNodesSQL, []any{hosts, ports, commands}, func(r engine.Rows) error {
		var host, result string
		var port int64
		var ok bool
		if err := r.Scan(&host, &port, &ok, &result); err != nil {
			return err
		}
		node := fmt.Sprintf("%s:%d", host, port)
		answered[node] = true
		got := map[string]string{}
		for _, e := range strings.Split(result, citusShardSep) {
			if k, v, found := strings.Cut(e, citusKeySep); found {
				got[k] = v
			}
		}
		for _, p := range byNode[node] {
			table := names[p.oid]
			where := fmt.Sprintf("table %q, shard %d on node %s", table, p.shard, node)
			w := want[strconv.FormatInt(p.oid, 10)]
			g, found := got[strconv.FormatInt(p.shard, 10)]
			var e error
			switch {
			case !ok:
				// The result is the node's error text: not repeated
				// here (it may name roles and hosts of the cluster's
				// configuration); the node's log has it.
				e = fmt.Errorf("%w (%s: the node could not be read as the application role)", ErrRLSPlacement, where)
			case w == "" || w == "missing":
				e = fmt.Errorf("%w (%s: the table was not found on the coordinator)", ErrRLSPlacement, where)
			case !found || g == "missing":
				e = fmt.Errorf("%w (%s: the shard was not found on the node)", ErrRLSPlacement, where)
			case g != w:
				e = fmt.Errorf("%w (%s: %s; re-apply postgres.RLSDDL on every node and shard, see docs/citus.md)", ErrRLSPlacement, where, placementDiff(w, g))
			}
			if e != nil {
				bad = append(bad, mismatch{table, node, p.shard, e})
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("guardedsql: reading the shard placements through the coordinator: %w", err)
	}
	if len(bad) > 0 {
		first := slices.MinFunc(bad, func(a, b mismatch) int {
			return cmp.Or(cmp.Compare(a.table, b.table), cmp.Compare(a.node, b.node), cmp.Compare(a.shard, b.shard))
		})
		return first.err
	}
	for node := range byNode {
		if !answered[node] {
			return fmt.Errorf("%w (node %s did not answer)", ErrRLSPlacement, node)
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
