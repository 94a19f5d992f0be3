package guardedsql_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/tenantmcp/tenantmcp/builder"
	"github.com/tenantmcp/tenantmcp/guardedsql"
	sqlengine "github.com/tenantmcp/tenantmcp/guardedsql/internal/engine"
	sqlitedialect "github.com/tenantmcp/tenantmcp/guardedsql/internal/engine/sqlite"
	"github.com/tenantmcp/tenantmcp/internal/guardfault"
	"github.com/tenantmcp/tenantmcp/scope"
)

// Fuzzing decodes the input bytes into a random builder statement. The
// properties checked:
//
//  1. Nothing panics; Build either succeeds or fails with ErrInvalid.
//  2. Reads (FuzzGuardRead): the guarded statement on the full database
//     returns exactly the rows the same statement returns, unguarded, on a
//     copy of the database that physically holds only the scope's rows
//     (computed from the Go model, not by the guard). That covers joins,
//     left joins on natural keys, subqueries, EXISTS, aggregates, limits.
//  3. The rendered SQL carries a guard predicate for every tenant-bound
//     table reference (a textual check written against the SQL, not the
//     guard's bookkeeping).
//  4. Writes (FuzzGuardWrite): under scopes of chain acme's family, no row
//     of another tenant ever changes, whatever the statement.

var fuzzScopes = [][]scope.Grant{
	{chainG("acme")},
	{chainG("globex")},
	{chainG("7")},
	{hotelG(7)},
	{hotelG(2), hotelG(9)},
	{chainG("globex"), hotelG(1)},
	{{Level: "hotel", ID: "07"}, chainG("ACME"), {Level: "region", ID: "x"}},
	{hotelG(4), chainG("7")},
}

// fgen decodes fuzz bytes into choices.
type fgen struct {
	data []byte
	i    int
}

func (g *fgen) n(k int) int {
	if k <= 1 {
		return 0
	}
	if g.i >= len(g.data) {
		return 0
	}
	b := g.data[g.i]
	g.i++
	return int(b) % k
}

func (g *fgen) flip() bool { return g.n(2) == 1 }

var fuzzTables = []string{"hotels", "rooms", "guests", "bookings", "payments", "chains", "countries"}

type edge struct{ child, ccol, parent, pcol string }

var fuzzEdges = []edge{
	{"hotels", "chain_id", "chains", "id"},
	{"hotels", "country", "countries", "code"},
	{"rooms", "hotel_id", "hotels", "id"},
	{"guests", "chain_id", "chains", "id"},
	{"bookings", "room_id", "rooms", "id"},
	{"bookings", "guest_id", "guests", "id"},
	{"payments", "booking_id", "bookings", "id"},
}

var fuzzCols = map[string][]string{
	"countries": {"code", "name"},
	"chains":    {"id", "name"},
	"hotels":    {"id", "chain_id", "name", "country"},
	"rooms":     {"id", "hotel_id", "number", "rate"},
	"guests":    {"id", "chain_id", "name", "email"},
	"bookings":  {"id", "room_id", "guest_id", "check_in", "nights", "status"},
	"payments":  {"id", "booking_id", "amount", "method"},
}

var fuzzValues = []any{int64(1), int64(2), int64(3), int64(4), int64(5), int64(7), int64(9), int64(12), int64(20), int64(30),
	int64(100), int64(120), int64(300), "acme", "globex", "7", "101", "102", "Ann Lee", "guest0@example.com",
	"confirmed", "cancelled", "2025-03-01", "card", "FR", nil, "12abc", int64(-1)}

type fref struct {
	t     builder.TableRef
	table string
}

type qgen struct {
	g      *fgen
	sch    *builder.Schema
	nalias int
}

func (q *qgen) ref(table string) fref {
	q.nalias++
	return fref{q.sch.Table(table).As(fmt.Sprintf("t%d", q.nalias)), table}
}

func (q *qgen) col(r fref) builder.Expr {
	cs := fuzzCols[r.table]
	return r.t.Col(cs[q.g.n(len(cs))])
}

func (q *qgen) value() any { return fuzzValues[q.g.n(len(fuzzValues))] }

