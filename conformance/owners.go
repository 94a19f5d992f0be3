package conformance

import (
	"context"
	"database/sql"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	"github.com/tenantmcp/tenantmcp/builder"
	"github.com/tenantmcp/tenantmcp/internal/refname"
	"github.com/tenantmcp/tenantmcp/scope"
)

// catOracle is the ownership oracle that does not trust the declaration:
// it attributes every row of every table of the scratch database to
// tenants from the live catalog and the rows alone (see [Target.LevelColumns]
// for where levels come from):
//
//  1. a row owns the (level, id) pairs of its level columns;
//  2. a row that references an owned row through an enforced foreign key
//     owns that row's pairs as well, transitively (children belong to their
//     parents' tenants; a row with several paths belongs to every tenant
//     one of them leads to), except pairs of a level whose id the row's own
//     level column gives (a message whose realm_id says realm 1 is realm
//     1's, whoever its sender is);
//  3. a row that owns nothing by 1–2 but is referenced by rows that own
//     pairs owns theirs, transitively (rows owned by reference: an address
//     belongs to the tenants whose customers, staff or stores point at it;
//     so does a country their hotels are in);
//  4. a row that still owns nothing (no owning row references it either)
//     owns the pairs of the rows it references, transitively (a huddle
//     whose recipient the realm's subscriptions point at is the realm's,
//     whatever the graph declares it).
//
// Ownership does not flow out of a table the run acknowledges as shared
// ([Target.Shared]): its rows receive pairs (so the summary can say how
// many of them the catalog gives to tenants) but give none, neither to the
// rows that reference them (2) nor to the rows they reference (3). Every
// tenant may read a shared row, so pointing at one says nothing about
// whose a row is: an address in a state that a territory column marks
// belongs to the tenants whose orders ship there, not to the state's.
//
// A row with no pairs belongs to no tenant. A row is foreign to a scope
// when it has pairs and the scope's grants admit none of them; the
// property P58 fails on every foreign row a guarded query returns, unless
// the run acknowledges its table as shared ([Target.Shared]). The graph's
// declarations (global, parents, paths) play no part.
type catOracle struct {
	tables map[string]*liveTable // lower-case name -> table
	rows   map[string][]Row      // lower-case name -> rows, lower-case columns, canonical text values
	owners map[string][]pairs    // lower-case name -> row -> pairs
	levels map[string]string     // "table.column" (lower case) -> level
	idx    map[string]map[string][]int
	// implied are references the catalog has no foreign key for, taken
	// from column names (impliedRefs), per lower-case table name.
	implied map[string][]liveFK
	// poly are the references of the polymorphic columns of tables the
	// graph does not declare tenant-bound (polyRefs), row by row, per
	// lower-case table name.
	poly map[string][]polyRef
}

// polyRef is one row's polymorphic reference: row i of its table
// references row j of table to.
type polyRef struct {
	i, j int
	to   string
}

// pairs is a set of "level\x1fid".
type pairs map[string]bool

func pairOf(level, id string) string { return level + "\x1f" + id }

// levelColumns decides which catalog columns carry which level: the
// target's LevelColumns if it names any, else every level column the
// graph declares plus every catalog column, in any table, named like a
// declared level column that is not the whole primary key of its table
// (hotels.chain_id makes every chain_id column carry "chain"; hotels.id,
// the key of the hotel level's own table, lends its name to nothing), and
// the primary key of every table such a column is named like a reference
// to (chains.id).
// Foreign keys carry levels on from there, whatever the graph declares.
func levelColumns(tg Target, def builder.SchemaDef, cat map[string]*liveTable) (map[string]string, error) {
	out := map[string]string{}
	known := map[string]bool{}
	for _, l := range def.Levels {
		known[l.Name] = true
	}
	if len(tg.LevelColumns) > 0 {
		for tc, l := range tg.LevelColumns {
			tab, col, ok := strings.Cut(strings.ToLower(tc), ".")
			if !ok || cat[tab] == nil || cat[tab].types[col] == "" {
				return nil, fmt.Errorf("conformance: Target.LevelColumns names %q, which is no table.column of the database", tc)
			}
			if !known[l] {
				return nil, fmt.Errorf("conformance: Target.LevelColumns gives %q the level %q, which the graph does not declare", tc, l)
			}
			out[tab+"."+col] = l
		}
		return out, nil
	}
	names := map[string]string{}
	for _, td := range def.Tables {
		for c, l := range td.Levels {
			out[strings.ToLower(td.Name+"."+c)] = l
			if !(len(td.PrimaryKey) == 1 && td.PrimaryKey[0] == c) {
				names[strings.ToLower(c)] = l
			}
		}
	}
	for tab, t := range cat {
		for col := range t.types {
			if l, ok := names[col]; ok {
				if _, set := out[tab+"."+col]; !set {
					out[tab+"."+col] = l
				}
			}
		}
		// The level's own table, named by its level columns with no
		// foreign key to say so: tenants.record_id beside Kill Bill's
		// tenant_record_id columns carries "tenant", whatever the graph
		// declares tenants to be.
		if len(t.pk) != 1 || offNamedLevelTables.Load() {
			continue
		}
		for _, col := range slices.Sorted(maps.Keys(names)) {
			if _, set := out[tab+"."+t.pk[0]]; !set && refname.Refers(col, tab, t.pk[0], false) {
				out[tab+"."+t.pk[0]] = names[col]
			}
		}
	}
	return out, nil
}

