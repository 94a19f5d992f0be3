package conformance

import (
	"fmt"
	"slices"
	"strings"

	"github.com/tenantmcp/tenantmcp/scope"
)

// oracle answers, from the seed Dataset alone, which rows a scope may see:
// a row of a tenant-bound table is visible when, for some level, the
// nearest column on its scope path that carries the level (its own level
// column, else its scope parent's, transitively) holds an id granted at
// that level. This is the documented semantics of the guard, written out a
// second time in plain Go over the seed rows.
type oracle struct {
	g    *graph
	d    *Dataset
	keys map[string][]string                  // table -> row keys, in Dataset order
	byPK map[string]map[string]int            // table -> key -> row index
	byFK map[*fkey]map[string]int             // fk -> referenced values -> parent row index
	lv   map[string][]map[string]string       // table -> row -> level -> id
	kids map[string]map[string]map[string]int // parent table -> parent key -> child table -> count
}

func newOracle(g *graph, d *Dataset) (*oracle, error) {
	o := &oracle{g: g, d: d, keys: map[string][]string{}, byPK: map[string]map[string]int{},
		byFK: map[*fkey]map[string]int{}, lv: map[string][]map[string]string{}, kids: map[string]map[string]map[string]int{}}
	for name := range d.Tables {
		if _, ok := g.tables[name]; !ok {
			return nil, fmt.Errorf("conformance: the Dataset has rows for table %q, which the graph does not declare", name)
		}
	}
	for _, name := range g.names {
		t := g.tables[name]
		if len(t.pk) == 0 {
			continue
		}
		idx := map[string]int{}
		for i, r := range d.Tables[name] {
			k := Key(r, t.pk)
			if _, dup := idx[k]; dup {
				return nil, fmt.Errorf("conformance: Dataset table %s has primary key %q twice", name, k)
			}
			idx[k] = i
			o.keys[name] = append(o.keys[name], k)
		}
		o.byPK[name] = idx
	}
	for _, name := range g.names {
		for _, f := range g.tables[name].fks {
			idx := map[string]int{}
			for i, r := range d.Tables[f.to] {
				idx[Key(r, f.ref)] = i
			}
			o.byFK[f] = idx
		}
	}
	for _, name := range g.names {
		t := g.tables[name]
		for _, f := range t.fks {
			pt := g.tables[f.to]
			if len(pt.pk) == 0 {
				continue
			}
			for _, r := range d.Tables[name] {
				pi, ok := o.parentRow(f, r)
				if !ok {
					continue
				}
				pk := Key(d.Tables[f.to][pi], pt.pk)
				if o.kids[f.to] == nil {
					o.kids[f.to] = map[string]map[string]int{}
				}
				if o.kids[f.to][pk] == nil {
					o.kids[f.to][pk] = map[string]int{}
				}
				o.kids[f.to][pk][name]++
			}
		}
	}
	for _, name := range g.bound {
		rows := d.Tables[name]
		lv := make([]map[string]string, len(rows))
		for i, r := range rows {
			lv[i] = o.levelsOf(name, r, 0)
		}
		o.lv[name] = lv
	}
	return o, nil
}

// parentRow finds the row r references through f.
func (o *oracle) parentRow(f *fkey, r Row) (int, bool) {
	for _, c := range f.cols {
		if r[c] == nil {
			return 0, false
		}
	}
	i, ok := o.byFK[f][Key(r, f.cols)]
	return i, ok
}

// levelsOf computes level -> id for a row of table (which need not be in
// the Dataset: the write properties ask about rows they are about to
// insert).
func (o *oracle) levelsOf(table string, r Row, depth int) map[string]string {
	t := o.g.tables[table]
	out := map[string]string{}
	for _, lc := range t.levelCols {
		if _, done := out[lc.level]; done || r[lc.col] == nil {
			continue
		}
		out[lc.level] = canon(r[lc.col])
	}
	if t.parent != nil && depth <= len(o.g.tables) {
		if pi, ok := o.parentRow(t.parent, r); ok {
			for l, id := range o.levelsOf(t.parent.to, o.d.Tables[t.parent.to][pi], depth+1) {
				if _, own := out[l]; !own {
					out[l] = id
				}
			}
		}
	}
	return out
}

// admits reports whether a row with these levels lies under one of gs.
func (o *oracle) admits(levels map[string]string, gs grantSet) bool {
	for l, id := range levels {
		if gs[l][id] {
			return true
		}
	}
	return false
}

