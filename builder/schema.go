package builder

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/tenantmcp/tenantmcp/internal/guardfault"
	"github.com/tenantmcp/tenantmcp/internal/sqlast"
	"github.com/tenantmcp/tenantmcp/scope"
)

// ErrSchema is wrapped by every error that refuses a schema definition: a
// tenant-bound table with no path to a scope level, a foreign-key cycle on
// a scope path, an unknown column, and so on. These are start-up errors; a
// Schema that exists is valid.
var ErrSchema = errors.New("builder: invalid schema")

// KeyType is the SQL type of the ids at one scope level.
type KeyType int

const (
	// IntKey: the level's columns hold integers. A grant id that is not a
	// canonical decimal int64 ("12", not "012", "+12" or "12.0") matches
	// nothing; it is never coerced.
	IntKey KeyType = KeyType(sqlast.IntKey)
	// TextKey: the level's columns hold text, compared exactly.
	TextKey KeyType = KeyType(sqlast.TextKey)
)

// Level declares one level of the tenant hierarchy. Levels are named like
// the levels in scope grants ("chain", "hotel").
type Level struct {
	Name string
	Key  KeyType
}

// ForeignKey declares that Columns reference RefColumns of RefTable. Empty
// RefColumns means RefTable's primary key.
type ForeignKey struct {
	Columns    []string
	RefTable   string
	RefColumns []string
	// (h4-ref)
	// Unchecked, when not empty, is the reason why this foreign key from a
	// tenant-bound table to a tenant-bound table (or one owned by
	// reference) is not checked on writes. Every other such key is checked
	// on every write (INSERT, UPDATE, upsert, INSERT ... SELECT): the row it
	// references must be in the writer's scope. An unchecked key is no
	// path of ownership for a table owned by reference, and cannot be the
	// scope parent.
	Unchecked string
}

// TableDef declares one table.
//
// A table is either Global (shared reference data: no tenant predicate, and
// guarded code may not write it) or tenant-bound. A tenant-bound table
// reaches the scope levels through its own level columns (Levels),
// through its Parent foreign key, or both; a row is in scope when any grant
// matches any level reachable that way. For a level the table carries in a
// column of its own, that column alone decides: the Parent's path to the
// same level is a consistency path (tested on writes, never widening
// reads), so a row whose column is NULL is in scope at that level for no
// one, whatever its parent (Cal.com's personal event types, teamId NULL:
// "owned by a user or a team" is not expressible in one table). Levels the
// table carries no column of are reached through its Parent. When Parent
// is empty and the table has no level columns, the parent is inferred if
// exactly one foreign key points at a tenant-bound table.
type TableDef struct {
	Name       string
	Columns    []string
	PrimaryKey []string
	// Unique lists the table's unique constraints (and unique indexes),
	// each as its columns. A scope-path foreign key must reference the
	// primary key or one of these.
	Unique      [][]string
	ForeignKeys []ForeignKey
	// Types optionally maps column names to declared SQL types. When a
	// level column's type is known it must agree with the level's KeyType.
	Types map[string]string

	Global bool
	// GlobalReason explains why a global table that looks tenant-bound is
	// global: one with a foreign key into a tenant-bound table, a column
	// named like a scope level ("chain", "chain_id", or the name of any
	// level column), a column named like a reference to a tenant-bound
	// table with no foreign key on it ("inbox_id" for inboxes,
	// "project_id" for sentry_project), a polymorphic reference (a
	// "taggable_type", "taggable_id" pair), or one a level column
	// references (the tenants' own table). guardedsql's
	// start-up catalog check refuses such a
	// table without a reason, since declaring a tenant table global
	// removes every predicate from it. Only for Global tables.
	GlobalReason string
	// Levels maps a column of this table to the scope level it carries:
	// hotels.id carries "hotel", hotels.chain_id carries "chain".
	Levels map[string]string
	// Parent names a column of the foreign key through which the table
	// reaches its scope (rooms: "hotel_id"). It is the path that decides
	// visibility, for the levels the table carries no column of; every
	// other foreign key to a tenant-bound table is a consistency path,
	// checked on writes (see ForeignKey.Unchecked). A row whose Parent
	// column is NULL reaches no level through it.
	Parent string

	// (h5-catalog) Acknowledgements of what guardedsql's start-up catalog
	// check refuses. Each maps what is acknowledged to the reason, which
	// must not be empty.

	// GlobalWritable, on a Global table, lets guarded code write it and
	// says why every tenant may change rows all tenants read (a shared
	// counter, a cache). Without it a global table is read-only: the guard
	// refuses INSERT, UPDATE and DELETE with guard's ErrReadOnly, and
	// guardedsql's AppGrantDDL grants the application role SELECT only.
	GlobalWritable string
	// SharedUnique acknowledges unique keys of a tenant-bound table that
	// lack its tenant column: the key's columns joined by "," in key order
	// ("email", "code,valid_from") map to what a conflict reveals ("that
	// some tenant registered this e-mail address"). Such a key answers an
	// insert differently when another tenant holds the value, so
	// guardedsql's Open refuses it unacknowledged (ErrSharedUnique), and
	// upserts whose conflict target is one are refused even when it is
	// acknowledged. Primary keys are reported (DB.UniqueOracles), not
	// refused; acknowledging one (a database-generated id) only records
	// the reason and lowers its start-up log line to debug level. List an
	// acknowledged key in Unique as well: the conformance suite renews the
	// columns of declared keys when it copies a row, and a copy keeping
	// the value would conflict.
	SharedUnique map[string]string
	// Triggers acknowledges triggers (on PostgreSQL also rules) on this
	// table, by name, with why they cannot move rows between tenants: a
	// trigger runs with no tenant predicate, so guardedsql's Open refuses
	// one it is not told about (ErrTrigger). The same holds for this
	// table's foreign keys whose ON UPDATE or ON DELETE action is CASCADE,
	// SET NULL or SET DEFAULT (a write of the referenced row rewrites or
	// deletes this table's rows, another tenant's among them), named
	// "fk:" + the columns, comma-separated, + "->" + the referenced table
	// (e.g. "fk:staff_id->staff"), the same on every engine; a key into a
	// global table that is not writable is not refused. Such an
	// acknowledgement holds only for a key that keeps the action in the
	// referenced row's tenant (the Parent, reaching a level the table has
	// no column of, or a key through a level column onto the same level):
	// on any other key a row may reference another tenant's row, and Open
	// refuses the action whatever the reason.
	Triggers map[string]string

	// (h4-ref)
	// OwnedByReference declares a table with no tenant column whose rows
	// belong to the tenant rows that reference them (addresses referenced
	// from customers, staff and stores): a row is visible to a caller when
	// some row referencing it, through a declared foreign key of a
	// tenant-bound table (Unchecked ones excluded), is in the caller's
	// scope, and to no one while nothing references it. UPDATE and DELETE
	// need every referencing row in scope (a row shared by two tenants is
	// readable by both and writable by neither); INSERT creates an
	// unreferenced row; a tenant row may be made to reference only a row
	// that is unreferenced or already visible to the writer. Such a table
	// needs a one-column primary key, which every referencing foreign key
	// references, cannot be Global, has no Levels and no Parent, and has no
	// foreign key into a tenant-bound table. Insert a new row and its
	// first reference in one transaction (guardedsql's DB.Tx): committed
	// alone, an unreferenced row may be claimed by any tenant that names
	// its key first.
	OwnedByReference bool
}

