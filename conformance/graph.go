package conformance

import (
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/tenantmcp/tenantmcp/builder"
	"github.com/tenantmcp/tenantmcp/scope"
)

// graph is the suite's own reading of a SchemaDef: which tables are
// tenant-bound, their keys, level columns and scope parents. It is
// deliberately computed here, from the declaration, and not taken from the
// guard, so that the expected results do not share the guard's code.
type graph struct {
	levels []builder.Level
	tables map[string]*tinfo
	names  []string // all tables, sorted
	bound  []string // tenant-bound tables, sorted
}

type tinfo struct {
	name      string
	cols      []string
	pk        []string
	unique    [][]string // declared unique keys (TableDef.Unique)
	global    bool
	byRef     bool       // owned by reference (h4-ref): see oracle.byRefVisible
	levelCols []levelCol // in column order
	fks       []*fkey
	parent    *fkey // scope parent; nil for a table with level columns
}

type levelCol struct{ col, level string }

type fkey struct {
	from, to  string
	cols, ref []string
	unchecked bool // declared Unchecked (h4-ref): no ownership path, not checked on writes
}

func (f *fkey) String() string {
	return fmt.Sprintf("%s(%v)->%s(%v)", f.from, f.cols, f.to, f.ref)
}

func newGraph(def builder.SchemaDef) (*graph, error) {
	g := &graph{levels: slices.Clone(def.Levels), tables: map[string]*tinfo{}}
	for _, td := range def.Tables {
		t := &tinfo{name: td.Name, cols: slices.Clone(td.Columns), pk: slices.Clone(td.PrimaryKey), global: td.Global, byRef: td.OwnedByReference}
		for _, u := range td.Unique {
			t.unique = append(t.unique, slices.Clone(u))
		}
		for _, c := range td.Columns {
			if l, ok := td.Levels[c]; ok {
				t.levelCols = append(t.levelCols, levelCol{c, l})
			}
		}
		g.tables[td.Name] = t
		g.names = append(g.names, td.Name)
	}
	sort.Strings(g.names)
	for _, td := range def.Tables {
		t := g.tables[td.Name]
		for _, f := range td.ForeignKeys {
			to, ok := g.tables[f.RefTable]
			if !ok {
				return nil, fmt.Errorf("conformance: %s: foreign key to unknown table %q", td.Name, f.RefTable)
			}
			ref := f.RefColumns
			if len(ref) == 0 {
				ref = to.pk
			}
			if len(ref) != len(f.Columns) || len(ref) == 0 {
				return nil, fmt.Errorf("conformance: %s: foreign key %v -> %s has mismatched columns", td.Name, f.Columns, f.RefTable)
			}
			t.fks = append(t.fks, &fkey{from: td.Name, to: f.RefTable, cols: slices.Clone(f.Columns), ref: slices.Clone(ref), unchecked: f.Unchecked != ""})
		}
	}
	for _, td := range def.Tables {
		t := g.tables[td.Name]
		if t.global || t.byRef {
			continue // a table owned by reference is not in bound: its rows' owners are its referrers' (byRefVisible)
		}
		if len(t.pk) == 0 {
			return nil, fmt.Errorf("conformance: tenant-bound table %s has no primary key; the suite identifies rows by primary key", t.name)
		}
		switch {
		case td.Parent != "":
			for _, f := range t.fks {
				if slices.Contains(f.cols, td.Parent) {
					t.parent = f
					break
				}
			}
			if t.parent == nil {
				return nil, fmt.Errorf("conformance: %s: parent %q is not a foreign-key column", t.name, td.Parent)
			}
		case len(t.levelCols) > 0:
		default:
			var cands []*fkey
			for _, f := range t.fks {
				if to := g.tables[f.to]; f.to != t.name && !to.global && !to.byRef && !f.unchecked {
					cands = append(cands, f)
				}
			}
			if len(cands) != 1 {
				return nil, fmt.Errorf("conformance: %s: no unambiguous scope parent (declare Parent)", t.name)
			}
			t.parent = cands[0]
		}
		g.bound = append(g.bound, t.name)
	}
	sort.Strings(g.bound)
	return g, nil
}

// mutable are the tables a mutation can break: the tenant-bound ones and
// those owned by reference (whose predicate is their referrers'), sorted.
func (g *graph) mutable() []string {
	out := slices.Clone(g.bound)
	for _, n := range g.names {
		if g.tables[n].byRef {
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out
}

// tenantFKs are the foreign keys of t to tenant-bound tables (and tables
// owned by reference), Unchecked ones excluded.
func (g *graph) tenantFKs(t *tinfo) []*fkey {
	var out []*fkey
	for _, f := range t.fks {
		if !g.tables[f.to].global && !f.unchecked {
			out = append(out, f)
		}
	}
	return out
}

// depth is the number of scope-parent hops from t to a table with level
// columns.
func (g *graph) depth(t *tinfo) int {
	n := 0
	for p := t.parent; p != nil && n < len(g.tables); p = g.tables[p.to].parent {
		n++
	}
	return n
}

// levelIndex returns the position of a level, root first, or -1.
func (g *graph) levelIndex(name string) int {
	return slices.IndexFunc(g.levels, func(l builder.Level) bool { return l.Name == name })
}

// grantSet is a scope's grants as the suite matches them: per level, the
// canonical ids. Ids that are not valid for the level's key type are
// dropped, as the documented semantics say: they match nothing.
type grantSet map[string]map[string]bool

func (g *graph) grantSet(grants []scope.Grant) grantSet {
	out := grantSet{}
	for _, gr := range grants {
		if len(gr.Within) > 0 {
			continue // only where its ancestors agree: oracle.admitsWithin
		}
		i := g.levelIndex(gr.Level)
		if i < 0 {
			continue
		}
		id := gr.ID
		if g.levels[i].Key == builder.IntKey {
			n, err := strconv.ParseInt(id, 10, 64)
			if err != nil || strconv.FormatInt(n, 10) != id {
				continue
			}
		}
		if out[gr.Level] == nil {
			out[gr.Level] = map[string]bool{}
		}
		out[gr.Level][id] = true
	}
	return out
}

// addLiveUniques adds to each table's unique keys those of the live
// catalog the declaration leaves out (a per-tenant unique_together the
// graph does not list): the suite's copies of rows must vary them, or its
// controls fail on a conflict that says nothing of the cause. Keys on
// columns the graph does not declare are left out (the suite cannot vary
// them).
func (g *graph) addLiveUniques(live map[string]*liveTable) {
	for _, name := range g.names {
		t, lt := g.tables[name], live[strings.ToLower(name)]
		if lt == nil {
			continue
		}
	keys:
		for _, lk := range lt.uniques {
			var key []string
			for _, c := range lk {
				i := slices.IndexFunc(t.cols, func(x string) bool { return strings.EqualFold(x, c) })
				if i < 0 {
					continue keys
				}
				key = append(key, t.cols[i])
			}
			same := func(u []string) bool {
				return len(u) == len(key) && !slices.ContainsFunc(u, func(c string) bool {
					return !slices.ContainsFunc(key, func(k string) bool { return strings.EqualFold(k, c) })
				})
			}
			if !same(t.pk) && !slices.ContainsFunc(t.unique, same) {
				t.unique = append(t.unique, key)
			}
		}
	}
}
