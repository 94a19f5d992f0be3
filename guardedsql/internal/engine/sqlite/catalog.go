package sqlite

import (
	"context"
	"fmt"
	"strings"

	"github.com/tenantmcp/tenantmcp/builder"
	"github.com/tenantmcp/tenantmcp/guardedsql/internal/engine"
)

// Catalog implements engine.CatalogChecker. SQLite has no catalog view of
// a column's collation, so it is read from the column's definition in the
// table's CREATE TABLE text (sqlite_schema.sql): a COLLATE clause naming
// anything but BINARY (NOCASE, RTRIM, or an application collation) makes
// the guard's comparisons inexact ('ACME' = 'acme', 'acme ' = 'acme').
func (d Dialect) Catalog(ctx context.Context, q engine.Querier, keyCols [][2]string) ([]builder.TableDef, []string, error) {
	defs, err := d.Introspect(ctx, q)
	if err != nil {
		return nil, nil, err
	}
	byTable := map[string]map[string]string{}
	var inexact []string
	for _, tc := range keyCols {
		colls, ok := byTable[tc[0]]
		if !ok {
			texts, err := strings1(ctx, q, `SELECT "sql" FROM sqlite_schema WHERE "type" = 'table' AND "name" = ?`, tc[0])
			if err != nil {
				return nil, nil, fmt.Errorf("sqlite: definition of %s: %w", tc[0], err)
			}
			colls = map[string]string{}
			if len(texts) == 1 {
				colls = ColumnCollations(texts[0])
			}
			byTable[tc[0]] = colls
		}
		for name, coll := range colls {
			if strings.EqualFold(name, tc[1]) && !strings.EqualFold(coll, "BINARY") {
				inexact = append(inexact, fmt.Sprintf("%s.%s (COLLATE %s)", tc[0], tc[1], coll))
			}
		}
	}
	return defs, inexact, nil
}

// FKEnforced implements engine.CatalogChecker from PRAGMA foreign_keys,
// which is per connection and off by default.
func (Dialect) FKEnforced(ctx context.Context, q engine.Querier) (bool, string, error) {
	v, err := strings1(ctx, q, `SELECT CAST("foreign_keys" AS TEXT) FROM pragma_foreign_keys`)
	if err != nil {
		return false, "", fmt.Errorf("sqlite: PRAGMA foreign_keys: %w", err)
	}
	if len(v) != 1 || v[0] != "1" {
		return false, "PRAGMA foreign_keys is off (open with _pragma=foreign_keys(1))", nil
	}
	return true, "", nil
}

// ColumnCollations returns the COLLATE clause of every column definition
// of a CREATE TABLE statement, by column name (unquoted). Table
// constraints, and COLLATE inside nested parentheses (CHECK, DEFAULT
// expressions), are skipped.
func ColumnCollations(create string) map[string]string {
	out := map[string]string{}
	var seg []string // top-level tokens of the current definition
	depth := 0
	flush := func() {
		if len(seg) == 0 {
			return
		}
		switch strings.ToUpper(seg[0]) {
		case "CONSTRAINT", "PRIMARY", "UNIQUE", "CHECK", "FOREIGN":
		default:
			for i := 1; i+1 < len(seg); i++ {
				if strings.EqualFold(seg[i], "COLLATE") {
					out[seg[0]] = seg[i+1]
				}
			}
		}
		seg = seg[:0]
	}
	for i := 0; i < len(create); {
		c := create[i]
		switch {
		case c == '-' && strings.HasPrefix(create[i:], "--"):
			j := strings.IndexByte(create[i:], '\n')
			if j < 0 {
				return out
			}
			i += j
		case c == '/' && strings.HasPrefix(create[i:], "/*"):
			j := strings.Index(create[i+2:], "*/")
			if j < 0 {
				return out
			}
			i += j + 4
		case c == '(':
			depth++
			i++
		case c == ')':
			if depth == 1 {
				flush()
			}
			depth--
			i++
		case c == ',' && depth == 1:
			flush()
			i++
		case c == '\'' || c == '"' || c == '`' || c == '[':
			end := map[byte]byte{'\'': '\'', '"': '"', '`': '`', '[': ']'}[c]
			j := i + 1
			var b strings.Builder
			for j < len(create) {
				if create[j] == end {
					if end != ']' && j+1 < len(create) && create[j+1] == end {
						b.WriteByte(end) // doubled quote
						j += 2
						continue
					}
					break
				}
				b.WriteByte(create[j])
				j++
			}
			if depth == 1 && c != '\'' {
				seg = append(seg, b.String())
			}
			i = j + 1
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			i++
		default:
			j := i
			for j < len(create) && !strings.ContainsRune(" \t\r\n(),'\"`[", rune(create[j])) {
				j++
			}
			if j == i {
				j++
			}
			if depth == 1 {
				seg = append(seg, create[i:j])
			}
			i = j
		}
	}
	return out
}

var _ engine.TriggerLister = Dialect{}

// Triggers implements engine.TriggerLister from sqlite_schema (temporary
// triggers of the connection included: sqlite_temp_schema), and the
// foreign keys with a referential action (engine.FKAction) from
// pragma_foreign_key_list.
func (Dialect) Triggers(ctx context.Context, q engine.Querier) ([]engine.Trigger, error) {
	return engine.CollectTriggers(ctx, q, `SELECT tbl_name, name, 'trigger', '' FROM sqlite_schema WHERE type = 'trigger'
UNION ALL SELECT tbl_name, name, 'trigger', '' FROM sqlite_temp_schema WHERE type = 'trigger'
UNION ALL SELECT m.name, 'fk:' || (SELECT group_concat("from", ',') FROM (SELECT g."from" FROM pragma_foreign_key_list(m.name) g WHERE g.id = f.id ORDER BY g.seq)) || '->' || f."table",
       '`+engine.FKAction+`', f."table"
FROM sqlite_schema m JOIN pragma_foreign_key_list(m.name) f
WHERE m.type = 'table' AND f.seq = 0
  AND (upper(f.on_update) NOT IN ('NO ACTION', 'RESTRICT') OR upper(f.on_delete) NOT IN ('NO ACTION', 'RESTRICT'))
ORDER BY 1, 2`)
}
