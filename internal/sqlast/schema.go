package sqlast

import "slices"

// KeyKind is the SQL type of the ids at one scope level. Grant ids are
// strings; the guard converts them to this kind before they reach SQL, and a
// grant id that is not a valid value of the kind matches nothing.
type KeyKind int

const (
	// IntKey levels hold 64-bit integer ids. Only canonical decimal grant
	// ids ("12", "-3"; not "012", "+12", "12.0", " 12") are admitted.
	IntKey KeyKind = iota + 1
	// TextKey levels hold text ids, compared byte for byte.
	TextKey
)

func (k KeyKind) String() string {
	switch k {
	case IntKey:
		return "integer"
	case TextKey:
		return "text"
	}
	return "invalid"
}

// Level is one level of the tenant hierarchy, e.g. "chain" or "hotel".
type Level struct {
	Name  string
	Key   KeyKind
	Index int // position in Schema.Levels
}

// Schema is the validated, immutable schema graph.
type Schema struct {
	Levels []*Level          // declaration order
	Tables map[string]*Table // by name
	Names  []string          // table names, sorted
	// Funcs are the scalar functions registered at schema build, by name.
	Funcs map[string]*Func
}

// Level returns the level called name, or nil.
func (s *Schema) Level(name string) *Level {
	for _, l := range s.Levels {
		if l.Name == name {
			return l
		}
	}
	return nil
}

// Table is one table of the schema graph.
type Table struct {
	Name    string
	Columns []string          // declaration order
	Types   map[string]string // declared SQL types where known
	PK      []string
	// Unique lists the declared unique keys (column lists) besides PK.
	Unique [][]string
	FKs    []*FK
	Global bool
	// GlobalReason says why a global table that looks tenant-bound (a
	// foreign key into a tenant-bound table, a column named like a level)
	// is global after all; the start-up catalog check refuses such a table
	// without one.
	GlobalReason string
	// ByRef: the table is owned by reference (builder.TableDef.OwnedByReference):
	// it has no tenant column, and a row belongs to the tenants of the
	// tenant-bound rows that reference it through Referrers. It has no
	// Parent, Chain or Anchors.
	ByRef bool
	// Referrers are, for a ByRef table, the declared foreign keys of
	// tenant-bound tables that reference its primary key, Unchecked ones
	// excluded: the paths that decide which tenants own each row.
	Referrers []*FK

	// LevelCols are this table's own level columns, in column order.
	LevelCols []LevelCol
	// Parent is the foreign key through which the table reaches the scope
	// levels of an ancestor; nil for tables that carry their levels
	// directly (and for global tables).
	Parent *FK
	// Chain is the full parent chain: Chain[0] == Parent, Chain[1] is the
	// parent's Parent, and so on.
	Chain []*FK
	// Anchors lists, for every level reachable from the table, the nearest
	// column carrying it. Sorted by level index.
	Anchors []Anchor
	// Identity is the table's single-column primary key when that column is
	// also one of its level columns (chains.id is the chain level): the row's
	// own tenant id rather than a reference to another tenant.
	Identity string

	// (h5-catalog) Acknowledgements of builder.TableDef, for the start-up
	// catalog check and the guard.

	// GlobalWritable, on a global table, is why guarded code may write it;
	// empty: read-only.
	GlobalWritable string
	// SharedUnique maps a unique key lacking the tenant column ("a,b") to
	// what a conflict on it reveals.
	SharedUnique map[string]string
	// Triggers maps an acknowledged trigger (or rule) name to its reason.
	Triggers map[string]string

	colIdx map[string]int // position in Columns
}

// NewTable returns a table with its column index built.
func NewTable(name string, columns []string) *Table {
	t := &Table{Name: name, Columns: slices.Clone(columns), colIdx: make(map[string]int, len(columns))}
	for i, c := range columns {
		if _, dup := t.colIdx[c]; !dup {
			t.colIdx[c] = i
		}
	}
	return t
}

// HasColumn reports whether c is a declared column of t.
func (t *Table) HasColumn(c string) bool {
	_, ok := t.colIdx[c]
	return ok
}

// LevelOf returns the level carried by column c of t itself, or nil.
func (t *Table) LevelOf(c string) *Level {
	for _, lc := range t.LevelCols {
		if lc.Col == c {
			return lc.Level
		}
	}
	return nil
}

// TenantFKs returns the foreign keys of t whose referenced table is
// tenant-bound or owned by reference, except those declared Unchecked:
// every such reference must point at a row in scope (for a table owned by
// reference: a row in scope or referenced by no one) when it is written.
func (t *Table) TenantFKs() []*FK {
	var out []*FK
	for _, fk := range t.FKs {
		if !fk.To.Global && fk.Unchecked == "" {
			out = append(out, fk)
		}
	}
	return out
}

// FKCovering returns the tenant foreign key of t that includes column c.
func (t *Table) FKCovering(c string) *FK {
	for _, fk := range t.FKs {
		if fk.To.Global || fk.Unchecked != "" {
			continue
		}
		if slices.Contains(fk.Cols, c) {
			return fk
		}
	}
	return nil
}

// IsKey reports whether cols include all columns of the primary key or of
// a unique key of t, so that at most one row of t matches given values for
// cols.
func (t *Table) IsKey(cols []string) bool {
	covers := func(key []string) bool {
		return len(key) > 0 && !slices.ContainsFunc(key, func(k string) bool { return !slices.Contains(cols, k) })
	}
	return covers(t.PK) || slices.ContainsFunc(t.Unique, covers)
}

// LevelCol is a column that carries a scope level.
type LevelCol struct {
	Col   string
	Level *Level
}

// FK is a foreign key: From.Cols reference To.RefCols.
type FK struct {
	From    *Table
	Cols    []string
	To      *Table
	RefCols []string
	// Unchecked, when not empty, is the declared reason why this foreign
	// key between tenant-bound tables is not checked on writes (and is no
	// path of ownership for a table owned by reference).
	Unchecked string
}

// Anchor says where a level can be read for rows of a table: follow Hops
// (a prefix of the table's Chain) and read Col on the last hop's target
// table, or on the table itself when Hops is empty.
type Anchor struct {
	Level *Level
	Hops  []*FK
	Col   string
}

// SameTenancy reports whether fk references a table that reaches every
// scope level fk.From reaches (a rental's clerk: both reach the store), so
// that a row and the row it references belong to the same tenant when the
// data is consistent. A key up the hierarchy (a project-level task's
// org-level assignee) is not: a grant of the row's finer level never sees
// the referenced row. Consistency paths are re-tested on UPDATE and DELETE
// only where this holds (issue 25 §2).
func SameTenancy(fk *FK) bool {
	for _, a := range fk.From.Anchors {
		if !slices.ContainsFunc(fk.To.Anchors, func(b Anchor) bool { return b.Level == a.Level }) {
			return false
		}
	}
	return len(fk.To.Anchors) > 0
}