// SchemaDef declares the levels and tables of a schema. Levels are listed
// from the root of the hierarchy down; each must be carried by a column of
// some table (its own table's key: environments.id for "environment").
type SchemaDef struct {
	Levels []Level
	Tables []TableDef
	// Functions registers scalar functions beyond the built-ins (see
	// FuncDef and Schema.Func).
	Functions []FuncDef
}

// Schema is a validated schema graph. It is immutable and safe for
// concurrent use; build it once at start-up.
type Schema struct {
	g *sqlast.Schema
}

// MustSchema is NewSchema that panics on error, for package-level schemas.
func MustSchema(def SchemaDef) *Schema {
	s, err := NewSchema(def)
	if err != nil {
		panic(err)
	}
	return s
}

// NewSchema validates def and resolves, for every tenant-bound table, the
// transitive foreign-key path to each scope level it can reach. It refuses
// (wrapping ErrSchema) unknown names, invalid identifiers, tenant-bound
// tables with no path to a level, a level no table's column carries, and
// cycles.
func NewSchema(def SchemaDef) (*Schema, error) {
	g := &sqlast.Schema{Tables: make(map[string]*sqlast.Table)}
	for i, l := range def.Levels {
		if !scope.ValidLevel(l.Name) {
			return nil, schemaErr("level %q is not a lower-case identifier", l.Name)
		}
		if l.Key != IntKey && l.Key != TextKey {
			return nil, schemaErr("level %q has no key type (IntKey or TextKey)", l.Name)
		}
		if g.Level(l.Name) != nil {
			return nil, schemaErr("level %q declared twice", l.Name)
		}
		g.Levels = append(g.Levels, &sqlast.Level{Name: l.Name, Key: sqlast.KeyKind(l.Key), Index: i})
	}
	folded := map[string]string{}
	for _, td := range def.Tables {
		if !validIdent(td.Name) {
			if _, _, ok := strings.Cut(td.Name, "."); ok {
				// One schema a graph: the engines read the catalog of the
				// connection's current schema (PostgreSQL's search_path,
				// MySQL's database), so a qualified name would name a
				// table the catalog check never sees.
				return nil, schemaErr("table name %q is schema-qualified: a schema graph names the tables of one schema, the connection's current one "+
					"(PostgreSQL: the first schema of search_path, e.g. ?search_path=sales in the DSN; MySQL: the DSN's database)", td.Name)
			}
			return nil, schemaErr("table name %q is not a valid identifier", td.Name)
		}
		if reserved(td.Name) {
			return nil, schemaErr("table name %q uses the reserved prefix _tm", td.Name)
		}
		if prev, dup := folded[strings.ToLower(td.Name)]; dup {
			return nil, schemaErr("table %q declared twice (as %q)", td.Name, prev)
		}
		folded[strings.ToLower(td.Name)] = td.Name
		if len(td.Columns) == 0 {
			return nil, schemaErr("table %q has no columns", td.Name)
		}
		cols := map[string]bool{}
		for _, c := range td.Columns {
			if !validIdent(c) {
				return nil, schemaErr("column %s.%q is not a valid identifier", td.Name, c)
			}
			if cols[strings.ToLower(c)] {
				return nil, schemaErr("column %s.%s declared twice", td.Name, c)
			}
			cols[strings.ToLower(c)] = true
		}
		t := sqlast.NewTable(td.Name, td.Columns)
		t.Global = td.Global
		t.ByRef = td.OwnedByReference
		if t.ByRef && t.Global {
			return nil, schemaErr("table %q cannot be both Global and OwnedByReference", td.Name)
		}
		if td.GlobalReason != "" && !td.Global {
			return nil, schemaErr("table %q has a GlobalReason but is not Global", td.Name)
		}
		t.GlobalReason = td.GlobalReason
		if err := ackFields(t, td); err != nil {
			return nil, err
		}
		t.Types = maps.Clone(td.Types)
		for c := range td.Types {
			if !t.HasColumn(c) {
				return nil, schemaErr("type given for unknown column %s.%s", td.Name, c)
			}
		}
		for _, c := range td.PrimaryKey {
			if !t.HasColumn(c) {
				return nil, schemaErr("primary key column %s.%s is not a column", td.Name, c)
			}
		}
		t.PK = slices.Clone(td.PrimaryKey)
		for _, u := range td.Unique {
			if len(u) == 0 {
				return nil, schemaErr("table %q declares an empty unique key", td.Name)
			}
			for _, c := range u {
				if !t.HasColumn(c) {
					return nil, schemaErr("unique key column %s.%s is not a column", td.Name, c)
				}
			}
			t.Unique = append(t.Unique, slices.Clone(u))
		}
		g.Tables[td.Name] = t
		g.Names = append(g.Names, td.Name)
	}
	slices.Sort(g.Names)

	// Foreign keys, level columns and parents, now that every table exists.
	for _, td := range def.Tables {
		t := g.Tables[td.Name]
		for _, fd := range td.ForeignKeys {
			fk, err := resolveFK(g, t, fd)
			if err != nil {
				return nil, err
			}
			if err := checkFKTarget(fk); err != nil {
				return nil, err
			}
			t.FKs = append(t.FKs, fk)
		}
		if t.Global {
			if len(td.Levels) > 0 || td.Parent != "" {
				return nil, schemaErr("global table %q cannot have level columns or a scope parent", t.Name)
			}
			continue
		}
		if err := checkByRefDecl(t, td); err != nil {
			return nil, err
		}
		if t.ByRef {
			continue
		}
		for _, c := range t.Columns {
			ln, ok := td.Levels[c]
			if !ok {
				continue
			}
			l := g.Level(ln)
			if l == nil {
				return nil, schemaErr("column %s.%s carries undeclared level %q", t.Name, c, ln)
			}
			if err := checkKeyType(t, c, l); err != nil {
				return nil, err
			}
			t.LevelCols = append(t.LevelCols, sqlast.LevelCol{Col: c, Level: l})
		}
		for c := range td.Levels {
			if !t.HasColumn(c) {
				return nil, schemaErr("level column %s.%s is not a column", t.Name, c)
			}
		}
		if len(t.PK) == 1 && t.LevelOf(t.PK[0]) != nil {
			t.Identity = t.PK[0]
		}
	}
	if err := resolveReferrers(g); err != nil {
		return nil, err
	}
	for _, td := range def.Tables {
		t := g.Tables[td.Name]
		if t.Global || t.ByRef {
			continue
		}
		p, err := pickParent(t, td.Parent)
		if err != nil {
			return nil, err
		}
		t.Parent = p
		if p != nil && p.Unchecked != "" {
			return nil, schemaErr("table %q: its scope parent %s(%s) cannot be Unchecked", t.Name, t.Name, strings.Join(p.Cols, ","))
		}
	}
	// Chains, with cycle detection, then anchors from the root down.
	for _, name := range g.Names {
		t := g.Tables[name]
		if t.Global || t.ByRef {
			continue
		}
		seen := map[*sqlast.Table]bool{t: true}
		for fk := t.Parent; fk != nil; fk = fk.To.Parent {
			if seen[fk.To] {
				return nil, schemaErr("scope path of table %q has a cycle through %q", t.Name, fk.To.Name)
			}
			seen[fk.To] = true
			t.Chain = append(t.Chain, fk)
		}
	}
	done := map[*sqlast.Table]bool{}
	for _, name := range g.Names {
		t := g.Tables[name]
		if t.Global || t.ByRef {
			continue
		}
		resolveAnchors(t, done)
		if len(t.Anchors) == 0 {
			return nil, schemaErr("tenant-bound table %q has no path to a scope level (declare level columns, a Parent, or Global)", t.Name)
		}
	}
	// A level no table's column carries is a declaration mistake (the
	// column that holds it left out of Levels): a grant at it would read
	// nothing, and the conformance suite, which tests what grants read
	// against what the database says they own, would find nothing to test.
	// (A graph with no tenant-bound table at all is left alone: nothing in
	// it reads a grant.)
	bound := slices.ContainsFunc(g.Names, func(n string) bool { return !g.Tables[n].Global })
	for _, l := range g.Levels {
		if bound && !slices.ContainsFunc(g.Names, func(n string) bool {
			return slices.ContainsFunc(g.Tables[n].LevelCols, func(lc sqlast.LevelCol) bool { return lc.Level == l })
		}) {
			return nil, schemaErr("level %q is carried by no table's column: declare the column that holds it in its table's Levels (its own table's key, %q: \"%s\"), or remove the level", l.Name, "id", l.Name)
		}
	}
	if err := registerFuncs(g, def.Functions); err != nil {
		return nil, err
	}
	return &Schema{g: g}, nil
}

