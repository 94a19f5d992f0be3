package guardedsql_test

// The differential fuzzers of fuzz_test.go and fuzz_writes_test.go, over
// random schema graphs (fuzz_graph_gen_test.go) instead of the hotel's:
//
//   - reads (FuzzGraphRead): a random builder query, guarded on the shared
//     database, returns exactly the rows the same query returns unguarded
//     on a copy holding only the caller's rows, computed in Go from the
//     seed data and the graph's foreign keys;
//   - writes (FuzzGraphWrite): a random INSERT, UPDATE or DELETE, guarded
//     on the shared database, changes exactly what the same statement,
//     unguarded, changes on that copy when the rules (computed in Go) allow
//     it, and nothing when they do not; in every case no row outside the
//     caller's scope changes, and every row it inserts is in its scope.
//
// TestGraphDifferential runs 200 random graphs through both.

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/tenantmcp/tenantmcp/builder"
	"github.com/tenantmcp/tenantmcp/guardedsql"
	"github.com/tenantmcp/tenantmcp/internal/guardfault"
	"github.com/tenantmcp/tenantmcp/scope"
)

// ---- reads

type gq struct {
	g      *fgen
	gr     *ggraph
	sch    *builder.Schema
	vals   map[string][]any // "table.col" -> values the data holds
	nalias int
}

var gjunk = []any{int64(1), int64(2), int64(4), int64(7), int64(12), "k1", "k3", "2", "alpha", "zz9", int64(-1)}

func columnValues(g *ggraph, st gstate) map[string][]any {
	out := map[string][]any{}
	for _, t := range g.tables {
		for i, c := range t.cols {
			seen := map[string]bool{}
			for _, r := range st[t.name] {
				if v := r[i]; v != nil && !seen[vkey(v)] {
					seen[vkey(v)] = true
					out[t.name+"."+c.name] = append(out[t.name+"."+c.name], v)
				}
			}
		}
	}
	return out
}

func (q *gq) ref(table string) fref {
	q.nalias++
	return fref{q.sch.Table(table).As(fmt.Sprintf("t%d", q.nalias)), table}
}

func (q *gq) colName(table string) string {
	cs := q.gr.by[table].cols
	return cs[q.g.n(len(cs))].name
}

func (q *gq) valueFor(table, col string) any {
	if vs := q.vals[table+"."+col]; len(vs) > 0 && q.g.n(4) != 0 {
		return vs[q.g.n(len(vs))]
	}
	return gjunk[q.g.n(len(gjunk))]
}

func (q *gq) pred(in []fref, depth int) builder.Pred {
	r := in[q.g.n(len(in))]
	cname := q.colName(r.table)
	c := r.t.Col(cname)
	v := func() any { return q.valueFor(r.table, cname) }
	switch q.g.n(14) {
	case 0, 1:
		return c.Eq(v())
	case 2:
		return c.Ne(v())
	case 3:
		return c.Lt(v())
	case 4:
		return c.Ge(v())
	case 5:
		return c.In(v(), v(), v())
	case 6:
		return c.IsNull()
	case 7:
		return builder.And(q.pred(in, depth), q.pred(in, depth))
	case 8:
		return builder.Or(q.pred(in, depth), q.pred(in, depth))
	case 9:
		return builder.Not(q.pred(in, depth))
	case 10:
		o := in[q.g.n(len(in))]
		return c.EqCol(o.t.Col(q.colName(o.table)))
	case 11, 12:
		if depth >= 2 {
			return c.IsNotNull()
		}
		sub := q.ref(q.gr.tables[q.g.n(len(q.gr.tables))].name)
		sb := builder.Select(sub.t.Col(q.colName(sub.table))).From(sub.t)
		if q.g.flip() {
			sb = sb.Where(q.pred([]fref{sub}, depth+1))
		}
		if q.g.flip() { // correlated
			o := in[q.g.n(len(in))]
			sb = sb.Where(sub.t.Col(q.colName(sub.table)).EqCol(o.t.Col(q.colName(o.table))))
		}
		sq, err := sb.Build()
		if err != nil {
			return builder.Pred{}
		}
		switch q.g.n(3) {
		case 0:
			return builder.Exists(sq)
		case 1:
			return c.NotInQuery(sq)
		}
		return c.InQuery(sq)
	}
	return c.IsNotNull()
}

// graphEdges lists every foreign key as a join edge.
func graphEdges(g *ggraph) []edge {
	var out []edge
	for _, t := range g.tables {
		for _, fk := range t.fks {
			out = append(out, edge{t.name, fk.col, fk.to, "id"})
		}
	}
	return out
}

// genGraphQuery decodes data into a query on g; it makes its choices from
// the graph alone, so the same data gives the same statement on the
// shared schema and on the all-global one.
func genGraphQuery(data []byte, g *ggraph, sch *builder.Schema, vals map[string][]any) (builder.Query, error) {
	q := &gq{g: &fgen{data: data}, gr: g, sch: sch, vals: vals}
	fg := q.g
	from := q.ref(g.tables[fg.n(len(g.tables))].name)
	refs := []fref{from}
	type join struct {
		r    fref
		on   builder.Pred
		left bool
	}
	var joins []join
	edges := graphEdges(g)
	for k := fg.n(4); k > 0; k-- {
		base := refs[fg.n(len(refs))]
		var cands []edge
		for _, e := range edges {
			if e.child == base.table || e.parent == base.table {
				cands = append(cands, e)
			}
		}
		var nr fref
		var on builder.Pred
		if len(cands) == 0 || fg.n(8) == 0 {
			nr = q.ref(base.table) // a join on a natural key
			c := q.colName(base.table)
			on = nr.t.Col(c).EqCol(base.t.Col(c))
		} else {
			e := cands[fg.n(len(cands))]
			if e.child == base.table {
				nr = q.ref(e.parent)
				on = nr.t.Col(e.pcol).EqCol(base.t.Col(e.ccol))
			} else {
				nr = q.ref(e.child)
				on = nr.t.Col(e.ccol).EqCol(base.t.Col(e.pcol))
			}
		}
		if fg.n(3) == 0 {
			on = builder.And(on, q.pred([]fref{nr, base}, 1))
		}
		joins = append(joins, join{nr, on, fg.flip()})
		refs = append(refs, nr)
	}
	var items []builder.Selectable
	var orders []builder.Order
	agg := fg.n(4) == 0
	var group builder.Expr
	if agg {
		group = from.t.Col(q.colName(from.table))
		items = append(items, group.As("g"))
		orders = append(orders, group.Asc())
		other := refs[fg.n(len(refs))]
		c := other.t.Col(q.colName(other.table))
		aggs := []builder.Expr{builder.CountAll(), builder.Count(c), builder.CountDistinct(c), builder.Min(c), builder.Max(c)}
		a := aggs[fg.n(len(aggs))]
		items = append(items, a.As("a"))
		orders = append(orders, a.Asc())
	} else {
		for i, r := range refs {
			e := r.t.Col("id")
			items = append(items, e.As(fmt.Sprintf("k%d", i)))
			orders = append(orders, e.Asc())
			if fg.flip() {
				x := r.t.Col(q.colName(r.table))
				items = append(items, x.As(fmt.Sprintf("x%d", i)))
				orders = append(orders, x.Asc())
			}
		}
	}
	sb := builder.Select(items...).From(from.t)
	for _, j := range joins {
		if j.left {
			sb = sb.LeftJoin(j.r.t, j.on)
		} else {
			sb = sb.Join(j.r.t, j.on)
		}
	}
	for k := []int{0, 0, 1, 1, 2}[fg.n(5)]; k > 0; k-- {
		sb = sb.Where(q.pred(refs, 0))
	}
	if agg {
		sb = sb.GroupBy(group)
	}
	if fg.n(3) == 0 {
		sb = sb.Distinct()
	}
	if fg.n(3) == 0 {
		sb = sb.OrderBy(orders...).Limit(1 + fg.n(5))
	}
	return sb.Build()
}

