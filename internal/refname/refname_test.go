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

func TestPolymorphic(t *testing.T) {
	for _, c := range []struct {
		cols    []string
		typ, id string
	}{
		{[]string{"id", "item_type", "item_id", "object"}, "item_type", "item_id"},
		{[]string{"id", "Taggable_Type", "taggable_id"}, "Taggable_Type", "taggable_id"},
		{[]string{"id", "type", "type_id"}, "type", "type_id"},
		{[]string{"id", "content_type_id", "object_id"}, "content_type_id", "object_id"},
		{[]string{"id", "item_type", "object_id"}, "", ""},
		{[]string{"id", "account_id"}, "", ""},
	} {
		if typ, id := Polymorphic(c.cols); typ != c.typ || id != c.id {
			t.Errorf("Polymorphic(%v) = %q, %q, want %q, %q", c.cols, typ, id, c.typ, c.id)
		}
	}
	for v, want := range map[string]string{
		"Customer": "customer", `App\Models\Customer`: "customer", "Billing::WalletTransaction": "wallet_transaction",
		"auth.user": "user", "2": "", "": "", "API_Key": "api_key", "APIKey": "api_key",
	} {
		if got := TypeBase(v); got != want {
			t.Errorf("TypeBase(%q) = %q, want %q", v, got, want)
		}
	}
}