// valueFor mostly picks a value plausible for column c (an existing id, a
// chain name), sometimes any value.
func (q *qgen) valueFor(c string) any {
	if q.g.n(4) == 0 {
		return q.value()
	}
	switch {
	case c == "chain_id" || c == "id" && q.g.n(3) == 0:
		return []any{"acme", "globex", "7", "newco", "ACME"}[q.g.n(5)]
	case c == "id" || strings.HasSuffix(c, "_id"):
		if q.g.flip() {
			return int64(1 + 3*q.g.n(10)) // chain acme's rows (ids interleave mod 3)
		}
		return int64(1 + q.g.n(30))
	case c == "country" || c == "code":
		return []any{"FR", "JP", "NZ", "XX", nil}[q.g.n(5)]
	case c == "number":
		return []any{"101", "102", "201", "999"}[q.g.n(4)]
	case c == "rate" || c == "amount" || c == "nights":
		return int64(q.g.n(400))
	case c == "check_in":
		return fmt.Sprintf("2025-%02d-%02d", 1+q.g.n(12), 1+q.g.n(28))
	}
	return q.value()
}

func (q *qgen) pred(in []fref, depth int) builder.Pred {
	r := in[q.g.n(len(in))]
	cname := fuzzCols[r.table][q.g.n(len(fuzzCols[r.table]))]
	c := r.t.Col(cname)
	switch q.g.n(15) {
	case 14:
		return r.t.Col(fuzzCols[r.table][0]).In(q.valueFor("id"), q.valueFor("id"), q.valueFor("id"))
	case 0:
		return c.Eq(q.valueFor(cname))
	case 1:
		return c.Ne(q.valueFor(cname))
	case 2:
		return c.Lt(q.valueFor(cname))
	case 3:
		return c.Ge(q.valueFor(cname))
	case 4:
		return c.Between(q.valueFor(cname), q.valueFor(cname))
	case 5:
		return c.In(q.valueFor(cname), q.valueFor(cname), q.value())
	case 6:
		return c.Like(fmt.Sprint(q.value()) + "%")
	case 7:
		return c.IsNull()
	case 8:
		return builder.And(q.pred(in, depth), q.pred(in, depth))
	case 9:
		return builder.Or(q.pred(in, depth), q.pred(in, depth))
	case 10:
		return builder.Not(q.pred(in, depth))
	case 11:
		o := in[q.g.n(len(in))]
		return c.EqCol(q.col(o))
	case 12, 13:
		if depth >= 2 {
			return c.IsNotNull()
		}
		sub := q.ref(fuzzTables[q.g.n(len(fuzzTables))])
		inner := append(slices.Clone(in), sub)
		sb := builder.Select(q.col(sub)).From(sub.t)
		if q.g.flip() {
			sb = sb.Where(q.pred([]fref{sub}, depth+1))
		}
		if q.g.flip() { // correlated
			sb = sb.Where(q.col(sub).EqCol(q.col(in[q.g.n(len(in))])))
		}
		if q.g.flip() {
			sb = sb.Where(q.pred(inner, depth+1))
		}
		sq, err := sb.Build()
		if err != nil {
			return builder.Pred{}
		}
		if q.g.flip() {
			return builder.Exists(sq)
		}
		if q.g.flip() {
			return c.NotInQuery(sq)
		}
		return c.InQuery(sq)
	}
	return c.IsNotNull()
}

