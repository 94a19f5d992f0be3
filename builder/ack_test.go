package builder_test

import (
	"errors"
	"testing"

	"github.com/tenantmcp/tenantmcp/builder"
)

// TestAcknowledgements: the issue-25 acknowledgements of TableDef are
// validated (a reason is required, keys name columns, GlobalWritable only
// on a global table that does not look tenant-bound), and Tenancy carries
// them onto introspected tables.
func TestAcknowledgements(t *testing.T) {
	base := func(mut func(*builder.TableDef)) builder.SchemaDef {
		g := builder.TableDef{Name: "rates", Columns: []string{"id", "label"}, PrimaryKey: []string{"id"}, Global: true}
		h := builder.TableDef{Name: "hotels", Columns: []string{"id", "chain_id", "code"}, PrimaryKey: []string{"id"}, Levels: map[string]string{"chain_id": "chain"}}
		mut(&h)
		if h.GlobalWritable != "" { // moved to the global table
			g.GlobalWritable, g.GlobalReason, h.GlobalWritable = h.GlobalWritable, h.GlobalReason, ""
			h.GlobalReason = ""
		}
		return builder.SchemaDef{Levels: []builder.Level{{Name: "chain", Key: builder.TextKey}}, Tables: []builder.TableDef{g, h}}
	}
	for name, mut := range map[string]func(*builder.TableDef){
		"shared key without reason":   func(h *builder.TableDef) { h.SharedUnique = map[string]string{"code": " "} },
		"shared key on no column":     func(h *builder.TableDef) { h.SharedUnique = map[string]string{"code,nope": "why"} },
		"trigger without reason":      func(h *builder.TableDef) { h.Triggers = map[string]string{"t": ""} },
		"writable global with reason": func(h *builder.TableDef) { h.GlobalWritable, h.GlobalReason = "why", "looks tenant-bound" },
	} {
		if _, err := builder.NewSchema(base(mut)); !errors.Is(err, builder.ErrSchema) {
			t.Errorf("%s: err = %v, want ErrSchema", name, err)
		}
	}
	if _, err := builder.NewSchema(base(func(h *builder.TableDef) {
		h.SharedUnique = map[string]string{"code": "codes are public"}
		h.Triggers = map[string]string{"audit": "writes only this row's audit"}
		h.GlobalWritable = "rates are edited by every chain"
	})); err != nil {
		t.Errorf("valid acknowledgements: %v", err)
	}
	cat := []builder.TableDef{
		{Name: "rates", Columns: []string{"id", "label"}, PrimaryKey: []string{"id"}},
		{Name: "hotels", Columns: []string{"id", "chain_id", "code"}, PrimaryKey: []string{"id"}},
	}
	ten := builder.Tenancy{
		Levels:         []builder.Level{{Name: "chain", Key: builder.TextKey}},
		LevelColumns:   map[string]string{"hotels.chain_id": "chain"},
		Global:         []string{"rates"},
		GlobalWritable: map[string]string{"rates": "edited by every chain"},
		SharedUnique:   map[string]map[string]string{"hotels": {"code": "codes are public"}},
		Triggers:       map[string]map[string]string{"hotels": {"audit": "audit only"}},
	}
	def, err := ten.Apply(cat)
	if err != nil {
		t.Fatal(err)
	}
	for _, td := range def.Tables {
		switch td.Name {
		case "rates":
			if td.GlobalWritable == "" {
				t.Errorf("GlobalWritable not applied: %+v", td)
			}
		case "hotels":
			if td.SharedUnique["code"] == "" || td.Triggers["audit"] == "" {
				t.Errorf("SharedUnique/Triggers not applied: %+v", td)
			}
		}
	}
	if _, err := builder.NewSchema(def); err != nil {
		t.Errorf("applied tenancy: %v", err)
	}
	ten.Triggers = map[string]map[string]string{"nope": {"t": "x"}}
	if _, err := ten.Apply(cat); !errors.Is(err, builder.ErrSchema) {
		t.Errorf("acknowledgement for an unknown table: %v, want ErrSchema", err)
	}
}
