package guardedsql_test

// Random schema graphs for the graph differential fuzzers
// (fuzz_graph_test.go): levels one to three deep, each with a level table
// (lv0, lv1, ...; lvN.id carries level lN and lvN.up references the level
// above, as a level column, a scope parent or both); tenant tables with
// their own level columns (tkN.lk, sometimes a second one, lk2, of another
// level, with or without a foreign key to the level table); child tables
// hanging under any earlier tenant table by a Parent path (cN.pid); a
// second, nullable foreign key to another tenant table (xid, a consistency
// path, whose rows sometimes lead to another tenant); global tables (gN)
// referenced from tenant tables (gid).
//
// The seed data interleaves ids across tenants, reuses the same integer
// ids in every table (and, at text levels, decimal-looking text ids), and
// leaves some rows pointing at another tenant through their consistency
// path. Ownership is computed here in Go from the rows and the graph's
// foreign keys (own level columns first, then the parent path), never by
// the guard.

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"modernc.org/sqlite"

	"github.com/tenantmcp/tenantmcp/builder"
	"github.com/tenantmcp/tenantmcp/guardedsql"
	sqlengine "github.com/tenantmcp/tenantmcp/guardedsql/internal/engine"
	sqlitedialect "github.com/tenantmcp/tenantmcp/guardedsql/internal/engine/sqlite"
	gsqlite "github.com/tenantmcp/tenantmcp/guardedsql/sqlite"
	"github.com/tenantmcp/tenantmcp/scope"
)

const (
	gkGlobal = iota
	gkLevel
	gkTenant
	gkChild
	gkByRef
)

// graphByRef turns on tables owned by reference in the generated graphs
// (builder.TableDef.OwnedByReference): rN(id, v, n), referenced from one
// to three tenant tables through a nullable rfN column, one of them now
// and then Unchecked (no path of ownership).
var graphByRef = true

type gcol struct {
	name    string
	text    bool
	notNull bool
}

// gfk is a single-column foreign key onto to.id; unchecked is its
// ForeignKey.Unchecked reason.
type gfk struct{ col, to, unchecked string }

type gtable struct {
	name   string
	kind   int
	cols   []gcol
	levels map[string]string // column -> level name
	parent string            // the Parent column, "" for none
	fks    []gfk
}

func (t *gtable) idx(c string) int {
	return slices.IndexFunc(t.cols, func(x gcol) bool { return x.name == c })
}

func (t *gtable) fkOf(c string) *gfk {
	for i := range t.fks {
		if t.fks[i].col == c {
			return &t.fks[i]
		}
	}
	return nil
}

type ggraph struct {
	seed   uint64
	levels []builder.Level
	tables []*gtable // parents first
	by     map[string]*gtable
}

func (g *ggraph) level(name string) builder.Level {
	for _, l := range g.levels {
		if l.Name == name {
			return l
		}
	}
	return builder.Level{}
}

func (g *ggraph) global(table string) bool { return g.by[table].kind == gkGlobal }