func schemaErr(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrSchema, fmt.Sprintf(format, args...))
}

func resolveFK(g *sqlast.Schema, t *sqlast.Table, fd ForeignKey) (*sqlast.FK, error) {
	to, ok := g.Tables[fd.RefTable]
	if !ok {
		return nil, schemaErr("foreign key %s(%s) references unknown table %q", t.Name, strings.Join(fd.Columns, ","), fd.RefTable)
	}
	ref := fd.RefColumns
	if len(ref) == 0 {
		ref = to.PK
	}
	if len(fd.Columns) == 0 || len(fd.Columns) != len(ref) {
		return nil, schemaErr("foreign key %s(%s) -> %s(%s): column counts differ or are zero",
			t.Name, strings.Join(fd.Columns, ","), to.Name, strings.Join(ref, ","))
	}
	for _, c := range fd.Columns {
		if !t.HasColumn(c) {
			return nil, schemaErr("foreign key column %s.%s is not a column", t.Name, c)
		}
	}
	for _, c := range ref {
		if !to.HasColumn(c) {
			return nil, schemaErr("foreign key %s -> %s.%s: not a column", t.Name, to.Name, c)
		}
	}
	return &sqlast.FK{From: t, Cols: slices.Clone(fd.Columns), To: to, RefCols: slices.Clone(ref), Unchecked: fd.Unchecked}, nil
}

