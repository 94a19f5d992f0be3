package server

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/google/jsonschema-go/jsonschema"
)

type argsPlain struct {
	From   string `json:"from" jsonschema:"earliest check-in"`
	To     string `json:"to"`
	Status string `json:"status,omitempty"`
	Limit  int    `json:"limit,omitempty"`
	Offset int64  `json:"offset,omitempty"`
}

type argsPointers struct {
	ID    *int64   `json:"id"`
	Name  *string  `json:"name,omitempty"`
	Force bool     `json:"force"`
	Ratio float64  `json:"ratio,omitempty"`
	Score *float64 `json:"score"`
}

type argsOpen map[string]string // additionalProperties: a schema, not false

type argsUnsigned struct {
	N uint `json:"n"` // minimum 0: a keyword the check does not know
}

type argsNested struct {
	Tags  []string `json:"tags"`
	Inner struct {
		A string `json:"a"`
	} `json:"inner"`
}

type argsAny struct {
	V any `json:"v"` // an unrestricted property: {} (no type)
}

// resolvedFor infers and resolves In's schema as AddTool does; narrow adds
// the Within property.
func resolvedFor[In any](t *testing.T, narrow bool) (*jsonschema.Schema, *jsonschema.Resolved) {
	t.Helper()
	s, err := jsonschema.For[In](nil)
	if err != nil {
		t.Fatal(err)
	}
	if narrow {
		if err := addNarrowProperty("t", s); err != nil {
			t.Fatal(err)
		}
	}
	r, err := s.Resolve(&jsonschema.ResolveOptions{ValidateDefaults: true})
	if err != nil {
		t.Fatal(err)
	}
	return s, r
}

// The compiled check is used only for the simple schemas, and stays off
// (nil) for anything with a keyword or shape it does not decide.
func TestArgCheckCompilesOnlySimpleSchemas(t *testing.T) {
	for _, tc := range []struct {
		name   string
		schema func(*testing.T) *jsonschema.Schema
		want   bool
	}{
		{"plain", func(t *testing.T) *jsonschema.Schema { s, _ := resolvedFor[argsPlain](t, false); return s }, true},
		{"plain+within", func(t *testing.T) *jsonschema.Schema { s, _ := resolvedFor[argsPlain](t, true); return s }, true},
		{"pointers", func(t *testing.T) *jsonschema.Schema { s, _ := resolvedFor[argsPointers](t, false); return s }, true},
		{"map", func(t *testing.T) *jsonschema.Schema { s, _ := resolvedFor[argsOpen](t, false); return s }, false},
		{"unsigned", func(t *testing.T) *jsonschema.Schema { s, _ := resolvedFor[argsUnsigned](t, false); return s }, false},
		{"nested", func(t *testing.T) *jsonschema.Schema { s, _ := resolvedFor[argsNested](t, false); return s }, false},
		{"any", func(t *testing.T) *jsonschema.Schema { s, _ := resolvedFor[argsAny](t, false); return s }, false},
		{"enum", func(*testing.T) *jsonschema.Schema {
			return &jsonschema.Schema{Type: "object", Properties: map[string]*jsonschema.Schema{"s": {Type: "string", Enum: []any{"a"}}}}
		}, false},
		{"pattern", func(*testing.T) *jsonschema.Schema {
			return &jsonschema.Schema{Type: "object", Properties: map[string]*jsonschema.Schema{"s": {Type: "string", Pattern: "^a$"}}}
		}, false},
		{"untyped root", func(*testing.T) *jsonschema.Schema {
			return &jsonschema.Schema{Properties: map[string]*jsonschema.Schema{"s": {Type: "string"}}}
		}, false},
		{"open object", func(*testing.T) *jsonschema.Schema {
			return &jsonschema.Schema{Type: "object", Properties: map[string]*jsonschema.Schema{"s": {Type: "string"}}}
		}, true},
	} {
		if got := compileArgCheck(tc.schema(t)) != nil; got != tc.want {
			t.Errorf("%s: compiled = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// The invariant of argCheck, checked against the full validation on
// random arguments: the check accepts exactly the arguments the schema
// accepts (for these schemas it decides every case; it must never accept
// one that the full validation refuses).
func TestArgCheckAgreesWithFullValidation(t *testing.T) {
	type subject struct {
		name   string
		schema *jsonschema.Schema
		res    *jsonschema.Resolved
	}
	var subjects []subject
	add := func(name string, s *jsonschema.Schema, r *jsonschema.Resolved) {
		subjects = append(subjects, subject{name, s, r})
	}
	s, r := resolvedFor[argsPlain](t, false)
	add("plain", s, r)
	s, r = resolvedFor[argsPlain](t, true)
	add("plain+within", s, r)
	s, r = resolvedFor[argsPointers](t, false)
	add("pointers", s, r)
	open := &jsonschema.Schema{Type: "object", Required: []string{"s"}, Properties: map[string]*jsonschema.Schema{
		"s": {Type: "string"}, "n": {Types: []string{"number", "null"}}, "b": {Type: "boolean"}}}
	r, err := open.Resolve(nil)
	if err != nil {
		t.Fatal(err)
	}
	add("open", open, r)

	values := []any{nil, true, false, "", "x", 0.0, 1.0, -3.0, 1.5, 1e300, -1e-300, 9007199254740993.0,
		[]any{}, []any{"a"}, map[string]any{}, map[string]any{"a": 1.0}}
	rng := rand.New(rand.NewPCG(1, 2))
	for _, sub := range subjects {
		c := compileArgCheck(sub.schema)
		if c == nil {
			t.Fatalf("%s: not compiled", sub.name)
		}
		var keys []string
		for k := range sub.schema.Properties {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		extras := []string{"x", "From", "within"}
		value := func() any {
			if rng.IntN(2) == 0 { // often a value of a common type, so that valid arguments occur
				return []any{"a", 2.0, true, nil}[rng.IntN(4)]
			}
			return values[rng.IntN(len(values))]
		}
		accepted, refused := 0, 0
		for range 20000 {
			m := map[string]any{}
			for _, k := range keys {
				if rng.IntN(4) > 0 {
					m[k] = value()
				}
			}
			for _, k := range extras {
				if rng.IntN(8) == 0 {
					m[k] = value()
				}
			}
			var v any = m
			full := sub.res.Validate(&v) == nil
			if got := c.accepts(m); got != full {
				t.Fatalf("%s: %v: check accepts = %v, full validation = %v", sub.name, m, got, full)
			}
			if full {
				accepted++
			} else {
				refused++
			}
		}
		// Both outcomes occurred, so the agreement was tested on each.
		if accepted == 0 || refused == 0 {
			t.Fatalf("%s: %d accepted, %d refused: the inputs do not exercise both outcomes", sub.name, accepted, refused)
		}
	}
}