// newCatOracle reads every table of the catalog whole, as the owner, and
// attributes its rows.
func newCatOracle(ctx context.Context, db *sql.DB, e Engine, cat map[string]*liveTable, levels map[string]string, shared map[string]bool, implied map[string][]liveFK, untrusted map[string]bool) (*catOracle, error) {
	c := &catOracle{tables: cat, rows: map[string][]Row{}, owners: map[string][]pairs{}, levels: levels, idx: map[string]map[string][]int{}, implied: implied}
	ownLevels := map[string][]map[string]bool{} // table -> row -> levels its own columns give
	names := make([]string, 0, len(cat))
	for n := range cat {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		t := cat[n]
		qc := make([]string, len(t.cols))
		for i, col := range t.cols {
			qc[i] = e.quote(col)
		}
		rs, err := db.QueryContext(ctx, "SELECT "+strings.Join(qc, ", ")+" FROM "+e.quote(t.name))
		if err != nil {
			return nil, fmt.Errorf("conformance: reading %s as owner: %w", t.name, err)
		}
		for rs.Next() {
			vals := make([]any, len(t.cols))
			ptrs := make([]any, len(t.cols))
			for i := range vals {
				ptrs[i] = &vals[i]
			}
			if err := rs.Scan(ptrs...); err != nil {
				rs.Close()
				return nil, err
			}
			row := Row{}
			for i, col := range t.cols {
				if vals[i] != nil {
					row[strings.ToLower(col)] = canon(vals[i])
				}
			}
			c.rows[n] = append(c.rows[n], row)
		}
		if err := rs.Close(); err != nil {
			return nil, err
		}
		if err := rs.Err(); err != nil {
			return nil, err
		}
		own := make([]pairs, len(c.rows[n]))
		lv := make([]map[string]bool, len(c.rows[n]))
		for i, row := range c.rows[n] {
			own[i], lv[i] = pairs{}, map[string]bool{}
			for col := range t.types {
				if l, ok := levels[n+"."+col]; ok && row[col] != nil {
					own[i][pairOf(l, row[col].(string))] = true
					lv[i][l] = true
				}
			}
		}
		c.owners[n] = own
		ownLevels[n] = lv
	}
	c.poly = c.polyRefs(untrusted)
	// 2: along foreign keys, from owning rows to the rows that reference
	// them, until nothing changes (sets only grow; bounded by the number
	// of pairs). A row's own level column decides its id of that level.
	for changed := true; changed; {
		changed = false
		c.eachReference(func(from string, i int, to string, j int) {
			if shared[to] {
				return
			}
			for p := range c.owners[to][j] {
				if l, _, _ := strings.Cut(p, "\x1f"); ownLevels[from][i][l] {
					continue
				}
				if !c.owners[from][i][p] {
					c.owners[from][i][p] = true
					changed = true
				}
			}
		})
	}
	anchored := map[string][]bool{}
	for n, own := range c.owners {
		a := make([]bool, len(own))
		for i, p := range own {
			a[i] = len(p) > 0
		}
		anchored[n] = a
	}
	// 3: against foreign keys, into rows that own nothing of their own.
	for changed := true; changed; {
		changed = false
		c.eachReference(func(from string, i int, to string, j int) {
			if !anchored[to][j] && !shared[from] && c.add(to, j, from, i) {
				changed = true
			}
		})
	}
	// 4: along foreign keys again, into the rows that still own nothing
	// (no owning row references them either), from the rows they
	// reference: a huddle that nothing references takes the tenants of its
	// recipient. Only those: a location its departments own does not also
	// take every tenant of its country.
	empty := map[string][]bool{}
	for n, own := range c.owners {
		e := make([]bool, len(own))
		for i, p := range own {
			e[i] = len(p) == 0
		}
		empty[n] = e
	}
	for changed := true; changed; {
		changed = false
		c.eachReference(func(from string, i int, to string, j int) {
			if empty[from][i] && !shared[to] && c.add(from, i, to, j) {
				changed = true
			}
		})
	}
	return c, nil
}