// ErrFKTarget is wrapped (with ErrSchema) when a foreign key into a
// tenant-bound table references columns that are neither its primary key
// nor a unique key.
var ErrFKTarget = fmt.Errorf("%w: foreign key into a tenant-bound table must reference a key", ErrSchema)

// checkFKTarget refuses a foreign key into a tenant-bound table whose
// referenced columns are not a key of that table.
//
// Invariant: every foreign key the guard follows (scope paths, and the
// parent checks of writes) matches at most one referenced row. Otherwise a
// tenant could create its own row with another tenant's key value (InnoDB
// accepts a foreign key onto a plain index) and reach, or write under, the
// other tenant's rows through it. The referenced table's declaration is
// trusted here; Open compares it with the live catalog.
func checkFKTarget(fk *sqlast.FK) error {
	if fk.To.Global || fk.To.IsKey(fk.RefCols) || guardfault.Off(guardfault.PathKey) {
		return nil
	}
	return fmt.Errorf("%w: %s(%s) -> %s(%s): declare the primary key or a unique key (TableDef.Unique) on %s(%s), and create it in the database",
		ErrFKTarget, fk.From.Name, strings.Join(fk.Cols, ","), fk.To.Name, strings.Join(fk.RefCols, ","), fk.To.Name, strings.Join(fk.RefCols, ","))
}