// genGraph draws a random schema graph.
func genGraph(r *rand.Rand) *ggraph {
	g := &ggraph{by: map[string]*gtable{}}
	nl := 1 + r.IntN(3)
	for i := 0; i < nl; i++ {
		k := builder.IntKey
		if r.IntN(2) == 0 {
			k = builder.TextKey
		}
		g.levels = append(g.levels, builder.Level{Name: fmt.Sprintf("l%d", i), Key: k})
	}
	add := func(t *gtable) {
		g.tables = append(g.tables, t)
		g.by[t.name] = t
	}
	var globals []string
	for i := r.IntN(3); i > 0; i-- {
		name := fmt.Sprintf("g%d", len(globals))
		add(&gtable{name: name, kind: gkGlobal, cols: []gcol{{"id", r.IntN(2) == 0, true}, {"gname", true, false}}})
		globals = append(globals, name)
	}
	var byref []string
	if graphByRef {
		for i := r.IntN(3); i > 0; i-- {
			name := fmt.Sprintf("r%d", len(byref))
			add(&gtable{name: name, kind: gkByRef, cols: []gcol{{"id", r.IntN(3) == 0, true}, {"v", true, false}, {"n", false, false}}})
			byref = append(byref, name)
		}
	}
	var tenant []string
	for i := 0; i < nl; i++ {
		text := g.levels[i].Key == builder.TextKey
		t := &gtable{name: fmt.Sprintf("lv%d", i), kind: gkLevel, cols: []gcol{{"id", text, true}},
			levels: map[string]string{"id": g.levels[i].Name}}
		if i > 0 {
			t.cols = append(t.cols, gcol{"up", g.levels[i-1].Key == builder.TextKey, true})
			t.fks = append(t.fks, gfk{col: "up", to: fmt.Sprintf("lv%d", i-1)})
			switch r.IntN(3) {
			case 0: // hotels-like: up carries the level above, and is the path further up
				t.levels["up"], t.parent = g.levels[i-1].Name, "up"
			case 1: // the level above only through the parent path
				t.parent = "up"
			default: // up carries the level above, and nothing leads further up
				t.levels["up"] = g.levels[i-1].Name
			}
		}
		t.cols = append(t.cols, gcol{"v", true, false}, gcol{"n", false, false})
		add(t)
		tenant = append(tenant, t.name)
	}
	for j, nt := 0, 2+r.IntN(4); j < nt; j++ {
		var t *gtable
		if r.IntN(3) == 0 {
			L := r.IntN(nl)
			t = &gtable{name: fmt.Sprintf("tk%d", j), kind: gkTenant,
				cols:   []gcol{{"id", false, true}, {"lk", g.levels[L].Key == builder.TextKey, true}},
				levels: map[string]string{"lk": g.levels[L].Name}}
			if r.IntN(3) != 0 {
				t.fks = append(t.fks, gfk{col: "lk", to: fmt.Sprintf("lv%d", L)})
			}
			if M := r.IntN(nl); nl > 1 && M != L && r.IntN(3) == 0 {
				t.cols = append(t.cols, gcol{"lk2", g.levels[M].Key == builder.TextKey, true})
				t.levels["lk2"] = g.levels[M].Name
				if r.IntN(2) == 0 {
					t.fks = append(t.fks, gfk{col: "lk2", to: fmt.Sprintf("lv%d", M)})
				}
			}
		} else {
			p := g.by[tenant[r.IntN(len(tenant))]]
			t = &gtable{name: fmt.Sprintf("c%d", j), kind: gkChild,
				cols: []gcol{{"id", false, true}, {"pid", p.cols[0].text, true}}, parent: "pid"}
			t.fks = append(t.fks, gfk{col: "pid", to: p.name})
		}
		if r.IntN(2) == 0 {
			x := g.by[tenant[r.IntN(len(tenant))]]
			t.cols = append(t.cols, gcol{"xid", x.cols[0].text, false})
			fk := gfk{col: "xid", to: x.name}
			if r.IntN(5) == 0 {
				fk.unchecked = "a historical pointer, kept as it was written"
			}
			t.fks = append(t.fks, fk)
		}
		if len(globals) > 0 && r.IntN(2) == 0 {
			gt := g.by[globals[r.IntN(len(globals))]]
			t.cols = append(t.cols, gcol{"gid", gt.cols[0].text, false})
			t.fks = append(t.fks, gfk{col: "gid", to: gt.name})
		}
		t.cols = append(t.cols, gcol{"v", true, false}, gcol{"n", false, false})
		add(t)
		tenant = append(tenant, t.name)
	}
	// References to the tables owned by reference, from one to three
	// tenant tables each (a column appended to each).
	for i, rn := range byref {
		for n, k := range r.Perm(len(tenant))[:min(len(tenant), 1+r.IntN(3))] {
			t := g.by[tenant[k]]
			fk := gfk{col: fmt.Sprintf("rf%d", i), to: rn}
			if n > 0 && r.IntN(4) == 0 { // the first is a path of ownership
				fk.unchecked = "a copy of the address at the time, not its owner"
			}
			t.cols = append(t.cols, gcol{fk.col, g.by[rn].cols[0].text, false})
			t.fks = append(t.fks, fk)
		}
	}
	return g
}

