package conformance

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"sort"
	"strings"
)

// liveTable is one table as the live catalog describes it, read by the
// suite's own queries over the owner connection: deliberately not through
// guardedsql's catalog reader nor from the schema graph, so that the
// ownership oracle (owners.go) shares no code or assumption with what it
// checks.
type liveTable struct {
	name  string            // as the catalog spells it
	cols  []string          // as the catalog spells them, in order
	types map[string]string // lower-case column -> declared type, lower case
	pk    []string          // lower case
	fks   []liveFK
	// uniques are the unique keys other than the primary key, lower case:
	// plain column lists only (no expression index). A partial unique
	// index counts, its predicate ignored: Lago's customers(external_id,
	// organization_id) WHERE deleted_at IS NULL refuses a copy of a live
	// row as a full one would, and the copies must vary it.
	uniques [][]string
}

// liveFK is one foreign-key constraint of the catalog, every name lower
// case.
type liveFK struct {
	cols, ref []string
	to        string
	// onDelete is the ON DELETE action: "no action", "restrict",
	// "cascade", "set null" or "set default".
	onDelete string
}

// blocksDelete reports whether f makes the engine refuse the delete of a
// row it still references (NO ACTION or RESTRICT); under CASCADE or SET
// NULL the delete is legal and succeeds.
func (f liveFK) blocksDelete() bool { return f.onDelete == "no action" || f.onDelete == "restrict" }

// readCatalog reads, keyed by lower-case name, every base table of the scratch database with its
// columns, declared types, primary key and foreign-key constraints. Every
// foreign key the catalog lists is enforced on the scratch database: the
// SQLite owner connection has PRAGMA foreign_keys on, and InnoDB and
// PostgreSQL enforce every constraint they list.
func readCatalog(ctx context.Context, db *sql.DB, e Engine) (map[string]*liveTable, error) {
	out := map[string]*liveTable{}
	var err error
	switch e {
	case SQLite:
		err = readSQLiteCatalog(ctx, db, out)
	case Postgres:
		err = readPostgresCatalog(ctx, db, out)
	case MySQL:
		err = readMySQLCatalog(ctx, db, out)
	default:
		err = fmt.Errorf("conformance: no catalog reader for engine %q", e)
	}
	if err != nil {
		return nil, fmt.Errorf("conformance: reading the live catalog: %w", err)
	}
	for _, t := range out {
		for i := range t.fks {
			if len(t.fks[i].ref) == 0 { // SQLite: REFERENCES t without columns
				if to := out[t.fks[i].to]; to != nil {
					t.fks[i].ref = slices.Clone(to.pk)
				}
			}
		}
	}
	return out, nil
}

func queryStrings(ctx context.Context, db *sql.DB, q string, args ...any) ([][]string, error) {
	rows, err := db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return nil, err
	}
	var out [][]string
	for rows.Next() {
		vals := make([]sql.NullString, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			return nil, err
		}
		row := make([]string, len(cols))
		for i, v := range vals {
			row[i] = v.String
		}
		out = append(out, row)
	}
	return out, rows.Err()
}

func readSQLiteCatalog(ctx context.Context, db *sql.DB, out map[string]*liveTable) error {
	names, err := queryStrings(ctx, db, `SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite\_%' ESCAPE '\'`)
	if err != nil {
		return err
	}
	for _, n := range names {
		t := &liveTable{name: n[0], types: map[string]string{}}
		cols, err := queryStrings(ctx, db, `SELECT name, type, pk FROM pragma_table_info(?) ORDER BY cid`, n[0])
		if err != nil {
			return err
		}
		type pkc struct {
			col string
			pos string
		}
		var pks []pkc
		for _, c := range cols {
			col := strings.ToLower(c[0])
			t.cols = append(t.cols, c[0])
			t.types[col] = strings.ToLower(c[1])
			if c[2] != "0" {
				pks = append(pks, pkc{col, c[2]})
			}
		}
		sort.Slice(pks, func(i, j int) bool {
			return len(pks[i].pos) < len(pks[j].pos) || (len(pks[i].pos) == len(pks[j].pos) && pks[i].pos < pks[j].pos)
		})
		for _, p := range pks {
			t.pk = append(t.pk, p.col)
		}
		fks, err := queryStrings(ctx, db, `SELECT id, "table", "from", "to", on_delete FROM pragma_foreign_key_list(?) ORDER BY id, seq`, n[0])
		if err != nil {
			return err
		}
		last := ""
		for _, f := range fks {
			if f[0] != last || len(t.fks) == 0 {
				t.fks = append(t.fks, liveFK{to: strings.ToLower(f[1]), onDelete: strings.ToLower(f[4])})
				last = f[0]
			}
			lf := &t.fks[len(t.fks)-1]
			lf.cols = append(lf.cols, strings.ToLower(f[2]))
			if f[3] != "" {
				lf.ref = append(lf.ref, strings.ToLower(f[3]))
			}
		}
		idx, err := queryStrings(ctx, db, `SELECT name FROM pragma_index_list(?) WHERE "unique" = 1 AND origin <> 'pk' ORDER BY name`, n[0])
		if err != nil {
			return err
		}
		for _, x := range idx {
			cols, err := queryStrings(ctx, db, `SELECT coalesce(name, '') FROM pragma_index_info(?) ORDER BY seqno`, x[0])
			if err != nil {
				return err
			}
			var key []string
			for _, c := range cols {
				key = append(key, strings.ToLower(c[0]))
			}
			t.addUnique(key)
		}
		out[strings.ToLower(t.name)] = t
	}
	return nil
}

