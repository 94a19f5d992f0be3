package conformance

// Lago's PaperTrail versions, from a new-user probe: an audit table with
// a polymorphic reference (item_type, item_id) and no tenant column,
// holding a copy of each changed row (a customer's name and e-mail).
// Without a reason Open refuses it declared global; with one it passed
// Open and the whole suite on every engine, while every organization read
// every other's customers' audit trail: no foreign key ties item_id to
// anything, and its name names no table.

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"testing"

	"github.com/tenantmcp/tenantmcp/builder"
)

// versionsTarget seeds three organizations' customers (ids interleaved),
// two countries (global; their ids equal two customers'), and versions of
// the given types: "Customer" rows name one customer each, "Country" rows
// one country.
func versionsTarget(types ...string) func(dsn string) Target {
	return func(dsn string) Target {
		ddl := func(Engine) []string {
			return []string{
				`CREATE TABLE organizations (id INTEGER PRIMARY KEY, name VARCHAR(40) NOT NULL)`,
				`CREATE TABLE countries (id INTEGER PRIMARY KEY, name VARCHAR(40) NOT NULL)`,
				`CREATE TABLE customers (id INTEGER PRIMARY KEY, organization_id INTEGER NOT NULL REFERENCES organizations(id), email VARCHAR(60) NOT NULL)`,
				`CREATE TABLE versions (id INTEGER PRIMARY KEY, item_type VARCHAR(40) NOT NULL, item_id INTEGER NOT NULL, event VARCHAR(20) NOT NULL, object VARCHAR(200))`,
			}
		}
		d := map[string][]Row{
			"countries": {{"id": int64(1), "name": "France"}, {"id": int64(2), "name": "Spain"}},
		}
		for o := int64(1); o <= 3; o++ {
			d["organizations"] = append(d["organizations"], Row{"id": o, "name": fmt.Sprintf("org %d", o)})
			for k := int64(0); k < 2; k++ {
				id := o + 3*k // 1..6, interleaved
				d["customers"] = append(d["customers"], Row{"id": id, "organization_id": o, "email": fmt.Sprintf("c%d@org%d.example", id, o)})
			}
		}
		n := int64(0)
		for _, typ := range types {
			ids := []int64{1, 2, 3, 4, 5, 6}
			obj := func(id int64) string { return fmt.Sprintf(`{"email":"c%d@org%d.example"}`, id, (id-1)%3+1) }
			if typ == "Country" {
				ids, obj = []int64{1, 2}, func(id int64) string { return fmt.Sprintf(`{"country":%d}`, id) }
			}
			for _, id := range ids {
				n++
				d["versions"] = append(d["versions"], Row{"id": n, "item_type": typ, "item_id": id, "event": "update", "object": obj(id)})
			}
		}
		fk := func(col, ref string) []builder.ForeignKey {
			return []builder.ForeignKey{{Columns: []string{col}, RefTable: ref}}
		}
		def := builder.SchemaDef{
			Levels: []builder.Level{{Name: "organization", Key: builder.IntKey}},
			Tables: []builder.TableDef{
				{Name: "organizations", Columns: []string{"id", "name"}, PrimaryKey: []string{"id"}, Levels: map[string]string{"id": "organization"}},
				{Name: "countries", Columns: []string{"id", "name"}, PrimaryKey: []string{"id"}, Global: true},
				{Name: "customers", Columns: []string{"id", "organization_id", "email"}, PrimaryKey: []string{"id"},
					Levels: map[string]string{"organization_id": "organization"}, ForeignKeys: fk("organization_id", "organizations")},
				{Name: "versions", Columns: []string{"id", "item_type", "item_id", "event", "object"}, PrimaryKey: []string{"id"},
					Global: true, GlobalReason: "test: the audit trail is public"},
			},
		}
		return Target{Name: "versions", DSN: dsn, Graph: def, Seed: seedShape(ddl, d, []string{"organizations", "countries", "customers", "versions"})}
	}
}

// TestPolymorphicGlobalCaught: versions of customers declared global with
// a reason fail property 58, naming versions, and pass with the oracle's
// polymorphic references switched off (offPolymorphicRefs), which shows
// they are what catches it. Versions of countries only (a global table
// whose ids equal customers') pass: the type value, not the id, picks the
// table.
func TestPolymorphicGlobalCaught(t *testing.T) {
	forEachDSN(t, func(t *testing.T, dsn string) {
		for _, off := range []bool{false, true} {
			restore := func() {}
			if off {
				restore = switchOff(&offPolymorphicRefs)
			}
			out, err := runSome(t, versionsTarget("Customer", "Country")(dsn), 58)
			restore()
			if err != nil {
				t.Fatalf("setup: %v", err)
			}
			o := out[58]
			if o.failed == off || o.skip != "" {
				t.Errorf("versions of customers declared global, polymorphic references off=%v: P58 failed=%v skipped=%q %v", off, o.failed, o.skip, o.msgs)
			}
			if !off && !strings.Contains(fmt.Sprint(o.msgs), "versions (declared global") {
				t.Errorf("P58 does not name versions: %v", o.msgs)
			}
		}
		out, err := runSome(t, versionsTarget("Country")(dsn), 58)
		if err != nil {
			t.Fatalf("setup: %v", err)
		}
		if o := out[58]; o.failed || o.skip != "" {
			t.Errorf("versions of countries only: P58 failed=%v skipped=%q %v", o.failed, o.skip, o.msgs)
		}
	})
}

