package guardedsql_test

// FuzzGuardWrites extends FuzzGuardWrite (fuzz_test.go) to the writes of
// issue 15: upserts (DO UPDATE and DO NOTHING, on ids that often belong to
// another tenant), multi-row inserts and INSERT ... SELECT, with RETURNING,
// and UPDATE and DELETE ... RETURNING. Under scopes of chain acme's family
// no row of another tenant may change (the fingerprint of FuzzGuardWrite),
// and no returned row may be another tenant's.

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/tenantmcp/tenantmcp/builder"
	"github.com/tenantmcp/tenantmcp/guardedsql"
	"github.com/tenantmcp/tenantmcp/internal/guardfault"
)

// foreignIDs returns, per table, the ids of the rows outside chain's
// family (and outside 'newco', which writers may create), read unguarded.
func foreignIDs(t testing.TB, h *hotelDB, chain string) map[string]map[string]bool {
	t.Helper()
	out := map[string]map[string]bool{}
	for table, q := range map[string]string{
		"chains":   `SELECT id FROM chains WHERE id NOT IN (?, 'newco')`,
		"hotels":   `SELECT id FROM hotels WHERE chain_id NOT IN (?, 'newco')`,
		"rooms":    `SELECT r.id FROM rooms r JOIN hotels h ON h.id = r.hotel_id WHERE h.chain_id NOT IN (?, 'newco')`,
		"guests":   `SELECT id FROM guests WHERE chain_id NOT IN (?, 'newco')`,
		"bookings": `SELECT b.id FROM bookings b JOIN rooms r ON r.id = b.room_id JOIN hotels h ON h.id = r.hotel_id WHERE h.chain_id NOT IN (?, 'newco')`,
		"payments": `SELECT p.id FROM payments p JOIN bookings b ON b.id = p.booking_id JOIN rooms r ON r.id = b.room_id JOIN hotels h ON h.id = r.hotel_id WHERE h.chain_id NOT IN (?, 'newco')`,
	} {
		rows, err := h.raw.Query(q, chain)
		if err != nil {
			t.Fatal(err)
		}
		out[table] = map[string]bool{}
		for rows.Next() {
			var id any
			if err := rows.Scan(&id); err != nil {
				t.Fatal(err)
			}
			out[table][fmt.Sprint(id)] = true
		}
		rows.Close()
	}
	return out
}

// genWrites decodes data into one of the issue-15 writes; it reports the
// target table (whose "id" the statement returns, when it returns).
func genWrites(data []byte, sch *builder.Schema) (builder.Mutation, string, error) {
	q := &qgen{g: &fgen{data: data}, sch: sch}
	g := q.g
	tables := fuzzTables[:6]
	table := tables[g.n(len(tables))]
	target := fref{sch.Table(table), table}
	cols := fuzzCols[table]
	returning := g.n(4) != 0
	pickCols := func() []string {
		cs := []string{"id"}
		for _, c := range cols[1:] {
			if g.n(6) != 0 {
				cs = append(cs, c)
			}
		}
		return cs
	}
	// own mostly picks a parent of chain acme's family, so that many rows
	// pass their checks and the conflicts are what decides.
	own := func(c string) any {
		switch {
		case g.n(3) == 0:
			return q.valueFor(c)
		case c == "chain_id":
			return "acme"
		case strings.HasSuffix(c, "_id"):
			return int64(1 + 3*g.n(10))
		}
		return q.valueFor(c)
	}
	row := func(cs []string) []any {
		vs := make([]any, len(cs))
		for i, c := range cs {
			vs[i] = own(c)
			if c == "id" && table != "chains" && g.n(3) == 0 {
				vs[i] = int64(1000 + g.n(1000)) // a fresh id now and then
			}
		}
		return vs
	}
	switch g.n(5) {
	case 0, 1: // upsert, often on another tenant's id; sometimes several rows
		cs := pickCols()
		ib := builder.InsertInto(target.t).Columns(cs...).Values(row(cs)...)
		if g.n(3) == 0 {
			ib = ib.Values(row(cs)...)
		}
		var upd []string
		for _, c := range cs[1:] {
			if g.flip() {
				upd = append(upd, c)
			}
		}
		if len(upd) == 0 || g.n(4) == 0 {
			ib = ib.OnConflict("id").DoNothing()
		} else {
			ib = ib.OnConflict("id").DoUpdate(upd...)
		}
		if returning {
			ib = ib.Returning("id")
		}
		m, err := ib.Build()
		return m, table, err
	case 2: // INSERT ... SELECT from a guarded read: mostly the target's own
		// rows (re-upserted), sometimes any table's columns
		cs := pickCols()
		srcTable := table
		if g.n(4) == 0 {
			srcTable = tables[g.n(len(tables))]
		}
		src := q.ref(srcTable)
		items := make([]builder.Selectable, len(cs))
		for i, c := range cs {
			if srcTable == table && g.n(5) != 0 {
				items[i] = src.t.Col(c)
			} else {
				items[i] = q.col(src)
			}
		}
		sb := builder.Select(items...).From(src.t)
		if g.flip() {
			sb = sb.Where(q.pred([]fref{src}, 0))
		}
		sel, err := sb.Build()
		if err != nil {
			return nil, "", err
		}
		ib := builder.InsertInto(target.t).Columns(cs...).Select(sel)
		var upd []string
		for _, c := range cs[1:] {
			if g.flip() {
				upd = append(upd, c)
			}
		}
		switch {
		case len(upd) > 0 && g.flip():
			ib = ib.OnConflict("id").DoUpdate(upd...)
		case g.flip():
			ib = ib.OnConflict("id").DoNothing()
		}
		if returning {
			ib = ib.Returning("id")
		}
		m, err := ib.Build()
		return m, table, err
	case 3:
		ub := builder.UpdateTable(target.t)
		c := cols[1+g.n(len(cols)-1)]
		ub = ub.Set(c, q.valueFor(c)).Where(target.t.Col("id").In(q.valueFor("id"), q.valueFor("id"), q.valueFor("id")))
		if g.flip() {
			ub = ub.Where(q.pred([]fref{target}, 0))
		}
		if g.flip() {
			ub = ub.ExpectOne()
		}
		m, err := ub.Returning("id").Build()
		return m, table, err
	default:
		db := builder.DeleteFrom(target.t).Where(target.t.Col("id").In(q.valueFor("id"), q.valueFor("id"), q.valueFor("id")))
		if g.flip() {
			db = db.Where(q.pred([]fref{target}, 0))
		}
		if g.flip() {
			db = db.ExpectOne()
		}
		m, err := db.Returning("id").Build()
		return m, table, err
	}
}

