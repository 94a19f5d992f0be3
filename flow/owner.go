package flow

import (
	"reflect"
	"strings"
	"sync"

	"github.com/tenantmcp/tenantmcp/redact"
)

// The data subject ($owner) of a result is read from its fields tagged
// pii:"email": every value of every such field must be one valid address,
// and package redact must not have counted more e-mail values in the
// result than those fields hold (an address in free text, or behind an
// interface, would be one more), or the subjects are unknown.

type ownerAcc struct {
	vals   []string
	fields int
	bad    bool
}

func (a *ownerAcc) add(s string) {
	a.fields++
	if a.bad {
		return
	}
	addr, _, err := parseEmail(s)
	if err != nil {
		a.bad = true
		return
	}
	for _, v := range a.vals {
		if v == addr {
			return
		}
	}
	if len(a.vals) == maxOwners {
		a.bad = true
		return
	}
	a.vals = append(a.vals, addr)
}

// owners returns the data subjects of a result value and whether they are
// unknown.
func owners(out any, rep redact.Report) ([]string, bool) {
	var acc ownerAcc
	walkOwners(reflect.ValueOf(out), &acc, 0)
	if rep.Redacted(redact.Email)+rep.Revealed(redact.Email) > acc.fields {
		return nil, true
	}
	if acc.bad || len(acc.vals) == 0 {
		return nil, true
	}
	return acc.vals, false
}

var ownerTypes sync.Map // reflect.Type → bool: an email-tagged field is reachable

func hasOwnerField(t reflect.Type) bool {
	if v, ok := ownerTypes.Load(t); ok {
		return v.(bool)
	}
	found := reachOwner(t, map[reflect.Type]bool{})
	ownerTypes.Store(t, found)
	return found
}

func reachOwner(t reflect.Type, seen map[reflect.Type]bool) bool {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if seen[t] {
		return false
	}
	seen[t] = true
	switch t.Kind() {
	case reflect.Struct:
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			if !f.IsExported() && !f.Anonymous {
				continue
			}
			if isOwnerTag(f) || reachOwner(f.Type, seen) {
				return true
			}
		}
	case reflect.Slice, reflect.Array, reflect.Map:
		return reachOwner(t.Elem(), seen)
	}
	return false
}

func isOwnerTag(f reflect.StructField) bool {
	tag, ok := f.Tag.Lookup("pii")
	if !ok {
		return false
	}
	name, _, _ := strings.Cut(tag, ",")
	return redact.Category(name) == redact.Email
}

const maxOwnerDepth = 64

// ownerField is a field of a struct that walkOwners visits: an e-mail
// tagged one (owner) or one whose value may hold such a field.
type ownerField struct {
	index int
	owner bool
	sf    reflect.StructField
}

var ownerPlans sync.Map // reflect.Type (a struct) → *structOwners

type structOwners struct {
	fields  []ownerField
	skipped bool // a scalar field was left out
}

// ownerPlan lists, in field order, the fields of struct type t that
// walkOwners must visit: the exported or embedded ones, less those whose
// type is a scalar (a walk of a bool, number or string, or of a pointer to
// one, finds nothing whatever its value). Keyed by the type itself, so two
// types never share a plan; built once, so a call reads no struct tags.
func ownerPlan(t reflect.Type) *structOwners {
	if p, ok := ownerPlans.Load(t); ok {
		return p.(*structOwners)
	}
	plan := &structOwners{}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.IsExported() && !f.Anonymous {
			continue
		}
		switch {
		case isOwnerTag(f):
			plan.fields = append(plan.fields, ownerField{index: i, owner: true, sf: f})
		case isScalar(f.Type):
			plan.skipped = true
		default:
			plan.fields = append(plan.fields, ownerField{index: i, sf: f})
		}
	}
	p, _ := ownerPlans.LoadOrStore(t, plan)
	return p.(*structOwners)
}

func isScalar(t reflect.Type) bool {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Bool, reflect.String,
		reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr,
		reflect.Float32, reflect.Float64, reflect.Complex64, reflect.Complex128:
		return true
	}
	return false
}

func walkOwners(v reflect.Value, acc *ownerAcc, depth int) {
	if depth > maxOwnerDepth {
		acc.bad = true
		return
	}
	for v.IsValid() && (v.Kind() == reflect.Pointer || v.Kind() == reflect.Interface) {
		if v.IsNil() {
			return
		}
		v = v.Elem()
	}
	if !v.IsValid() || !hasOwnerField(v.Type()) {
		return
	}
	switch v.Kind() {
	case reflect.Struct:
		p := ownerPlan(v.Type())
		if p.skipped && depth+1 > maxOwnerDepth {
			acc.bad = true // as the walk of a skipped field would have
		}
		for _, pf := range p.fields {
			if pf.owner {
				ownerValues(v.Field(pf.index), pf.sf, acc)
				continue
			}
			walkOwners(v.Field(pf.index), acc, depth+1)
		}
	case reflect.Slice, reflect.Array:
		for i := 0; i < v.Len(); i++ {
			walkOwners(v.Index(i), acc, depth+1)
		}
	case reflect.Map:
		it := v.MapRange()
		for it.Next() {
			walkOwners(it.Value(), acc, depth+1)
		}
	}
}

// ownerValues reads the values of one email-tagged field: a string, a
// pointer to one, a list of them, or (",keys") the string keys of a map.
func ownerValues(v reflect.Value, f reflect.StructField, acc *ownerAcc) {
	tag := f.Tag.Get("pii")
	for v.Kind() == reflect.Pointer {
		if v.IsNil() {
			return
		}
		v = v.Elem()
	}
	switch {
	case strings.HasSuffix(tag, ",keys") && v.Kind() == reflect.Map && v.Type().Key().Kind() == reflect.String:
		for _, k := range v.MapKeys() {
			acc.add(k.String())
		}
	case v.Kind() == reflect.String:
		acc.add(v.String())
	case (v.Kind() == reflect.Slice || v.Kind() == reflect.Array) && v.Type().Elem().Kind() == reflect.String:
		for i := 0; i < v.Len(); i++ {
			acc.add(v.Index(i).String())
		}
	default:
		acc.fields++
		acc.bad = true
	}
}