// visible returns the keys of the rows of table a scope with grants sees.
// Global tables are visible whole.
func (o *oracle) visible(table string, grants []scope.Grant) map[string]bool {
	out := map[string]bool{}
	t := o.g.tables[table]
	if t.global {
		for _, k := range o.keys[table] {
			out[k] = true
		}
		return out
	}
	if t.byRef {
		return o.byRefVisible(table, grants)
	}
	gs := o.g.grantSet(grants)
	for i, k := range o.keys[table] {
		if o.admits(o.lv[table][i], gs) || o.admitsWithin(o.lv[table][i], grants) {
			out[k] = true
		}
	}
	return out
}

// reachedIDs returns the ids at level of the rows grants see, in every
// tenant-bound table: a workspace's projects, a project's workspace. An id
// outside it and not granted is another tenant's, whatever the hierarchy.
func (o *oracle) reachedIDs(grants []scope.Grant, level string) map[string]bool {
	out := map[string]bool{}
	for _, name := range o.g.bound {
		if o.g.tables[name].byRef {
			continue
		}
		vis := o.visible(name, grants)
		for i, k := range o.keys[name] {
			if id, ok := o.lv[name][i][level]; ok && vis[k] {
				out[id] = true
			}
		}
	}
	return out
}

// writable returns, in key order, the rows of table that grants may
// update or delete (with leaves, only those no row references): the
// visible rows whose every path is in scope (pathsInScope). The write
// properties take their own-row controls from it.
func (o *oracle) writable(table string, grants []scope.Grant, leaves bool) []string {
	var out []string
	vis := map[string]map[string]bool{}
	for _, k := range sortedKeys(o.visible(table, grants)) {
		if (!leaves || o.isLeaf(table, k)) && o.pathsInScope(table, k, grants, vis) {
			out = append(out, k)
		}
	}
	return out
}

// pathsInScope reports whether every row that row k of table references
// through a checked foreign key into a tenant-bound table (its scope
// parent and its consistency paths) is visible to grants. The guard
// refuses an UPDATE or DELETE of a row one of whose paths leads out of
// scope (ErrSharedRow: a history row of a salesperson who moved to another
// territory), so a write property's own-row control must pass this. vis
// caches visible per table for one grants.
func (o *oracle) pathsInScope(table, k string, grants []scope.Grant, vis map[string]map[string]bool) bool {
	r := o.row(table, k)
	for _, f := range o.g.tenantFKs(o.g.tables[table]) {
		pi, ok := o.parentRow(f, r)
		if !ok {
			continue // NULL: no path
		}
		if vis[f.to] == nil {
			vis[f.to] = o.visible(f.to, grants)
		}
		if !vis[f.to][Key(o.d.Tables[f.to][pi], o.g.tables[f.to].pk)] {
			return false
		}
	}
	return true
}

// admitsWithin reports whether one of the grants confined to ancestors
// admits a row whose nearest level values are levels: every level such a
// grant names (its own and its ancestors') must hold the grant's id there.
// A level the graph lacks, or that the row does not reach, admits nothing.
func (o *oracle) admitsWithin(levels map[string]string, grants []scope.Grant) bool {
next:
	for _, g := range grants {
		if len(g.Within) == 0 {
			continue
		}
		for _, x := range append(slices.Clone(g.Within), scope.Grant{Level: g.Level, ID: g.ID}) {
			gs := o.g.grantSet([]scope.Grant{x}) // canonical id, known level
			id, ok := levels[x.Level]
			if !ok || !gs[x.Level][id] {
				continue next
			}
		}
		return true
	}
	return false
}

// rowVisible reports whether a hypothetical row of table would be visible.
func (o *oracle) rowVisible(table string, r Row, grants []scope.Grant) bool {
	if o.g.tables[table].global {
		return true
	}
	if o.g.tables[table].byRef {
		return false // a new row of a table owned by reference is referenced by no one
	}
	lv := o.levelsOf(table, r, 0)
	return o.admits(lv, o.g.grantSet(grants)) || o.admitsWithin(lv, grants)
}

// foreign returns the keys of table's rows the grants do not see, sorted.
func (o *oracle) foreign(table string, grants []scope.Grant) []string {
	vis := o.visible(table, grants)
	var out []string
	for _, k := range o.keys[table] {
		if !vis[k] {
			out = append(out, k)
		}
	}
	return out
}