func pickParent(t *sqlast.Table, parent string) (*sqlast.FK, error) {
	if parent != "" {
		for _, fk := range t.FKs {
			if fk.Cols[0] == parent || slices.Contains(fk.Cols, parent) {
				if fk.To.Global {
					return nil, schemaErr("parent %s.%s references global table %q, which carries no scope", t.Name, parent, fk.To.Name)
				}
				if fk.To.ByRef {
					return nil, schemaErr("parent %s.%s references %q, which is owned by reference and carries no scope of its own: a table reached only through a table owned by reference cannot be declared yet; leave it out of the graph (the guard cannot reach it; grant the application role nothing on it)", t.Name, parent, fk.To.Name)
				}
				return fk, nil
			}
		}
		return nil, schemaErr("parent %s.%s is not a foreign key column", t.Name, parent)
	}
	if len(t.LevelCols) > 0 {
		return nil, nil
	}
	var cands []*sqlast.FK
	for _, fk := range t.FKs {
		if !fk.To.Global && !fk.To.ByRef && fk.Unchecked == "" && fk.To != t {
			cands = append(cands, fk)
		}
	}
	switch len(cands) {
	case 0:
		return nil, schemaErr("tenant-bound table %q has no level columns and no foreign key to a tenant-bound table (declare Levels or a Parent if each row is one tenant's; OwnedByReference if its rows belong to the tenants whose rows reference them, such as a shared address table; Global only if every tenant may read every row)", t.Name)
	case 1:
		return cands[0], nil
	}
	var names []string
	for _, fk := range cands {
		names = append(names, strings.Join(fk.Cols, ",")+"->"+fk.To.Name)
	}
	return nil, schemaErr("table %q: scope parent is ambiguous among %s; set Parent", t.Name, strings.Join(names, ", "))
}

// resolveAnchors computes t.Anchors: for each level, the nearest column on
// the scope path that carries it. A level read from a parent's column that
// the foreign key itself references is read from the foreign-key column
// instead (rooms.hotel_id rather than hotels.id), which saves a join.
func resolveAnchors(t *sqlast.Table, done map[*sqlast.Table]bool) {
	if done[t] {
		return
	}
	done[t] = true
	byLevel := map[*sqlast.Level]sqlast.Anchor{}
	for _, lc := range t.LevelCols {
		if _, ok := byLevel[lc.Level]; !ok {
			byLevel[lc.Level] = sqlast.Anchor{Level: lc.Level, Col: lc.Col}
		}
	}
	if t.Parent != nil {
		p := t.Parent.To
		resolveAnchors(p, done)
		for _, a := range p.Anchors {
			if _, ok := byLevel[a.Level]; ok {
				continue
			}
			hops := append([]*sqlast.FK{t.Parent}, a.Hops...)
			col := a.Col
			for len(hops) > 0 {
				last := hops[len(hops)-1]
				i := slices.Index(last.RefCols, col)
				if i < 0 {
					break
				}
				col = last.Cols[i]
				hops = hops[:len(hops)-1]
			}
			byLevel[a.Level] = sqlast.Anchor{Level: a.Level, Hops: hops, Col: col}
		}
	}
	for _, a := range byLevel {
		t.Anchors = append(t.Anchors, a)
	}
	slices.SortFunc(t.Anchors, func(a, b sqlast.Anchor) int { return a.Level.Index - b.Level.Index })
}

func checkKeyType(t *sqlast.Table, c string, l *sqlast.Level) error {
	typ := strings.ToLower(t.Types[c])
	if typ == "" {
		return nil
	}
	isInt := strings.Contains(typ, "int")
	isText := strings.Contains(typ, "char") || strings.Contains(typ, "text") || strings.Contains(typ, "clob")
	switch {
	case l.Key == sqlast.IntKey && isText:
		return schemaErr("level column %s.%s has type %s but level %q has integer keys", t.Name, c, t.Types[c], l.Name)
	case l.Key == sqlast.TextKey && isInt:
		return schemaErr("level column %s.%s has type %s but level %q has text keys", t.Name, c, t.Types[c], l.Name)
	}
	return nil
}

// validIdent accepts the identifiers every supported engine can quote
// without escaping: ASCII letters, digits and underscore, not starting
// with a digit, at most 63 bytes (PostgreSQL's limit).
func validIdent(s string) bool {
	if s == "" || len(s) > 63 {
		return false
	}
	for i, r := range s {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r == '_':
		case i > 0 && r >= '0' && r <= '9':
		default:
			return false
		}
	}
	return true
}

// validAlias is stricter: aliases may not start with '_', which keeps the
// guard's own aliases (_tm1, _tm_scope) out of reach.
func validAlias(s string) bool {
	return validIdent(s) && s[0] != '_'
}

func reserved(s string) bool {
	return strings.HasPrefix(strings.ToLower(s), "_tm")
}

