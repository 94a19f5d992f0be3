// Package refname reads table references from column names, the way
// frameworks name a reference they keep no foreign key for: inbox_id for
// inboxes.id, company_id for companies.id, tenant_record_id for
// tenants.record_id (Kill Bill's). Both the start-up check (guardedsql)
// and the catalog oracle (conformance) read names this one way.
package refname

import (
	"slices"
	"strings"
	"unicode"
)

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

// Polymorphic returns the columns of a polymorphic reference among cols
// (as cols spell them), or "", "": a pair ("<p>_type", "<p>_id"), the way
// Rails and Laravel store a reference to a row of any of several tables
// ("taggable_type", "taggable_id"); the bare pair ("type", "type_id"),
// Zulip's recipient; or Django's generic relation ("content_type_id",
// "object_id"). Such a reference names no table, and no database foreign
// key can hold it.
func Polymorphic(cols []string) (typ, id string) {
	has := func(name string) int {
		return slices.IndexFunc(cols, func(x string) bool { return strings.EqualFold(x, name) })
	}
	for _, pair := range [][2]string{{"type", "type_id"}, {"content_type_id", "object_id"}, {"content_type", "object_id"}} {
		if t := has(pair[0]); t >= 0 {
			if i := has(pair[1]); i >= 0 {
				return cols[t], cols[i]
			}
		}
	}
	for t, c := range cols {
		p, ok := strings.CutSuffix(strings.ToLower(c), "_type")
		if !ok || p == "" {
			continue
		}
		if i := has(p + "_id"); i >= 0 {
			return cols[t], cols[i]
		}
	}
	return "", ""
}

// TypeBase returns the table name a polymorphic type value names, as Base
// does for a column: the class name after its namespace ("Customer",
// "App\\Models\\Customer", "Billing::Customer"), in snake case, lower
// ("customer"; "WalletTransaction" gives "wallet_transaction"); "" for a
// value that is not a class name (Zulip's integer types).
func TypeBase(v string) string {
	for _, sep := range []string{"\\", "::", "."} {
		if i := strings.LastIndex(v, sep); i >= 0 {
			v = v[i+len(sep):]
		}
	}
	if v == "" || !unicode.IsLetter(rune(v[0])) {
		return ""
	}
	rs := []rune(v)
	var b strings.Builder
	for i, r := range rs {
		// A word starts at an upper-case letter after a lower-case one
		// or a digit, or before a lower-case one after an acronym
		// ("APIKey": api_key).
		if i > 0 && unicode.IsUpper(r) {
			prev := rs[i-1]
			if unicode.IsLower(prev) || unicode.IsDigit(prev) || unicode.IsUpper(prev) && i+1 < len(rs) && unicode.IsLower(rs[i+1]) {
				b.WriteByte('_')
			}
		}
		b.WriteRune(unicode.ToLower(r))
	}
	return b.String()
}
