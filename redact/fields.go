package redact

import (
	"cmp"
	"encoding"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode"
)

// field is one JSON member of a struct type, after Go's embedding rules and
// encoding/json's tag rules have been applied.
type field struct {
	name      string
	nameJSON  []byte // `"name":`, HTML-escaped as encoding/json does
	tag       bool   // the name came from a json tag
	index     []int
	typ       reflect.Type // the field's type, one unnamed pointer followed
	omitEmpty bool
	omitZero  bool
	isZero    func(reflect.Value) bool
	quoted    bool

	pii  bool     // the field carries a pii tag (own or inherited)
	cat  catIndex // its category
	keys bool     // ",keys": the category applies to the map's keys

	enc    encoderFunc // filled in by newStructEncoder
	tagged taggedFunc  // filled in by newStructEncoder for pii fields
	fast   fastKind    // filled in by newStructEncoder: enc's work done inline
	// direct and offset, filled in by newStructEncoder: a plain string or
	// 64-bit integer field with no tag option but its name, read at
	// offset from the address of an addressable struct (see
	// structEncoder.encode).
	direct fastKind
	offset uintptr
}

type structInfo struct {
	fields []field
	err    error // first invalid pii tag, wrapping ErrTag
}

var fieldCache sync.Map // reflect.Type → *structInfo

func cachedFields(t reflect.Type) *structInfo {
	if v, ok := fieldCache.Load(t); ok {
		return v.(*structInfo)
	}
	v, _ := fieldCache.LoadOrStore(t, typeFields(t))
	return v.(*structInfo)
}

// piiTag is a parsed `pii:"category[,keys]"` tag.
type piiTag struct {
	set  bool
	cat  catIndex
	keys bool
}

func parsePII(t reflect.Type, sf reflect.StructField) (piiTag, error) {
	v, ok := sf.Tag.Lookup("pii")
	if !ok {
		return piiTag{}, nil
	}
	name, opts, _ := strings.Cut(v, ",")
	ci, ok := indexOf(Category(name))
	if !ok {
		return piiTag{}, fmt.Errorf("%w: field %s.%s: unknown category %q (known: %v)", ErrTag, t, sf.Name, name, catNames)
	}
	p := piiTag{set: true, cat: ci}
	for opts != "" {
		var o string
		o, opts, _ = strings.Cut(opts, ",")
		switch o {
		case "keys":
			ft := sf.Type
			for ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() != reflect.Map {
				return piiTag{}, fmt.Errorf("%w: field %s.%s: option keys needs a map, not %s", ErrTag, t, sf.Name, sf.Type)
			}
			p.keys = true
		default:
			return piiTag{}, fmt.Errorf("%w: field %s.%s: unknown option %q", ErrTag, t, sf.Name, o)
		}
	}
	return p, nil
}

