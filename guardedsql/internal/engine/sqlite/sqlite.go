package sqlite

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	sq "github.com/Masterminds/squirrel"

	"github.com/tenantmcp/tenantmcp/builder"
	"github.com/tenantmcp/tenantmcp/guardedsql/internal/engine"
	"github.com/tenantmcp/tenantmcp/internal/sqlast"
	"github.com/tenantmcp/tenantmcp/scope"
)

// Dialect is the SQLite dialect. The zero value is ready to use.
type Dialect struct {
	// Style overrides the path predicate shape (tests and benchmarks
	// compare both); the default is PathIn.
	Style engine.PathStyle
}

var _ engine.Dialect = Dialect{}

// Name implements engine.Dialect.
func (Dialect) Name() string { return "sqlite" }

// Quote implements engine.Dialect.
func (Dialect) Quote(id string) string { return `"` + strings.ReplaceAll(id, `"`, `""`) + `"` }

// Placeholders implements engine.Dialect.
func (Dialect) Placeholders() sq.PlaceholderFormat { return sq.Question }

// LikeEscape implements engine.Dialect.
func (Dialect) LikeEscape() string { return `'\'` }

// DualTable implements engine.Dialect.
func (Dialect) DualTable() string { return "" }

// RendersByShape implements engine.ShapeRenderer: InScope and InTuples
// name the level in the text and read the prelude's table, whose text is
// constant and binds the document whole.
func (Dialect) RendersByShape() {}

// PathStyle implements engine.Dialect.
func (d Dialect) PathStyle() engine.PathStyle { return d.Style }

// ScopeTable is the CTE name; user tables may not start with "_tm".
const ScopeTable = `"_tm_scope"`

// Prelude implements engine.Dialect.
func (Dialect) Prelude(doc string) engine.Frag {
	return engine.Frag{
		SQL:  `WITH ` + ScopeTable + `("lvl", "id") AS (SELECT "l"."key", "i"."value" FROM json_each(?) AS "l", json_each("l"."value") AS "i")`,
		Args: []any{doc},
	}
}

// InScope implements engine.Dialect.
func (Dialect) InScope(x engine.Frag, lvl *sqlast.Level, _ string) engine.Frag {
	// lvl.Name is a validated lower-case identifier from the schema.
	return engine.Frag{
		SQL:  x.SQL + ` IN (SELECT "id" FROM ` + ScopeTable + ` WHERE "lvl" = '` + lvl.Name + `')`,
		Args: x.Args,
	}
}

// InTuples implements engine.Dialect: a row-value IN over the shape's
// tuples, whose elements json_extract yields typed like json_each does
// (INTEGER for numbers, TEXT for strings).
func (Dialect) InTuples(xs []engine.Frag, sh engine.Shape, _ string) engine.Frag {
	row := engine.Row(xs)
	rhs := make([]string, len(xs))
	for i := range xs {
		rhs[i] = `json_extract("id", '$[` + strconv.Itoa(i) + `]')`
	}
	// sh.Key is built from validated lower-case identifiers and '/'.
	return engine.Frag{
		SQL:  row.SQL + ` IN (SELECT ` + strings.Join(rhs, ", ") + ` FROM ` + ScopeTable + ` WHERE "lvl" = '` + sh.Key + `')`,
		Args: row.Args,
	}
}

// InScopeInline implements engine.InlineScoper: the ids granted at lvl in
// doc, bound here.
func (Dialect) InScopeInline(x engine.Frag, lvl *sqlast.Level, doc string) engine.Frag {
	return engine.Frag{
		SQL:  x.SQL + ` IN (SELECT "i"."value" FROM json_each(?, '$."` + lvl.Name + `"') AS "i")`,
		Args: append(append([]any(nil), x.Args...), doc),
	}
}

// InTuplesInline implements engine.InlineScoper.
func (Dialect) InTuplesInline(xs []engine.Frag, sh engine.Shape, doc string) engine.Frag {
	row := engine.Row(xs)
	rhs := make([]string, len(xs))
	for i := range xs {
		rhs[i] = `json_extract("i"."value", '$[` + strconv.Itoa(i) + `]')`
	}
	return engine.Frag{
		SQL:  row.SQL + ` IN (SELECT ` + strings.Join(rhs, ", ") + ` FROM json_each(?, '$."` + sh.Key + `"') AS "i")`,
		Args: append(append([]any(nil), row.Args...), doc),
	}
}

// NeedsTx implements engine.Dialect: SQLite needs no session state.
func (Dialect) NeedsTx() bool { return false }

// Session implements engine.Dialect.
func (Dialect) Session(context.Context, engine.Querier, scope.Scope, string) error { return nil }