// graphCase is one graph, its data, its scopes and its shared database.
type graphCase struct {
	g      *ggraph
	st     gstate
	scopes [][]scope.Grant
	d      *gdb
	vals   map[string][]any
	// copies[i] is the filtered copy for scopes[i], built on first use;
	// valid while st is.
	copies map[int]*guardedsql.DB
	// counters
	reads, readRows, nonEmpty, writes, wrote, refused int
	// byRefRead: reads returning rows with a table owned by reference in
	// the statement; byRefWrote: writes of such a table's rows that
	// changed rows; claims: writes that set a reference to one (allowed
	// or not); heldBack: writes where the rules held back a row the
	// caller sees (shared, or a consistency path out of scope).
	byRefRead, byRefWrote, claims, heldBack int
	// vouched: rows written out of the writer's sight under a row it sees
	// (see ggraph.vouched).
	vouched int
}

func newGraphCase(t testing.TB, seed uint64) *graphCase {
	t.Helper()
	r := rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15))
	g := genGraph(r)
	g.seed = seed
	st := genData(r, g)
	c := &graphCase{g: g, st: st, scopes: genScopes(r, g, st), copies: map[int]*guardedsql.DB{}}
	c.d = openGraphDB(t, g, st)
	// Back from the database, with its types.
	var err error
	if c.st, err = dumpState(context.Background(), c.d.raw, g); err != nil {
		t.Fatal(err)
	}
	c.vals = columnValues(g, c.st)
	return c
}

func (c *graphCase) copyFor(t testing.TB, si int) *guardedsql.DB {
	if db, ok := c.copies[si]; ok {
		return db
	}
	vis := c.g.visibleRows(c.st, c.scopes[si])
	_, db := c.d.copyDB(t, c.st.filter(vis))
	c.copies[si] = db
	return db
}

// checkRead runs one query under scope si on the shared database and on
// the scope's filtered copy; it reports whether the query ran.
func (c *graphCase) checkRead(t testing.TB, si int, data []byte) (bool, error) {
	grants := c.scopes[si]
	ctx := grantCtx(grants...)
	q, err := genGraphQuery(data, c.g, c.d.sch, c.vals)
	if err != nil {
		if !errors.Is(err, builder.ErrInvalid) {
			return false, fmt.Errorf("Build: %w", err)
		}
		return false, nil
	}
	fq, err := genGraphQuery(data, c.g, c.d.gsch, c.vals)
	if err != nil {
		return false, fmt.Errorf("the generator is not deterministic: %w", err)
	}
	got, gerr := resultSet(ctx, c.d.db, q)
	want, werr := resultSet(ctx, c.copyFor(t, si), fq)
	if errors.Is(gerr, guardedsql.ErrInternal) {
		return false, fmt.Errorf("guard: %w", gerr)
	}
	text, args, _ := c.d.db.Render(ctx, q)
	if (gerr != nil) != (werr != nil) {
		return false, fmt.Errorf("%sscope %v: guarded err %v, filtered err %v\n%s\n%v", c.g, grants, gerr, werr, text, args)
	}
	if !slices.Equal(got, want) {
		return false, fmt.Errorf("%sscope %v: guarded result differs from the filtered copy\n got %v\nwant %v\n%s\n%v\nvisible: %v",
			c.g, grants, got, want, text, args, c.g.visibleRows(c.st, grants))
	}
	c.reads++
	c.readRows += len(got)
	if len(got) > 0 {
		c.nonEmpty++
		if slices.ContainsFunc(q.Tables(), func(r builder.TableRef) bool { return c.g.by[r.Name()].kind == gkByRef }) {
			c.byRefRead++
		}
	}
	return gerr == nil, nil
}

// ---- writes

// wpred is a write's WHERE clause, rendered both as a builder predicate
// (for the guard) and as SQL (for the copy, unguarded).
type wpred struct {
	op   string // eq ne lt in isnull not and or insub
	col  string
	vals []any
	kids []*wpred
	// insub: col IN (SELECT subCol FROM sub WHERE subWhere = subVal)
	sub, subCol, subWhere string
	subVal                any
}

func (p *wpred) build(sch *builder.Schema, table string) builder.Pred {
	t := sch.Table(table)
	c := t.Col(p.col)
	switch p.op {
	case "eq":
		return c.Eq(p.vals[0])
	case "ne":
		return c.Ne(p.vals[0])
	case "lt":
		return c.Lt(p.vals[0])
	case "in":
		return c.In(p.vals...)
	case "isnull":
		return c.IsNull()
	case "not":
		return builder.Not(p.kids[0].build(sch, table))
	case "and":
		return builder.And(p.kids[0].build(sch, table), p.kids[1].build(sch, table))
	case "or":
		return builder.Or(p.kids[0].build(sch, table), p.kids[1].build(sch, table))
	case "insub":
		s := sch.Table(p.sub).As("s1")
		sq, err := builder.Select(s.Col(p.subCol)).From(s).Where(s.Col(p.subWhere).Eq(p.subVal)).Build()
		if err != nil {
			return builder.Pred{}
		}
		return c.InQuery(sq)
	}
	panic(p.op)
}