// typeFields lists the JSON members of struct type t the way encoding/json
// does: breadth-first through embedded structs, the shallowest name wins, a
// json-tagged name beats an untagged one at the same depth, and remaining
// ties hide each other. A pii tag on an embedded struct that is flattened
// applies to every member promoted from it that has no tag of its own.
func typeFields(t reflect.Type) *structInfo {
	type pending struct {
		typ   reflect.Type
		index []int
		pii   piiTag
	}
	info := &structInfo{}
	var found []field
	next := []pending{{typ: t}}
	var current []pending
	var count, nextCount map[reflect.Type]int
	visited := map[reflect.Type]bool{}

	for len(next) > 0 {
		current, next = next, current[:0]
		count, nextCount = nextCount, map[reflect.Type]int{}
		for _, p := range current {
			if visited[p.typ] {
				continue
			}
			visited[p.typ] = true
			for i := 0; i < p.typ.NumField(); i++ {
				sf := p.typ.Field(i)
				if sf.Anonymous {
					et := sf.Type
					if et.Kind() == reflect.Pointer {
						et = et.Elem()
					}
					if !sf.IsExported() && et.Kind() != reflect.Struct {
						continue
					}
				} else if !sf.IsExported() {
					continue
				}
				tag := sf.Tag.Get("json")
				if tag == "-" {
					continue
				}
				pt, err := parsePII(p.typ, sf)
				if err != nil && info.err == nil {
					info.err = err
				}
				if !pt.set {
					pt = p.pii
				}
				name, opts, _ := strings.Cut(tag, ",")
				if !validJSONName(name) {
					name = ""
				}
				index := make([]int, len(p.index)+1)
				copy(index, p.index)
				index[len(p.index)] = i

				ft := sf.Type
				if ft.Name() == "" && ft.Kind() == reflect.Pointer {
					ft = ft.Elem()
				}
				if name == "" && sf.Anonymous && ft.Kind() == reflect.Struct {
					nextCount[ft]++
					if nextCount[ft] == 1 {
						next = append(next, pending{typ: ft, index: index, pii: pt})
					}
					continue
				}
				f := field{
					name:      name,
					tag:       name != "",
					index:     index,
					typ:       ft,
					omitEmpty: hasOption(opts, "omitempty"),
					omitZero:  hasOption(opts, "omitzero"),
					quoted:    hasOption(opts, "string") && quotable(ft.Kind()),
					pii:       pt.set,
					cat:       pt.cat,
					keys:      pt.keys,
				}
				if f.name == "" {
					f.name = sf.Name
				}
				f.nameJSON = append(appendString(nil, f.name), ':')
				if f.omitZero {
					f.isZero = zeroFunc(sf.Type)
				}
				found = append(found, f)
				if count[p.typ] > 1 {
					// Several embeddings of p.typ at this depth: the
					// duplicate makes the names below annihilate.
					found = append(found, found[len(found)-1])
				}
			}
		}
	}

	slices.SortFunc(found, func(a, b field) int {
		if c := strings.Compare(a.name, b.name); c != 0 {
			return c
		}
		if c := cmp.Compare(len(a.index), len(b.index)); c != 0 {
			return c
		}
		if a.tag != b.tag {
			if a.tag {
				return -1
			}
			return 1
		}
		return slices.Compare(a.index, b.index)
	})
	out := found[:0]
	for i := 0; i < len(found); {
		j := i + 1
		for j < len(found) && found[j].name == found[i].name {
			j++
		}
		// found[i] is the shallowest (and tagged-first) of its name; it
		// dominates unless the next one ties with it.
		if j-i == 1 || len(found[i].index) != len(found[i+1].index) || found[i].tag != found[i+1].tag {
			out = append(out, found[i])
		}
		i = j
	}
	slices.SortFunc(out, func(a, b field) int { return slices.Compare(a.index, b.index) })
	info.fields = out
	return info
}

func hasOption(opts, name string) bool {
	for opts != "" {
		var o string
		o, opts, _ = strings.Cut(opts, ",")
		if o == name {
			return true
		}
	}
	return false
}

func quotable(k reflect.Kind) bool {
	switch k {
	case reflect.Bool,
		reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr,
		reflect.Float32, reflect.Float64, reflect.String:
		return true
	}
	return false
}

// validJSONName reports whether a json tag name is usable, by encoding/json's
// rule: letters, digits and a fixed set of punctuation.
func validJSONName(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		if strings.ContainsRune("!#$%&()*+-./:;<=>?@[]^_{|}~ ", c) {
			continue
		}
		if !unicode.IsLetter(c) && !unicode.IsDigit(c) {
			return false
		}
	}
	return true
}

type isZeroer interface{ IsZero() bool }

var isZeroerType = reflect.TypeFor[isZeroer]()

// zeroFunc returns the omitzero test for a field of type t: its IsZero
// method if it has one (guarding nil receivers), else nil for
// reflect.Value.IsZero.
func zeroFunc(t reflect.Type) func(reflect.Value) bool {
	switch {
	case t.Kind() == reflect.Interface && t.Implements(isZeroerType):
		return func(v reflect.Value) bool {
			return v.IsNil() || v.Elem().Kind() == reflect.Pointer && v.Elem().IsNil() || v.Interface().(isZeroer).IsZero()
		}
	case t.Kind() == reflect.Pointer && t.Implements(isZeroerType):
		return func(v reflect.Value) bool { return v.IsNil() || v.Interface().(isZeroer).IsZero() }
	case t.Implements(isZeroerType):
		return func(v reflect.Value) bool { return v.Interface().(isZeroer).IsZero() }
	case reflect.PointerTo(t).Implements(isZeroerType):
		return func(v reflect.Value) bool {
			if !v.CanAddr() {
				c := reflect.New(v.Type()).Elem()
				c.Set(v)
				v = c
			}
			return v.Addr().Interface().(isZeroer).IsZero()
		}
	}
	return nil
}

func typeByIndex(t reflect.Type, index []int) reflect.Type {
	for _, i := range index {
		if t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		t = t.Field(i).Type
	}
	return t
}

var (
	marshalerType     = reflect.TypeFor[json.Marshaler]()
	textMarshalerType = reflect.TypeFor[encoding.TextMarshaler]()
	timeType          = reflect.TypeFor[time.Time]()
	numberType        = reflect.TypeFor[json.Number]()
	stringType        = reflect.TypeFor[string]()
	float64Type       = reflect.TypeFor[float64]()
	boolType          = reflect.TypeFor[bool]()
)