// addUnique records key unless it is empty or names an expression (an
// empty column name).
func (t *liveTable) addUnique(key []string) {
	if len(key) > 0 && !slices.Contains(key, "") {
		t.uniques = append(t.uniques, key)
	}
}

func readPostgresCatalog(ctx context.Context, db *sql.DB, out map[string]*liveTable) error {
	cols, err := queryStrings(ctx, db, `SELECT c.relname, a.attname, format_type(a.atttypid, a.atttypmod)
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace JOIN pg_attribute a ON a.attrelid = c.oid
WHERE n.nspname = current_schema() AND c.relkind IN ('r', 'p') AND a.attnum > 0 AND NOT a.attisdropped
ORDER BY c.relname, a.attnum`)
	if err != nil {
		return err
	}
	for _, c := range cols {
		name := strings.ToLower(c[0])
		t := out[name]
		if t == nil {
			t = &liveTable{name: c[0], types: map[string]string{}}
			out[name] = t
		}
		col := strings.ToLower(c[1])
		t.cols = append(t.cols, c[1])
		t.types[col] = strings.ToLower(c[2])
	}
	cons, err := queryStrings(ctx, db, `SELECT c.relname, k.oid::text, k.contype, coalesce(r.relname, ''), a.attname, coalesce(ra.attname, ''),
       CASE k.confdeltype WHEN 'a' THEN 'no action' WHEN 'r' THEN 'restrict' WHEN 'c' THEN 'cascade' WHEN 'n' THEN 'set null' WHEN 'd' THEN 'set default' ELSE '' END
FROM pg_constraint k
JOIN pg_class c ON c.oid = k.conrelid JOIN pg_namespace n ON n.oid = c.relnamespace
CROSS JOIN LATERAL unnest(k.conkey) WITH ORDINALITY AS u(attnum, ord)
JOIN pg_attribute a ON a.attrelid = k.conrelid AND a.attnum = u.attnum
LEFT JOIN pg_class r ON r.oid = k.confrelid
LEFT JOIN pg_attribute ra ON ra.attrelid = k.confrelid AND ra.attnum = k.confkey[u.ord]
WHERE n.nspname = current_schema() AND k.contype IN ('p', 'f')
ORDER BY c.relname, k.oid, u.ord`)
	if err != nil {
		return err
	}
	last := ""
	for _, k := range cons {
		t := out[strings.ToLower(k[0])]
		if t == nil {
			continue
		}
		col := strings.ToLower(k[4])
		if k[2] == "p" {
			t.pk = append(t.pk, col)
			continue
		}
		if k[1] != last {
			t.fks = append(t.fks, liveFK{to: strings.ToLower(k[3]), onDelete: k[6]})
			last = k[1]
		}
		lf := &t.fks[len(t.fks)-1]
		lf.cols = append(lf.cols, col)
		lf.ref = append(lf.ref, strings.ToLower(k[5]))
	}
	idx, err := queryStrings(ctx, db, `SELECT c.relname, i.indexrelid::text, a.attname
FROM pg_index i JOIN pg_class c ON c.oid = i.indrelid JOIN pg_namespace n ON n.oid = c.relnamespace
CROSS JOIN LATERAL unnest(i.indkey::int2[]) WITH ORDINALITY AS u(attnum, ord)
JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = u.attnum
WHERE n.nspname = current_schema() AND i.indisunique AND NOT i.indisprimary AND i.indexprs IS NULL
ORDER BY c.relname, i.indexrelid, u.ord`)
	if err != nil {
		return err
	}
	groupUniques(out, idx)
	return nil
}

