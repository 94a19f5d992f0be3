package conformance

// Lago's fees_taxes(fee_id, tax_id) and memberships(user_id,
// organization_id), from a new-user probe: a table with a UUID key whose
// other unique key is made of foreign-key columns only. Property 60 copied
// an own row with fresh key values and no other change, so every copy
// collided with its template on the join key (ErrConflict) and a correct
// declaration failed on all three engines. And Lago's partial unique
// indexes (taxes(code, organization_id) WHERE deleted_at IS NULL), which
// the suite did not read from the catalog: left out of the declaration's
// Unique, every copy of a tax collided on it.

import (
	"fmt"
	"testing"

	"github.com/tenantmcp/tenantmcp/builder"
)

func typedJoinTarget(dsn string) Target {
	ddl := func(e Engine) []string {
		// Lago's partial unique index, which the declaration does not
		// list (MariaDB has no partial index: a full one there).
		partial := " WHERE deleted_at IS NULL"
		if e == MySQL {
			partial = ""
		}
		return []string{
			`CREATE TABLE organizations (id INTEGER PRIMARY KEY, name VARCHAR(40) NOT NULL)`,
			`CREATE TABLE fees (id VARCHAR(36) PRIMARY KEY, organization_id INTEGER NOT NULL REFERENCES organizations(id), amount_cents INTEGER NOT NULL)`,
			`CREATE TABLE taxes (id VARCHAR(36) PRIMARY KEY, organization_id INTEGER NOT NULL REFERENCES organizations(id), code VARCHAR(20) NOT NULL, deleted_at VARCHAR(30))`,
			`CREATE UNIQUE INDEX index_taxes_on_code_and_organization_id ON taxes (code, organization_id)` + partial,
			`CREATE TABLE fees_taxes (id VARCHAR(36) PRIMARY KEY, fee_id VARCHAR(36) NOT NULL REFERENCES fees(id), tax_id VARCHAR(36) NOT NULL REFERENCES taxes(id),
				amount_cents INTEGER NOT NULL, CONSTRAINT index_fees_taxes_on_fee_id_and_tax_id UNIQUE (fee_id, tax_id))`,
		}
	}
	uuid := func(kind, o, k int) string { return fmt.Sprintf("%08x-0000-4000-8000-%012x", kind, o*16+k) }
	d := map[string][]Row{}
	for o := 1; o <= 3; o++ {
		d["organizations"] = append(d["organizations"], Row{"id": int64(o), "name": fmt.Sprintf("org %d", o)})
		for k := 1; k <= 2; k++ {
			d["fees"] = append(d["fees"], Row{"id": uuid(1, o, k), "organization_id": int64(o), "amount_cents": int64(100*o + k)})
			d["taxes"] = append(d["taxes"], Row{"id": uuid(2, o, k), "organization_id": int64(o), "code": fmt.Sprintf("vat_%d_%d", o, k)})
		}
		// One pair an organization: (fee 1, tax 1); (fee 1, tax 2) is free.
		d["fees_taxes"] = append(d["fees_taxes"], Row{"id": uuid(3, o, 1), "fee_id": uuid(1, o, 1), "tax_id": uuid(2, o, 1), "amount_cents": int64(20 * o)})
	}
	fk := func(col, ref string) builder.ForeignKey {
		return builder.ForeignKey{Columns: []string{col}, RefTable: ref}
	}
	def := builder.SchemaDef{
		Levels: []builder.Level{{Name: "organization", Key: builder.IntKey}},
		Tables: []builder.TableDef{
			{Name: "organizations", Columns: []string{"id", "name"}, PrimaryKey: []string{"id"}, Levels: map[string]string{"id": "organization"}},
			{Name: "fees", Columns: []string{"id", "organization_id", "amount_cents"}, PrimaryKey: []string{"id"},
				Levels: map[string]string{"organization_id": "organization"}, ForeignKeys: []builder.ForeignKey{fk("organization_id", "organizations")}},
			{Name: "taxes", Columns: []string{"id", "organization_id", "code"}, PrimaryKey: []string{"id"},
				Levels: map[string]string{"organization_id": "organization"}, ForeignKeys: []builder.ForeignKey{fk("organization_id", "organizations")}},
			{Name: "fees_taxes", Columns: []string{"id", "fee_id", "tax_id", "amount_cents"}, PrimaryKey: []string{"id"}, Parent: "fee_id",
				Unique: [][]string{{"fee_id", "tax_id"}}, ForeignKeys: []builder.ForeignKey{fk("fee_id", "fees"), fk("tax_id", "taxes")}},
		},
	}
	return Target{Name: "typedjoin", DSN: dsn, Graph: def, Seed: seedShape(ddl, d, []string{"organizations", "fees", "taxes", "fees_taxes"})}
}

// TestTypedJoinTableCopies: property 60 (and 9 and 10, which copy rows the
// same way) pass on a correct declaration of such a table, on every
// engine: the copy's join key points at the organization's free pair.
func TestTypedJoinTableCopies(t *testing.T) {
	expectGreen(t, typedJoinTarget, 9, 10, 60)
}