func (p *wpred) sql(table string) (string, []any) {
	c := `"` + table + `"."` + p.col + `"`
	switch p.op {
	case "eq":
		return c + " = ?", p.vals
	case "ne":
		return c + " <> ?", p.vals
	case "lt":
		return c + " < ?", p.vals
	case "in":
		return c + " IN (" + strings.TrimSuffix(strings.Repeat("?, ", len(p.vals)), ", ") + ")", p.vals
	case "isnull":
		return c + " IS NULL", nil
	case "not":
		s, a := p.kids[0].sql(table)
		return "NOT (" + s + ")", a
	case "and", "or":
		s1, a1 := p.kids[0].sql(table)
		s2, a2 := p.kids[1].sql(table)
		return "((" + s1 + ") " + strings.ToUpper(p.op) + " (" + s2 + "))", append(slices.Clone(a1), a2...)
	case "insub":
		return c + ` IN (SELECT "s1"."` + p.subCol + `" FROM "` + p.sub + `" AS "s1" WHERE "s1"."` + p.subWhere + `" = ?)`, []any{p.subVal}
	}
	panic(p.op)
}

// wmut is one generated write.
type wmut struct {
	kind      string // insert update delete
	table     string
	cols      []string
	rows      [][]any
	set       []string
	setv      []any
	ids       []any
	where     *wpred
	expectOne bool
}

func (m *wmut) String() string {
	switch m.kind {
	case "insert":
		return fmt.Sprintf("INSERT INTO %s (%s) VALUES %v", m.table, strings.Join(m.cols, ", "), m.rows)
	case "update":
		s := fmt.Sprintf("UPDATE %s SET %v = %v WHERE id IN %v", m.table, m.set, m.setv, m.ids)
		if m.where != nil {
			w, a := m.where.sql(m.table)
			s += fmt.Sprintf(" AND %s %v", w, a)
		}
		return s + fmt.Sprintf(" (expect one: %v)", m.expectOne)
	}
	s := fmt.Sprintf("DELETE FROM %s WHERE id IN %v", m.table, m.ids)
	if m.where != nil {
		w, a := m.where.sql(m.table)
		s += fmt.Sprintf(" AND %s %v", w, a)
	}
	return s + fmt.Sprintf(" (expect one: %v)", m.expectOne)
}

func (m *wmut) build(sch *builder.Schema) (builder.Mutation, error) {
	t := sch.Table(m.table)
	switch m.kind {
	case "insert":
		ib := builder.InsertInto(t).Columns(m.cols...)
		for _, r := range m.rows {
			ib = ib.Values(r...)
		}
		return ib.Build()
	case "update":
		ub := builder.UpdateTable(t)
		for i, c := range m.set {
			ub = ub.Set(c, m.setv[i])
		}
		ub = ub.Where(t.Col("id").In(m.ids...))
		if m.where != nil {
			ub = ub.Where(m.where.build(sch, m.table))
		}
		if m.expectOne {
			ub = ub.ExpectOne()
		}
		return ub.Build()
	}
	db := builder.DeleteFrom(t).Where(t.Col("id").In(m.ids...))
	if m.where != nil {
		db = db.Where(m.where.build(sch, m.table))
	}
	if m.expectOne {
		db = db.ExpectOne()
	}
	return db.Build()
}

// whereRaw is the WHERE clause of an UPDATE or DELETE, as SQL.
func (m *wmut) whereRaw() (string, []any) {
	s := `"` + m.table + `"."id" IN (` + strings.TrimSuffix(strings.Repeat("?, ", len(m.ids)), ", ") + ")"
	args := slices.Clone(m.ids)
	if m.where != nil {
		w, a := m.where.sql(m.table)
		s += " AND " + w
		args = append(args, a...)
	}
	return s, args
}

// matchRaw returns the vkeys of the ids of the rows an UPDATE or DELETE
// matches on the copy, unguarded.
func (m *wmut) matchRaw(ctx context.Context, raw *sql.DB) ([]string, error) {
	w, args := m.whereRaw()
	rows, err := raw.QueryContext(ctx, `SELECT "id" FROM "`+m.table+`" WHERE `+w, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var id any
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		out = append(out, vkey(id))
	}
	return out, rows.Err()
}

// applyRaw runs m unguarded on the copy, in a transaction that an
// expect-one statement rolls back unless it touched exactly one row.
func (m *wmut) applyRaw(ctx context.Context, raw *sql.DB) (int64, error) {
	tx, err := raw.BeginTx(ctx, nil)
	if err != nil {
		return 0, err
	}
	defer tx.Rollback()
	var n int64
	switch m.kind {
	case "insert":
		ph := "(" + strings.TrimSuffix(strings.Repeat("?, ", len(m.cols)), ", ") + ")"
		for _, r := range m.rows {
			res, err := tx.ExecContext(ctx, `INSERT INTO "`+m.table+`" ("`+strings.Join(m.cols, `", "`)+`") VALUES `+ph, r...)
			if err != nil {
				return 0, err
			}
			k, _ := res.RowsAffected()
			n += k
		}
	default:
		var args []any
		s := `DELETE FROM "` + m.table + `"`
		if m.kind == "update" {
			var sets []string
			for _, c := range m.set {
				sets = append(sets, `"`+c+`" = ?`)
			}
			s = `UPDATE "` + m.table + `" SET ` + strings.Join(sets, ", ")
			args = append(args, m.setv...)
		}
		w, a := m.whereRaw()
		s += " WHERE " + w
		args = append(args, a...)
		res, err := tx.ExecContext(ctx, s, args...)
		if err != nil {
			return 0, err
		}
		n, _ = res.RowsAffected()
		if m.expectOne && n != 1 {
			return 0, fmt.Errorf("expected one row, %d", n)
		}
	}
	return n, tx.Commit()
}

// wgen draws writes from a byte stream, with values taken mostly from
// the data (so that writes hit rows, in and out of scope).
type wgen struct {
	g    *fgen
	gr   *ggraph
	st   gstate
	vis  map[string]map[string]bool
	vals map[string][]any
}