// Table returns a reference to the named table, aliased by its own name.
// An unknown name is reported by Build of the statement that uses it.
func (s *Schema) Table(name string) TableRef {
	if s == nil || s.g == nil {
		return TableRef{err: fmt.Errorf("%w: nil schema", ErrInvalid)}
	}
	t, ok := s.g.Tables[name]
	if !ok {
		return TableRef{err: fmt.Errorf("%w: unknown table %q", ErrInvalid, name)}
	}
	return TableRef{ref: sqlast.NewRef(t, name)}
}

// TableNames returns the names of all tables, sorted.
func (s *Schema) TableNames() []string { return slices.Clone(s.g.Names) }

// Levels returns the declared levels, root first.
func (s *Schema) Levels() []Level {
	out := make([]Level, len(s.g.Levels))
	for i, l := range s.g.Levels {
		out[i] = Level{Name: l.Name, Key: KeyType(l.Key)}
	}
	return out
}

// IsOwnedByReference reports whether the named table is owned by reference
// (TableDef.OwnedByReference).
func (s *Schema) IsOwnedByReference(table string) bool {
	t, ok := s.g.Tables[table]
	return ok && t.ByRef
}

// IsGlobal reports whether the named table is global (unscoped).
func (s *Schema) IsGlobal(table string) bool {
	t, ok := s.g.Tables[table]
	return ok && t.Global
}

// ScopePath describes how rows of table reach each level, one line per
// level, e.g. "chain: bookings.room_id -> rooms.hotel_id -> hotels.chain_id".
// It is meant for documentation and start-up logs.
func (s *Schema) ScopePath(table string) string {
	t, ok := s.g.Tables[table]
	if !ok {
		return ""
	}
	if t.Global {
		return "global"
	}
	if t.ByRef {
		refs := make([]string, len(t.Referrers))
		for i, fk := range t.Referrers {
			refs[i] = fk.From.Name + "." + strings.Join(fk.Cols, ",")
		}
		return "owned by reference: " + strings.Join(refs, ", ")
	}
	var lines []string
	for _, a := range t.Anchors {
		var b strings.Builder
		b.WriteString(a.Level.Name + ": ")
		cur := t.Name
		for _, h := range a.Hops {
			b.WriteString(cur + "." + strings.Join(h.Cols, ",") + " -> ")
			cur = h.To.Name
		}
		b.WriteString(cur + "." + a.Col)
		lines = append(lines, b.String())
	}
	return strings.Join(lines, "\n")
}

// String lists every table with its scope paths.
func (s *Schema) String() string {
	var b strings.Builder
	for _, n := range s.g.Names {
		b.WriteString(n)
		b.WriteString(":\n  ")
		b.WriteString(strings.ReplaceAll(s.ScopePath(n), "\n", "\n  "))
		b.WriteString("\n")
	}
	return b.String()
}

// Tenancy says how the tables of an introspected catalog relate to the
// scope levels: which columns carry which level, which tables are global,
// and, where a table has several foreign keys to tenant-bound tables, which
// one is its scope parent. Apply merges it into the catalog.
type Tenancy struct {
	Levels []Level
	// LevelColumns maps "table.column" to a level name.
	LevelColumns map[string]string
	// Global lists the tables that hold shared reference data.
	Global []string
	// GlobalReasons maps a table of Global to why it is global although it
	// looks tenant-bound (see TableDef.GlobalReason).
	GlobalReasons map[string]string
	// Parents maps a table name to the column of its scope-parent foreign key.
	Parents map[string]string
	// Ignore lists tables left out of the schema (migration bookkeeping and
	// the like); the builder cannot reference them at all.
	Ignore []string

	// (h5-catalog) The acknowledgements of TableDef, by table name.

	// GlobalWritable maps a table of Global to TableDef.GlobalWritable.
	GlobalWritable map[string]string
	// SharedUnique maps a table to TableDef.SharedUnique.
	SharedUnique map[string]map[string]string
	// Triggers maps a table to TableDef.Triggers.
	Triggers map[string]map[string]string
	// (h4-ref)
	// OwnedByReference lists the tables owned by reference (see
	// TableDef.OwnedByReference).
	OwnedByReference []string
	// Unchecked maps "table.column", a column of one of the table's foreign
	// keys, to the reason that key is not checked on writes (see
	// ForeignKey.Unchecked).
	Unchecked map[string]string
}

// Schema applies t to catalog, as [Tenancy.Apply], and builds the
// [Schema]: what every engine's Introspect returns.
func (t Tenancy) Schema(catalog []TableDef) (*Schema, error) {
	def, err := t.Apply(catalog)
	if err != nil {
		return nil, err
	}
	return NewSchema(def)
}