func genQuery(data []byte, sch *builder.Schema) (builder.Query, error) {
	q := &qgen{g: &fgen{data: data}, sch: sch}
	g := q.g
	from := q.ref(fuzzTables[g.n(len(fuzzTables))])
	refs := []fref{from}
	sb := builder.SelectBuilder{}
	type join struct {
		r    fref
		on   builder.Pred
		left bool
	}
	var joins []join
	for k := g.n(3); k > 0; k-- {
		base := refs[g.n(len(refs))]
		var cands []edge
		for _, e := range fuzzEdges {
			if e.child == base.table || e.parent == base.table {
				cands = append(cands, e)
			}
		}
		var nr fref
		var on builder.Pred
		if len(cands) == 0 || g.n(4) == 0 {
			// A join on a natural key: same room number, guest name...
			nr = q.ref(base.table)
			c := fuzzCols[base.table][g.n(len(fuzzCols[base.table]))]
			on = nr.t.Col(c).EqCol(base.t.Col(c))
		} else {
			e := cands[g.n(len(cands))]
			if e.child == base.table {
				nr = q.ref(e.parent)
				on = nr.t.Col(e.pcol).EqCol(base.t.Col(e.ccol))
			} else {
				nr = q.ref(e.child)
				on = nr.t.Col(e.ccol).EqCol(base.t.Col(e.pcol))
			}
		}
		if g.flip() {
			on = builder.And(on, q.pred([]fref{nr, base}, 1))
		}
		joins = append(joins, join{nr, on, g.flip()})
		refs = append(refs, nr)
	}
	var items []builder.Selectable
	var orders []builder.Order
	agg := g.n(4) == 0
	var group builder.Expr
	if agg {
		group = q.col(from)
		items = append(items, group.As("g"))
		orders = append(orders, group.Asc())
		other := refs[g.n(len(refs))]
		c := q.col(other)
		aggs := []builder.Expr{builder.CountAll(), builder.Count(c), builder.CountDistinct(c), builder.Min(c), builder.Max(c), builder.Sum(c)}
		a := aggs[g.n(len(aggs))]
		items = append(items, a.As("a"))
		orders = append(orders, a.Asc())
	} else {
		for i, r := range refs {
			pk := "id"
			if r.table == "countries" {
				pk = "code"
			}
			e := r.t.Col(pk)
			items = append(items, e.As(fmt.Sprintf("k%d", i)))
			orders = append(orders, e.Asc())
			if g.flip() {
				x := q.col(r)
				items = append(items, x.As(fmt.Sprintf("x%d", i)))
				orders = append(orders, x.Asc())
			}
		}
	}
	sb = builder.Select(items...).From(from.t)
	for _, j := range joins {
		if j.left {
			sb = sb.LeftJoin(j.r.t, j.on)
		} else {
			sb = sb.Join(j.r.t, j.on)
		}
	}
	for k := g.n(3); k > 0; k-- {
		sb = sb.Where(q.pred(refs, 0))
	}
	if agg {
		sb = sb.GroupBy(group)
		if g.flip() {
			sb = sb.Having(builder.CountAll().Gt(g.n(3)))
		}
	}
	if g.flip() {
		sb = sb.Distinct()
	}
	if g.flip() {
		sb = sb.OrderBy(orders...).Limit(g.n(6))
		if g.flip() {
			sb = sb.Offset(g.n(4))
		}
	}
	return sb.Build()
}

// guardRE matches the guard predicate the SQLite dialect renders for a
// reference with alias a on one of cols: own level column or path column.
func guardPresent(sqlText, alias string, cols []string) bool {
	re := regexp.MustCompile(`\("` + regexp.QuoteMeta(alias) + `"\."(` + strings.Join(cols, "|") + `)" IN \(SELECT ("id" FROM "_tm_scope"|"_tm\d+"\.)`)
	return re.MatchString(sqlText)
}

var scopeCols = map[string][]string{
	"chains":   {"id"},
	"hotels":   {"chain_id", "id"},
	"rooms":    {"hotel_id"},
	"guests":   {"chain_id"},
	"bookings": {"room_id"},
	"payments": {"booking_id"},
}

// reach lists the levels each tenant-bound table can reach (by the
// hotel schema's design, independently of the schema graph code).
var reach = map[string][]string{
	"chains": {"chain"}, "guests": {"chain"},
	"hotels": {"chain", "hotel"}, "rooms": {"chain", "hotel"}, "bookings": {"chain", "hotel"}, "payments": {"chain", "hotel"},
}

// activeLevels: chain ids are text (any id is a valid key), hotel ids are
// integers (only canonical decimal ids count).
func activeLevels(grants []scope.Grant) map[string]bool {
	out := map[string]bool{}
	for _, g := range grants {
		switch g.Level {
		case "chain":
			out["chain"] = true
		case "hotel":
			if n, err := strconv.ParseInt(g.ID, 10, 64); err == nil && strconv.FormatInt(n, 10) == g.ID {
				out["hotel"] = true
			}
		}
	}
	return out
}

