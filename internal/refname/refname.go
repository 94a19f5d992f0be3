// Package refname reads table references from column names, the way
// frameworks name a reference they keep no foreign key for: inbox_id for
// inboxes.id, company_id for companies.id, tenant_record_id for
// tenants.record_id (Kill Bill's). Both the start-up check (guardedsql)
// and the catalog oracle (conformance) read names this one way.
package refname

import "strings"

// Base returns the table name col is named after when it references a key
// column named key: col without "_"+key or key at its end ("tenant" of
// tenant_record_id for record_id, "user" of userid for id), lower case;
// "" when col does not end so or leaves fewer than two characters.
func Base(col, key string) string {
	col, key = strings.ToLower(col), strings.ToLower(key)
	base, ok := strings.CutSuffix(col, "_"+key)
	if !ok {
		base, ok = strings.CutSuffix(col, key)
	}
	if !ok || len(base) < 2 {
		return ""
	}
	return base
}

// Names reports whether table (any case) is named base, or a plural of
// it: exactly, after a schema's prefix ("public.projects"), or, when
// prefixed, after an application's ("sentry_project").
func Names(table, base string, prefixed bool) bool {
	if base == "" {
		return false
	}
	n := strings.ToLower(table)
	forms := []string{base, base + "s", base + "es"}
	if b, ok := strings.CutSuffix(base, "y"); ok {
		forms = append(forms, b+"ies")
	}
	for _, f := range forms {
		if n == f || strings.HasSuffix(n, "."+f) || prefixed && strings.HasSuffix(n, "_"+f) {
			return true
		}
	}
	return false
}

// Refers reports whether col is named like a reference to column key of
// table (see Base and Names).
func Refers(col, table, key string, prefixed bool) bool {
	return Names(table, Base(col, key), prefixed)
}