// idOf picks a row id of table: mostly a visible one, sometimes any.
func (w *wgen) idOf(table string) any {
	rows := w.st[table]
	if len(rows) == 0 || w.g.n(8) == 0 {
		return idValue(w.gr.by[table].cols[0].text, 1+w.g.n(12))
	}
	if w.g.n(3) != 0 {
		var mine []any
		for _, r := range rows {
			if w.vis[table][vkey(r[0])] {
				mine = append(mine, r[0])
			}
		}
		if len(mine) > 0 {
			return mine[w.g.n(len(mine))]
		}
	}
	return rows[w.g.n(len(rows))][0]
}

// valueFor draws a value for column c of t of the column's kind.
func (w *wgen) valueFor(t *gtable, c gcol) any {
	if fk := t.fkOf(c.name); fk != nil {
		if !c.notNull && w.g.n(6) == 0 {
			return nil
		}
		return w.idOf(fk.to)
	}
	if l, ok := t.levels[c.name]; ok {
		if vs := w.vals[t.name+"."+c.name]; len(vs) > 0 && w.g.n(4) != 0 {
			return vs[w.g.n(len(vs))]
		}
		return idValue(w.gr.level(l).Key == builder.TextKey, 1+w.g.n(9))
	}
	switch c.name {
	case "v", "gname":
		return gvocab[w.g.n(len(gvocab))]
	case "n":
		return gnums[w.g.n(len(gnums))]
	}
	return idValue(c.text, 1+w.g.n(9))
}

func (w *wgen) pred(t *gtable, depth int) *wpred {
	c := t.cols[w.g.n(len(t.cols))]
	v := func() any {
		x := w.valueFor(t, c)
		for x == nil {
			x = idValue(c.text, 1+w.g.n(9))
		}
		return x
	}
	switch op := w.g.n(9); op {
	case 0:
		return &wpred{op: "eq", col: c.name, vals: []any{v()}}
	case 1:
		return &wpred{op: "ne", col: c.name, vals: []any{v()}}
	case 2:
		return &wpred{op: "lt", col: c.name, vals: []any{v()}}
	case 3:
		return &wpred{op: "in", col: c.name, vals: []any{v(), v()}}
	case 4:
		return &wpred{op: "isnull", col: c.name}
	case 5, 6:
		if depth > 1 {
			return &wpred{op: "isnull", col: c.name}
		}
		return &wpred{op: []string{"and", "or"}[op-5], kids: []*wpred{w.pred(t, depth+1), w.pred(t, depth+1)}}
	case 7:
		if depth > 1 {
			return &wpred{op: "isnull", col: c.name}
		}
		return &wpred{op: "not", kids: []*wpred{w.pred(t, depth+1)}}
	}
	// A subquery over the table a foreign key of t references, or t's own
	// children: the rows it sees are the caller's on both sides.
	var fks []gfk
	for _, x := range w.gr.tables {
		for _, fk := range x.fks {
			if x.name == t.name || fk.to == t.name {
				fks = append(fks, gfk{col: x.name + "." + fk.col, to: fk.to})
			}
		}
	}
	if len(fks) == 0 {
		return &wpred{op: "isnull", col: c.name}
	}
	fk := fks[w.g.n(len(fks))]
	from, fcol, _ := strings.Cut(fk.col, ".")
	p := &wpred{op: "insub"}
	if from == t.name { // t.fcol IN (SELECT id FROM fk.to WHERE ...)
		p.col, p.sub, p.subCol = fcol, fk.to, "id"
	} else { // t.id IN (SELECT fcol FROM from WHERE ...)
		p.col, p.sub, p.subCol = "id", from, fcol
	}
	st := w.gr.by[p.sub]
	sc := st.cols[w.g.n(len(st.cols))]
	p.subWhere = sc.name
	for p.subVal == nil {
		p.subVal = w.valueFor(st, sc)
		if p.subVal == nil {
			p.subVal = idValue(sc.text, 1+w.g.n(9))
		}
	}
	return p
}

func (w *wgen) mutation() *wmut {
	t := w.gr.tables[w.g.n(len(w.gr.tables))]
	m := &wmut{table: t.name}
	switch w.g.n(3) {
	case 0:
		m.kind = "insert"
		for _, c := range t.cols {
			if c.name == "id" || c.notNull || w.g.n(3) != 0 {
				m.cols = append(m.cols, c.name)
			}
		}
		for k := 1 + w.g.n(2); k > 0; k-- {
			row := make([]any, len(m.cols))
			for i, cn := range m.cols {
				c := t.cols[t.idx(cn)]
				if cn == "id" && t.kind != gkLevel || cn == "id" && w.g.n(2) == 0 {
					row[i] = idValue(c.text, 50+w.g.n(200)) // fresh, mostly
					if w.g.n(6) == 0 {
						row[i] = w.idOf(t.name)
					}
					continue
				}
				row[i] = w.valueFor(t, c)
			}
			m.rows = append(m.rows, row)
		}
	case 1:
		m.kind = "update"
		for k := 1 + w.g.n(2); k > 0; k-- {
			c := t.cols[1+w.g.n(len(t.cols)-1)]
			if !slices.Contains(m.set, c.name) {
				m.set = append(m.set, c.name)
				m.setv = append(m.setv, w.valueFor(t, c))
			}
		}
	default:
		m.kind = "delete"
	}
	if m.kind != "insert" {
		m.ids = []any{w.idOf(t.name), w.idOf(t.name), w.idOf(t.name)}
		if w.g.flip() {
			m.where = w.pred(t, 0)
		}
		m.expectOne = w.g.n(3) == 0
	}
	return m
}

// inScopeValue: a level value a plain grant of the scope names.
func inScopeValue(grants []scope.Grant, level string, v any) bool {
	return slices.ContainsFunc(grants, func(g scope.Grant) bool {
		return g.Plain() && g.Level == level && g.ID == canonLevel(v)
	})
}

