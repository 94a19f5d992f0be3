package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"regexp"
	"strconv"
	"strings"
)

// Argument errors. A client (usually a model) that sends wrong arguments
// needs to learn what the input schema wants, in the schema's terms: the
// argument's path, the JSON type or keyword it fails. It must not see the
// server's Go types (GetBookingIn.id of type int64), and the message does
// not echo the value it sent: a misplaced secret or another tenant's value
// pasted into an argument is not reflected back, nor logged in the error.

// schemaMessage rephrases an input-schema validation error. The validator's
// messages quote the offending value; this keeps only the path, the
// keyword and the types, and falls back to a generic message for anything
// it does not recognise.
func schemaMessage(err error) string {
	msg := err.Error()
	loc := ""
	for {
		i := strings.Index(msg, "validating ")
		if i < 0 {
			break
		}
		rest := msg[i+len("validating "):]
		j := strings.Index(rest, ": ")
		if j < 0 {
			break
		}
		if l := rest[:j]; l != "root" {
			loc = l
		}
		msg = rest[j+2:]
	}
	arg := argPath(loc)
	at := "the arguments"
	if arg != "" {
		at = fmt.Sprintf("argument %q", arg)
	}
	switch {
	case strings.HasPrefix(msg, "type: "):
		want, got := quotedAfter(msg, `want "`), quotedAfter(msg, `has type "`)
		if jsonTypeName(want) == "" {
			break
		}
		if n := jsonTypeName(got); n != "" && got != "null" {
			return fmt.Sprintf("%s must be %s, not %s", at, jsonTypeName(want), n)
		}
		return fmt.Sprintf("%s must be %s", at, jsonTypeName(want))
	case strings.HasPrefix(msg, "required: missing properties: "):
		if names, ok := nameList(strings.TrimPrefix(msg, "required: missing properties: ")); ok {
			return fmt.Sprintf("%s: missing required %s", at, plural("property", names))
		}
		return at + ": a required property is missing"
	case strings.HasPrefix(msg, "unexpected additional properties "):
		if names, ok := nameList(strings.TrimPrefix(msg, "unexpected additional properties ")); ok {
			return fmt.Sprintf("%s: unknown %s (not in the input schema)", at, plural("property", names))
		}
		return at + ": an unknown property (not in the input schema)"
	default:
		k, _, ok := strings.Cut(msg, ":")
		if m := boundRE.FindStringSubmatch(msg); ok && m != nil {
			if v, err := strconv.ParseFloat(m[1], 64); err == nil {
				if phrase, known := boundPhrases[k]; known {
					return at + " " + fmt.Sprintf(phrase, strconv.FormatFloat(v, 'f', -1, 64))
				}
			}
		}
		if ok && keywordRE.MatchString(k) {
			return fmt.Sprintf("%s: does not satisfy the input schema's %q", at, k)
		}
	}
	return at + " do not match the tool's input schema"
}

// boundPhrases words the schema's numeric bounds, whose value the
// validator's message ends with.
var boundPhrases = map[string]string{
	"minimum": "must be at least %s", "maximum": "must be at most %s",
	"exclusiveMinimum": "must be greater than %s", "exclusiveMaximum": "must be less than %s",
	"minItems": "must have at least %s items", "maxItems": "must have at most %s items",
	"minProperties": "must have at least %s properties", "maxProperties": "must have at most %s properties",
}

var (
	boundRE   = regexp.MustCompile(`than ([-+0-9.eE]+)$`)
	keywordRE = regexp.MustCompile(`^[a-zA-Z]{2,32}$`)
	// nameRE is a property name safe to repeat: the schema's own names
	// look like this; anything else is not echoed.
	nameRE = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,64}$`)
)

// argPath turns a schema location ("/properties/guest/properties/email",
// "/properties/ids/items") into an argument path ("guest.email", "ids[]").
func argPath(loc string) string {
	var b strings.Builder
	parts := strings.Split(strings.Trim(loc, "/"), "/")
	for i := 0; i < len(parts); i++ {
		switch parts[i] {
		case "properties":
			if i+1 < len(parts) {
				if b.Len() > 0 {
					b.WriteByte('.')
				}
				b.WriteString(parts[i+1])
				i++
			}
		case "items", "prefixItems", "additionalProperties":
			b.WriteString("[]")
		}
	}
	return b.String()
}

func quotedAfter(s, prefix string) string {
	i := strings.LastIndex(s, prefix)
	if i < 0 {
		return ""
	}
	v, _, _ := strings.Cut(s[i+len(prefix):], `"`)
	return v
}

func jsonTypeName(t string) string {
	switch t {
	case "integer", "array", "object":
		return "an " + t
	case "number", "string", "boolean":
		return "a " + t
	case "null":
		return "null"
	}
	return ""
}

// nameList parses the validator's JSON list of property names, keeping
// only names that look like schema property names.
func nameList(s string) ([]string, bool) {
	var names []string
	if json.Unmarshal([]byte(s), &names) != nil || len(names) == 0 {
		return nil, false
	}
	for _, n := range names {
		if !nameRE.MatchString(n) {
			return nil, false
		}
	}
	return names, true
}

func plural(word string, names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = fmt.Sprintf("%q", n)
	}
	if len(names) == 1 {
		return word + " " + q[0]
	}
	if strings.HasSuffix(word, "y") {
		word = strings.TrimSuffix(word, "y") + "ie"
	}
	return word + "s " + strings.Join(q, ", ")
}

// decodeMessage rephrases an error of decoding validated arguments into
// the handler's input type: what the schema cannot say (an integer that
// must fit the field, written without a fraction or exponent).
func decodeMessage(err error) string {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		at := "the arguments"
		if te.Field != "" {
			at = fmt.Sprintf("argument %q", te.Field)
		}
		switch k := te.Type.Kind(); {
		case k >= reflect.Int && k <= reflect.Int64:
			bits := te.Type.Bits()
			return fmt.Sprintf("%s must be an integer from %d to %d, written without a fraction or exponent",
				at, int64(-1)<<(bits-1), int64(1)<<(bits-1)-1)
		case k >= reflect.Uint && k <= reflect.Uintptr:
			return fmt.Sprintf("%s must be an integer from 0 to %d, written without a fraction or exponent",
				at, uint64(math.MaxUint64)>>(64-te.Type.Bits()))
		case k == reflect.Float32 || k == reflect.Float64:
			return at + " must be a number in range"
		case k == reflect.String:
			return at + " must be a string"
		case k == reflect.Bool:
			return at + " must be a boolean"
		case k == reflect.Slice || k == reflect.Array:
			return at + " must be an array"
		case k == reflect.Struct || k == reflect.Map:
			return at + " must be an object"
		}
		return at + " has the wrong type for the input schema"
	}
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return "the arguments are not valid JSON"
	}
	// Errors of a type's own UnmarshalJSON are the tool author's words,
	// but may quote the value: say only where.
	return "the arguments do not match the tool's input schema"
}