// foreignTarget returns foreign's keys of the rows of table that a write
// by grants may not point a foreign key at: for a table owned by
// reference, the rows another scope's rows reference (an unreferenced row
// may be claimed by anyone, guardedsql's documented rule, so a write
// pointing at one is accepted); for any other table, foreign's.
func (o *oracle) foreignTarget(table string, grants []scope.Grant) []string {
	out := o.foreign(table, grants)
	if t := o.g.tables[table]; t == nil || !t.byRef {
		return out
	}
	referenced := o.byRefReferenced(table)
	return slices.DeleteFunc(out, func(k string) bool { return !referenced[k] })
}

// byRefReferenced returns the keys of the rows of table, owned by
// reference, that some row of a tenant-bound table references through a
// checked foreign key, whoever's it is.
func (o *oracle) byRefReferenced(table string) map[string]bool {
	out := map[string]bool{}
	t := o.g.tables[table]
	for _, name := range o.g.bound {
		for _, f := range o.g.tables[name].fks {
			if f.to != table || f.unchecked {
				continue
			}
			for _, r := range o.d.Tables[name] {
				if pi, ok := o.parentRow(f, r); ok {
					out[Key(o.d.Tables[table][pi], t.pk)] = true
				}
			}
		}
	}
	return out
}

// row returns the Dataset row of table with key k.
func (o *oracle) row(table, k string) Row {
	i, ok := o.byPK[table][k]
	if !ok {
		return nil
	}
	return o.d.Tables[table][i]
}

// levelIDs returns, per level, every id that some row of the Dataset
// carries in a level column, sorted.
func (o *oracle) levelIDs() map[string][]string {
	seen := map[string]map[string]bool{}
	for _, name := range o.g.bound {
		for _, lv := range o.lv[name] {
			for l, id := range lv {
				if !scope.ValidID(id) {
					continue // "" for "no tenant": no grant names it
				}
				if seen[l] == nil {
					seen[l] = map[string]bool{}
				}
				seen[l][id] = true
			}
		}
	}
	out := map[string][]string{}
	for l, ids := range seen {
		for id := range ids {
			out[l] = append(out[l], id)
		}
		slices.Sort(out[l])
	}
	return out
}

// isLeaf reports whether no row of the Dataset references the row.
func (o *oracle) isLeaf(table, k string) bool {
	return len(o.kids[table][k]) == 0
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// diff describes how got differs from want, briefly.
func diff(got, want map[string]bool) string {
	var extra, missing []string
	for k := range got {
		if !want[k] {
			extra = append(extra, k)
		}
	}
	for k := range want {
		if !got[k] {
			missing = append(missing, k)
		}
	}
	if len(extra) == 0 && len(missing) == 0 {
		return ""
	}
	slices.Sort(extra)
	slices.Sort(missing)
	return fmt.Sprintf("%d rows, want %d: %d foreign/unexpected %s, %d missing %s",
		len(got), len(want), len(extra), head(extra), len(missing), head(missing))
}

func head(s []string) string {
	const n = 5
	show := s
	if len(show) > n {
		show = show[:n]
	}
	out := "[" + strings.Join(show, " ") + "]"
	if len(s) > n {
		out = out[:len(out)-1] + " …]"
	}
	return out
}

// byRefVisible (h4-ref) returns the keys of the rows of table, owned by
// reference, that a scope sees: those some visible row of a tenant-bound
// table references through a checked foreign key. An unreferenced row is
// visible to no one.
func (o *oracle) byRefVisible(table string, grants []scope.Grant) map[string]bool {
	out := map[string]bool{}
	t := o.g.tables[table]
	for _, name := range o.g.bound {
		rt := o.g.tables[name]
		var fks []*fkey
		for _, f := range rt.fks {
			if f.to == table && !f.unchecked {
				fks = append(fks, f)
			}
		}
		if len(fks) == 0 {
			continue
		}
		vis := o.visible(name, grants)
		for _, r := range o.d.Tables[name] {
			if !vis[Key(r, rt.pk)] {
				continue
			}
			for _, f := range fks {
				if pi, ok := o.parentRow(f, r); ok {
					out[Key(o.d.Tables[table][pi], t.pk)] = true
				}
			}
		}
	}
	return out
}