// groupUniques adds to out the unique keys of rows (table, index id,
// column), ordered by table and index.
func groupUniques(out map[string]*liveTable, rows [][]string) {
	for i := 0; i < len(rows); {
		j := i
		var key []string
		for ; j < len(rows) && rows[j][0] == rows[i][0] && rows[j][1] == rows[i][1]; j++ {
			key = append(key, strings.ToLower(rows[j][2]))
		}
		if t := out[strings.ToLower(rows[i][0])]; t != nil {
			t.addUnique(key)
		}
		i = j
	}
}

func readMySQLCatalog(ctx context.Context, db *sql.DB, out map[string]*liveTable) error {
	cols, err := queryStrings(ctx, db, `SELECT c.TABLE_NAME, c.COLUMN_NAME, c.COLUMN_TYPE FROM information_schema.COLUMNS c
JOIN information_schema.TABLES t ON t.TABLE_SCHEMA = c.TABLE_SCHEMA AND t.TABLE_NAME = c.TABLE_NAME
WHERE c.TABLE_SCHEMA = DATABASE() AND t.TABLE_TYPE = 'BASE TABLE' ORDER BY c.TABLE_NAME, c.ORDINAL_POSITION`)
	if err != nil {
		return err
	}
	for _, c := range cols {
		name := strings.ToLower(c[0])
		t := out[name]
		if t == nil {
			t = &liveTable{name: c[0], types: map[string]string{}}
			out[name] = t
		}
		col := strings.ToLower(c[1])
		t.cols = append(t.cols, c[1])
		t.types[col] = strings.ToLower(c[2])
	}
	keys, err := queryStrings(ctx, db, `SELECT k.TABLE_NAME, k.CONSTRAINT_NAME, k.COLUMN_NAME, coalesce(k.REFERENCED_TABLE_NAME, ''), coalesce(k.REFERENCED_COLUMN_NAME, ''),
       lower(coalesce(rc.DELETE_RULE, ''))
FROM information_schema.KEY_COLUMN_USAGE k
LEFT JOIN information_schema.REFERENTIAL_CONSTRAINTS rc ON rc.CONSTRAINT_SCHEMA = k.TABLE_SCHEMA AND rc.TABLE_NAME = k.TABLE_NAME AND rc.CONSTRAINT_NAME = k.CONSTRAINT_NAME
WHERE k.TABLE_SCHEMA = DATABASE() AND (k.CONSTRAINT_NAME = 'PRIMARY' OR k.REFERENCED_TABLE_NAME IS NOT NULL)
ORDER BY k.TABLE_NAME, k.CONSTRAINT_NAME, k.ORDINAL_POSITION`)
	if err != nil {
		return err
	}
	last := ""
	for _, k := range keys {
		t := out[strings.ToLower(k[0])]
		if t == nil {
			continue
		}
		col := strings.ToLower(k[2])
		if k[1] == "PRIMARY" && k[3] == "" {
			t.pk = append(t.pk, col)
			continue
		}
		if id := k[0] + "\x00" + k[1]; id != last {
			t.fks = append(t.fks, liveFK{to: strings.ToLower(k[3]), onDelete: k[5]})
			last = id
		}
		lf := &t.fks[len(t.fks)-1]
		lf.cols = append(lf.cols, col)
		lf.ref = append(lf.ref, strings.ToLower(k[4]))
	}
	idx, err := queryStrings(ctx, db, `SELECT TABLE_NAME, INDEX_NAME, coalesce(COLUMN_NAME, '') FROM information_schema.STATISTICS
WHERE TABLE_SCHEMA = DATABASE() AND NON_UNIQUE = 0 AND INDEX_NAME <> 'PRIMARY'
ORDER BY TABLE_NAME, INDEX_NAME, SEQ_IN_INDEX`)
	if err != nil {
		return err
	}
	groupUniques(out, idx)
	return nil
}