// allowed decides, from the rules alone, whether the values m writes into
// table t are allowed in scope grants, given the state st before and its
// visible rows: every non-NULL reference to a tenant table through a
// checked foreign key names a visible row (or, for a table owned by
// reference, a row no one references); the scope parent is never NULL
// (and set by an INSERT); a level column no such reference vouches for
// holds a value of a plain grant (NULL only on INSERT, where the engine
// decides); a root row inserted is in scope by one of its level columns;
// a row inserted into a table owned by reference belongs to no one yet.
func (g *ggraph) allowed(t *gtable, vals map[string]any, insert bool, grants []scope.Grant, st gstate, vis map[string]map[string]bool) (bool, string) {
	if t.kind == gkByRef {
		return true, ""
	}
	covered := map[string]bool{}
	for _, fk := range t.fks {
		if g.global(fk.to) || fk.unchecked != "" {
			continue
		}
		v, set := vals[fk.col]
		switch {
		case set && v != nil && g.by[fk.to].kind == gkByRef:
			if !vis[fk.to][vkey(v)] && len(g.referrers(st, fk.to, v)) > 0 {
				return false, fmt.Sprintf("%s = %v: a %s row another tenant references", fk.col, v, fk.to)
			}
		case !set && insert && fk.col == t.parent:
			return false, "INSERT without the scope parent " + fk.col
		case !set:
		case v == nil && fk.col == t.parent:
			return false, "NULL scope parent " + fk.col
		case v == nil:
		case !vis[fk.to][vkey(v)]:
			return false, fmt.Sprintf("%s = %v: no visible %s row", fk.col, v, fk.to)
		default:
			covered[fk.col] = true
		}
	}
	for c, l := range t.levels {
		v, set := vals[c]
		switch {
		case covered[c] || !set:
		case insert && c == "id":
			// The new row's own id: the root rule below.
		case v == nil && !insert:
			return false, "NULL level column " + c
		case v == nil:
		case !inScopeValue(grants, l, v):
			return false, fmt.Sprintf("level column %s = %v not granted", c, v)
		}
	}
	if insert && t.parent == "" {
		ok := false
		for c, l := range t.levels {
			if v := vals[c]; v != nil && inScopeValue(grants, l, v) {
				ok = true
			}
		}
		if !ok {
			return false, "root row in no granted level"
		}
	}
	return true, ""
}

// allowedUnderOne decides whether a row inserted with vals under grants is
// allowed under one of them alone (internal/guard/pairing.go): a scope of
// several grants must not file a row under one tenant through its parent
// and under another through a consistency path. A row of a tenants' own
// table (its id a level) is exempt: it is a new tenant.
func (g *ggraph) allowedUnderOne(t *gtable, vals map[string]any, grants []scope.Grant, st gstate) (bool, string) {
	if _, tenant := t.levels["id"]; len(grants) < 2 || tenant {
		return true, ""
	}
	for _, gr := range grants {
		one := []scope.Grant{gr}
		if ok, _ := g.allowed(t, vals, true, one, st, g.visibleRows(st, one)); ok {
			return true, ""
		}
	}
	return false, "allowed under the scope, but under no one of its grants"
}

// updatedUnderOne decides whether row of t, given vals by an UPDATE that
// sets the columns set under grants, is updated under the guard's pairing
// (internal/guard/pairing.go): under one grant, the row is visible and
// the values allowed, or, when the UPDATE moves the row (sets its parent
// or a level column), the values allowed and the consistency paths it
// keeps inside that grant.
func (g *ggraph) updatedUnderOne(t *gtable, row []any, vals map[string]any, set []string, grants []scope.Grant, st gstate) bool {
	if len(grants) < 2 || t.kind == gkByRef || t.kind == gkGlobal {
		return true
	}
	moves := slices.ContainsFunc(set, func(c string) bool { return c == t.parent || t.levels[c] != "" })
	for _, gr := range grants {
		one := []scope.Grant{gr}
		vis := g.visibleRows(st, one)
		if ok, _ := g.allowed(t, vals, false, one, st, vis); !ok {
			continue
		}
		if moves && g.heldBack(t, row, set, st, vis) == "" || !moves && vis[t.name][vkey(row[0])] {
			return true
		}
	}
	return false
}

// engineRefuses reports a constraint of the shared database that the copy
// (no foreign keys, other tenants' rows absent) does not enforce: a
// primary key held by any row, a NOT NULL column left NULL, a global
// reference to a missing row, and, for a DELETE, a row that still
// references a deleted one.
func (g *ggraph) engineRefuses(m *wmut, st gstate, deleted map[string]bool) string {
	t := g.by[m.table]
	switch m.kind {
	case "insert":
		ids := map[string]bool{}
		for _, r := range m.rows {
			vals := map[string]any{}
			for i, c := range m.cols {
				vals[c] = r[i]
			}
			id := vkey(vals["id"])
			if st.find(t.name, vals["id"]) != nil || ids[id] {
				return "primary key " + id + " taken"
			}
			ids[id] = true
			for _, c := range t.cols {
				if c.notNull && vals[c.name] == nil {
					return "NOT NULL " + c.name
				}
				if fk := t.fkOf(c.name); fk != nil && vals[c.name] != nil && st.find(fk.to, vals[c.name]) == nil {
					return fmt.Sprintf("%s = %v references nothing", c.name, vals[c.name])
				}
			}
		}
	case "update":
		for i, c := range m.set {
			if fk := t.fkOf(c); fk != nil && m.setv[i] != nil && st.find(fk.to, m.setv[i]) == nil {
				return fmt.Sprintf("%s = %v references nothing", c, m.setv[i])
			}
			if t.cols[t.idx(c)].notNull && m.setv[i] == nil {
				return "NOT NULL " + c
			}
		}
	case "delete":
		for _, x := range g.tables {
			for _, fk := range x.fks {
				if fk.to != m.table {
					continue
				}
				for _, r := range st[x.name] {
					if v := r[x.idx(fk.col)]; v != nil && deleted[vkey(v)] && !(x.name == m.table && deleted[vkey(r[0])]) {
						return fmt.Sprintf("%s %v still references it", x.name, r[0])
					}
				}
			}
		}
	}
	return ""
}

// rowSet is a state as a set of "table|id|row" strings.
func rowSet(st gstate) map[string]bool {
	out := map[string]bool{}
	for table, rows := range st {
		for _, r := range rows {
			out[table+"|"+vkey(r[0])+"|"+fmt.Sprintf("%#v", r)] = true
		}
	}
	return out
}

// entry splits a diff entry into its table and the vkey of its row's id.
func entry(k string) (table, id string, added bool) {
	parts := strings.SplitN(k[1:], "|", 3)
	return parts[0], parts[1], k[0] == '+'
}

// idOf returns the id of the row of table whose vkey is id.
func idOf(st gstate, table, id string) any {
	for _, r := range st[table] {
		if vkey(r[0]) == id {
			return r[0]
		}
	}
	return nil
}

