package server

import (
	"fmt"
	"reflect"
	"slices"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"
)

// outputSchema infers Out's schema and loosens it where redaction changes
// the shape of a value: a field tagged `pii:"…"` may be masked or tokenised
// (a string whatever its Go type) or dropped (so it is never required).
// Clients validate structured content against this schema, so it must
// describe the redacted output, not the handler's value.
func outputSchema[Out any]() (*jsonschema.Schema, error) {
	t := reflect.TypeFor[Out]()
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	s, err := jsonschema.ForType(t, nil)
	if err != nil {
		return nil, err
	}
	if s.Type != "object" {
		return nil, fmt.Errorf("result type %v must be a struct or map: MCP structured content is an object", t)
	}
	loosenPII(t, s, map[reflect.Type]bool{})
	return s, nil
}

func loosenPII(t reflect.Type, s *jsonschema.Schema, seen map[reflect.Type]bool) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if s == nil || seen[t] {
		return
	}
	switch t.Kind() {
	case reflect.Slice, reflect.Array:
		loosenPII(t.Elem(), s.Items, seen)
	case reflect.Map:
		loosenPII(t.Elem(), s.AdditionalProperties, seen)
	case reflect.Struct:
		seen[t] = true
		defer delete(seen, t)
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			if !f.IsExported() && !f.Anonymous {
				continue
			}
			name, skip := jsonName(f)
			if skip {
				continue
			}
			ft := f.Type
			for ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if f.Anonymous && name == "" && ft.Kind() == reflect.Struct {
				loosenPII(ft, s, seen) // embedded fields are promoted into s
				continue
			}
			if name == "" {
				name = f.Name
			}
			prop := s.Properties[name]
			if prop == nil {
				continue
			}
			if _, ok := f.Tag.Lookup("pii"); ok {
				s.Properties[name] = redactedValueSchema(prop)
				s.Required = slices.DeleteFunc(s.Required, func(r string) bool { return r == name })
				continue
			}
			loosenPII(f.Type, prop, seen)
		}
	}
}

// redactedValueSchema admits a redaction placeholder, mask or token (a
// string) as well as the value revealed in clear for a permitted role.
func redactedValueSchema(orig *jsonschema.Schema) *jsonschema.Schema {
	if orig.Type == "array" && orig.Items != nil {
		// A tagged list is redacted element by element.
		return &jsonschema.Schema{Type: "array", Description: orig.Description, Items: redactedValueSchema(orig.Items)}
	}
	types := []string{"string"}
	if orig.Type != "" && orig.Type != "string" {
		types = append(types, orig.Type)
	}
	for _, t := range orig.Types {
		if !slices.Contains(types, t) {
			types = append(types, t)
		}
	}
	out := &jsonschema.Schema{Description: orig.Description}
	if len(types) == 1 {
		out.Type = types[0]
	} else {
		out.Types = types
	}
	return out
}

// jsonName returns the encoding/json name of f ("" if the tag names none)
// and whether the field is skipped with `json:"-"`.
func jsonName(f reflect.StructField) (string, bool) {
	tag := f.Tag.Get("json")
	if tag == "-" {
		return "", true
	}
	name, _, _ := strings.Cut(tag, ",")
	return name, false
}
