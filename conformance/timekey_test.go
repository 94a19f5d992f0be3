package conformance

import (
	"context"
	"database/sql"
	"strings"
	"testing"
	"time"

	"github.com/tenantmcp/tenantmcp/builder"
)

// A new user's shape (AdventureWorks' history tables): a table keyed by
// a tenant and a DATE, seeded with time.Time values as Go code writes
// them. The suite's setup accepts the Dataset (on MariaDB/MySQL the
// owner's snapshot used to read the DATE as "2011-05-31" while the Dataset
// said 2011-05-31T00:00:00Z, and the run stopped) and the read and write
// properties find every row by its date key. On SQLite the seed writes
// the times in the guard's text form, as docs/transactions.md tells users
// to (the driver's default, time.String, is a different text).
func TestTimeKeyDataset(t *testing.T) {
	def := builder.SchemaDef{
		Levels: []builder.Level{{Name: "territory", Key: builder.IntKey}},
		Tables: []builder.TableDef{
			{Name: "territories", Columns: []string{"id"}, PrimaryKey: []string{"id"}, Levels: map[string]string{"id": "territory"}},
			{Name: "quotas", Columns: []string{"territory_id", "quota_date", "amount"}, PrimaryKey: []string{"territory_id", "quota_date"},
				Levels:      map[string]string{"territory_id": "territory"},
				ForeignKeys: []builder.ForeignKey{{Columns: []string{"territory_id"}, RefTable: "territories"}}},
		},
	}
	day := func(m, d int) time.Time { return time.Date(2011, time.Month(m), d, 0, 0, 0, 0, time.UTC) }
	seed := func(ctx context.Context, db *sql.DB, e Engine) (*Dataset, error) {
		d := &Dataset{Tables: map[string][]Row{
			"territories": {{"id": int64(1)}, {"id": int64(2)}, {"id": int64(3)}},
		}}
		// The same dates in every territory: a key that is not unique
		// without the tenant column.
		for _, tr := range []int64{1, 2, 3} {
			for i, dt := range []time.Time{day(5, 31), day(6, 30), day(7, 31)} {
				d.Tables["quotas"] = append(d.Tables["quotas"], Row{"territory_id": tr, "quota_date": dt, "amount": tr*100 + int64(i)})
			}
		}
		for _, q := range []string{
			`CREATE TABLE territories (id INTEGER PRIMARY KEY)`,
			`CREATE TABLE quotas (territory_id INTEGER NOT NULL REFERENCES territories(id), quota_date DATE NOT NULL, amount INTEGER NOT NULL, PRIMARY KEY (territory_id, quota_date))`,
		} {
			if _, err := db.ExecContext(ctx, q); err != nil {
				return nil, err
			}
		}
		for _, table := range []string{"territories", "quotas"} {
			for _, r := range d.Tables[table] {
				var cols, phs []string
				var vals []any
				for c, v := range r {
					if tm, ok := v.(time.Time); ok && e == SQLite {
						v = tm.UTC().Format("2006-01-02 15:04:05")
					}
					cols, phs, vals = append(cols, c), append(phs, "?"), append(vals, v)
				}
				if e == Postgres {
					for i := range phs {
						phs[i] = "$" + string(rune('1'+i))
					}
				}
				if _, err := db.ExecContext(ctx, "INSERT INTO "+table+" ("+strings.Join(cols, ", ")+") VALUES ("+strings.Join(phs, ", ")+")", vals...); err != nil {
					return nil, err
				}
			}
		}
		return d, nil
	}
	forEachDSN(t, func(t *testing.T, dsn string) {
		out, err := runSome(t, Target{Name: "quotas", DSN: dsn, Graph: def, Seed: seed}, 1, 2, 7, 8, 45)
		if err != nil {
			t.Fatalf("setup: %v", err)
		}
		for _, id := range []int{1, 2, 7, 8, 45} {
			o := out[id]
			if o.failed || o.skip != "" {
				t.Errorf("P%d: failed=%v skipped=%q %v", id, o.failed, o.skip, o.msgs)
			}
		}
	})
}