// vouched reports whether row of t, which the caller cannot see, has every
// level column set and covered by a checked foreign key to a row the
// caller saw before the write. The guard lets such a key vouch for the
// level value (the referenced row is in scope, its hierarchy included), so
// a caller granted a root level writes a row of a table that reaches only
// a lower level under one of its own lower-level rows, and loses sight of
// it: not another tenant's row, but not readable by its writer.
func (g *ggraph) vouched(t *gtable, row []any, vis map[string]map[string]bool) bool {
	if row == nil || t.parent != "" || len(t.levels) == 0 {
		return false
	}
	for c := range t.levels {
		fk := t.fkOf(c)
		v := row[t.idx(c)]
		if fk == nil || fk.unchecked != "" || v == nil || !vis[fk.to][vkey(v)] {
			return false
		}
	}
	return true
}

// heldBack says why the rules keep an UPDATE or DELETE (assigning the
// columns set) from touching row of t although the caller sees it, or ""
// when they do not: a row of a table owned by reference that a row
// outside the scope references (writable by no one), or a row whose
// consistency path (a checked foreign key other than the scope parent,
// not into itself, a table owned by reference or made of its own level
// columns, and left unassigned) leads to a row outside the scope. Only a
// path into a table that reaches every level t reaches is re-tested so:
// elsewhere some grant that sees the row never sees the referenced row,
// consistent data or not (a key up the hierarchy, or to a table that
// lacks one of t's levels), and its value is checked when written only.
func (g *ggraph) heldBack(t *gtable, row []any, set []string, st gstate, vis map[string]map[string]bool) string {
	if t.kind == gkByRef {
		refs := g.referrers(st, t.name, row[0])
		for _, ref := range refs {
			if !vis[ref[0].(string)][vkey(ref[1])] {
				return fmt.Sprintf("shared with %s %v", ref[0], ref[1])
			}
		}
		if len(refs) == 0 {
			return "unreferenced"
		}
		return ""
	}
	for _, fk := range t.fks {
		to := g.by[fk.to]
		if to.kind == gkGlobal || to.kind == gkByRef || fk.unchecked != "" || fk.col == t.parent || fk.to == t.name ||
			t.levels[fk.col] != "" || slices.Contains(set, fk.col) || !g.sameTenancy(t.name, fk.to) {
			continue
		}
		if v := row[t.idx(fk.col)]; v != nil && !vis[fk.to][vkey(v)] {
			return fmt.Sprintf("%s = %v leads outside the scope", fk.col, v)
		}
	}
	return ""
}

// sameTenancy reports whether table to reaches every level table from
// reaches (and at least one), so that a grant admitting a row of from also
// admits a row of to that agrees with it on those levels.
func (g *ggraph) sameTenancy(from, to string) bool {
	mine, theirs := g.tableLevels(from), g.tableLevels(to)
	for l := range mine {
		if !theirs[l] {
			return false
		}
	}
	return len(theirs) > 0
}

// diff lists what b has that a lacks ("+") and what a has that b lacks
// ("-"), sorted.
func diff(a, b gstate) []string {
	sa, sb := rowSet(a), rowSet(b)
	var out []string
	for k := range sb {
		if !sa[k] {
			out = append(out, "+"+k)
		}
	}
	for k := range sa {
		if !sb[k] {
			out = append(out, "-"+k)
		}
	}
	slices.Sort(out)
	return out
}

