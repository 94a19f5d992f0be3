package refname

import "testing"

func TestRefers(t *testing.T) {
	for _, c := range []struct {
		col, table, key string
		prefixed, want  bool
	}{
		{"inbox_id", "inboxes", "id", false, true},
		{"company_id", "companies", "id", false, true},
		{"address_id", "address", "id", false, true},
		{"userid", "users", "id", false, true},
		{"tenant_record_id", "tenants", "record_id", false, true},
		{"tenant_record_id", "tenants", "id", false, false}, // "tenant_record" names no tenants
		{"project_id", "sentry_project", "id", true, true},
		{"project_id", "sentry_project", "id", false, false},
		{"project_id", "public.projects", "id", false, true},
		{"id", "ids", "id", true, false},
		{"x_id", "xs", "id", true, false}, // a one-letter base names nothing
		{"account_id", "accounts", "record_id", true, false},
	} {
		if got := Refers(c.col, c.table, c.key, c.prefixed); got != c.want {
			t.Errorf("Refers(%q, %q, %q, %v) = %v, want %v", c.col, c.table, c.key, c.prefixed, got, c.want)
		}
	}
}
