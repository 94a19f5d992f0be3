package redact

import (
	"encoding"
	"encoding/json"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Encoding of pii-tagged fields under Mask or Token.
//
// The operator applies to the field's value: through pointers and
// interfaces, element by element through slices and arrays, value by value
// through maps (keys are still scanned by the detectors, or redacted with
// the category under ",keys"). A scalar (string, number, bool, []byte,
// time.Time, a TextMarshaler, or a MarshalJSON that yields a scalar) is
// redacted as its text and written as a JSON string. A composite (a struct,
// or a MarshalJSON that yields an object or array) has no safe hint: Mask
// writes "[redacted:<category>]", Token tokenises the value's clear JSON.

var taggedCache sync.Map // reflect.Type → taggedFunc

func taggedEncoder(t reflect.Type) taggedFunc {
	if f, ok := taggedCache.Load(t); ok {
		return f.(taggedFunc)
	}
	var (
		wg sync.WaitGroup
		f  taggedFunc
	)
	wg.Add(1)
	fi, loaded := taggedCache.LoadOrStore(t, taggedFunc(func(e *encodeState, v reflect.Value, c catIndex, a action) error {
		wg.Wait()
		return f(e, v, c, a)
	}))
	if loaded {
		return fi.(taggedFunc)
	}
	f = newTaggedEncoder(t)
	wg.Done()
	taggedCache.Store(t, f)
	return f
}

func newTaggedEncoder(t reflect.Type) taggedFunc {
	if t == timeType {
		return func(e *encodeState, v reflect.Value, c catIndex, a action) error {
			return e.taggedScalar(timeOf(v).Format(time.RFC3339Nano), c, a)
		}
	}
	if m := marshals(t); m != "" {
		if hasPII(t) {
			err := fmt.Errorf("%w: %v implements %s, which would bypass its pii tags", ErrTag, t, m)
			return func(*encodeState, reflect.Value, catIndex, action) error { return err }
		}
		return marshalerTagged
	}
	switch t.Kind() {
	case reflect.String, reflect.Bool,
		reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr,
		reflect.Float32, reflect.Float64:
		return func(e *encodeState, v reflect.Value, c catIndex, a action) error {
			s, err := scalarText(v)
			if err != nil {
				return err
			}
			return e.taggedScalar(s, c, a)
		}
	case reflect.Pointer:
		elem := taggedEncoder(t.Elem())
		return func(e *encodeState, v reflect.Value, c catIndex, a action) error {
			if v.IsNil() {
				e.buf = append(e.buf, "null"...)
				return nil
			}
			if err := e.enter(v); err != nil {
				return err
			}
			err := elem(e, v.Elem(), c, a)
			e.depth--
			return err
		}
	case reflect.Interface:
		return func(e *encodeState, v reflect.Value, c catIndex, a action) error {
			if v.IsNil() {
				e.buf = append(e.buf, "null"...)
				return nil
			}
			if err := e.enter(v); err != nil {
				return err
			}
			err := taggedEncoder(v.Elem().Type())(e, v.Elem(), c, a)
			e.depth--
			return err
		}
	case reflect.Slice, reflect.Array:
		if isByteSlice(t) {
			return func(e *encodeState, v reflect.Value, c catIndex, a action) error {
				if v.IsNil() {
					e.buf = append(e.buf, "null"...)
					return nil
				}
				return e.taggedScalar(string(v.Bytes()), c, a)
			}
		}
		elem := taggedEncoder(t.Elem())
		return func(e *encodeState, v reflect.Value, c catIndex, a action) error {
			if v.Kind() == reflect.Slice && v.IsNil() {
				e.buf = append(e.buf, "null"...)
				return nil
			}
			if err := e.enter(v); err != nil {
				return err
			}
			e.buf = append(e.buf, '[')
			for i := 0; i < v.Len(); i++ {
				if i > 0 {
					e.buf = append(e.buf, ',')
				}
				if err := elem(e, v.Index(i), c, a); err != nil {
					return err
				}
			}
			e.buf = append(e.buf, ']')
			e.depth--
			return nil
		}
	case reflect.Map:
		if !validMapKey(t.Key()) {
			err := fmt.Errorf("%w: map key type %v", ErrUnsupported, t.Key())
			return func(*encodeState, reflect.Value, catIndex, action) error { return err }
		}
		elem := taggedEncoder(t.Elem())
		return func(e *encodeState, v reflect.Value, c catIndex, a action) error {
			return e.encodeMap(v, func(v reflect.Value) error { return elem(e, v, c, a) }, 0, 0, false)
		}
	}
	return compositeTagged
}

// keysTagged encodes a map field tagged ",keys": keys redacted with the
// category, values encoded normally.
func keysTagged(t reflect.Type) taggedFunc {
	mt := t
	for mt.Kind() == reflect.Pointer {
		mt = mt.Elem()
	}
	if !validMapKey(mt.Key()) {
		err := fmt.Errorf("%w: map key type %v", ErrUnsupported, mt.Key())
		return func(*encodeState, reflect.Value, catIndex, action) error { return err }
	}
	elem := typeEncoder(mt.Elem())
	return func(e *encodeState, v reflect.Value, c catIndex, a action) error {
		for v.Kind() == reflect.Pointer {
			if v.IsNil() {
				e.buf = append(e.buf, "null"...)
				return nil
			}
			v = v.Elem()
		}
		return e.encodeMap(v, func(v reflect.Value) error { return elem(e, v, encOpts{}) }, c, a, true)
	}
}

// taggedScalar writes the redaction of text as a JSON string. Empty text
// stays empty: there is nothing to hide.
func (e *encodeState) taggedScalar(text string, c catIndex, a action) error {
	if text == "" {
		e.buf = append(e.buf, '"', '"')
		return nil
	}
	if a == actMask && c != ciSecret {
		var tmp [64]byte // no write barrier: see extend
		tmp[0] = '"'
		m := appendMask(tmp[:1], c, text)
		e.writeBytes(append(m, '"'))
		return nil
	}
	e.buf = appendString(e.buf, e.apply(c, a, text))
	return nil
}

func scalarText(v reflect.Value) (string, error) {
	switch v.Kind() {
	case reflect.String:
		return v.String(), nil
	case reflect.Bool:
		return strconv.FormatBool(v.Bool()), nil
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return strconv.FormatInt(v.Int(), 10), nil
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return strconv.FormatUint(v.Uint(), 10), nil
	case reflect.Float32, reflect.Float64:
		f := v.Float()
		bits := 64
		if v.Kind() == reflect.Float32 {
			bits = 32
		}
		return strconv.FormatFloat(f, 'g', -1, bits), nil
	}
	return "", fmt.Errorf("%w: type %v", ErrUnsupported, v.Type())
}

// compositeTagged redacts a value with no text form as a whole.
func compositeTagged(e *encodeState, v reflect.Value, c catIndex, a action) error {
	if a != actToken || c == ciSecret {
		e.buf = appendString(e.buf, placeholders[c])
		return nil
	}
	clear, err := e.clearJSON(v)
	if err != nil {
		return err
	}
	e.buf = appendString(e.buf, e.sc.token(c, string(clear)))
	return nil
}

// marshalerTagged redacts a value that marshals itself: by its text if it
// yields a scalar, as a composite otherwise.
func marshalerTagged(e *encodeState, v reflect.Value, c catIndex, a action) error {
	if (v.Kind() == reflect.Pointer || v.Kind() == reflect.Interface) && v.IsNil() {
		e.buf = append(e.buf, "null"...)
		return nil
	}
	var x any
	switch {
	case v.CanInterface() && (v.Type().Implements(marshalerType) || v.Type().Implements(textMarshalerType)):
		x = v.Interface()
	case v.CanAddr() && v.Addr().CanInterface():
		x = v.Addr().Interface()
	default:
		// A pointer-receiver marshaler on an unaddressable value is not
		// called by encoding/json either; redact the plain value.
		if t := v.Type(); t.Kind() == reflect.Struct {
			return compositeTagged(e, v, c, a)
		}
		s, err := scalarText(v)
		if err != nil {
			return compositeTagged(e, v, c, a)
		}
		return e.taggedScalar(s, c, a)
	}
	if m, ok := x.(json.Marshaler); ok {
		b, err := m.MarshalJSON()
		if err != nil {
			return fmt.Errorf("%w: MarshalJSON of %v: %w", ErrUnsupported, v.Type(), err)
		}
		var tok any
		if err := json.Unmarshal(b, &tok); err != nil {
			return fmt.Errorf("%w: MarshalJSON of %v: %v", ErrUnsupported, v.Type(), err)
		}
		switch t := tok.(type) {
		case nil:
			e.buf = append(e.buf, "null"...)
			return nil
		case string:
			return e.taggedScalar(t, c, a)
		case bool, float64:
			return e.taggedScalar(strings.TrimSpace(string(b)), c, a)
		}
		if a != actToken {
			e.buf = appendString(e.buf, placeholders[c])
			return nil
		}
		e.buf = appendString(e.buf, e.sc.token(c, string(b)))
		return nil
	}
	b, err := x.(encoding.TextMarshaler).MarshalText()
	if err != nil {
		return fmt.Errorf("%w: MarshalText of %v: %w", ErrUnsupported, v.Type(), err)
	}
	return e.taggedScalar(string(b), c, a)
}
