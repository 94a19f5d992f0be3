package postgres

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/tenantmcp/tenantmcp/builder"
	"github.com/tenantmcp/tenantmcp/guardedsql/internal/engine"
)

// The catalog queries read pg_catalog rather than information_schema: the
// latter shows constraints only on tables the current role owns, and the
// start-up comparison runs as the application role, which must not own
// them. All of them read the current schema (the first of search_path
// that exists), where the guarded statements find their tables.

const catalogColumnsSQL = `SELECT c.relname::text, a.attname::text, pg_catalog.format_type(a.atttypid, a.atttypmod),
       COALESCE(co.collname::text, ''), COALESCE(co.collprovider::text, ''), COALESCE(co.collisdeterministic, true)
FROM pg_catalog.pg_class c
JOIN pg_catalog.pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
LEFT JOIN pg_catalog.pg_collation co ON co.oid = a.attcollation
WHERE c.relnamespace = pg_catalog.to_regnamespace(current_schema()) AND c.relkind IN ('r', 'p')
ORDER BY c.relname, a.attnum`

// catalogConstraintsSQL lists primary keys ('p') and foreign keys ('f')
// column by column, in key order.
const catalogConstraintsSQL = `SELECT c.relname::text, k.contype::text, k.conname::text, a.attname::text,
       COALESCE(rc.relname::text, ''), COALESCE(ra.attname::text, '')
FROM pg_catalog.pg_constraint k
JOIN pg_catalog.pg_class c ON c.oid = k.conrelid
CROSS JOIN LATERAL pg_catalog.unnest(k.conkey) WITH ORDINALITY AS u(attnum, ord)
JOIN pg_catalog.pg_attribute a ON a.attrelid = c.oid AND a.attnum = u.attnum
LEFT JOIN pg_catalog.pg_class rc ON rc.oid = k.confrelid
LEFT JOIN pg_catalog.pg_attribute ra ON ra.attrelid = k.confrelid AND ra.attnum = k.confkey[u.ord]
WHERE c.relnamespace = pg_catalog.to_regnamespace(current_schema()) AND k.contype IN ('p', 'f') AND k.convalidated
ORDER BY c.relname, k.contype, k.conname, u.ord`

// catalogUniqueSQL lists the columns of valid, non-partial unique indexes
// (unique constraints and primary keys included); a column 0 (expression)
// comes out as ”.
const catalogUniqueSQL = `SELECT c.relname::text, ic.relname::text, COALESCE(a.attname::text, '')
FROM pg_catalog.pg_index x
JOIN pg_catalog.pg_class c ON c.oid = x.indrelid
JOIN pg_catalog.pg_class ic ON ic.oid = x.indexrelid
CROSS JOIN LATERAL pg_catalog.unnest(x.indkey::int2[]) WITH ORDINALITY AS u(attnum, ord)
LEFT JOIN pg_catalog.pg_attribute a ON a.attrelid = c.oid AND a.attnum = u.attnum AND u.attnum > 0
WHERE c.relnamespace = pg_catalog.to_regnamespace(current_schema()) AND x.indisunique AND x.indpred IS NULL AND x.indisvalid
ORDER BY c.relname, ic.relname, u.ord`

// Introspect implements engine.Dialect for the connection's current
// schema, from pg_catalog: tables (ordinary and partitioned), columns with
// their types, primary keys, validated foreign keys, and unique keys.
func (d Dialect) Introspect(ctx context.Context, q engine.Querier) ([]builder.TableDef, error) {
	defs, _, err := d.catalog(ctx, q)
	// The key table of the signed scope context (any namespace) is the
	// library's own, not the application's.
	return slices.DeleteFunc(defs, isKeyTable), err
}

// isKeyTable reports whether td is a key table signedDDL created.
func isKeyTable(td builder.TableDef) bool {
	return strings.HasSuffix(td.Name, "_scope_keys") && slices.Equal(td.Columns, []string{"id", "inner_pad", "outer_pad", "added"})
}

// colInfo is what the byte-exactness check needs to know of a column.
type colInfo struct {
	collation     string
	provider      string // 'c' libc, 'i' ICU, 'd' default
	deterministic bool
}