// checkWrite draws one write from data, runs it guarded under scope si on
// the shared database and unguarded on a copy of the scope's rows, and
// compares. c.st follows the shared database.
func (c *graphCase) checkWrite(t testing.TB, si int, data []byte) error {
	ctx := context.Background()
	grants := c.scopes[si]
	g := c.g
	vis := g.visibleRows(c.st, grants)
	w := &wgen{g: &fgen{data: data}, gr: g, st: c.st, vis: vis, vals: c.vals}
	m := w.mutation()
	bm, err := m.build(c.d.sch)
	if err != nil {
		if !errors.Is(err, builder.ErrInvalid) {
			return fmt.Errorf("Build %s: %w", m, err)
		}
		return nil
	}
	before := c.st
	text, args, _ := c.d.db.Render(grantCtx(grants...), bm)
	res, gerr := c.d.db.Exec(grantCtx(grants...), bm)
	if errors.Is(gerr, guardedsql.ErrInternal) {
		return fmt.Errorf("%sscope %v\n%s: %w", g, grants, m, gerr)
	}
	after, err := dumpState(ctx, c.d.raw, g)
	if err != nil {
		return err
	}
	c.st = after
	c.copies = map[int]*guardedsql.DB{}
	c.writes++
	got := diff(before, after)
	fail := func(format string, a ...any) error {
		return fmt.Errorf("%sscope %v\nwrite: %s\nguard SQL: %s %v\nguard: err %v\nchanges: %v\n%s",
			g, grants, m, text, args, gerr, got, fmt.Sprintf(format, a...))
	}
	// 1. Rows outside the scope are untouched, and every row written is
	// the caller's.
	visAfter := g.visibleRows(after, grants)
	for _, k := range got {
		table, id, added := entry(k)
		switch {
		case !added && !vis[table][id]:
			return fail("a row outside the scope changed: %s", k)
		case added && m.kind == "insert" && g.by[table].kind == gkByRef:
			// A row inserted into a table owned by reference is no one's yet.
		case added && !visAfter[table][id]:
			if g.vouched(g.by[table], after.find(table, idOf(after, table, id)), vis) {
				// Moved under a row the caller sees, by a level column
				// whose foreign key vouches for it, in a table that
				// does not reach the caller's grant level: the caller
				// cannot read it back, but it stays in the caller's
				// tenant (see vouched).
				c.vouched++
				continue
			}
			return fail("a row written outside the scope: %s", k)
		}
	}
	// 2. The copy, unguarded, and the rules.
	if g.global(m.table) {
		if !errors.Is(gerr, guardedsql.ErrReadOnly) || len(got) > 0 {
			return fail("a write to a global table: want ErrReadOnly and no change")
		}
		c.refused++
		return nil
	}
	craw := c.d.writeCopy(t, before.filter(vis))
	cbefore, err := dumpState(ctx, craw, g)
	if err != nil {
		return err
	}
	// The copy runs the statement without its expect-one clause: the rows
	// the rules hold back are taken out first, then the count applies.
	var matched []string
	if m.kind != "insert" {
		if matched, err = m.matchRaw(ctx, craw); err != nil {
			return err
		}
	}
	one := m.expectOne
	m.expectOne = false
	_, cerr := m.applyRaw(ctx, craw)
	m.expectOne = one
	cafter, err := dumpState(ctx, craw, g)
	if err != nil {
		return err
	}
	want := diff(cbefore, cafter)
	tt := g.by[m.table]
	held := map[string]string{}
	if m.kind != "insert" {
		for _, r := range cbefore[m.table] {
			if why := g.heldBack(tt, r, m.set, before, vis); why != "" {
				held[vkey(r[0])] = why
			}
		}
		if m.kind == "update" {
			vals := map[string]any{}
			for i, cn := range m.set {
				vals[cn] = m.setv[i]
			}
			for _, r := range cbefore[m.table] {
				if id := vkey(r[0]); held[id] == "" && !g.updatedUnderOne(tt, r, vals, m.set, grants, before) {
					held[id] = "its guard and the values it is given hold under no one grant"
				}
			}
		}
		want = slices.DeleteFunc(want, func(k string) bool { _, id, _ := entry(k); return held[id] != "" })
	}
	// What the rules say about the values written.
	ok, why := true, ""
	switch m.kind {
	case "insert":
		for _, r := range m.rows {
			vals := map[string]any{}
			for i, cn := range m.cols {
				vals[cn] = r[i]
			}
			if ok, why = g.allowed(tt, vals, true, grants, before, vis); !ok {
				break
			}
			if ok, why = g.allowedUnderOne(tt, vals, grants, before); !ok {
				break
			}
		}
	case "update":
		vals := map[string]any{}
		for i, cn := range m.set {
			vals[cn] = m.setv[i]
		}
		if len(want) > 0 {
			ok, why = g.allowed(tt, vals, false, grants, before, vis)
		}
	}
	touched := map[string]bool{}
	for _, id := range matched {
		if held[id] == "" {
			touched[id] = true
		}
	}
	if m.kind != "insert" && one && len(touched) != 1 {
		ok, why = false, fmt.Sprintf("expect one, the rules leave %d rows (held back: %v)", len(touched), held)
	}
	deleted := map[string]bool{}
	if m.kind == "delete" {
		deleted = touched
	}
	engine := ""
	if ok {
		engine = g.engineRefuses(m, before, deleted)
	}
	if len(held) > 0 && slices.ContainsFunc(matched, func(id string) bool { return held[id] != "" }) {
		c.heldBack++
	}
	if slices.ContainsFunc(append(slices.Clone(m.cols), m.set...), func(cn string) bool {
		fk := tt.fkOf(cn)
		return fk != nil && g.by[fk.to].kind == gkByRef
	}) {
		c.claims++
	}
	switch {
	case !ok || engine != "" || cerr != nil:
		// Refused by the rules, by a constraint, or (expect-one) by the
		// count: the shared database must not change.
		if len(got) > 0 {
			return fail("the rules refuse it (%s%s, copy err %v) but the guarded write changed rows", why, engine, cerr)
		}
		if gerr == nil && res.RowsAffected > 0 {
			return fail("refused (%s%s) but reported %d rows", why, engine, res.RowsAffected)
		}
		c.refused++
	default:
		if gerr != nil && !(len(want) == 0 && errors.Is(gerr, guardedsql.ErrNotFound)) {
			return fail("the rules allow it and the copy wrote %v, but the guard refused", want)
		}
		if !slices.Equal(got, want) {
			return fail("the guarded write differs from the write on the copy:\nwant %v", want)
		}
		if len(got) > 0 {
			c.wrote++
			if tt.kind == gkByRef {
				c.byRefWrote++
			}
		}
	}
	return nil
}

// ---- the tests

func graphSeeds() [][]byte { return fuzzSeeds()[:32] }

// fuzzGraphs is how many graphs the fuzz targets draw from: the graph
// byte of an input picks one.
const fuzzGraphs = 16

func FuzzGraphRead(f *testing.F) {
	for i, s := range graphSeeds() {
		f.Add(uint8(i), uint8(i/3), s)
	}
	// Built once, with every scope's copy: the fuzz function only reads.
	cases := make([]*graphCase, fuzzGraphs)
	for i := range cases {
		cases[i] = newGraphCase(f, uint64(i))
		for si := range cases[i].scopes {
			cases[i].copyFor(f, si)
		}
	}
	f.Fuzz(func(t *testing.T, graph, sc uint8, data []byte) {
		c := cases[int(graph)%fuzzGraphs]
		if _, err := c.checkRead(t, int(sc)%len(c.scopes), data); err != nil {
			t.Fatal(err)
		}
	})
}

func FuzzGraphWrite(f *testing.F) {
	for i, s := range graphSeeds() {
		f.Add(uint8(i), uint8(i/3), s)
	}
	f.Fuzz(func(t *testing.T, graph, sc uint8, data []byte) {
		c := newGraphCase(t, uint64(graph)%fuzzGraphs)
		if err := c.checkWrite(t, int(sc)%len(c.scopes), data); err != nil {
			t.Fatal(err)
		}
	})
}

// TestGraphDifferential: 200 random graphs, each with reads under every
// scope and a run of writes under the scopes in turn, on one database.
// The counts show the oracles are not vacuous.
func TestGraphDifferential(t *testing.T) {
	graphs := 200
	if testing.Short() {
		graphs = 40
	}
	var reads, readRows, nonEmpty, ran, writes, wrote, refused, byRefRead, byRefWrote, claims, heldBack, vouched int
	for seed := uint64(1000); seed < uint64(1000+graphs); seed++ {
		c := newGraphCase(t, seed)
		r := rand.New(rand.NewPCG(seed, 7))
		buf := make([]byte, 48)
		for si := range c.scopes {
			for k := 0; k < 6; k++ {
				for i := range buf {
					buf[i] = byte(r.Uint32())
				}
				ok, err := c.checkRead(t, si, buf)
				if err != nil {
					t.Fatal(err)
				}
				if ok {
					ran++
				}
			}
		}
		for k := 0; k < 12; k++ {
			for i := range buf {
				buf[i] = byte(r.Uint32())
			}
			if err := c.checkWrite(t, k%len(c.scopes), buf); err != nil {
				t.Fatal(err)
			}
		}
		reads += c.reads
		readRows += c.readRows
		nonEmpty += c.nonEmpty
		byRefRead += c.byRefRead
		byRefWrote += c.byRefWrote
		claims += c.claims
		heldBack += c.heldBack
		vouched += c.vouched
		writes += c.writes
		wrote += c.wrote
		refused += c.refused
	}
	t.Logf("%d graphs: %d reads ran (%d compared, %d non-empty, %d rows), %d writes (%d wrote rows, %d refused)", graphs, ran, reads, nonEmpty, readRows, writes, wrote, refused)
	t.Logf("tables owned by reference: %d non-empty reads, %d writes of their rows, %d writes setting a reference to one; %d writes with rows held back; %d rows written out of the writer's sight under a row it sees",
		byRefRead, byRefWrote, claims, heldBack, vouched)
	if ran < graphs*4 || nonEmpty < graphs*2 || wrote < graphs || refused < graphs/2 ||
		graphByRef && (byRefRead < graphs/4 || byRefWrote < graphs/20 || claims < graphs/4) || heldBack < graphs/10 {
		t.Fatalf("the graph fuzz is vacuous: %d reads ran, %d rows, %d writes wrote, %d refused", ran, readRows, wrote, refused)
	}
}