// Apply returns a SchemaDef made of the catalog's tables (typically from
// guardedsql's introspection) with t's tenancy applied. Every name t
// mentions must exist in the catalog. Tables t does not mention are
// tenant-bound, so an unknown table fails closed at NewSchema unless its
// scope parent can be inferred.
func (t Tenancy) Apply(catalog []TableDef) (SchemaDef, error) {
	def := SchemaDef{Levels: slices.Clone(t.Levels)}
	byName := map[string]int{}
	for _, td := range catalog {
		if slices.Contains(t.Ignore, td.Name) {
			continue
		}
		td.Levels = nil
		td.Parent = ""
		td.Global = slices.Contains(t.Global, td.Name)
		td.GlobalReason = t.GlobalReasons[td.Name]
		td.GlobalWritable = t.GlobalWritable[td.Name]
		td.SharedUnique = maps.Clone(t.SharedUnique[td.Name])
		td.Triggers = maps.Clone(t.Triggers[td.Name])
		td.OwnedByReference = slices.Contains(t.OwnedByReference, td.Name)
		byName[td.Name] = len(def.Tables)
		def.Tables = append(def.Tables, td)
	}
	// Foreign keys into ignored tables are dropped: the builder cannot
	// reference those tables, so the keys would not resolve.
	for i := range def.Tables {
		fks := def.Tables[i].ForeignKeys[:0:0]
		for _, fk := range def.Tables[i].ForeignKeys {
			if _, ok := byName[fk.RefTable]; ok {
				fks = append(fks, fk)
			}
		}
		def.Tables[i].ForeignKeys = fks
	}
	for _, g := range t.Global {
		if _, ok := byName[g]; !ok {
			return SchemaDef{}, schemaErr("tenancy names global table %q, which the catalog lacks", g)
		}
	}
	for g := range t.GlobalReasons {
		if !slices.Contains(t.Global, g) {
			return SchemaDef{}, schemaErr("tenancy gives a global reason for %q, which it does not list as Global", g)
		}
	}
	for _, m := range []map[string]string{t.GlobalWritable, keysOf(t.SharedUnique), keysOf(t.Triggers)} {
		for tn := range m {
			if _, ok := byName[tn]; !ok {
				return SchemaDef{}, schemaErr("tenancy acknowledges something of %q, which the catalog lacks", tn)
			}
		}
	}
	for tc, lvl := range t.LevelColumns {
		tn, cn, ok := strings.Cut(tc, ".")
		i, found := byName[tn]
		if !ok || !found {
			return SchemaDef{}, schemaErr("tenancy level column %q: no such table", tc)
		}
		if !slices.Contains(def.Tables[i].Columns, cn) {
			return SchemaDef{}, schemaErr("tenancy level column %q: no such column", tc)
		}
		if def.Tables[i].Levels == nil {
			def.Tables[i].Levels = map[string]string{}
		}
		def.Tables[i].Levels[cn] = lvl
	}
	if err := t.applyByRef(def.Tables, byName); err != nil {
		return SchemaDef{}, err
	}
	for tn, col := range t.Parents {
		i, found := byName[tn]
		if !found {
			return SchemaDef{}, schemaErr("tenancy parent for unknown table %q", tn)
		}
		def.Tables[i].Parent = col
	}
	return def, nil
}

// (h4-ref) Tables owned by reference and unchecked foreign keys.

// checkByRefDecl validates the declaration of t, a non-global table, as
// owned by reference, and refuses Unchecked on foreign keys of tables that
// are not tenant-bound (it only means something between tenant tables).
func checkByRefDecl(t *sqlast.Table, td TableDef) error {
	if !t.ByRef {
		return nil
	}
	switch {
	case len(td.Levels) > 0 || td.Parent != "":
		return schemaErr("table %q is owned by reference and cannot have level columns or a scope parent", t.Name)
	case len(t.PK) != 1:
		return schemaErr("table %q is owned by reference and needs a one-column primary key", t.Name)
	}
	for _, fk := range t.FKs {
		if fk.To.ByRef {
			return schemaErr("table %q is owned by reference and cannot reference %q, which is owned by reference too: "+
				"a table reached only through a table owned by reference cannot be declared yet; leave it out of the graph (the guard cannot reach it; grant the application role nothing on it)", t.Name, fk.To.Name)
		}
		if !fk.To.Global {
			// The advice names both ways out: a Parent through the
			// referenced table gives each row to that table's tenant, not
			// to the rows pointing at it, which is only right when that is
			// whose the rows are.
			return schemaErr("table %q is owned by reference and cannot reference %q, which is not global: if %q is reference data every tenant may read, declare it Global (with a GlobalReason if it looks tenant-bound); "+
				"declare %q tenant-bound with a Parent through %q only if each of its rows belongs to that row's tenant rather than to the rows that reference it", t.Name, fk.To.Name, fk.To.Name, t.Name, fk.To.Name)
		}
	}
	return nil
}

