package conformance

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// quote quotes an identifier for the engine's owner connection.
func (e Engine) quote(id string) string {
	if e == MySQL {
		return "`" + id + "`"
	}
	return `"` + id + `"`
}

// ph is the engine's n-th (1-based) placeholder.
func (e Engine) ph(n int) string {
	if e == Postgres {
		return fmt.Sprintf("$%d", n)
	}
	return "?"
}

// readTable reads every row of table through the owner connection, with
// []byte turned into string so the values can be bound again.
func readTable(ctx context.Context, db *sql.DB, e Engine, t *tinfo) ([]Row, error) {
	qc := make([]string, len(t.cols))
	for i, c := range t.cols {
		qc[i] = e.quote(c)
	}
	q := "SELECT " + strings.Join(qc, ", ") + " FROM " + e.quote(t.name)
	if len(t.pk) > 0 {
		ob := make([]string, len(t.pk))
		for i, c := range t.pk {
			ob[i] = e.quote(c)
		}
		q += " ORDER BY " + strings.Join(ob, ", ")
	}
	rows, err := db.QueryContext(ctx, q)
	if err != nil {
		return nil, fmt.Errorf("conformance: reading %s as owner: %w", t.name, err)
	}
	defer rows.Close()
	var out []Row
	for rows.Next() {
		vals := make([]any, len(t.cols))
		ptrs := make([]any, len(t.cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			return nil, err
		}
		r := Row{}
		for i, c := range t.cols {
			if b, ok := vals[i].([]byte); ok {
				vals[i] = string(b)
			}
			r[c] = vals[i]
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// snapshot is the whole scratch database as the owner sees it.
type snapshot struct {
	rows  map[string][]Row          // table -> rows in key order
	byKey map[string]map[string]Row // tenant-bound table -> key -> row
	hash  map[string]string         // table -> digest of its contents
}

// keyPrint digests the keys of the tenant-bound tables' rows, table by
// table: what a deterministic Seed gives again on every call.
func (s *snapshot) keyPrint() string {
	h := sha256.New()
	for _, name := range slices.Sorted(maps.Keys(s.byKey)) {
		fmt.Fprintf(h, "%s\x00", name)
		for _, k := range slices.Sorted(maps.Keys(s.byKey[name])) {
			fmt.Fprintf(h, "%s\x00", k)
		}
	}
	return hex.EncodeToString(h.Sum(nil))
}

func takeSnapshot(ctx context.Context, db *sql.DB, e Engine, g *graph) (*snapshot, error) {
	s := &snapshot{rows: map[string][]Row{}, byKey: map[string]map[string]Row{}, hash: map[string]string{}}
	for _, name := range g.names {
		t := g.tables[name]
		rows, err := readTable(ctx, db, e, t)
		if err != nil {
			return nil, err
		}
		s.rows[name] = rows
		h := sha256.New()
		lines := make([]string, len(rows))
		for i, r := range rows {
			parts := make([]string, len(t.cols))
			for j, c := range t.cols {
				parts[j] = canon(r[c])
			}
			lines[i] = strings.Join(parts, "\x1f")
		}
		slices.Sort(lines) // key order can differ between collations; content cannot
		for _, l := range lines {
			h.Write([]byte(l))
			h.Write([]byte{'\n'})
		}
		s.hash[name] = hex.EncodeToString(h.Sum(nil))
		if len(t.pk) > 0 {
			idx := map[string]Row{}
			for _, r := range rows {
				idx[Key(r, t.pk)] = r
			}
			s.byKey[name] = idx
		}
	}
	return s, nil
}

// changed lists the tables whose contents differ between a and b.
func changed(a, b *snapshot) []string {
	var out []string
	for name, h := range a.hash {
		if b.hash[name] != h {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

// rowExists reports whether table has a row with key k, as the owner sees
// it.
func rowExists(ctx context.Context, db *sql.DB, e Engine, t *tinfo, r Row) (bool, error) {
	var where []string
	var args []any
	for i, c := range t.pk {
		where = append(where, e.quote(c)+" = "+e.ph(i+1))
		args = append(args, r[c])
	}
	var n int
	err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM "+e.quote(t.name)+" WHERE "+strings.Join(where, " AND "), args...).Scan(&n)
	return n > 0, err
}

// checkSeed compares the Dataset with what the database holds: the same
// keys in every table, and the same foreign-key and level-column values,
// which are all the oracle reads.
func checkSeed(g *graph, d *Dataset, s *snapshot) error {
	for _, name := range g.names {
		t := g.tables[name]
		if len(t.pk) == 0 {
			continue
		}
		want := d.Tables[name]
		if len(want) != len(s.rows[name]) {
			return fmt.Errorf("conformance: table %s holds %d rows, the Dataset says %d", name, len(s.rows[name]), len(want))
		}
		var cols []string
		for _, f := range t.fks {
			cols = append(cols, f.cols...)
		}
		for _, lc := range t.levelCols {
			cols = append(cols, lc.col)
		}
		for _, r := range want {
			k := Key(r, t.pk)
			got, ok := s.byKey[name][k]
			if !ok {
				return fmt.Errorf("conformance: table %s has no row with key %q from the Dataset", name, k)
			}
			for _, c := range cols {
				if canon(got[c]) != canon(r[c]) {
					return fmt.Errorf("conformance: %s row %q: column %s is %q in the database, %q in the Dataset", name, k, c, canon(got[c]), canon(r[c]))
				}
			}
		}
	}
	return nil
}
