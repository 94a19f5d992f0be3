package pgtaint_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/tenantmcp/tenantmcp/flow/pgtaint"
)

// TestInstallSQLIsFunctionsOnly (no database): the statements create
// SECURITY DEFINER functions with a pinned search_path, take EXECUTE from
// PUBLIC and every privilege on the table from PUBLIC; the grant gives the
// application role EXECUTE and USAGE only and revokes its table
// privileges. Names that would overflow PostgreSQL's 63 bytes with the
// functions' suffixes, or are not plain identifiers, are refused.
func TestInstallSQLIsFunctionsOnly(t *testing.T) {
	stmts, err := pgtaint.InstallSQL(pgtaint.Options{Table: "app.taint"})
	if err != nil {
		t.Fatal(err)
	}
	all := strings.Join(stmts, "\n")
	for _, want := range []string{
		`REVOKE ALL ON "app"."taint" FROM PUBLIC`,
		`REVOKE ALL ON FUNCTION "app"."taint_put"(text, text, timestamptz, interval, jsonb) FROM PUBLIC`,
		`REVOKE ALL ON FUNCTION "app"."taint_sweep"(timestamptz, interval) FROM PUBLIC`,
	} {
		if !strings.Contains(all, want) {
			t.Errorf("InstallSQL lacks %q", want)
		}
	}
	if n := strings.Count(all, "SECURITY DEFINER SET search_path = pg_catalog, pg_temp"); n != 4 {
		t.Errorf("%d functions are SECURITY DEFINER with a pinned search_path, want 4", n)
	}
	if strings.Contains(all, "GRANT") {
		t.Errorf("InstallSQL grants something: %s", all)
	}
	grants, err := pgtaint.GrantSQL(pgtaint.Options{Table: "app.taint"}, "hotel_app")
	if err != nil {
		t.Fatal(err)
	}
	g := strings.Join(grants, "\n")
	if !strings.Contains(g, `REVOKE ALL ON "app"."taint" FROM "hotel_app"`) || strings.Count(g, "GRANT EXECUTE ON FUNCTION") != 4 {
		t.Errorf("GrantSQL: %s", g)
	}
	for _, line := range grants {
		if strings.HasPrefix(line, "GRANT") && !strings.HasPrefix(line, "GRANT EXECUTE ON FUNCTION") && !strings.HasPrefix(line, "GRANT USAGE ON SCHEMA") {
			t.Errorf("GrantSQL grants more than EXECUTE and USAGE: %s", line)
		}
	}
	for _, bad := range []string{strings.Repeat("a", 57), "Taint", "a.b.c", "x;drop"} {
		if _, err := pgtaint.InstallSQL(pgtaint.Options{Table: bad}); !errors.Is(err, pgtaint.ErrConfig) {
			t.Errorf("table %q: %v, want ErrConfig", bad, err)
		}
	}
	if _, err := pgtaint.GrantSQL(pgtaint.Options{}, ""); !errors.Is(err, pgtaint.ErrConfig) {
		t.Errorf("empty role: %v", err)
	}
}