// impliedRefs returns, for the tables in globals (lower case: those the
// graph declares global or leaves out), each column named like a reference to another
// table of the catalog (channel_id, ChannelId or channelid to channels;
// a prefixed name, sentry_project, matches project_id) that no foreign key
// of the catalog covers, as a reference to that table's single-column
// primary key. Mattermost's schema has no foreign keys at all: its posts
// declared global leaked every team's messages while the catalog, by its
// constraints alone, attributed them to no one. A value that matches no
// key references nothing, so a column only named like a reference costs
// nothing; one whose values do match is a reference, constraint or not.
func impliedRefs(cat map[string]*liveTable, globals map[string]bool) map[string][]liveFK {
	out := map[string][]liveFK{}
	for name := range globals {
		t := cat[name]
		if t == nil {
			continue
		}
	cols:
		for _, col := range t.cols {
			lc := strings.ToLower(col)
			for _, f := range t.fks {
				if slices.Contains(f.cols, lc) {
					continue cols
				}
			}
			if len(t.pk) == 1 && t.pk[0] == lc {
				continue
			}
			if to := refTarget(cat, lc); to != "" && to != name {
				out[name] = append(out[name], liveFK{cols: []string{lc}, ref: slices.Clone(cat[to].pk), to: to})
			}
		}
	}
	return out
}

// polyRefs returns, for the tables in from (lower case: those the graph
// declares global or leaves out) with a polymorphic reference
// (refname.Polymorphic: Lago's PaperTrail versions, item_type and item_id;
// Akaunting's mediables, which tie media to documents), the row each row
// references: the row of the
// table its type value names ("Customer" or "App\\Models\\Customer":
// customers; for Django's content_type_id, the django_content_type row's
// app_label_model) whose single-column primary key holds its id. Such a
// table declared global with a GlobalReason passed Open and the whole
// suite while every organization read the others' customers' audit
// trail: the catalog has no constraint to follow, and the id column alone
// names no table. Left out of the graph, mediables still tie each medium
// to a company's document: media declared global (Open has nothing to
// refuse: no tenant-looking column) showed every company's contracts to
// every company. A type value naming no table references nothing.
func (c *catOracle) polyRefs(from map[string]bool) map[string][]polyRef {
	if offPolymorphicRefs.Load() {
		return nil
	}
	out := map[string][]polyRef{}
	for _, name := range slices.Sorted(maps.Keys(from)) {
		t := c.tables[name]
		if t == nil {
			continue
		}
		typ, id := refname.Polymorphic(t.cols)
		if id == "" {
			continue
		}
		typ, id = strings.ToLower(typ), strings.ToLower(id)
		resolved := map[string]string{}
		for i, row := range c.rows[name] {
			tv, ok := row[typ].(string)
			iv, ok2 := row[id].(string)
			if !ok || !ok2 {
				continue
			}
			to, seen := resolved[tv]
			if !seen {
				to = c.typeTable(typ, tv)
				resolved[tv] = to
			}
			if to == "" || to == name {
				continue
			}
			for _, j := range c.index(to, c.tables[to].pk)[tuple(iv)] {
				out[name] = append(out[name], polyRef{i: i, j: j, to: to})
			}
		}
	}
	return out
}

// typeTable returns the table (with a single-column primary key) that the
// value v of the polymorphic type column typ names, or "".
func (c *catOracle) typeTable(typ, v string) string {
	single := func(n string) bool { return c.tables[n] != nil && len(c.tables[n].pk) == 1 }
	if strings.HasPrefix(typ, "content_type") {
		for _, row := range c.rows["django_content_type"] {
			if row["id"] == v {
				app, _ := row["app_label"].(string)
				model, _ := row["model"].(string)
				if n := strings.ToLower(app + "_" + model); single(n) {
					return n
				}
			}
		}
		return ""
	}
	base := refname.TypeBase(v)
	for _, n := range slices.Sorted(maps.Keys(c.tables)) {
		if single(n) && refname.Names(n, base, true) {
			return n
		}
	}
	return ""
}

// refTarget returns the table of cat (with a single-column primary key)
// that col, lower case, is named like a reference to, or "".
func refTarget(cat map[string]*liveTable, col string) string {
	for _, n := range slices.Sorted(maps.Keys(cat)) {
		if pk := cat[n].pk; len(pk) == 1 && refname.Refers(col, n, pk[0], true) {
			return n
		}
	}
	return ""
}