func sqlType(c gcol) string {
	if c.text {
		return "TEXT"
	}
	return "INTEGER"
}

// def declares the graph; allGlobal declares every table global (for the
// filtered copy, which runs the same statements with no predicate).
func (g *ggraph) def(allGlobal bool) builder.SchemaDef {
	def := builder.SchemaDef{Levels: slices.Clone(g.levels)}
	for _, t := range g.tables {
		td := builder.TableDef{Name: t.name, PrimaryKey: []string{"id"}, Types: map[string]string{}}
		for _, c := range t.cols {
			td.Columns = append(td.Columns, c.name)
			td.Types[c.name] = sqlType(c)
		}
		for _, fk := range t.fks {
			td.ForeignKeys = append(td.ForeignKeys, builder.ForeignKey{Columns: []string{fk.col}, RefTable: fk.to, Unchecked: fk.unchecked})
			if allGlobal {
				td.ForeignKeys[len(td.ForeignKeys)-1].Unchecked = ""
			}
		}
		switch {
		case allGlobal || t.kind == gkGlobal:
			td.Global = true
		case t.kind == gkByRef:
			td.OwnedByReference = true
		default:
			td.Levels, td.Parent = t.levels, t.parent
		}
		def.Tables = append(def.Tables, td)
	}
	return def
}

func (g *ggraph) ddl() []string {
	var out []string
	for _, t := range g.tables {
		var parts []string
		for _, c := range t.cols {
			s := `"` + c.name + `" ` + sqlType(c)
			if c.name == "id" {
				s += " PRIMARY KEY"
			}
			if c.notNull {
				s += " NOT NULL"
			}
			if fk := t.fkOf(c.name); fk != nil {
				s += ` REFERENCES "` + fk.to + `"("id")`
			}
			parts = append(parts, s)
		}
		out = append(out, `CREATE TABLE "`+t.name+`" (`+strings.Join(parts, ", ")+`)`)
	}
	return out
}

// String is the graph in a few lines, for failure reports.
func (g *ggraph) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "graph seed %d, levels", g.seed)
	for _, l := range g.levels {
		k := "int"
		if l.Key == builder.TextKey {
			k = "text"
		}
		fmt.Fprintf(&b, " %s(%s)", l.Name, k)
	}
	b.WriteString("\n")
	for _, t := range g.tables {
		var cs []string
		for _, c := range t.cols {
			s := c.name
			if l, ok := t.levels[c.name]; ok {
				s += "[" + l + "]"
			}
			if fk := t.fkOf(c.name); fk != nil {
				s += "->" + fk.to
				if fk.unchecked != "" {
					s += "(unchecked)"
				}
			}
			if c.name == t.parent {
				s += "(parent)"
			}
			cs = append(cs, s)
		}
		kind := map[int]string{gkGlobal: "global", gkLevel: "level", gkTenant: "tenant", gkChild: "child", gkByRef: "byref"}[t.kind]
		fmt.Fprintf(&b, "  %s %s(%s)\n", kind, t.name, strings.Join(cs, ", "))
	}
	return b.String()
}

// gstate holds every table's rows, each aligned with the table's columns.
type gstate map[string][][]any

// vkey is a value with its type, so 7 and "7" stay apart.
func vkey(v any) string { return fmt.Sprintf("%T:%v", v, v) }

func (st gstate) find(table string, id any) []any {
	if id == nil {
		return nil
	}
	k := vkey(id)
	for _, r := range st[table] {
		if vkey(r[0]) == k {
			return r
		}
	}
	return nil
}

