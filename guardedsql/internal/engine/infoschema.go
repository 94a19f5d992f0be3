package engine

import (
	"context"
	"fmt"

	sq "github.com/Masterminds/squirrel"

	"github.com/tenantmcp/tenantmcp/builder"
)

// InfoSchemaFlavor selects the foreign-key query of InformationSchema.
type InfoSchemaFlavor int

const (
	// FlavorStandard resolves referenced columns through
	// referential_constraints.unique_constraint_name (PostgreSQL).
	FlavorStandard InfoSchemaFlavor = iota
	// FlavorMySQL reads key_column_usage.referenced_table_name and
	// referenced_column_name (MySQL and MariaDB name every primary key
	// "PRIMARY", so the standard join would be ambiguous there).
	FlavorMySQL
)

// InformationSchema introspects the base tables of one schema (PostgreSQL
// schema, MySQL database) through the standard information_schema views.
// ph is the engine's placeholder format.
//
// It is written for the PostgreSQL and MySQL dialects and is not exercised
// by this package's SQLite tests; the engine tests of those dialects cover
// it.
func InformationSchema(ctx context.Context, q Querier, ph sq.PlaceholderFormat, flavor InfoSchemaFlavor, schemaName string) ([]builder.TableDef, error) {
	run := func(query string, scan func(Rows) error) error {
		text, err := ph.ReplacePlaceholders(query)
		if err != nil {
			return err
		}
		rows, err := q.Query(ctx, text, schemaName)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			if err := scan(rows); err != nil {
				return err
			}
		}
		return rows.Err()
	}
	ts := NewTables()
	tables := ts.ByName
	err := run(`SELECT c.table_name, c.column_name, c.data_type
FROM information_schema.columns c
JOIN information_schema.tables t ON t.table_schema = c.table_schema AND t.table_name = c.table_name
WHERE c.table_schema = ? AND t.table_type = 'BASE TABLE'
ORDER BY c.table_name, c.ordinal_position`, func(r Rows) error {
		var tn, cn, typ string
		if err := r.Scan(&tn, &cn, &typ); err != nil {
			return err
		}
		ts.Column(tn, cn, typ)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("introspect columns: %w", err)
	}
	err = run(`SELECT k.table_name, k.column_name
FROM information_schema.table_constraints tc
JOIN information_schema.key_column_usage k
  ON k.constraint_schema = tc.constraint_schema AND k.constraint_name = tc.constraint_name AND k.table_name = tc.table_name
WHERE tc.table_schema = ? AND tc.constraint_type = 'PRIMARY KEY'
ORDER BY k.table_name, k.ordinal_position`, func(r Rows) error {
		var tn, cn string
		if err := r.Scan(&tn, &cn); err != nil {
			return err
		}
		if td := tables[tn]; td != nil {
			td.PrimaryKey = append(td.PrimaryKey, cn)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("introspect primary keys: %w", err)
	}
	fkQuery := `SELECT k.table_name, k.constraint_name, k.column_name, u.table_name, u.column_name
FROM information_schema.referential_constraints rc
JOIN information_schema.key_column_usage k
  ON k.constraint_schema = rc.constraint_schema AND k.constraint_name = rc.constraint_name
JOIN information_schema.key_column_usage u
  ON u.constraint_schema = rc.unique_constraint_schema AND u.constraint_name = rc.unique_constraint_name
 AND u.ordinal_position = k.position_in_unique_constraint
WHERE rc.constraint_schema = ?
ORDER BY k.table_name, k.constraint_name, k.ordinal_position`
	if flavor == FlavorMySQL {
		fkQuery = `SELECT k.table_name, k.constraint_name, k.column_name, k.referenced_table_name, k.referenced_column_name
FROM information_schema.key_column_usage k
WHERE k.table_schema = ? AND k.referenced_table_name IS NOT NULL
ORDER BY k.table_name, k.constraint_name, k.ordinal_position`
	}
	var fks Keys
	err = run(fkQuery, func(r Rows) error {
		var tn, name, cn, rt, rc string
		if err := r.Scan(&tn, &name, &cn, &rt, &rc); err != nil {
			return err
		}
		fks.Add(tn, name, cn, rt, rc, true)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("introspect foreign keys: %w", err)
	}
	fks.ForeignKeys(tables)
	// Unique keys, from the indexes rather than table_constraints: a
	// PostgreSQL unique index is no constraint, and a MySQL unique index on
	// a column prefix (sub_part) or an expression does not make the column
	// unique. The primary key is listed too.
	uniqueQuery := `SELECT t.relname, ic.relname, COALESCE(a.attname, ''), 0
FROM pg_catalog.pg_index x
JOIN pg_catalog.pg_class t ON t.oid = x.indrelid
JOIN pg_catalog.pg_namespace n ON n.oid = t.relnamespace
JOIN pg_catalog.pg_class ic ON ic.oid = x.indexrelid
CROSS JOIN LATERAL unnest(x.indkey::int2[]) WITH ORDINALITY AS k(attnum, ord)
LEFT JOIN pg_catalog.pg_attribute a ON a.attrelid = t.oid AND a.attnum = k.attnum AND k.attnum > 0
WHERE n.nspname = ? AND x.indisunique AND x.indpred IS NULL AND x.indisvalid
ORDER BY t.relname, ic.relname, k.ord`
	if flavor == FlavorMySQL {
		uniqueQuery = `SELECT table_name, index_name, COALESCE(column_name, ''), COALESCE(sub_part, 0)
FROM information_schema.statistics
WHERE table_schema = ? AND non_unique = 0
ORDER BY table_name, index_name, seq_in_index`
	}
	var uks Keys
	err = run(uniqueQuery, func(r Rows) error {
		var tn, name, cn string
		var sub int64
		if err := r.Scan(&tn, &name, &cn, &sub); err != nil {
			return err
		}
		// An expression or a prefix is not a key of the column.
		uks.Add(tn, name, cn, "", "", cn != "" && sub == 0)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("introspect unique keys: %w", err)
	}
	uks.Unique(tables)
	return ts.Defs(), nil
}
