package conformance

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/tenantmcp/tenantmcp/builder"
)

// SyntheticSeed returns a Seed function for a schema graph alone: it
// creates the graph's tables (columns typed from TableDef.Types, else
// integer keys, level columns of their level's key type, foreign keys of
// the referenced column's type, and text elsewhere; primary, unique and
// foreign-key constraints as declared, with TableDef.Unique) and fills them
// with generated rows: three tenants at the root level, each parent row
// with 2×scale children, interleaved so that consecutive integer keys
// belong to different tenants, and plain columns drawn from small
// vocabularies that every tenant shares. Other tenant-bound foreign keys
// point into the same tenant where the data allows, and agree with the
// row's other key columns.
//
// Composite keys are numbered within the rest of the key: a
// tenant-prefixed key (company_id, id) gets ids 1, 2, … in every company,
// so the same id exists in every tenant. A plain column in a declared
// unique key is numbered the same way within that key's other columns
// (UNIQUE(company_id, email): "email-1", "email-2", … in every company),
// so values repeat across tenants but never within one. A column whose
// declared type is a timestamp, date, decimal or UUID gets values of that
// type (numbered the same way when it is in a unique key: one second, one
// day or one unit apart, or the n-th UUID). A unique key made only of
// foreign-key and level columns cannot be varied; use your own Seed for
// such a schema.
func SyntheticSeed(def builder.SchemaDef, scale int) func(ctx context.Context, db *sql.DB, engine Engine) (*Dataset, error) {
	return func(ctx context.Context, db *sql.DB, engine Engine) (*Dataset, error) {
		g, err := newGraph(def)
		if err != nil {
			return nil, err
		}
		sy := &synth{g: g, def: def, engine: engine, scale: max(scale, 1), kinds: map[string]string{}, counters: map[string]int64{}}
		order, err := sy.order()
		if err != nil {
			return nil, err
		}
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			return nil, err
		}
		defer tx.Rollback()
		for _, name := range order {
			if _, err := tx.ExecContext(ctx, sy.ddl(name)); err != nil {
				return nil, fmt.Errorf("synthetic seed: creating %s: %w", name, err)
			}
		}
		d := &Dataset{Tables: map[string][]Row{}}
		for _, name := range order {
			rows, err := sy.rows(name, d)
			if err != nil {
				return nil, err
			}
			t := g.tables[name]
			for _, r := range rows {
				cols := make([]string, len(t.cols))
				phs := make([]string, len(t.cols))
				vals := make([]any, len(t.cols))
				for i, c := range t.cols {
					cols[i], phs[i], vals[i] = engine.quote(c), engine.ph(i+1), r[c]
				}
				if _, err := tx.ExecContext(ctx, "INSERT INTO "+engine.quote(name)+" ("+strings.Join(cols, ", ")+") VALUES ("+strings.Join(phs, ", ")+")", vals...); err != nil {
					return nil, fmt.Errorf("synthetic seed: inserting into %s: %w", name, err)
				}
				d.Add(name, r)
			}
		}
		return d, tx.Commit()
	}
}

type synth struct {
	g      *graph
	def    builder.SchemaDef
	engine Engine
	scale  int
	kinds  map[string]string // "table.col" -> "int" | "text"
	seq    int64
	// counters numbers the rows of a key within the values of its other
	// columns: "table\x00cols\x00values" -> last number.
	counters map[string]int64
}