// textID makes text ids that look like integers half of the time, so a
// text level's "4" meets an integer level's 4.
func textID(n int) string {
	if n%2 == 0 {
		return strconv.Itoa(n)
	}
	return "k" + strconv.Itoa(n)
}

func idValue(text bool, n int) any {
	if text {
		return textID(n)
	}
	return int64(n)
}

var gvocab = []any{"alpha", "bravo", "7", "k1", nil}
var gnums = []any{int64(1), int64(2), int64(3), int64(7), int64(100), nil}

// genData draws the rows: three tenants at the root level, each level
// table's rows round-robin over their parents, so consecutive ids belong
// to different tenants.
func genData(r *rand.Rand, g *ggraph) gstate {
	st := gstate{}
	for _, t := range g.tables {
		seq := r.IntN(3) // every table's ids start near 1: the same ids everywhere
		next := func() any { seq++; return idValue(t.cols[0].text, seq) }
		plain := func(row []any, k int) {
			row[t.idx("v")] = gvocab[(k+r.IntN(2))%len(gvocab)]
			row[t.idx("n")] = gnums[r.IntN(len(gnums))]
		}
		pick := func(table string) any {
			rows := st[table]
			return rows[r.IntN(len(rows))][0]
		}
		switch t.kind {
		case gkByRef:
			for k := 6 + r.IntN(4); k > 0; k-- {
				row := make([]any, len(t.cols))
				row[0] = next()
				plain(row, k)
				st[t.name] = append(st[t.name], row)
			}
			continue
		case gkGlobal:
			for k := 0; k < 3; k++ {
				st[t.name] = append(st[t.name], []any{next(), []string{"red", "green", "blue"}[k]})
			}
			continue
		case gkLevel:
			if t.parent == "" && t.fkOf("up") == nil {
				for k := 0; k < 3; k++ {
					row := make([]any, len(t.cols))
					row[0] = next()
					plain(row, k)
					st[t.name] = append(st[t.name], row)
				}
				continue
			}
			up := t.fkOf("up").to
			for rep, k := 1+r.IntN(2), 0; rep > 0; rep-- {
				for _, p := range st[up] {
					row := make([]any, len(t.cols))
					row[0], row[1] = next(), p[0]
					plain(row, k)
					k++
					st[t.name] = append(st[t.name], row)
				}
			}
			continue
		}
		n := 6 + r.IntN(7)
		for k := 0; k < n; k++ {
			row := make([]any, len(t.cols))
			row[0] = next()
			for _, c := range t.cols[1:] {
				i := t.idx(c.name)
				fk := t.fkOf(c.name)
				switch {
				case c.name == "v" || c.name == "n":
				case c.name == "pid":
					ps := st[fk.to]
					row[i] = ps[(k+r.IntN(2))%len(ps)][0]
				case t.levels[c.name] != "" && fk != nil:
					ps := st[fk.to]
					row[i] = ps[k%len(ps)][0]
				case t.levels[c.name] != "":
					// No foreign key: any value of the level's kind, now
					// and then one no level table holds.
					lv := "lv" + strings.TrimPrefix(t.levels[c.name], "l")
					if r.IntN(5) == 0 {
						row[i] = idValue(c.text, 90+k)
					} else {
						row[i] = pick(lv)
					}
				case c.name == "xid":
					row[i] = nil
					if x := r.IntN(10); x < 4 {
						row[i] = sameTenantRow(r, g, st, t, row, fk.to)
					} else if x < 8 {
						row[i] = pick(fk.to)
					}
				case c.name == "gid":
					if r.IntN(3) != 0 {
						row[i] = pick(fk.to)
					}
				case g.by[fk.to].kind == gkByRef:
					// The last two rows stay unreferenced; the others are
					// drawn at random, so some end up shared by tenants.
					if rows := st[fk.to]; r.IntN(3) != 0 {
						row[i] = rows[r.IntN(len(rows)-2)][0]
					}
				}
			}
			plain(row, k)
			st[t.name] = append(st[t.name], row)
		}
	}
	return st
}