// checkGuardText renders st with the join-aware rewrites off (plain) and
// checks that every tenant-bound reference carries its predicate. The
// rewrites themselves are checked by the differential oracle.
func checkGuardText(h *hotelDB, ctx context.Context, st builder.Statement, grants []scope.Grant) error {
	active := activeLevels(grants)
	plain, err := guardedsql.NewSQLitePredicatesOnlyForTest(context.Background(), h.raw, h.sch, guardedsql.Options{})
	if err != nil {
		return err
	}
	text, _, err := plain.Render(ctx, st)
	if err != nil {
		return nil
	}
	for _, r := range st.Tables() {
		if h.sch.IsGlobal(r.Name()) {
			continue
		}
		if _, isInsert := st.(builder.Insert); isInsert {
			continue
		}
		reachable := slices.ContainsFunc(reach[r.Name()], func(l string) bool { return active[l] })
		if !reachable {
			if !strings.Contains(text, "(1=0)") {
				return fmt.Errorf("%s (%s) reaches no granted level but the SQL has no false guard:\n%s", r.Alias(), r.Name(), text)
			}
			continue
		}
		if !guardPresent(text, r.Alias(), scopeCols[r.Name()]) {
			return fmt.Errorf("no guard predicate for %s (%s) in\n%s", r.Alias(), r.Name(), text)
		}
	}
	return nil
}

// filteredDB writes a copy of the model holding only the rows visible to
// grants, and guards it with a schema where every table is global: the
// same statements then run with no predicate at all.
func filteredDB(t testing.TB, m *model, grants []scope.Grant) (*guardedsql.DB, *builder.Schema) {
	t.Helper()
	v := m.visible(grants)
	f := &model{countries: m.countries}
	for _, c := range m.chains {
		if v.chains[c.ID] {
			f.chains = append(f.chains, c)
		}
	}
	for _, x := range m.hotels {
		if v.hotels[x.ID] {
			f.hotels = append(f.hotels, x)
		}
	}
	for _, x := range m.rooms {
		if v.rooms[x.ID] {
			f.rooms = append(f.rooms, x)
		}
	}
	for _, x := range m.guests {
		if v.guests[x.ID] {
			f.guests = append(f.guests, x)
		}
	}
	for _, x := range m.bookings {
		if v.bookings[x.ID] {
			f.bookings = append(f.bookings, x)
		}
	}
	for _, x := range m.payments {
		if v.payments[x.ID] {
			f.payments = append(f.payments, x)
		}
	}
	raw, err := sql.Open("sqlite", filepath.Join(t.TempDir(), "filtered.db")) // foreign keys off: visible rows may reference hidden ones
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { raw.Close() })
	if err := f.load(context.Background(), raw); err != nil {
		t.Fatal(err)
	}
	def := hotelDef
	def.Tables = slices.Clone(hotelDef.Tables)
	for i := range def.Tables {
		def.Tables[i].Global, def.Tables[i].Levels, def.Tables[i].Parent = true, nil, ""
	}
	sch := builder.MustSchema(def)
	// Deliberately at odds with the catalog (tables that are tenant-bound
	// declared global, foreign keys off), so without the start-up check.
	db, err := guardedsql.NewForTest(sqlengine.StdPool(raw, false), sqlitedialect.Dialect{}, sch, guardedsql.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return db, sch
}

func resultSet(ctx context.Context, db *guardedsql.DB, q builder.Query) ([]string, error) {
	rows, err := db.Query(ctx, q)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	cols, _ := rows.Columns()
	var out []string
	for rows.Next() {
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			return nil, err
		}
		out = append(out, fmt.Sprintf("%v", vals))
	}
	slices.Sort(out)
	return out, rows.Err()
}

type readFixture struct {
	h        *hotelDB
	filtered []*guardedsql.DB
	fsch     []*builder.Schema
}

func newReadFixture(t testing.TB) *readFixture {
	h := newHotelSized(t, 3, 3, 3, 2)
	fx := &readFixture{h: h}
	for _, g := range fuzzScopes {
		db, sch := filteredDB(t, h.m, g)
		fx.filtered = append(fx.filtered, db)
		fx.fsch = append(fx.fsch, sch)
	}
	return fx
}