// order lists the tables parents first; a foreign key from a table to
// itself is left NULL, any other cycle is refused.
func (sy *synth) order() ([]string, error) {
	var out []string
	state := map[string]int{}
	var visit func(string) error
	visit = func(n string) error {
		switch state[n] {
		case 1:
			return fmt.Errorf("synthetic seed: foreign-key cycle through %s; supply a Seed function", n)
		case 2:
			return nil
		}
		state[n] = 1
		for _, f := range sy.g.tables[n].fks {
			if f.to != n {
				if err := visit(f.to); err != nil {
					return err
				}
			}
		}
		state[n] = 2
		out = append(out, n)
		return nil
	}
	for _, n := range sy.g.names {
		if err := visit(n); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// kind is "int" or "text" for a column, following foreign keys.
func (sy *synth) kind(table, col string) string {
	key := table + "." + col
	if k, ok := sy.kinds[key]; ok {
		return k
	}
	sy.kinds[key] = "text" // breaks cycles
	t := sy.g.tables[table]
	k := "text"
	if typ := strings.ToLower(sy.declType(table, col)); typ != "" {
		if strings.Contains(typ, "int") {
			k = "int"
		}
	} else if f := fkOf(t, col); f != nil && f.to != table {
		k = sy.kind(f.to, f.ref[slices.Index(f.cols, col)])
	} else if lc := levelOf(t, col); lc != "" {
		if sy.g.levels[sy.g.levelIndex(lc)].Key == builder.IntKey {
			k = "int"
		}
	} else if slices.Contains(t.pk, col) {
		k = "int" // an id, alone or within a composite key
	}
	sy.kinds[key] = k
	return k
}

// typed is the kind of a column whose declared type (TableDef.Types) is a
// timestamp, date, decimal or UUID, whose values must be of that type;
// "" for every other column.
func (sy *synth) typed(table, col string) string {
	switch k := typeKind(sy.declType(table, col)); k {
	case kindTime, kindDate, kindDecimal, kindUUID:
		return k
	}
	return ""
}

func (sy *synth) declType(table, col string) string {
	for _, td := range sy.def.Tables {
		if td.Name == table {
			return td.Types[col]
		}
	}
	return ""
}

func fkOf(t *tinfo, col string) *fkey {
	for _, f := range t.fks {
		if slices.Contains(f.cols, col) {
			return f
		}
	}
	return nil
}

func levelOf(t *tinfo, col string) string {
	for _, lc := range t.levelCols {
		if lc.col == col {
			return lc.level
		}
	}
	return ""
}

func (sy *synth) sqlType(table, col string) string {
	if typ := sy.declType(table, col); typ != "" {
		return typ
	}
	if sy.kind(table, col) == "int" {
		if sy.engine == SQLite {
			return "INTEGER"
		}
		return "BIGINT"
	}
	if sy.engine == MySQL {
		return "VARCHAR(191)"
	}
	return "TEXT"
}

func (sy *synth) ddl(name string) string {
	t := sy.g.tables[name]
	q := sy.engine.quote
	var parts []string
	for _, c := range t.cols {
		col := q(c) + " " + sy.sqlType(name, c)
		if slices.Contains(t.pk, c) || levelOf(t, c) != "" || (t.parent != nil && slices.Contains(t.parent.cols, c)) {
			col += " NOT NULL"
		}
		parts = append(parts, col)
	}
	quoteAll := func(cs []string) string {
		out := make([]string, len(cs))
		for i, c := range cs {
			out[i] = q(c)
		}
		return strings.Join(out, ", ")
	}
	if len(t.pk) > 0 {
		parts = append(parts, "PRIMARY KEY ("+quoteAll(t.pk)+")")
	}
	// The declared unique keys, and columns other tables reference, which
	// must be unique.
	uniques := slices.Clone(t.unique)
	for _, other := range sy.g.names {
		for _, f := range sy.g.tables[other].fks {
			if f.to == name && !slices.Equal(f.ref, t.pk) {
				uniques = append(uniques, f.ref)
			}
		}
	}
	done := map[string]bool{}
	for _, u := range uniques {
		if k := strings.Join(u, "\x00"); !done[k] {
			done[k] = true
			parts = append(parts, "UNIQUE ("+quoteAll(u)+")")
		}
	}
	for _, f := range t.fks {
		parts = append(parts, "FOREIGN KEY ("+quoteAll(f.cols)+") REFERENCES "+q(f.to)+" ("+quoteAll(f.ref)+")")
	}
	return "CREATE TABLE " + q(name) + " (\n  " + strings.Join(parts, ",\n  ") + "\n)"
}

var vocabulary = []string{"alpha", "bravo", "charlie", "delta", "echo"}

// rows generates the rows of one table, given its parents' rows in d.
func (sy *synth) rows(name string, d *Dataset) ([]Row, error) {
	t := sy.g.tables[name]
	var gen *fkey // the foreign key whose rows this table's rows hang under
	if t.parent != nil {
		gen = t.parent
	} else if !t.global {
		for _, f := range sy.g.tenantFKs(t) {
			if f.to != name {
				gen = f
				break
			}
		}
	}
	var parents []Row
	n := 3
	if gen != nil {
		parents = d.Tables[gen.to]
		if len(parents) == 0 {
			return nil, fmt.Errorf("synthetic seed: %s hangs under %s, which has no rows", name, gen.to)
		}
		n = 2 * sy.scale
	} else if !t.global {
		n = 3 // root tenants
	}
	var out []Row
	// Round-robin over parents: consecutive keys belong to different
	// tenants.
	for j := 0; j < n; j++ {
		for pi := 0; pi < max(len(parents), 1); pi++ {
			sy.seq++
			r := Row{}
			var parent Row
			if gen != nil {
				parent = parents[pi]
				for i, c := range gen.cols {
					r[c] = parent[gen.ref[i]]
				}
			}
			// Keys and references first, then the numbered columns,
			// which are numbered within the values of their key's other
			// columns.
			for _, c := range t.cols {
				if _, set := r[c]; set || numberedKey(t, c) != nil {
					continue
				}
				kind := sy.kind(name, c)
				switch {
				case fkOf(t, c) != nil:
					f := fkOf(t, c)
					if f.to == name {
						r[c] = nil
						continue
					}
					ref := sy.pickRef(f, r, parent, gen, d, j+pi)
					for i, fc := range f.cols {
						if _, set := r[fc]; !set {
							r[fc] = ref[f.ref[i]]
						}
					}
				case levelOf(t, c) != "":
					lvl := levelOf(t, c)
					if v, ok := sy.inherit(gen, parent, lvl, d); ok {
						r[c] = v
					} else {
						r[c] = sy.value(kind, lvl, sy.seq)
					}
				case kind == "int":
					r[c] = int64((j+1)*100 + pi%3)
				case sy.typed(name, c) != "":
					// Shared across tenants, like the vocabulary.
					r[c] = typedValue(sy.typed(name, c), c, 0, int64(j+pi%3+1))
				default:
					r[c] = c + "-" + vocabulary[(j+pi)%len(vocabulary)]
				}
			}
			for _, c := range t.cols {
				key := numberedKey(t, c)
				if key == nil {
					continue
				}
				prefix := c
				if slices.Equal(key, t.pk) {
					prefix = name
					if lvl := levelOf(t, c); lvl != "" {
						prefix = lvl
					}
				}
				n := sy.next(name, key, c, r)
				if k := sy.typed(name, c); k != "" {
					r[c] = typedValue(k, prefix, 0, n)
				} else {
					r[c] = sy.value(sy.kind(name, c), prefix, n)
				}
			}
			out = append(out, r)
		}
	}
	return out, nil
}

// numberedKey returns the key within which column c of t is numbered:
// the primary key for a key column that no foreign key fills, else the
// smallest declared unique key holding c if c is a plain column; nil for
// every other column.
func numberedKey(t *tinfo, c string) []string {
	if fkOf(t, c) != nil {
		return nil
	}
	if slices.Contains(t.pk, c) {
		return t.pk
	}
	if levelOf(t, c) != "" {
		return nil
	}
	var best []string
	for _, u := range t.unique {
		if slices.Contains(u, c) && (best == nil || len(u) < len(best)) {
			best = u
		}
	}
	return best
}

// next numbers column c of key in table within the values r already
// holds for the key's other columns: 1, 2, … per distinct combination, so
// that (company_id, id) restarts at 1 in every company and the key stays
// unique.
func (sy *synth) next(table string, key []string, c string, r Row) int64 {
	parts := []string{table, strings.Join(key, ","), c}
	for _, k := range key {
		if v, set := r[k]; set && k != c {
			parts = append(parts, k+"="+canon(v))
		}
	}
	id := strings.Join(parts, "\x00")
	sy.counters[id]++
	return sy.counters[id]
}

func (sy *synth) value(kind, prefix string, n int64) any {
	if kind == "int" {
		return n
	}
	return prefix + "-" + strconv.FormatInt(n, 10)
}

// inherit finds the value of level lvl on the parent's scope path.
func (sy *synth) inherit(gen *fkey, parent Row, lvl string, d *Dataset) (any, bool) {
	for f, row := gen, parent; f != nil && row != nil; {
		pt := sy.g.tables[f.to]
		for _, lc := range pt.levelCols {
			if lc.level == lvl {
				return row[lc.col], true
			}
		}
		next := pt.parent
		if next == nil {
			return nil, false
		}
		var found Row
		for _, cand := range d.Tables[next.to] {
			if Key(cand, next.ref) == Key(row, next.cols) {
				found = cand
				break
			}
		}
		f, row = next, found
	}
	return nil, false
}

// pickRef chooses the row a non-generating foreign key points at: one
// that agrees with the key columns r already holds (a composite key
// (company_id, ad_id) whose company_id came with the parent), and in the
// same tenant subtree as the new row where there is one.
func (sy *synth) pickRef(f *fkey, r, parent Row, gen *fkey, d *Dataset, i int) Row {
	var cands []Row
	for _, c := range d.Tables[f.to] {
		agrees := true
		for k, fc := range f.cols {
			if v, set := r[fc]; set && canon(v) != canon(c[f.ref[k]]) {
				agrees = false
			}
		}
		if agrees {
			cands = append(cands, c)
		}
	}
	if len(cands) == 0 {
		return Row{}
	}
	if sy.g.tables[f.to].global || gen == nil {
		return cands[i%len(cands)]
	}
	// Levels of the new row, through its generating parent.
	want := map[string]string{}
	for _, l := range sy.g.levels {
		if v, ok := sy.inherit(gen, parent, l.Name, d); ok {
			want[l.Name] = canon(v)
		}
	}
	var best []Row
	bestDepth := -1
	for _, c := range cands {
		depth := -1
		for li := len(sy.g.levels) - 1; li >= 0; li-- {
			l := sy.g.levels[li].Name
			v, ok := sy.levelOfRow(f.to, c, l, d)
			if ok && want[l] == canon(v) {
				depth = li
				break
			}
		}
		switch {
		case depth > bestDepth:
			best, bestDepth = []Row{c}, depth
		case depth == bestDepth:
			best = append(best, c)
		}
	}
	return best[i%len(best)]
}

func (sy *synth) levelOfRow(table string, row Row, lvl string, d *Dataset) (any, bool) {
	t := sy.g.tables[table]
	for _, lc := range t.levelCols {
		if lc.level == lvl {
			return row[lc.col], true
		}
	}
	if t.parent == nil {
		return nil, false
	}
	return sy.inherit(t.parent, func() Row {
		for _, c := range d.Tables[t.parent.to] {
			if Key(c, t.parent.ref) == Key(row, t.parent.cols) {
				return c
			}
		}
		return nil
	}(), lvl, d)
}

// ReadGraph reads a schema graph from a JSON file: a builder.SchemaDef
// whose fields are named as in Go (matched without regard to case), with
// a level's key given as "int" or "text":
//
//	{"levels": [{"name": "org", "key": "int"}],
//	 "tables": [{"name": "projects", "columns": ["id", "org_id", "title"],
//	             "primaryKey": ["id"], "unique": [["org_id", "title"]],
//	             "levels": {"org_id": "org"}}, …]}
//
// testdata/adanalytics.json in this package is a graph with composite
// keys, composite foreign keys and per-tenant unique keys.
func ReadGraph(path string) (builder.SchemaDef, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return builder.SchemaDef{}, err
	}
	var doc struct {
		Levels []struct {
			Name string
			Key  json.RawMessage
		}
		Tables    []builder.TableDef
		Functions []builder.FuncDef // as json.Marshal writes a SchemaDef
	}
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&doc); err != nil {
		return builder.SchemaDef{}, fmt.Errorf("conformance: schema graph %s: %w", path, err)
	}
	def := builder.SchemaDef{Tables: doc.Tables, Functions: doc.Functions}
	for _, l := range doc.Levels {
		var k builder.KeyType
		switch strings.Trim(strings.ToLower(string(l.Key)), `"`) {
		case "int", "integer", strconv.Itoa(int(builder.IntKey)):
			k = builder.IntKey
		case "text", "string", strconv.Itoa(int(builder.TextKey)):
			k = builder.TextKey
		default:
			return builder.SchemaDef{}, fmt.Errorf("conformance: schema graph %s: level %q: key %s is neither \"int\" nor \"text\"", path, l.Name, l.Key)
		}
		def.Levels = append(def.Levels, builder.Level{Name: l.Name, Key: k})
	}
	if _, err := builder.NewSchema(def); err != nil {
		return builder.SchemaDef{}, fmt.Errorf("conformance: schema graph %s: %w", path, err)
	}
	return def, nil
}