// sameTenantRow picks a row of table to that shares a level value with
// row (the same tenant), or any row of to when none does.
func sameTenantRow(r *rand.Rand, g *ggraph, st gstate, t *gtable, row []any, to string) any {
	mine := g.rowLevels(st, t.name, row)
	var same []any
	for _, cand := range st[to] {
		for l, v := range g.rowLevels(st, to, cand) {
			if mine[l] == v {
				same = append(same, cand[0])
				break
			}
		}
	}
	if len(same) == 0 {
		return st[to][r.IntN(len(st[to]))][0]
	}
	return same[r.IntN(len(same))]
}

func canonLevel(v any) string {
	switch x := v.(type) {
	case int64:
		return strconv.FormatInt(x, 10)
	case string:
		return x
	}
	return fmt.Sprint(v)
}

// rowLevels is the value of every level a row reaches: its own level
// columns first, then, for the levels it lacks, its parent row's.
func (g *ggraph) rowLevels(st gstate, table string, row []any) map[string]string {
	out := map[string]string{}
	for depth := 0; row != nil && depth < 16; depth++ {
		t := g.by[table]
		for c, l := range t.levels {
			if _, have := out[l]; !have && row[t.idx(c)] != nil {
				out[l] = canonLevel(row[t.idx(c)])
			}
		}
		if t.parent == "" {
			break
		}
		fk := t.fkOf(t.parent)
		table, row = fk.to, st.find(fk.to, row[t.idx(t.parent)])
	}
	return out
}

// tableLevels is the set of levels the rows of table reach, read from
// the graph alone the way rowLevels reads a row: its own level columns,
// then its scope parent's, up the parent path.
func (g *ggraph) tableLevels(table string) map[string]bool {
	out := map[string]bool{}
	for depth := 0; table != "" && depth < 16; depth++ {
		t := g.by[table]
		for _, l := range t.levels {
			out[l] = true
		}
		if t.parent == "" {
			break
		}
		table = t.fkOf(t.parent).to
	}
	return out
}

// grantAdmits: a plain grant admits a row whose value at its level is
// the grant's id; a grant confined to ancestors, one whose values at every
// level it names are those ids.
func grantAdmits(gr scope.Grant, lv map[string]string) bool {
	named := map[string]string{gr.Level: gr.ID}
	for _, w := range gr.Within {
		named[w.Level] = w.ID
	}
	for l, id := range named {
		if v, ok := lv[l]; !ok || v != id {
			return false
		}
	}
	return true
}

// visibleRows returns, per table, the vkeys of the ids of the rows
// grants may see: every row of a global table; a row of a tenant table
// some grant admits; a row of a table owned by reference that a visible
// row references through a checked foreign key.
func (g *ggraph) visibleRows(st gstate, grants []scope.Grant) map[string]map[string]bool {
	out := map[string]map[string]bool{}
	for _, t := range g.tables {
		out[t.name] = map[string]bool{}
	}
	for _, t := range g.tables {
		if t.kind == gkByRef {
			continue
		}
		for _, row := range st[t.name] {
			ok := t.kind == gkGlobal
			if !ok {
				lv := g.rowLevels(st, t.name, row)
				ok = slices.ContainsFunc(grants, func(gr scope.Grant) bool { return grantAdmits(gr, lv) })
			}
			if !ok {
				continue
			}
			out[t.name][vkey(row[0])] = true
			for _, fk := range t.fks {
				if v := row[t.idx(fk.col)]; g.by[fk.to].kind == gkByRef && fk.unchecked == "" && v != nil {
					out[fk.to][vkey(v)] = true
				}
			}
		}
	}
	return out
}