// add adds the pairs of row sj of src to row dj of dst and reports whether
// any was new.
func (c *catOracle) add(dst string, dj int, src string, sj int) bool {
	grew := false
	for p := range c.owners[src][sj] {
		if !c.owners[dst][dj][p] {
			c.owners[dst][dj][p] = true
			grew = true
		}
	}
	return grew
}

// eachReference calls fn for every row i of a table that references row j
// of another (or the same) table through a foreign key of the catalog.
func (c *catOracle) eachReference(fn func(from string, i int, to string, j int)) {
	for from, t := range c.tables {
		for _, f := range append(slices.Clone(t.fks), c.implied[from]...) {
			if c.tables[f.to] == nil || len(f.ref) != len(f.cols) {
				continue
			}
			target := c.index(f.to, f.ref)
		next:
			for i, row := range c.rows[from] {
				parts := make([]string, len(f.cols))
				for k, col := range f.cols {
					v, ok := row[col]
					if !ok {
						continue next // a NULL part references nothing
					}
					parts[k] = v.(string)
				}
				for _, j := range target[tuple(parts...)] {
					fn(from, i, f.to, j)
				}
			}
		}
	}
	for from, refs := range c.poly {
		for _, x := range refs {
			fn(from, x.i, x.to, x.j)
		}
	}
}

// index maps the canonical values of cols to the rows of table holding
// them (rows with a NULL among cols are left out).
func (c *catOracle) index(table string, cols []string) map[string][]int {
	id := table + "\x00" + strings.Join(cols, "\x00")
	if m, ok := c.idx[id]; ok {
		return m
	}
	m := map[string][]int{}
next:
	for i, row := range c.rows[table] {
		parts := make([]string, len(cols))
		for k, col := range cols {
			v, ok := row[col]
			if !ok {
				continue next
			}
			parts[k] = v.(string)
		}
		m[tuple(parts...)] = append(m[tuple(parts...)], i)
	}
	c.idx[id] = m
	return m
}

// admitsPairs reports whether grants admit one of ps: a plain grant its
// (level, canonical id) pair, a grant confined to ancestors every pair of
// its path.
func admitsPairs(ps pairs, g *graph, grants []scope.Grant) bool {
	gs := g.grantSet(grants)
	for l, ids := range gs {
		for id := range ids {
			if ps[pairOf(l, id)] {
				return true
			}
		}
	}
next:
	for _, gr := range grants {
		if len(gr.Within) == 0 {
			continue
		}
		for _, x := range append(slices.Clone(gr.Within), scope.Grant{Level: gr.Level, ID: gr.ID}) {
			if !ps[pairOf(x.Level, x.ID)] {
				continue next
			}
		}
		return true
	}
	return false
}

// foreignRow reports whether row i of table belongs to tenants and to none
// that grants admit.
func (c *catOracle) foreignRow(table string, i int, g *graph, grants []scope.Grant) bool {
	ps := c.owners[table][i]
	return len(ps) > 0 && !admitsPairs(ps, g, grants)
}

// ownersText renders the pairs of a row for a message: "store=2 store=3".
func ownersText(ps pairs) string {
	var out []string
	for p := range ps {
		l, id, _ := strings.Cut(p, "\x1f")
		out = append(out, l+"="+id)
	}
	slices.Sort(out)
	if len(out) > 4 {
		out = append(out[:4], "…")
	}
	return strings.Join(out, " ")
}

// foreignByKey reports whether every catalog row of table whose cols hold
// the canonical values key is foreign to grants (so a returned row with
// that key can only be another tenant's), with one such row's owners; found
// is false when no catalog row has the key.
func (c *catOracle) foreignByKey(table string, cols []string, key string, g *graph, grants []scope.Grant) (foreign, found bool, owners string) {
	lt := strings.ToLower(table)
	lc := make([]string, len(cols))
	for i, col := range cols {
		lc[i] = strings.ToLower(col)
	}
	rows := c.index(lt, lc)[key]
	if len(rows) == 0 {
		return false, false, ""
	}
	for _, i := range rows {
		if !c.foreignRow(lt, i, g, grants) {
			return false, true, ""
		}
	}
	return true, true, ownersText(c.owners[lt][rows[0]])
}

// owned counts the rows of table the oracle attributes to tenants.
func (c *catOracle) owned(table string) int {
	n := 0
	for _, ps := range c.owners[strings.ToLower(table)] {
		if len(ps) > 0 {
			n++
		}
	}
	return n
}
