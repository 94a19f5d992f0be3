package server

import (
	"encoding/json"
	"math"

	"github.com/google/jsonschema-go/jsonschema"
)

// argCheck is a tool's input schema compiled, when it is one of the
// simplest (what jsonschema.For infers for a struct of strings, booleans,
// ints and floats, optionally pointers: an object of typed properties,
// some required, additionalProperties false or absent), into a check of
// the decoded arguments that needs no reflection.
//
// Invariant: accepts(m) is true only if the full validation of m against
// the schema (jsonschema.Resolved.Validate) succeeds; whatever it cannot
// decide (an unexpected type, a nested value, a keyword it does not know)
// makes it answer false, and validateArgs then runs the full validation,
// which gives the decision and the error. So the check can only save work,
// never admit an argument the schema refuses.
type argCheck struct {
	props    map[string]jsonKinds
	required []string
	closed   bool // additionalProperties: false
}

// jsonKinds is a set of JSON Schema type names.
type jsonKinds uint8

const (
	kindNull jsonKinds = 1 << iota
	kindBoolean
	kindString
	kindInteger
	kindNumber
)

var kindNames = map[string]jsonKinds{
	"null": kindNull, "boolean": kindBoolean, "string": kindString, "integer": kindInteger, "number": kindNumber,
}

// annotations are the keywords that never affect validation.
var annotations = map[string]bool{"description": true, "title": true}

// compileArgCheck compiles s, or returns nil if s uses anything beyond the
// simple form (then every call takes the full validation). It reads the
// schema's JSON form, so a keyword added to jsonschema.Schema later is
// unknown here and disables the check rather than being ignored.
func compileArgCheck(s *jsonschema.Schema) *argCheck {
	b, err := json.Marshal(s)
	if err != nil {
		return nil
	}
	var top map[string]json.RawMessage
	if json.Unmarshal(b, &top) != nil {
		return nil
	}
	c := &argCheck{props: map[string]jsonKinds{}}
	for k, v := range top {
		switch {
		case annotations[k]:
		case k == "type":
			var t string
			if json.Unmarshal(v, &t) != nil || t != "object" {
				return nil
			}
		case k == "required":
			if json.Unmarshal(v, &c.required) != nil {
				return nil
			}
		case k == "additionalProperties":
			if string(v) != "false" {
				return nil
			}
			c.closed = true
		case k == "properties":
			var props map[string]map[string]json.RawMessage
			if json.Unmarshal(v, &props) != nil {
				return nil
			}
			for name, p := range props {
				kinds, ok := propKinds(p)
				if !ok {
					return nil
				}
				c.props[name] = kinds
			}
		default:
			return nil
		}
	}
	if _, ok := top["type"]; !ok {
		return nil
	}
	return c
}

// propKinds reads a property schema made only of a type (a name or a list
// of names) and annotations.
func propKinds(p map[string]json.RawMessage) (jsonKinds, bool) {
	var kinds jsonKinds
	for k, v := range p {
		switch {
		case annotations[k]:
		case k == "type":
			var names []string
			var one string
			if json.Unmarshal(v, &one) == nil {
				names = []string{one}
			} else if json.Unmarshal(v, &names) != nil || len(names) == 0 {
				return 0, false
			}
			for _, n := range names {
				kn, ok := kindNames[n]
				if !ok {
					return 0, false
				}
				kinds |= kn
			}
		default:
			return 0, false
		}
	}
	return kinds, kinds != 0
}

// accepts reports whether m, the arguments as encoding/json decodes them
// into a map, certainly satisfies the schema (see argCheck).
func (c *argCheck) accepts(m map[string]any) bool {
	for _, r := range c.required {
		if _, ok := m[r]; !ok {
			return false
		}
	}
	for k, v := range m {
		kinds, ok := c.props[k]
		if !ok {
			if c.closed {
				return false
			}
			continue // an additional property, which the schema allows with any value
		}
		if kinds&kindOf(v) == 0 {
			return false
		}
	}
	return true
}

// kindOf is the set of JSON Schema types v is an instance of (an integral
// number is both an integer and a number), or 0 for what the check leaves
// to the full validation (objects, arrays, anything unexpected).
func kindOf(v any) jsonKinds {
	switch x := v.(type) {
	case nil:
		return kindNull
	case bool:
		return kindBoolean
	case string:
		return kindString
	case float64:
		if math.IsInf(x, 0) || math.IsNaN(x) {
			return 0
		}
		if _, frac := math.Modf(x); frac == 0 {
			return kindInteger | kindNumber
		}
		return kindNumber
	}
	return 0
}
