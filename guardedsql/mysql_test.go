package guardedsql_test

import (
	"strings"
	"testing"

	"github.com/tenantmcp/tenantmcp/builder"
)

// TestMySQLRender pins the scope expansion of levels holding several ids
// (one id: weedout_test.go): the document is a parameter of every
// JSON_TABLE, text levels are matched twice against the same entry of one
// JSON_TABLE (collation, bytes), and no grant id appears in the SQL text.
func TestMySQLRender(t *testing.T) {
	h := engineMySQL.sharedHotel(t)
	ctx := grantCtx(chainG("acme"), chainG("globex"), hotelG(7), hotelG(9))
	b := h.sch.Table("bookings").As("b")
	text, args, err := h.db.Render(ctx, builder.Must(builder.Select(b.Col("id")).From(b).Build()))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"(`_tm2`.`chain_id`, CAST(`_tm2`.`chain_id` AS BINARY)) IN (SELECT `_tms`.`c0`, `_tms`.`b0` FROM " +
			"JSON_TABLE(?, '$.\"chain\"[*]' COLUMNS (`c0` VARCHAR(256) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin PATH '$', `b0` VARBINARY(256) PATH '$'))",
		"JSON_TABLE(?, '$.\"hotel\"[*]' COLUMNS (`c0` BIGINT PATH '$'))",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("missing %s in\n%s", want, text)
		}
	}
	if strings.Contains(text, "acme") || strings.Count(text, "?") != len(args) {
		t.Fatalf("ids in text or placeholder mismatch: %s %v", text, args)
	}
	for _, a := range args {
		if a != `{"chain":["acme","globex"],"hotel":[7,9]}` {
			t.Fatalf("argument %v is not the scope document", a)
		}
	}
}