// resolveReferrers sets the Referrers of every table owned by reference and
// checks every Unchecked foreign key.
//
// Invariant: a row of a table owned by reference is owned exactly through
// Referrers, every one of which references its one-column primary key.
func resolveReferrers(g *sqlast.Schema) error {
	for _, name := range g.Names {
		t := g.Tables[name]
		for _, fk := range t.FKs {
			if fk.Unchecked != "" && (t.Global || t.ByRef || fk.To.Global) {
				return schemaErr("foreign key %s(%s) -> %s is declared Unchecked, which only applies between tenant-bound tables", t.Name, strings.Join(fk.Cols, ","), fk.To.Name)
			}
			if !fk.To.ByRef || fk.Unchecked != "" || t.Global {
				continue
			}
			if t.ByRef {
				continue // refused by checkByRefDecl
			}
			if !slices.Equal(fk.RefCols, fk.To.PK) {
				return schemaErr("foreign key %s(%s) -> %s(%s): a table owned by reference is referenced by its primary key (%s)",
					t.Name, strings.Join(fk.Cols, ","), fk.To.Name, strings.Join(fk.RefCols, ","), strings.Join(fk.To.PK, ","))
			}
			fk.To.Referrers = append(fk.To.Referrers, fk)
		}
	}
	for _, name := range g.Names {
		if t := g.Tables[name]; t.ByRef && len(t.Referrers) == 0 {
			// Name the tables that reference it but are not tenant-bound:
			// the mistake is there more often (memberships declared
			// global beside users owned by reference).
			var others []string
			for _, n := range g.Names {
				if u := g.Tables[n]; u != t && slices.ContainsFunc(u.FKs, func(fk *sqlast.FK) bool { return fk.To == t }) {
					others = append(others, n)
				}
			}
			if len(others) > 0 {
				return schemaErr("table %q is owned by reference but no tenant-bound table references it (through a foreign key that is not Unchecked); "+
					"it is referenced only by %s, declared global, owned by reference or through an Unchecked key", t.Name, strings.Join(others, ", "))
			}
			return schemaErr("table %q is owned by reference but no tenant-bound table references it (through a foreign key that is not Unchecked)", t.Name)
		}
	}
	return nil
}

// applyByRef applies OwnedByReference and Unchecked to the tables of def.
func (t Tenancy) applyByRef(tables []TableDef, byName map[string]int) error {
	for _, n := range t.OwnedByReference {
		if _, ok := byName[n]; !ok {
			return schemaErr("tenancy names table %q owned by reference, which the catalog lacks", n)
		}
		if slices.Contains(t.Global, n) {
			return schemaErr("tenancy names table %q both global and owned by reference", n)
		}
	}
	for tc, reason := range t.Unchecked {
		tn, cn, ok := strings.Cut(tc, ".")
		i, found := byName[tn]
		if !ok || !found {
			return schemaErr("tenancy unchecked foreign key %q: no such table", tc)
		}
		if reason == "" {
			return schemaErr("tenancy unchecked foreign key %q: give the reason it is not checked", tc)
		}
		n := 0
		for k, fk := range tables[i].ForeignKeys {
			if slices.Contains(fk.Columns, cn) {
				tables[i].ForeignKeys[k].Unchecked = reason
				n++
			}
		}
		if n == 0 {
			return schemaErr("tenancy unchecked foreign key %q: no foreign key of %s has column %s", tc, tn, cn)
		}
	}
	return nil
}

// keysOf returns the keys of m as a set (map to "").
func keysOf[V any](m map[string]V) map[string]string {
	out := make(map[string]string, len(m))
	for k := range m {
		out[k] = ""
	}
	return out
}

// ackFields validates and copies the acknowledgements of td (h5-catalog)
// into t.
func ackFields(t *sqlast.Table, td TableDef) error {
	if td.GlobalWritable != "" && !td.Global {
		return schemaErr("table %q has GlobalWritable but is not Global", td.Name)
	}
	if td.GlobalWritable != "" && td.GlobalReason != "" {
		return schemaErr("global table %q looks tenant-bound (it has a GlobalReason) and cannot be GlobalWritable", td.Name)
	}
	t.GlobalWritable = td.GlobalWritable
	for k, why := range td.SharedUnique {
		if strings.TrimSpace(why) == "" {
			return schemaErr("table %q: SharedUnique[%q] needs a reason (what a conflict reveals)", td.Name, k)
		}
		for _, c := range strings.Split(k, ",") {
			if !t.HasColumn(c) {
				return schemaErr("table %q: SharedUnique[%q]: %q is not a column (write the key's columns joined by \",\")", td.Name, k, c)
			}
		}
	}
	t.SharedUnique = maps.Clone(td.SharedUnique)
	for name, why := range td.Triggers {
		if strings.TrimSpace(why) == "" {
			return schemaErr("table %q: Triggers[%q] needs a reason", td.Name, name)
		}
	}
	t.Triggers = maps.Clone(td.Triggers)
	return nil
}