// referrers returns the rows (as "table id") that reference row id of
// table to, a table owned by reference, through checked foreign keys.
func (g *ggraph) referrers(st gstate, to string, id any) [][2]any {
	var out [][2]any
	for _, t := range g.tables {
		for _, fk := range t.fks {
			if fk.to != to || fk.unchecked != "" {
				continue
			}
			for _, r := range st[t.name] {
				if v := r[t.idx(fk.col)]; v != nil && vkey(v) == vkey(id) {
					out = append(out, [2]any{t.name, r[0]})
				}
			}
		}
	}
	return out
}

// filter keeps the visible rows.
func (st gstate) filter(vis map[string]map[string]bool) gstate {
	out := gstate{}
	for table, rows := range st {
		for _, r := range rows {
			if vis[table][vkey(r[0])] {
				out[table] = append(out[table], slices.Clone(r))
			}
		}
	}
	return out
}

// genScopes draws scopes from the data: a root tenant, a root tenant with
// a deeper grant of another tenant, a deeper grant alone, grants confined
// to ancestors (matching and not), ids that match nothing.
func genScopes(r *rand.Rand, g *ggraph, st gstate) [][]scope.Grant {
	pick := func(i int) (string, []any) {
		rows := st[fmt.Sprintf("lv%d", i)]
		row := rows[r.IntN(len(rows))]
		return canonLevel(row[0]), row
	}
	l := func(i int) string { return g.levels[i].Name }
	last := len(g.levels) - 1
	roots := st["lv0"]
	a, b := canonLevel(roots[0][0]), canonLevel(roots[1][0])
	out := [][]scope.Grant{{{Level: l(0), ID: a}}}
	if last > 0 {
		id, _ := pick(last)
		out = append(out, []scope.Grant{{Level: l(0), ID: b}, {Level: l(last), ID: id}})
		i := 1 + r.IntN(last)
		id, row := pick(i)
		lv := g.rowLevels(st, fmt.Sprintf("lv%d", i), row)
		anc := lv[l(i-1)]
		if r.IntN(3) == 0 {
			anc, _ = pick(i - 1) // often another ancestor: admits nothing
		}
		out = append(out, []scope.Grant{{Level: l(i), ID: id, Within: []scope.Grant{{Level: l(i - 1), ID: anc}}}})
		id2, _ := pick(i)
		out = append(out, []scope.Grant{{Level: l(i), ID: id2}, {Level: l(0), ID: "zz9"}})
	} else {
		out = append(out, []scope.Grant{{Level: l(0), ID: b}, {Level: l(0), ID: "zz9"}})
	}
	if g.levels[0].Key == builder.IntKey {
		out = append(out, []scope.Grant{{Level: l(0), ID: "0" + a}, {Level: l(0), ID: canonLevel(roots[2][0])}})
	}
	return out
}

// quiet drops the DB's log: refused writes and shared keys are what the
// fuzz is about, and thousands of them would bury the test's output.
var quiet = slog.New(slog.DiscardHandler)

var copyN atomic.Int64

// gdb is one graph's shared database, guarded.
type gdb struct {
	g     *ggraph
	sch   *builder.Schema
	raw   *sql.DB
	db    *guardedsql.DB
	gsch  *builder.Schema // every table global: for the filtered copies
	dir   string
	wcopy *sql.DB // the copy for writes (writeCopy)
}

func openGraphDB(t testing.TB, g *ggraph, st gstate) *gdb {
	t.Helper()
	ctx := context.Background()
	// Not t.TempDir: a fuzz input's test name holds '#', which would end
	// the file: URI's path.
	dir, err := os.MkdirTemp("", "tmgraph")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	conn, err := sqlite.NewConnector("file:" + filepath.Join(dir, "shared.db") + "?_pragma=foreign_keys(1)&_pragma=busy_timeout(5000)&_pragma=synchronous(0)&_pragma=journal_mode(memory)&_txlock=immediate")
	if err != nil {
		t.Fatal(err)
	}
	raw := sql.OpenDB(conn)
	t.Cleanup(func() { raw.Close() })
	if err := loadGraph(ctx, raw, g, st); err != nil {
		t.Fatalf("%v\n%s", err, g)
	}
	sch, err := builder.NewSchema(g.def(false))
	if err != nil {
		t.Fatalf("%v\n%s", err, g)
	}
	db, err := gsqlite.New(ctx, raw, sch, guardedsql.Options{Logger: quiet})
	if err != nil {
		t.Fatalf("%v\n%s", err, g)
	}
	gsch, err := builder.NewSchema(g.def(true))
	if err != nil {
		t.Fatal(err)
	}
	return &gdb{g: g, sch: sch, raw: raw, db: db, gsch: gsch, dir: dir}
}