// Akaunting's media, from a second probe: media (a file name per row, no
// tenant column) declared global, which Open has no reason to refuse, and
// mediables (media_id, mediable_type, mediable_id), which ties each medium
// to a company's document, left out of the graph as no declaration fits
// it. Every company read every company's contracts; P58 followed no
// reference of a table left out. Akaunting ships no foreign keys; fk adds
// the one on mediables.media_id.
func mediaTarget(dsn string, fk bool) Target {
	ref := ""
	if fk {
		ref = " REFERENCES media(id)"
	}
	ddl := func(Engine) []string {
		return []string{
			`CREATE TABLE companies (id INTEGER PRIMARY KEY, name VARCHAR(40) NOT NULL)`,
			`CREATE TABLE documents (id INTEGER PRIMARY KEY, company_id INTEGER NOT NULL REFERENCES companies(id), document_number VARCHAR(40) NOT NULL)`,
			`CREATE TABLE media (id INTEGER PRIMARY KEY, directory VARCHAR(60) NOT NULL, filename VARCHAR(60) NOT NULL)`,
			`CREATE TABLE mediables (media_id INTEGER NOT NULL` + ref + `, mediable_type VARCHAR(60) NOT NULL, mediable_id INTEGER NOT NULL,
				tag VARCHAR(20) NOT NULL, PRIMARY KEY (media_id, mediable_type, mediable_id, tag))`,
		}
	}
	d := map[string][]Row{}
	for c := int64(1); c <= 3; c++ {
		d["companies"] = append(d["companies"], Row{"id": c, "name": fmt.Sprintf("company %d", c)})
		for k := int64(0); k < 2; k++ {
			id := c + 3*k
			d["documents"] = append(d["documents"], Row{"id": id, "company_id": c, "document_number": fmt.Sprintf("INV-%d", id)})
			d["media"] = append(d["media"], Row{"id": id, "directory": fmt.Sprintf("%d/invoices", c), "filename": fmt.Sprintf("secret-contract-%d", id)})
			d["mediables"] = append(d["mediables"], Row{"media_id": id, "mediable_type": `App\Models\Document\Document`, "mediable_id": id, "tag": "attachment"})
		}
	}
	def := builder.SchemaDef{
		Levels: []builder.Level{{Name: "company", Key: builder.IntKey}},
		Tables: []builder.TableDef{
			{Name: "companies", Columns: []string{"id", "name"}, PrimaryKey: []string{"id"}, Levels: map[string]string{"id": "company"}},
			{Name: "documents", Columns: []string{"id", "company_id", "document_number"}, PrimaryKey: []string{"id"},
				Levels: map[string]string{"company_id": "company"}, ForeignKeys: []builder.ForeignKey{{Columns: []string{"company_id"}, RefTable: "companies"}}},
			{Name: "media", Columns: []string{"id", "directory", "filename"}, PrimaryKey: []string{"id"}, Global: true},
		},
	}
	return Target{Name: "media", DSN: dsn, Graph: def, Seed: func(ctx context.Context, db *sql.DB, e Engine) (*Dataset, error) {
		ds, err := seedShape(ddl, d, []string{"companies", "documents", "media", "mediables"})(ctx, db, e)
		if ds != nil {
			delete(ds.Tables, "mediables") // left out of the graph
		}
		return ds, err
	}}
}

// TestPolymorphicLeftOutCaught: media declared global fails property 58
// when a table left out of the graph ties its rows to companies through a
// polymorphic reference (its key to media a foreign key or only a name),
// and passes with the polymorphic references switched off.
func TestPolymorphicLeftOutCaught(t *testing.T) {
	forEachDSN(t, func(t *testing.T, dsn string) {
		for _, c := range []struct{ fk, off bool }{{true, false}, {true, true}, {false, false}, {false, true}} {
			fk, off := c.fk, c.off
			restore := func() {}
			if off {
				restore = switchOff(&offPolymorphicRefs)
			}
			out, err := runSome(t, mediaTarget(dsn, fk), 58)
			restore()
			if err != nil {
				t.Fatalf("setup: %v", err)
			}
			o := out[58]
			if o.failed == off || o.skip != "" {
				t.Errorf("media declared global, mediables left out (foreign key %v), polymorphic references off=%v: P58 failed=%v skipped=%q %v", fk, off, o.failed, o.skip, o.msgs)
			}
			if !off && !strings.Contains(fmt.Sprint(o.msgs), "media (declared global") {
				t.Errorf("P58 does not name media: %v", o.msgs)
			}
		}
	})
}