// marshals reports which marshaling interface t (or *t) implements, if any.
func marshals(t reflect.Type) string {
	switch {
	case t.Implements(marshalerType) || t.Kind() != reflect.Pointer && reflect.PointerTo(t).Implements(marshalerType):
		return "json.Marshaler"
	case t.Implements(textMarshalerType) || t.Kind() != reflect.Pointer && reflect.PointerTo(t).Implements(textMarshalerType):
		return "encoding.TextMarshaler"
	}
	return ""
}

// TaggedField describes one pii-tagged struct field reachable from a type.
type TaggedField struct {
	// Path is the field's JSON path from the root: member names, "[]" for
	// the elements of an array or slice, "{}" for the values of a map.
	Path []string
	// Category is the field's category.
	Category Category
	// Keys reports a ",keys" tag: the category applies to the map's keys.
	Keys bool
}

// TaggedFields lists the pii-tagged fields reachable from t, depth first in
// field order. A recursive type lists each field once, at its shallowest
// path. Fields reachable only through interface values are not known from
// the type and are not listed; their strings are still scanned at run time.
//
// The error wraps ErrTag if t carries a tag that JSON would refuse, so a
// server can call TaggedFields (or CategoriesOf) when a tool is registered
// and fail at start rather than at the first call.
//
// Note for schema inference: under Mask and Token a tagged field of any
// type becomes a JSON string, and under Drop it is omitted.
func TaggedFields(t reflect.Type) ([]TaggedField, error) {
	var out []TaggedField
	err := walkTags(t, nil, map[reflect.Type]bool{}, func(path []string, f *field) {
		out = append(out, TaggedField{Path: slices.Clone(path), Category: catNames[f.cat], Keys: f.keys})
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// CategoriesOf returns the distinct categories of the pii tags reachable
// from t, in the order of Categories. It is the set of labels a value of
// type t can carry structurally; detectors may find other categories in its
// free text at run time.
func CategoriesOf(t reflect.Type) ([]Category, error) {
	var seen [nCat]bool
	err := walkTags(t, nil, map[reflect.Type]bool{}, func(_ []string, f *field) { seen[f.cat] = true })
	if err != nil {
		return nil, err
	}
	var out []Category
	for i, ok := range seen {
		if ok {
			out = append(out, catNames[i])
		}
	}
	return out, nil
}

func walkTags(t reflect.Type, path []string, onPath map[reflect.Type]bool, visit func([]string, *field)) error {
	if t == nil {
		return nil
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == timeType || onPath[t] {
		return nil
	}
	if m := marshals(t); m != "" {
		if hasPII(t) {
			return fmt.Errorf("%w: %v implements %s, which would bypass its pii tags", ErrTag, t, m)
		}
		return nil
	}
	onPath[t] = true
	defer delete(onPath, t)
	switch t.Kind() {
	case reflect.Struct:
		info := cachedFields(t)
		if info.err != nil {
			return info.err
		}
		for i := range info.fields {
			f := &info.fields[i]
			p := append(path, f.name)
			if f.pii {
				visit(p, f)
			}
			if err := walkTags(typeByIndex(t, f.index), p, onPath, visit); err != nil {
				return err
			}
		}
	case reflect.Slice, reflect.Array:
		if t.Kind() == reflect.Slice && t.Elem().Kind() == reflect.Uint8 {
			return nil
		}
		return walkTags(t.Elem(), append(path, "[]"), onPath, visit)
	case reflect.Map:
		return walkTags(t.Elem(), append(path, "{}"), onPath, visit)
	}
	return nil
}

var piiCache sync.Map // reflect.Type → bool

// hasPII reports whether any pii tag is reachable from t, ignoring t's own
// marshaling methods: if it is true and t marshals itself, the tags cannot
// be enforced.
func hasPII(t reflect.Type) bool {
	if v, ok := piiCache.Load(t); ok {
		return v.(bool)
	}
	found := false
	var walk func(t reflect.Type, seen map[reflect.Type]bool)
	walk = func(t reflect.Type, seen map[reflect.Type]bool) {
		for !found && t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		if found || seen[t] {
			return
		}
		seen[t] = true
		switch t.Kind() {
		case reflect.Struct:
			for i := 0; i < t.NumField(); i++ {
				sf := t.Field(i)
				if _, ok := sf.Tag.Lookup("pii"); ok && (sf.IsExported() || sf.Anonymous) {
					found = true
					return
				}
				walk(sf.Type, seen)
			}
		case reflect.Slice, reflect.Array, reflect.Map:
			walk(t.Elem(), seen)
		}
	}
	walk(t, map[reflect.Type]bool{})
	piiCache.Store(t, found)
	return found
}