func loadGraph(ctx context.Context, raw *sql.DB, g *ggraph, st gstate) error {
	for _, s := range g.ddl() {
		if _, err := raw.ExecContext(ctx, s); err != nil {
			return fmt.Errorf("%s: %w", s, err)
		}
	}
	return insertState(ctx, raw, g, st)
}

func insertState(ctx context.Context, raw *sql.DB, g *ggraph, st gstate) error {
	tx, err := raw.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	for _, t := range g.tables {
		if len(st[t.name]) == 0 {
			continue
		}
		ph := strings.TrimSuffix(strings.Repeat("?, ", len(t.cols)), ", ")
		for _, row := range st[t.name] {
			if _, err := tx.ExecContext(ctx, `INSERT INTO "`+t.name+`" VALUES (`+ph+`)`, row...); err != nil {
				return fmt.Errorf("%s %v: %w", t.name, row, err)
			}
		}
	}
	return tx.Commit()
}

// dump reads every table unguarded.
func dumpState(ctx context.Context, raw *sql.DB, g *ggraph) (gstate, error) {
	st := gstate{}
	for _, t := range g.tables {
		rows, err := raw.QueryContext(ctx, `SELECT * FROM "`+t.name+`" ORDER BY "id"`)
		if err != nil {
			return nil, err
		}
		for rows.Next() {
			vals := make([]any, len(t.cols))
			ptrs := make([]any, len(vals))
			for i := range vals {
				ptrs[i] = &vals[i]
			}
			if err := rows.Scan(ptrs...); err != nil {
				rows.Close()
				return nil, err
			}
			st[t.name] = append(st[t.name], vals)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, err
		}
	}
	return st, nil
}

// writeCopy returns the graph's copy for writes, emptied and refilled
// with st: one database per graph, reused by every write.
func (d *gdb) writeCopy(t testing.TB, st gstate) *sql.DB {
	t.Helper()
	ctx := context.Background()
	if d.wcopy == nil {
		d.wcopy, _ = d.copyDB(t, st)
		return d.wcopy
	}
	for _, tb := range d.g.tables {
		if _, err := d.wcopy.ExecContext(ctx, `DELETE FROM "`+tb.name+`"`); err != nil {
			t.Fatal(err)
		}
	}
	if err := insertState(ctx, d.wcopy, d.g, st); err != nil {
		t.Fatal(err)
	}
	return d.wcopy
}

// copyDB writes a new database holding st (foreign keys off: visible rows
// may reference hidden ones). guarded is the copy guarded with every table
// global, so builder statements run on it with no predicate.
func (d *gdb) copyDB(t testing.TB, st gstate) (raw *sql.DB, guarded *guardedsql.DB) {
	t.Helper()
	// In memory, shared by the pool's connections under a name no other
	// copy uses.
	copyN.Add(1)
	raw, err := sql.Open("sqlite", fmt.Sprintf("file:tmgraphcopy%d?mode=memory&cache=shared", copyN.Load()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { raw.Close() })
	if err := loadGraph(context.Background(), raw, d.g, st); err != nil {
		t.Fatal(err)
	}
	// Deliberately at odds with the catalog (tenant tables declared
	// global, foreign keys off), so without the start-up check.
	db, err := guardedsql.NewForTest(sqlengine.StdPool(raw, false), sqlitedialect.Dialect{}, d.gsch, guardedsql.Options{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	return raw, db
}