// check runs one fuzz input; it reports whether the input produced a
// statement that ran, and any violated property.
func (fx *readFixture) check(data []byte) (bool, error) {
	if len(data) == 0 {
		return false, nil
	}
	si := int(data[0]) % len(fuzzScopes)
	grants := fuzzScopes[si]
	ctx := grantCtx(grants...)
	q, err := genQuery(data[1:], fx.h.sch)
	if err != nil {
		if !errors.Is(err, builder.ErrInvalid) {
			return false, fmt.Errorf("Build: %w", err)
		}
		return false, nil
	}
	fq, err := genQuery(data[1:], fx.fsch[si])
	if err != nil {
		return false, fmt.Errorf("the generator is not deterministic: %w", err)
	}
	if err := checkGuardText(fx.h, ctx, q, grants); err != nil {
		return false, err
	}
	got, gerr := resultSet(ctx, fx.h.db, q)
	if errors.Is(gerr, guardedsql.ErrConversion) {
		return false, nil // refused by design (issue 26 §2): not runnable
	}
	want, werr := resultSet(ctx, fx.filtered[si], fq)
	if errors.Is(gerr, guardedsql.ErrInternal) {
		return false, fmt.Errorf("guard: %w", gerr)
	}
	if (gerr != nil) != (werr != nil) {
		text, _, _ := fx.h.db.Render(ctx, q)
		return false, fmt.Errorf("guarded err %v, filtered err %v\n%s", gerr, werr, text)
	}
	if !slices.Equal(got, want) {
		text, _, _ := fx.h.db.Render(ctx, q)
		return false, fmt.Errorf("scope %v: guarded result differs from the filtered database\n got %v\nwant %v\n%s", grants, got, want, text)
	}
	return gerr == nil, nil
}

func fuzzSeeds() [][]byte {
	var out [][]byte
	for i := 0; i < 64; i++ {
		b := make([]byte, 48)
		x := uint32(i*2654435761 + 1)
		for j := range b {
			x ^= x << 13
			x ^= x >> 17
			x ^= x << 5
			b[j] = byte(x)
		}
		out = append(out, b)
	}
	return out
}

func FuzzGuardRead(f *testing.F) {
	for _, s := range fuzzSeeds() {
		f.Add(s)
	}
	fx := newReadFixture(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		if _, err := fx.check(data); err != nil {
			t.Fatal(err)
		}
	})
}

// TestFuzzOracleCatchesDroppedPredicate runs the fuzz seeds with one
// table's predicate dropped: the differential oracle must notice, for
// every tenant-bound table.
func TestFuzzOracleCatchesDroppedPredicate(t *testing.T) {
	fx := newReadFixture(t)
	ran := 0
	for _, s := range fuzzSeeds() {
		ok, err := fx.check(s)
		if err != nil {
			t.Fatal(err)
		}
		if ok {
			ran++
		}
	}
	if ran < 20 {
		t.Fatalf("only %d of %d seeds produced a runnable statement", ran, len(fuzzSeeds()))
	}
	if !guardfault.Enabled {
		t.Skip("mutation control: " + guardfault.NotBuilt)
	}
	for _, table := range []string{"chains", "hotels", "rooms", "guests", "bookings", "payments"} {
		restore := guardfault.DropPredicate(table)
		caught := false
		for _, s := range fuzzSeeds() {
			for k := 0; k < 8 && !caught; k++ {
				// All seeds under every scope.
				d := slices.Clone(s)
				d[0] = byte(k)
				_, err := fx.check(d)
				caught = err != nil
			}
			if caught {
				break
			}
		}
		restore()
		if !caught {
			t.Errorf("with the %s predicate dropped the fuzz oracle saw nothing", table)
		}
	}
}

var writeScopes = [][]scope.Grant{
	{chainG("acme")},
	{hotelG(1)},
	{hotelG(4), hotelG(7)},
	{chainG("acme"), {Level: "hotel", ID: "2x"}},
}

func genMutation(data []byte, sch *builder.Schema) (builder.Mutation, error) {
	q := &qgen{g: &fgen{data: data}, sch: sch}
	g := q.g
	tables := fuzzTables[:6] // chains included; countries tested separately
	table := tables[g.n(len(tables))]
	target := fref{sch.Table(table), table}
	cols := fuzzCols[table]
	switch g.n(3) {
	case 0:
		var cs []string
		var vs []any
		for _, c := range cols[1:] {
			if g.n(8) == 0 {
				continue
			}
			cs = append(cs, c)
			vs = append(vs, q.valueFor(c))
		}
		if table == "chains" || g.n(4) == 0 {
			cs = append([]string{"id"}, cs...)
			id := q.valueFor("id")
			if table != "chains" {
				id = int64(1000 + g.n(1000))
			}
			vs = append([]any{id}, vs...)
		}
		ib := builder.InsertInto(target.t).Columns(cs...).Values(vs...)
		if g.flip() {
			vs2 := make([]any, len(vs))
			for i := range vs2 {
				vs2[i] = q.valueFor(cs[i])
				if cs[i] == "id" && table != "chains" {
					vs2[i] = int64(2000 + g.n(1000))
				}
			}
			ib = ib.Values(vs2...)
		}
		return ib.Build()
	case 1:
		ub := builder.UpdateTable(target.t)
		set := map[string]bool{}
		for k := 1 + g.n(2); k > 0; k-- {
			c := cols[1+g.n(len(cols)-1)]
			if !set[c] {
				set[c] = true
				ub = ub.Set(c, q.valueFor(c))
			}
		}
		ub = ub.Where(target.t.Col("id").In(q.valueFor("id"), q.valueFor("id"), q.valueFor("id")))
		if g.flip() {
			ub = ub.Where(q.pred([]fref{target}, 0))
		}
		if g.flip() {
			ub = ub.ExpectOne()
		}
		return ub.Build()
	default:
		db := builder.DeleteFrom(target.t).Where(target.t.Col("id").In(q.valueFor("id"), q.valueFor("id"), q.valueFor("id")))
		if g.flip() {
			db = db.Where(q.pred([]fref{target}, 0))
		}
		if g.flip() {
			db = db.ExpectOne()
		}
		return db.Build()
	}
}