type writesFixture struct {
	h       *hotelDB
	before  string
	foreign map[string]map[string]bool
	execs   int // statements run
	wrote   int // statements that wrote rows
	rows    int // rows returned
}

func newWritesFixture(t testing.TB) *writesFixture {
	h := newHotelSized(t, 3, 3, 3, 2)
	return &writesFixture{h: h, before: foreignRows(t, h, "acme"), foreign: foreignIDs(t, h, "acme")}
}

func (fx *writesFixture) check(t testing.TB, data []byte) error {
	if len(data) == 0 {
		return nil
	}
	h := fx.h
	grants := writeScopes[int(data[0])%len(writeScopes)]
	ctx := grantCtx(grants...)
	m, table, err := genWrites(data[1:], h.sch)
	if err != nil {
		if !errors.Is(err, builder.ErrInvalid) {
			return fmt.Errorf("Build: %w", err)
		}
		return nil
	}
	fx.execs++
	rows, err := h.db.ExecReturning(ctx, m)
	if errors.Is(err, guardedsql.ErrInternal) || errors.Is(err, guardedsql.ErrInvalid) {
		return fmt.Errorf("ExecReturning: %w", err)
	}
	var got []string
	if err == nil {
		ids, err := guardedsql.CollectRows(rows, func(r *guardedsql.Rows) (string, error) {
			var id any
			err := r.Scan(&id)
			return fmt.Sprint(id), err
		})
		if err != nil {
			return fmt.Errorf("scan: %w", err)
		}
		got = ids
		if len(ids) > 0 {
			fx.wrote++
		}
	}
	fx.rows += len(got)
	for _, id := range got {
		if fx.foreign[table][id] {
			text, args, _ := h.db.Render(ctx, m)
			return fmt.Errorf("scope %v got back %s %s of another tenant\n%s\n%v", grants, table, id, text, args)
		}
	}
	if after := foreignRows(t, h, "acme"); after != fx.before {
		text, args, _ := h.db.Render(ctx, m)
		return fmt.Errorf("scope %v changed another tenant's rows (err %v)\n%s\n%v", grants, err, text, args)
	}
	return nil
}

// writesSeeds are fuzzSeeds and as many again, from another stream.
func writesSeeds() [][]byte {
	out := fuzzSeeds()
	for i := 0; i < 192; i++ {
		b := make([]byte, 48)
		x := uint64(i)*0x9e3779b97f4a7c15 + 0x1234567
		for j := range b {
			x ^= x << 13
			x ^= x >> 7
			x ^= x << 17
			b[j] = byte(x >> 24)
		}
		out = append(out, b)
	}
	return out
}

func FuzzGuardWrites(f *testing.F) {
	for _, s := range writesSeeds() {
		f.Add(s)
	}
	fx := newWritesFixture(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		if err := fx.check(t, data); err != nil {
			t.Fatal(err)
		}
	})
}

// TestWritesFuzzCatchesMissingConflictCheck: the seeds write and return
// rows, and with the conflict-row check of upserts removed some seed
// overwrites another tenant's row and the fingerprint notices.
func TestWritesFuzzCatchesMissingConflictCheck(t *testing.T) {
	fx := newWritesFixture(t)
	for _, s := range writesSeeds() {
		if err := fx.check(t, s); err != nil {
			t.Fatal(err)
		}
	}
	if fx.wrote < 10 || fx.rows < 10 {
		t.Fatalf("seeds: %d statements, %d wrote, %d rows returned; the fuzz is vacuous", fx.execs, fx.wrote, fx.rows)
	}
	if !guardfault.Enabled {
		t.Skip("mutation control: " + guardfault.NotBuilt)
	}
	fx = newWritesFixture(t)
	restore := guardfault.Disable(guardfault.UpsertConflict)
	defer restore()
	caught := false
	for _, s := range writesSeeds() {
		for k := 0; k < len(writeScopes) && !caught; k++ {
			d := slices.Clone(s)
			d[0] = byte(k)
			caught = fx.check(t, d) != nil
		}
		if caught {
			break
		}
	}
	if !caught {
		t.Error("with the upsert conflict check removed the writes fuzz saw nothing")
	}
	t.Logf("with the fault, until caught: %d statements, %d returned rows (%d rows)", fx.execs, fx.wrote, fx.rows)
}