// TestGraphFuzzCatchesDroppedPredicate: with one tenant table's predicate
// dropped, the read oracle notices on nearly every (graph, table) pair,
// and the write oracle on most: the differential is not vacuous on the
// generated shapes (level tables, own level columns, parent paths).
func TestGraphFuzzCatchesDroppedPredicate(t *testing.T) {
	if !guardfault.Enabled {
		t.Skip("mutation control: " + guardfault.NotBuilt)
	}
	type pair struct {
		seed  uint64
		table string
	}
	var reads, writes, missedReads, missedWrites []pair
	for seed := uint64(2000); seed < 2012; seed++ {
		c := newGraphCase(t, seed)
		for _, tb := range c.g.tables {
			if tb.kind == gkGlobal {
				continue
			}
			restore := guardfault.DropPredicate(tb.name)
			caught := false
			r := rand.New(rand.NewPCG(seed, 11))
			buf := make([]byte, 48)
			for k := 0; k < 400 && !caught; k++ {
				for i := range buf {
					buf[i] = byte(r.Uint32())
				}
				buf[0] = byte(slices.IndexFunc(c.g.tables, func(x *gtable) bool { return x == tb })) // FROM the table itself
				_, err := c.checkRead(t, k%len(c.scopes), buf)
				caught = err != nil
			}
			reads = append(reads, pair{seed, tb.name})
			if !caught {
				missedReads = append(missedReads, pair{seed, tb.name})
			}
			// Writes, on a fresh database each time.
			w := newGraphCase(t, seed)
			caught = false
			for k := 0; k < 300 && !caught; k++ {
				for i := range buf {
					buf[i] = byte(r.Uint32())
				}
				caught = w.checkWrite(t, k%len(w.scopes), buf) != nil
			}
			writes = append(writes, pair{seed, tb.name})
			if !caught {
				missedWrites = append(missedWrites, pair{seed, tb.name})
			}
			restore()
		}
	}
	t.Logf("dropped predicates: reads caught %d of %d (missed %v), writes caught %d of %d (missed %v)",
		len(reads)-len(missedReads), len(reads), missedReads, len(writes)-len(missedWrites), len(writes), missedWrites)
	if len(missedReads) > 0 || len(missedWrites)*10 > len(writes) {
		t.Fatal("the graph fuzz misses too many dropped predicates")
	}
}

// TestGraphFuzzCatchesWriteRuleFaults: with the write rules of tables
// owned by reference (guardfault.ByRef) or of consistency paths
// (guardfault.ConsistencyPaths) removed, the write oracle sees rows change
// that the rules protect (not only statements the guard refuses).
func TestGraphFuzzCatchesWriteRuleFaults(t *testing.T) {
	if !graphByRef {
		t.Skip("tables owned by reference are off in the generator")
	}
	// run returns the failures of 30 writes on each of 60 graphs.
	run := func() (writes int, errs []error) {
		for seed := uint64(3000); seed < 3060; seed++ {
			c := newGraphCase(t, seed)
			r := rand.New(rand.NewPCG(seed, 13))
			buf := make([]byte, 48)
			for k := 0; k < 30; k++ {
				for i := range buf {
					buf[i] = byte(r.Uint32())
				}
				writes++
				if err := c.checkWrite(t, k%len(c.scopes), buf); err != nil {
					errs = append(errs, err)
				}
			}
		}
		return writes, errs
	}
	if n, errs := run(); len(errs) > 0 {
		t.Fatalf("with the rules, %d of %d writes fail: %v", len(errs), n, errs[0])
	}
	if !guardfault.Enabled {
		t.Skip("mutation control: " + guardfault.NotBuilt)
	}
	for _, fault := range []guardfault.Fix{guardfault.ByRef, guardfault.ConsistencyPaths, guardfault.GrantPairing} {
		restore := guardfault.Disable(fault)
		n, errs := run()
		restore()
		var changed []error
		for _, err := range errs {
			if !strings.Contains(err.Error(), "but the guard refused") {
				changed = append(changed, err)
			}
		}
		if len(changed) == 0 {
			t.Errorf("with %s removed, %d writes on 60 graphs and no protected row changed (%d other failures)", fault, n, len(errs))
			continue
		}
		t.Logf("with %s removed, %d of %d writes changed protected rows; the first:\n%v", fault, len(changed), n, changed[0])
	}
}

// TestGraphVouchedWrites replays the graphs on which 1000 random graphs
// found rows written out of their writer's sight (see ggraph.vouched):
// each must see such a write, accepted, and no other failure.
func TestGraphVouchedWrites(t *testing.T) {
	for _, seed := range []uint64{10358, 10837, 10963} {
		c := newGraphCase(t, seed)
		r := rand.New(rand.NewPCG(seed, 7))
		buf := make([]byte, 64)
		for range c.scopes {
			for k := 0; k < 10; k++ {
				for i := range buf {
					buf[i] = byte(r.Uint32())
				}
			}
		}
		for k := 0; k < 25; k++ {
			for i := range buf {
				buf[i] = byte(r.Uint32())
			}
			if err := c.checkWrite(t, k%len(c.scopes), buf); err != nil {
				t.Fatal(err)
			}
		}
		if c.vouched == 0 {
			t.Errorf("graph %d: no row written out of its writer's sight", seed)
		}
	}
}