// Introspect implements engine.Dialect from sqlite_schema and the
// table_info and foreign_key_list pragmas.
func (Dialect) Introspect(ctx context.Context, q engine.Querier) ([]builder.TableDef, error) {
	names, err := strings1(ctx, q, `SELECT "name" FROM sqlite_schema WHERE "type" = 'table' AND "name" NOT LIKE 'sqlite\_%' ESCAPE '\' ORDER BY "name"`)
	if err != nil {
		return nil, fmt.Errorf("sqlite: list tables: %w", err)
	}
	var out []builder.TableDef
	for _, n := range names {
		td := builder.TableDef{Name: n, Types: map[string]string{}}
		rows, err := q.Query(ctx, `SELECT "name", "type", "pk" FROM pragma_table_info(?) ORDER BY "cid"`, n)
		if err != nil {
			return nil, fmt.Errorf("sqlite: columns of %s: %w", n, err)
		}
		pkPos := map[int]string{}
		for rows.Next() {
			var cn, typ string
			var pk int
			if err := rows.Scan(&cn, &typ, &pk); err != nil {
				rows.Close()
				return nil, err
			}
			td.Columns = append(td.Columns, cn)
			if typ != "" {
				td.Types[cn] = typ
			}
			if pk > 0 {
				pkPos[pk] = cn
			}
		}
		if err := closeRows(rows); err != nil {
			return nil, err
		}
		for i := 1; i <= len(pkPos); i++ {
			td.PrimaryKey = append(td.PrimaryKey, pkPos[i])
		}
		if td.Unique, err = uniqueKeys(ctx, q, n); err != nil {
			return nil, err
		}
		out = append(out, td)
	}
	for i := range out {
		td := &out[i]
		rows, err := q.Query(ctx, `SELECT "id", "table", "from", "to" FROM pragma_foreign_key_list(?) ORDER BY "id", "seq"`, td.Name)
		if err != nil {
			return nil, fmt.Errorf("sqlite: foreign keys of %s: %w", td.Name, err)
		}
		byID := map[int]int{}
		for rows.Next() {
			var id int
			var table, from string
			var to *string
			if err := rows.Scan(&id, &table, &from, &to); err != nil {
				rows.Close()
				return nil, err
			}
			k, ok := byID[id]
			if !ok {
				k = len(td.ForeignKeys)
				byID[id] = k
				td.ForeignKeys = append(td.ForeignKeys, builder.ForeignKey{RefTable: table})
			}
			fk := &td.ForeignKeys[k]
			fk.Columns = append(fk.Columns, from)
			if to != nil {
				fk.RefColumns = append(fk.RefColumns, *to)
			}
		}
		if err := closeRows(rows); err != nil {
			return nil, err
		}
		// A foreign key naming no parent columns references the parent's
		// primary key; builder resolves an empty RefColumns the same way,
		// but only if every column is implicit.
		for k := range td.ForeignKeys {
			fk := &td.ForeignKeys[k]
			if len(fk.RefColumns) != len(fk.Columns) {
				fk.RefColumns = nil
			}
		}
	}
	return out, nil
}

// uniqueKeys lists the columns of table's unique indexes (UNIQUE
// constraints, CREATE UNIQUE INDEX, and a primary key other than the rowid),
// leaving out partial indexes and those on expressions, which do not make
// their columns a key.
func uniqueKeys(ctx context.Context, q engine.Querier, table string) ([][]string, error) {
	names, err := strings1(ctx, q, `SELECT "name" FROM pragma_index_list(?) WHERE "unique" = 1 AND "partial" = 0 ORDER BY "name"`, table)
	if err != nil {
		return nil, fmt.Errorf("sqlite: unique indexes of %s: %w", table, err)
	}
	var out [][]string
	for _, ix := range names {
		cols, err := strings1(ctx, q, `SELECT COALESCE("name", '') FROM pragma_index_info(?) ORDER BY "seqno"`, ix)
		if err != nil {
			return nil, fmt.Errorf("sqlite: columns of index %s: %w", ix, err)
		}
		if len(cols) > 0 && !slices.Contains(cols, "") {
			out = append(out, cols)
		}
	}
	return out, nil
}

func strings1(ctx context.Context, q engine.Querier, query string, args ...any) ([]string, error) {
	rows, err := q.Query(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	var out []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			rows.Close()
			return nil, err
		}
		out = append(out, s)
	}
	return out, closeRows(rows)
}

func closeRows(r engine.Rows) error {
	err := r.Err()
	if cerr := r.Close(); err == nil {
		err = cerr
	}
	return err
}