type writeFixture struct {
	h      *hotelDB
	before string
	ok     int // statements that changed something
}

func newWriteFixture(t testing.TB) *writeFixture {
	h := newHotelSized(t, 3, 3, 3, 2)
	return &writeFixture{h: h, before: foreignRows(t, h, "acme")}
}

func (fx *writeFixture) check(t testing.TB, data []byte) error {
	return fx.checkWith(t, data, genMutation, guardedsql.ErrInternal, guardedsql.ErrInvalid)
}

// checkWith runs the mutation gen makes of data under a scope of chain
// acme's family: an error matching one of bugs fails the input, and so does
// any change to another tenant's rows (the canary).
func (fx *writeFixture) checkWith(t testing.TB, data []byte, gen func([]byte, *builder.Schema) (builder.Mutation, error), bugs ...error) error {
	if len(data) == 0 {
		return nil
	}
	h := fx.h
	grants := writeScopes[int(data[0])%len(writeScopes)]
	ctx := grantCtx(grants...)
	m, err := gen(data[1:], h.sch)
	if err != nil {
		if !errors.Is(err, builder.ErrInvalid) {
			return fmt.Errorf("Build: %w", err)
		}
		return nil
	}
	if err := checkGuardText(h, ctx, m, grants); err != nil {
		return err
	}
	res, err := h.db.Exec(ctx, m)
	for _, bug := range bugs {
		if errors.Is(err, bug) {
			return fmt.Errorf("Exec: %w", err)
		}
	}
	if err == nil && res.RowsAffected > 0 {
		fx.ok++
	}
	if after := foreignRows(t, h, "acme"); after != fx.before {
		text, args, _ := h.db.Render(ctx, m)
		return fmt.Errorf("scope %v changed another tenant's rows (err %v)\n%s\n%v", grants, err, text, args)
	}
	return nil
}

func FuzzGuardWrite(f *testing.F) {
	for _, s := range fuzzSeeds() {
		f.Add(s)
	}
	fx := newWriteFixture(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		if err := fx.check(t, data); err != nil {
			t.Fatal(err)
		}
	})
}

// TestWriteFuzzCatchesDroppedPredicate: with a parent table's predicate
// dropped, some seed writes into another tenant and the canary notices.
func TestWriteFuzzCatchesDroppedPredicate(t *testing.T) {
	fx := newWriteFixture(t)
	for _, s := range fuzzSeeds() {
		if err := fx.check(t, s); err != nil {
			t.Fatal(err)
		}
	}
	if fx.ok < 5 {
		t.Fatalf("only %d seed mutations changed anything; the write fuzz is vacuous", fx.ok)
	}
	if !guardfault.Enabled {
		t.Skip("mutation control: " + guardfault.NotBuilt)
	}
	for _, table := range []string{"hotels", "rooms", "bookings"} {
		fx := newWriteFixture(t)
		restore := guardfault.DropPredicate(table)
		caught := false
		for _, s := range fuzzSeeds() {
			for k := 0; k < len(writeScopes) && !caught; k++ {
				d := slices.Clone(s)
				d[0] = byte(k)
				caught = fx.check(t, d) != nil
			}
			if caught {
				break
			}
		}
		restore()
		if !caught {
			t.Errorf("with the %s predicate dropped the write fuzz saw nothing", table)
		}
	}
}
