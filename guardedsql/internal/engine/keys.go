package engine

import (
	"slices"

	"github.com/tenantmcp/tenantmcp/builder"
)

// Keys groups catalog rows that list keys one column per row, in key
// order (foreign keys, unique indexes), by table and key name, for the
// introspections of every dialect.
type Keys struct {
	order []keyName
	keys  map[keyName]*key
}

type keyName struct{ table, name string }

type key struct {
	cols, refCols []string
	refTable      string
	unusable      bool
}

// Add records column col (referencing refTable.refCol, for a foreign key)
// of key name on table. An unusable column (an index expression, a
// column prefix) disqualifies the whole key.
func (k *Keys) Add(table, name, col, refTable, refCol string, usable bool) {
	if k.keys == nil {
		k.keys = map[keyName]*key{}
	}
	n := keyName{table, name}
	x := k.keys[n]
	if x == nil {
		x = &key{refTable: refTable}
		k.keys[n] = x
		k.order = append(k.order, n)
	}
	x.cols = append(x.cols, col)
	x.refCols = append(x.refCols, refCol)
	x.unusable = x.unusable || !usable
}

// ForeignKeys appends the recorded keys to their tables' ForeignKeys.
func (k *Keys) ForeignKeys(tables map[string]*builder.TableDef) {
	for _, n := range k.order {
		if td, x := tables[n.table], k.keys[n]; td != nil && !x.unusable {
			td.ForeignKeys = append(td.ForeignKeys, builder.ForeignKey{Columns: x.cols, RefTable: x.refTable, RefColumns: x.refCols})
		}
	}
}

// Unique appends the recorded keys to their tables' Unique.
func (k *Keys) Unique(tables map[string]*builder.TableDef) {
	for _, n := range k.order {
		if td, x := tables[n.table], k.keys[n]; td != nil && !x.unusable {
			td.Unique = append(td.Unique, x.cols)
		}
	}
}

// Tables collects introspected columns by table.
type Tables struct {
	ByName map[string]*builder.TableDef
	order  []string
}

// NewTables returns an empty collection.
func NewTables() *Tables { return &Tables{ByName: map[string]*builder.TableDef{}} }

// Column records column col of table with its declared type; columns
// come in their table's order.
func (ts *Tables) Column(table, col, typ string) {
	td := ts.ByName[table]
	if td == nil {
		td = &builder.TableDef{Name: table, Types: map[string]string{}}
		ts.ByName[table] = td
		ts.order = append(ts.order, table)
	}
	td.Columns = append(td.Columns, col)
	td.Types[col] = typ
}

// Defs returns the tables, sorted by name.
func (ts *Tables) Defs() []builder.TableDef {
	names := slices.Sorted(slices.Values(ts.order))
	out := make([]builder.TableDef, 0, len(names))
	for _, n := range names {
		out = append(out, *ts.ByName[n])
	}
	return out
}