func (Dialect) catalog(ctx context.Context, q engine.Querier) ([]builder.TableDef, map[[2]string]colInfo, error) {
	ts := engine.NewTables()
	tables := ts.ByName
	cols := map[[2]string]colInfo{}
	err := each(ctx, q, catalogColumnsSQL, nil, func(r engine.Rows) error {
		var tn, cn, typ string
		var ci colInfo
		if err := r.Scan(&tn, &cn, &typ, &ci.collation, &ci.provider, &ci.deterministic); err != nil {
			return err
		}
		ts.Column(tn, cn, typ)
		cols[[2]string{tn, cn}] = ci
		return nil
	})
	if err != nil {
		return nil, nil, fmt.Errorf("postgres: introspect columns: %w", err)
	}
	var fks, uks engine.Keys
	err = each(ctx, q, catalogConstraintsSQL, nil, func(r engine.Rows) error {
		var tn, typ, name, cn, rt, rc string
		if err := r.Scan(&tn, &typ, &name, &cn, &rt, &rc); err != nil {
			return err
		}
		if td := tables[tn]; td != nil && typ == "p" {
			td.PrimaryKey = append(td.PrimaryKey, cn)
		} else if typ == "f" {
			fks.Add(tn, name, cn, rt, rc, true)
		}
		return nil
	})
	if err != nil {
		return nil, nil, fmt.Errorf("postgres: introspect keys: %w", err)
	}
	fks.ForeignKeys(tables)
	err = each(ctx, q, catalogUniqueSQL, nil, func(r engine.Rows) error {
		var tn, name, cn string
		if err := r.Scan(&tn, &name, &cn); err != nil {
			return err
		}
		uks.Add(tn, name, cn, "", "", cn != "") // '' is an index expression
		return nil
	})
	if err != nil {
		return nil, nil, fmt.Errorf("postgres: introspect unique keys: %w", err)
	}
	uks.Unique(tables)
	return ts.Defs(), cols, nil
}

// Catalog implements engine.CatalogReader: the introspected tables, and
// the text tenant-key columns of g that do not compare byte for byte. A
// nondeterministic collation (an ICU collation with a strength below
// identical, say "und-u-ks-level2") makes 'ACME' = 'acme' true in the
// guard's predicates and the row-level security policies alike.
// Deterministic collations compare equal only identical strings, so they
// are accepted whatever their sort order.
func (d Dialect) Catalog(ctx context.Context, q engine.Querier, keyCols [][2]string) ([]builder.TableDef, []string, error) {
	defs, cols, err := d.catalog(ctx, q)
	if err != nil {
		return nil, nil, err
	}
	var inexact []string
	for _, tc := range keyCols {
		if ci, ok := cols[tc]; ok && !ci.deterministic {
			inexact = append(inexact, fmt.Sprintf("%s.%s (collation %s, nondeterministic)", tc[0], tc[1], ci.collation))
		}
	}
	return defs, inexact, nil
}

// FKEnforced implements engine.CatalogChecker: with session_replication_role
// set to replica, PostgreSQL fires no foreign-key triggers.
func (Dialect) FKEnforced(ctx context.Context, q engine.Querier) (bool, string, error) {
	var role string
	err := each(ctx, q, `SELECT pg_catalog.current_setting('session_replication_role')`, nil, func(r engine.Rows) error { return r.Scan(&role) })
	if err != nil {
		return false, "", fmt.Errorf("postgres: session_replication_role: %w", err)
	}
	if role == "replica" {
		return false, "session_replication_role is replica (foreign-key triggers do not fire)", nil
	}
	return true, "", nil
}

var _ engine.TriggerLister = Dialect{}

// Triggers implements engine.TriggerLister: the user triggers (not the
// internal ones that enforce foreign keys), the rewrite rules (not the
// _RETURN rule of a view) and the foreign keys with a referential action
// (engine.FKAction; 'a' is NO ACTION, 'r' RESTRICT) of the current
// schema's tables, from pg_catalog, so that the application role sees
// those of tables it does not own.
func (Dialect) Triggers(ctx context.Context, q engine.Querier) ([]engine.Trigger, error) {
	return engine.CollectTriggers(ctx, q, `SELECT c.relname::text, t.tgname::text, 'trigger', ''
FROM pg_catalog.pg_trigger t JOIN pg_catalog.pg_class c ON c.oid = t.tgrelid
WHERE c.relnamespace = pg_catalog.to_regnamespace(current_schema()) AND NOT t.tgisinternal
UNION ALL
SELECT c.relname::text, r.rulename::text, 'rule', ''
FROM pg_catalog.pg_rewrite r JOIN pg_catalog.pg_class c ON c.oid = r.ev_class
WHERE c.relnamespace = pg_catalog.to_regnamespace(current_schema()) AND r.rulename <> '_RETURN'
UNION ALL
SELECT c.relname::text, 'fk:' || (SELECT pg_catalog.string_agg(a.attname::text, ',' ORDER BY k.n)
        FROM pg_catalog.unnest(f.conkey) WITH ORDINALITY AS k(attnum, n)
        JOIN pg_catalog.pg_attribute a ON a.attrelid = f.conrelid AND a.attnum = k.attnum) || '->' || r.relname::text,
       '`+engine.FKAction+`', r.relname::text
FROM pg_catalog.pg_constraint f JOIN pg_catalog.pg_class c ON c.oid = f.conrelid JOIN pg_catalog.pg_class r ON r.oid = f.confrelid
WHERE f.contype = 'f' AND c.relnamespace = pg_catalog.to_regnamespace(current_schema())
  AND (f.confupdtype NOT IN ('a', 'r') OR f.confdeltype NOT IN ('a', 'r'))
ORDER BY 1, 2`)
}
