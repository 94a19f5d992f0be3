package server

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"
)

// ErrTenantInInput is wrapped by the error that refuses to register a tool
// whose input schema has a property named like a tenant key. Scope comes only
// from the verified token; a tenant argument would invite a model (or a
// prompt injection) to choose the tenant.
var ErrTenantInInput = errors.New("server: tool input names a tenant key")

// DefaultScopeKeys are the property names no tool input may carry, in
// addition to each scope level name and "<level>_id".
var DefaultScopeKeys = []string{"tenant", "tenant_id", "chain_id", "org", "org_id"}

// TenantInputError reports the tool and the JSON path of the offending
// property.
type TenantInputError struct {
	Tool     string
	Property string // a JSON-pointer-like path, e.g. "/filter/tenant_id"
	Key      string // the forbidden key it matched
}

func (e *TenantInputError) Error() string {
	return fmt.Sprintf("server: tool %q: input property %q is the scope key %q; tenant scope comes only from the verified token", e.Tool, e.Property, e.Key)
}

func (e *TenantInputError) Unwrap() error { return ErrTenantInInput }

// forbiddenKeys returns the normalized set of forbidden property names.
func forbiddenKeys(extra, levels []string) map[string]string {
	m := map[string]string{}
	add := func(k string) {
		if k != "" {
			m[normalizeKey(k)] = k
		}
	}
	for _, k := range DefaultScopeKeys {
		add(k)
	}
	for _, k := range extra {
		add(k)
	}
	for _, l := range levels {
		add(l)
		add(l + "_id")
	}
	return m
}

// normalizeKey folds case and separators so that tenantId, TenantID,
// tenant-id and tenant_id are the same key.
func normalizeKey(k string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(k) {
		if r == '_' || r == '-' || r == ' ' || r == '.' {
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

// checkTenantFree walks every subschema of s and returns a
// *TenantInputError for the first property (in sorted order) whose name is
// a forbidden key.
func checkTenantFree(tool string, s *jsonschema.Schema, forbidden map[string]string) error {
	seen := map[*jsonschema.Schema]bool{}
	var walk func(path string, s *jsonschema.Schema) error
	walk = func(path string, s *jsonschema.Schema) error {
		if s == nil || seen[s] {
			return nil
		}
		seen[s] = true
		for _, name := range slices.Sorted(maps.Keys(s.Properties)) {
			if k, bad := forbidden[normalizeKey(name)]; bad {
				return &TenantInputError{Tool: tool, Property: path + "/" + name, Key: k}
			}
			if err := walk(path+"/"+name, s.Properties[name]); err != nil {
				return err
			}
		}
		for _, name := range slices.Sorted(maps.Keys(s.Defs)) {
			if err := walk(path+"/$defs/"+name, s.Defs[name]); err != nil {
				return err
			}
		}
		for _, name := range slices.Sorted(maps.Keys(s.Definitions)) {
			if err := walk(path+"/definitions/"+name, s.Definitions[name]); err != nil {
				return err
			}
		}
		for _, name := range slices.Sorted(maps.Keys(s.PatternProperties)) {
			if err := walk(path+"/"+name, s.PatternProperties[name]); err != nil {
				return err
			}
		}
		for _, req := range s.Required {
			if k, bad := forbidden[normalizeKey(req)]; bad {
				return &TenantInputError{Tool: tool, Property: path + "/" + req, Key: k}
			}
		}
		subs := []*jsonschema.Schema{s.Items, s.AdditionalProperties, s.AdditionalItems, s.Contains, s.Not, s.If, s.Then, s.Else, s.UnevaluatedItems, s.UnevaluatedProperties}
		subs = append(subs, s.PrefixItems...)
		subs = append(subs, s.ItemsArray...)
		subs = append(subs, s.AllOf...)
		subs = append(subs, s.AnyOf...)
		subs = append(subs, s.OneOf...)
		for _, sub := range subs {
			if err := walk(path+"/*", sub); err != nil {
				return err
			}
		}
		return nil
	}
	return walk("", s)
}
