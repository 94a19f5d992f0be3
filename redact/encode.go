package redact

import (
	"bytes"
	"encoding"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"
	"unsafe"

	"github.com/tenantmcp/tenantmcp/redact/internal/detect"
)

// MaxDepth bounds the nesting of pointers, maps, slices and interfaces
// followed while encoding. Deeper values (in practice: cycles) fail with
// ErrUnsupported.
const MaxDepth = 1000

type encOpts struct {
	quoted bool // the ",string" option
}

// encoderFunc appends the redacted JSON of v to e.buf.
type encoderFunc func(e *encodeState, v reflect.Value, o encOpts) error

// taggedFunc appends the JSON of v, a value of a pii-tagged field of
// category c, under action a (actMask or actToken).
type taggedFunc func(e *encodeState, v reflect.Value, c catIndex, a action) error

type encodeState struct {
	run
	buf   []byte
	depth int
	// last is the length of the last output JSON handed out with its
	// buffer (Scoped.JSON): the next buffer is made that large, so that a
	// page is written without regrowing.
	last int
}

var encodeStatePool sync.Pool

func newEncodeState(s *Scoped) *encodeState {
	e, _ := encodeStatePool.Get().(*encodeState)
	if e == nil {
		e = &encodeState{}
		e.clean = make([]memoEntry, 0, 64)
		e.cleanText = make([]byte, 0, 1024)
		e.cleanIdx = new([cleanSlots]uint16)
	}
	e.run.init(s)
	if e.buf == nil {
		e.buf = make([]byte, 0, max(1024, min(e.last+e.last/8, 1<<20)))
	}
	e.buf = e.buf[:0]
	e.depth = 0
	return e
}

func (e *encodeState) release() {
	if cap(e.buf) > 1<<20 {
		e.buf = nil
	}
	e.sc = nil
	e.resetClean() // no string of this call survives it
	encodeStatePool.Put(e)
}

func (e *encodeState) marshal(v any) error {
	if v == nil {
		e.buf = append(e.buf, "null"...)
		return nil
	}
	return e.value(reflect.ValueOf(v), encOpts{})
}

func (e *encodeState) value(v reflect.Value, o encOpts) error {
	if !v.IsValid() {
		e.buf = append(e.buf, "null"...)
		return nil
	}
	return typeEncoder(v.Type())(e, v, o)
}

func (e *encodeState) enter(v reflect.Value) error {
	if e.depth++; e.depth > MaxDepth {
		return fmt.Errorf("%w: nesting deeper than %d at %s (a cycle?)", ErrUnsupported, MaxDepth, v.Type())
	}
	return nil
}

// clearJSON encodes v with every category but Secret revealed and nothing
// counted: the input of a token over a composite value.
func (e *encodeState) clearJSON(v reflect.Value) ([]byte, error) {
	savedAct, savedNo := e.act, e.nocount
	for i := range e.act {
		e.act[i] = actReveal
	}
	e.act[ciSecret] = actDrop
	e.nocount = true
	start := len(e.buf)
	err := e.value(v, encOpts{})
	out := bytes.Clone(e.buf[start:])
	e.buf = e.buf[:start]
	e.act, e.nocount = savedAct, savedNo
	return out, err
}

// encoderCache holds the encoder of each type, built once.
//
// Invariant: the key is the reflect.Type itself, which is type identity, so
// an encoder is only ever used for the type it was built from; two types
// that differ in any tag, name, option or field type never share one
// (TestTwinTypesNeverShareAnEncoder, FuzzEncoderCache). The same holds for
// taggedCache, fieldCache and piiCache. What an encoder decides per call
// (the policy's actions, the counts, the memo) lives in the encodeState,
// never in the encoder.
var encoderCache sync.Map // reflect.Type → encoderFunc

// typeEncoder returns the cached encoder of t, building it on first use. A
// recursive type gets, while its encoder is being built, an indirect
// encoder that waits for the real one.
func typeEncoder(t reflect.Type) encoderFunc {
	if f, ok := encoderCache.Load(t); ok {
		return f.(encoderFunc)
	}
	var (
		wg sync.WaitGroup
		f  encoderFunc
	)
	wg.Add(1)
	fi, loaded := encoderCache.LoadOrStore(t, encoderFunc(func(e *encodeState, v reflect.Value, o encOpts) error {
		wg.Wait()
		return f(e, v, o)
	}))
	if loaded {
		return fi.(encoderFunc)
	}
	f = newTypeEncoder(t, true)
	wg.Done()
	encoderCache.Store(t, f)
	return f
}

func errEncoder(err error) encoderFunc {
	return func(*encodeState, reflect.Value, encOpts) error { return err }
}

func newTypeEncoder(t reflect.Type, allowAddr bool) encoderFunc {
	if t == timeType {
		return timeEncoder
	}
	if t.Kind() == reflect.Pointer && t.Elem() == timeType {
		// As (*time.Time).MarshalJSON, without re-parsing its output.
		return newPtrEncoder(t)
	}
	if m := marshals(t); m != "" && hasPII(t) {
		return errEncoder(fmt.Errorf("%w: %v implements %s, which would bypass its pii tags", ErrTag, t, m))
	}
	if t.Kind() != reflect.Pointer && allowAddr && reflect.PointerTo(t).Implements(marshalerType) {
		return condAddrEncoder(addrMarshalerEncoder, newTypeEncoder(t, false))
	}
	if t.Implements(marshalerType) {
		return marshalerEncoder
	}
	if t.Kind() != reflect.Pointer && allowAddr && reflect.PointerTo(t).Implements(textMarshalerType) {
		return condAddrEncoder(addrTextMarshalerEncoder, newTypeEncoder(t, false))
	}
	if t.Implements(textMarshalerType) {
		return textMarshalerEncoder
	}
	switch t.Kind() {
	case reflect.Bool:
		return boolEncoder
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return intEncoder
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return uintEncoder
	case reflect.Float32:
		return float32Encoder
	case reflect.Float64:
		return float64Encoder
	case reflect.String:
		if t == numberType {
			return numberEncoder
		}
		return stringEncoder
	case reflect.Interface:
		return interfaceEncoder
	case reflect.Struct:
		return newStructEncoder(t)
	case reflect.Map:
		return newMapEncoder(t)
	case reflect.Slice:
		return newSliceEncoder(t)
	case reflect.Array:
		return newArrayEncoder(t)
	case reflect.Pointer:
		return newPtrEncoder(t)
	}
	return errEncoder(fmt.Errorf("%w: type %v", ErrUnsupported, t))
}

func condAddrEncoder(canAddr, other encoderFunc) encoderFunc {
	return func(e *encodeState, v reflect.Value, o encOpts) error {
		if v.CanAddr() {
			return canAddr(e, v, o)
		}
		return other(e, v, o)
	}
}

func boolEncoder(e *encodeState, v reflect.Value, o encOpts) error {
	if o.quoted {
		e.buf = append(e.buf, '"')
	}
	e.buf = strconv.AppendBool(e.buf, v.Bool())
	if o.quoted {
		e.buf = append(e.buf, '"')
	}
	return nil
}

func intEncoder(e *encodeState, v reflect.Value, o encOpts) error {
	if o.quoted {
		e.buf = append(e.buf, '"')
	}
	e.buf = strconv.AppendInt(e.buf, v.Int(), 10)
	if o.quoted {
		e.buf = append(e.buf, '"')
	}
	return nil
}

func uintEncoder(e *encodeState, v reflect.Value, o encOpts) error {
	if o.quoted {
		e.buf = append(e.buf, '"')
	}
	e.buf = strconv.AppendUint(e.buf, v.Uint(), 10)
	if o.quoted {
		e.buf = append(e.buf, '"')
	}
	return nil
}

func float32Encoder(e *encodeState, v reflect.Value, o encOpts) error {
	return appendFloat(e, v.Float(), 32, o)
}

func float64Encoder(e *encodeState, v reflect.Value, o encOpts) error {
	return appendFloat(e, v.Float(), 64, o)
}

// appendFloat formats like encoding/json (ES6 number-to-string): plain
// decimal unless the magnitude is below 1e-6 or at least 1e21.
func appendFloat(e *encodeState, f float64, bits int, o encOpts) error {
	if math.IsInf(f, 0) || math.IsNaN(f) {
		return fmt.Errorf("%w: float %v", ErrUnsupported, f)
	}
	if o.quoted {
		e.buf = append(e.buf, '"')
	}
	var tmp [32]byte
	e.writeBytes(appendFloatText(tmp[:0], f, bits))
	if o.quoted {
		e.buf = append(e.buf, '"')
	}
	return nil
}

func appendFloatText(b []byte, f float64, bits int) []byte {
	format := byte('f')
	if a := math.Abs(f); a != 0 {
		if bits == 64 && (a < 1e-6 || a >= 1e21) || bits == 32 && (float32(a) < 1e-6 || float32(a) >= 1e21) {
			format = 'e'
		}
	}
	b = strconv.AppendFloat(b, f, format, -1, bits)
	if format == 'e' {
		// e-09 → e-9
		if n := len(b); n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b
}

func numberEncoder(e *encodeState, v reflect.Value, o encOpts) error {
	n := v.String()
	if n == "" {
		n = "0"
	}
	if !validNumber(n) {
		return fmt.Errorf("%w: invalid number literal %q", ErrUnsupported, n)
	}
	if o.quoted {
		e.buf = append(e.buf, '"')
	}
	e.buf = append(e.buf, n...)
	if o.quoted {
		e.buf = append(e.buf, '"')
	}
	return nil
}

func stringEncoder(e *encodeState, v reflect.Value, o encOpts) error {
	if o.quoted {
		inner := e.run.appendText(nil, v.String())
		e.buf = appendString(e.buf, string(inner))
		return nil
	}
	e.plainString(v.String())
	return nil
}

func interfaceEncoder(e *encodeState, v reflect.Value, o encOpts) error {
	if v.IsNil() {
		e.buf = append(e.buf, "null"...)
		return nil
	}
	if err := e.enter(v); err != nil {
		return err
	}
	ev := v.Elem()
	var err error
	// The dynamic types of decoded JSON (any, []any, map[string]any) skip
	// the cache lookup: their encoders are the ones newTypeEncoder gives.
	switch ev.Type() {
	case stringType:
		err = stringEncoder(e, ev, o)
	case float64Type:
		err = float64Encoder(e, ev, o)
	case boolType:
		err = boolEncoder(e, ev, o)
	default:
		err = e.value(ev, o)
	}
	e.depth--
	return err
}

func timeEncoder(e *encodeState, v reflect.Value, _ encOpts) error {
	t := timeOf(v)
	if y := t.Year(); y < 0 || y >= 10000 {
		return fmt.Errorf("%w: time %v: year outside of range [0,9999]", ErrUnsupported, y)
	}
	e.buf = append(e.buf, '"')
	e.buf = t.AppendFormat(e.buf, time.RFC3339Nano)
	e.buf = append(e.buf, '"')
	return nil
}

// timeOf reads a time.Time without boxing it, even from a value that
// cannot be Interface'd.
func timeOf(v reflect.Value) time.Time {
	if t, ok := reflect.TypeAssert[time.Time](v); ok {
		return t
	}
	c := reflect.New(timeType).Elem()
	c.Set(v)
	return c.Interface().(time.Time)
}

var (
	marshalerEncoder, addrMarshalerEncoder = methodEncoders("MarshalJSON",
		func(e *encodeState, m json.Marshaler, t reflect.Type) error { return e.callMarshalJSON(m, t) })
	textMarshalerEncoder, addrTextMarshalerEncoder = methodEncoders("MarshalText",
		func(e *encodeState, m encoding.TextMarshaler, t reflect.Type) error { return e.callMarshalText(m, t) })
)

// methodEncoders returns the encoders for a type that implements the
// marshaling interface M on its value and on its address, as encoding/json
// has them: a nil pointer (or a value that turns out not to implement M)
// encodes as null, and an unexported value whose method cannot be called
// is an error.
func methodEncoders[M any](method string, call func(*encodeState, M, reflect.Type) error) (onValue, onAddr encoderFunc) {
	onValue = func(e *encodeState, v reflect.Value, _ encOpts) error {
		if v.Kind() == reflect.Pointer && v.IsNil() {
			e.buf = append(e.buf, "null"...)
			return nil
		}
		if !v.CanInterface() {
			return fmt.Errorf("%w: cannot call %s of unexported %v", ErrUnsupported, method, v.Type())
		}
		m, ok := v.Interface().(M)
		if !ok {
			e.buf = append(e.buf, "null"...)
			return nil
		}
		return call(e, m, v.Type())
	}
	onAddr = func(e *encodeState, v reflect.Value, _ encOpts) error {
		va := v.Addr()
		if va.IsNil() {
			e.buf = append(e.buf, "null"...)
			return nil
		}
		if !va.CanInterface() {
			return fmt.Errorf("%w: cannot call %s of unexported %v", ErrUnsupported, method, v.Type())
		}
		return call(e, va.Interface().(M), v.Type())
	}
	return onValue, onAddr
}

func (e *encodeState) callMarshalJSON(m json.Marshaler, t reflect.Type) error {
	b, err := m.MarshalJSON()
	if err != nil {
		return fmt.Errorf("%w: MarshalJSON of %v: %w", ErrUnsupported, t, err)
	}
	if err := e.rewriteJSON(b); err != nil {
		return fmt.Errorf("%w: MarshalJSON of %v: %v", ErrUnsupported, t, err)
	}
	return nil
}

func (e *encodeState) callMarshalText(m encoding.TextMarshaler, t reflect.Type) error {
	b, err := m.MarshalText()
	if err != nil {
		return fmt.Errorf("%w: MarshalText of %v: %w", ErrUnsupported, t, err)
	}
	e.buf = e.run.appendText(e.buf, string(b))
	return nil
}

type structEncoder struct {
	fields []field
}

func newStructEncoder(t reflect.Type) encoderFunc {
	info := cachedFields(t)
	if info.err != nil {
		return errEncoder(info.err)
	}
	se := &structEncoder{fields: slices.Clone(info.fields)}
	for i := range se.fields {
		prepareField(t, &se.fields[i])
	}
	return se.encode
}

// fastKind names the field types whose encoder the struct encoder runs
// inline, without the indirect call: exactly the types for which
// newTypeEncoder returns stringEncoder, intEncoder or uintEncoder (no
// marshaling method on the type or its pointer, not json.Number).
type fastKind uint8

const (
	fastNone fastKind = iota
	fastString
	fastInt
	fastUint
)

func fastKindOf(t reflect.Type) fastKind {
	if t == numberType || t == timeType || marshals(t) != "" {
		return fastNone
	}
	switch t.Kind() {
	case reflect.String:
		return fastString
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return fastInt
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return fastUint
	}
	return fastNone
}

// encodeField is f.enc(e, fv, o), with the common scalar kinds inlined.
//
// The inlined writes only reslice e.buf (see extend): assigning e.buf the
// result of a call or of appending a slice stores its pointer, which costs a
// write barrier whenever the garbage collector is marking.
func (e *encodeState) encodeField(f *field, fv reflect.Value) error {
	if !f.quoted {
		switch f.fast {
		case fastString:
			e.plainString(fv.String())
			return nil
		case fastInt:
			e.writeInt(fv.Int())
			return nil
		case fastUint:
			var tmp [24]byte
			e.writeBytes(strconv.AppendUint(tmp[:0], fv.Uint(), 10))
			return nil
		}
	}
	return f.enc(e, fv, encOpts{quoted: f.quoted})
}

// appendJSONString appends the JSON string literal of s, as appendString
// does.
func (e *encodeState) appendJSONString(s string) {
	for i := 0; i < len(s); i++ {
		if b := s[i]; b >= utf8.RuneSelf || !htmlSafe[b] {
			e.buf = appendString(e.buf, s)
			return
		}
	}
	n := e.extend(len(s) + 2)
	e.buf[n] = '"'
	copy(e.buf[n+1:], s)
	e.buf[n+1+len(s)] = '"'
}

// extend lengthens e.buf by n bytes and returns the offset of the first.
// Apart from growing, it only reslices e.buf, which stores no pointer (no
// write barrier), unlike e.buf = append(e.buf, s...) with a slice s.
func (e *encodeState) extend(n int) int {
	l := len(e.buf)
	if cap(e.buf)-l < n {
		e.buf = slices.Grow(e.buf, n)
	}
	e.buf = e.buf[:l+n]
	return l
}

// writeBytes appends b to e.buf (see extend).
func (e *encodeState) writeBytes(b []byte) {
	copy(e.buf[e.extend(len(b)):], b)
}

// prepareField fills in what encoding field f of struct type t needs: its
// encoders and how it is written inline or read directly.
func prepareField(t reflect.Type, f *field) {
	ft := typeByIndex(t, f.index)
	f.enc = typeEncoder(ft)
	f.fast = fastKindOf(ft)
	if len(f.index) == 1 && !f.pii && !f.omitEmpty && !f.omitZero && !f.quoted {
		switch k := ft.Kind(); {
		case f.fast == fastString:
			f.direct, f.offset = fastString, t.Field(f.index[0]).Offset
		case f.fast == fastInt && (k == reflect.Int64 || k == reflect.Int && ft.Size() == 8):
			f.direct, f.offset = fastInt, t.Field(f.index[0]).Offset
		}
	}
	if f.pii {
		if f.keys {
			f.tagged = keysTagged(ft)
		} else {
			f.tagged = taggedEncoder(ft)
		}
	}
}

func (se *structEncoder) encode(e *encodeState, v reflect.Value, _ encOpts) error {
	next := byte('{')
	// The rows of a slice are addressable: their plain string and integer
	// fields are read at their offsets, without a reflect.Value each.
	var base unsafe.Pointer
	if v.CanAddr() {
		base = unsafe.Pointer(v.UnsafeAddr()) // not v.Addr(): no pointer type looked up per row
	}
fields:
	for i := range se.fields {
		f := &se.fields[i]
		if f.direct != fastNone && base != nil {
			e.writeName(next, f.nameJSON)
			next = ','
			p := unsafe.Add(base, f.offset)
			if f.direct == fastString {
				e.plainString(*(*string)(p))
			} else {
				e.writeInt(*(*int64)(p))
			}
			continue
		}
		var fv reflect.Value
		if len(f.index) == 1 {
			fv = v.Field(f.index[0])
		} else {
			fv = v
			for _, x := range f.index {
				if fv.Kind() == reflect.Pointer {
					if fv.IsNil() {
						continue fields
					}
					fv = fv.Elem()
				}
				fv = fv.Field(x)
			}
		}
		if f.omitEmpty && isEmptyValue(fv) ||
			f.omitZero && (f.isZero == nil && fv.IsZero() || f.isZero != nil && f.isZero(fv)) {
			continue
		}
		if f.pii {
			a := e.act[f.cat]
			if !isEmptyValue(fv) {
				e.count(f.cat, a)
			}
			switch a {
			case actReveal:
				// encoded normally below; other categories in its
				// strings are still detected
			case actDrop:
				continue
			default:
				e.writeName(next, f.nameJSON)
				next = ','
				if err := f.tagged(e, fv, f.cat, a); err != nil {
					return err
				}
				continue
			}
		}
		e.writeName(next, f.nameJSON)
		next = ','
		if f.pii {
			saved := e.inReveal
			e.inReveal = uint8(f.cat) + 1
			err := e.encodeField(f, fv)
			e.inReveal = saved
			if err != nil {
				return err
			}
			continue
		}
		if err := e.encodeField(f, fv); err != nil {
			return err
		}
	}
	if next == '{' {
		e.buf = append(e.buf, '{', '}')
	} else {
		e.buf = append(e.buf, '}')
	}
	return nil
}

// writeName appends the byte before a member ('{' or ',') and its
// `"name":` (see extend).
func (e *encodeState) writeName(before byte, name []byte) {
	n := e.extend(1 + len(name))
	e.buf[n] = before
	copy(e.buf[n+1:], name)
}

// plainString appends the JSON string literal of the redacted s: a short
// plain string (detect.CleanCopy: nothing to detect, nothing to escape) is
// copied as it is, in one pass; anything else goes through textJSON and
// appendJSONString, with the same output.
func (e *encodeState) plainString(s string) {
	l := len(e.buf)
	if cap(e.buf)-l < len(s)+2 {
		e.buf = slices.Grow(e.buf, len(s)+2)
	}
	dst := e.buf[l : l+len(s)+2]
	if detect.CleanCopy(dst[1:], s) {
		dst[0] = '"'
		dst[len(s)+1] = '"'
		e.buf = e.buf[:l+len(s)+2]
		return
	}
	out, _ := e.run.textJSON(s)
	e.appendJSONString(out)
}

// writeInt appends the decimal form of v, written in place (see extend)
// rather than formatted elsewhere and copied.
func (e *encodeState) writeInt(v int64) {
	u := uint64(v)
	sign := 0
	if v < 0 {
		u, sign = -u, 1
	}
	n := sign + 1
	for x := u; x >= 10; x /= 10 {
		n++
	}
	b := e.buf[e.extend(n):]
	b = b[:n]
	i := n
	for u >= 100 {
		q := u / 100
		r := (u - q*100) * 2
		i -= 2
		b[i], b[i+1] = smallDigits[r], smallDigits[r+1]
		u = q
	}
	if u >= 10 {
		b[i-2], b[i-1] = smallDigits[u*2], smallDigits[u*2+1]
	} else {
		b[i-1] = byte('0' + u)
	}
	if sign == 1 {
		b[0] = '-'
	}
}

// smallDigits holds the two digits of 00 to 99.
const smallDigits = "00010203040506070809" +
	"10111213141516171819" +
	"20212223242526272829" +
	"30313233343536373839" +
	"40414243444546474849" +
	"50515253545556575859" +
	"60616263646566676869" +
	"70717273747576777879" +
	"80818283848586878889" +
	"90919293949596979899"

func isEmptyValue(v reflect.Value) bool {
	switch v.Kind() {
	case reflect.Array, reflect.Map, reflect.Slice, reflect.String:
		return v.Len() == 0
	case reflect.Bool,
		reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr,
		reflect.Float32, reflect.Float64,
		reflect.Interface, reflect.Pointer:
		return v.IsZero()
	}
	return false
}

func newMapEncoder(t reflect.Type) encoderFunc {
	if !validMapKey(t.Key()) {
		return errEncoder(fmt.Errorf("%w: map key type %v", ErrUnsupported, t.Key()))
	}
	elem := typeEncoder(t.Elem())
	return func(e *encodeState, v reflect.Value, _ encOpts) error {
		return e.encodeMap(v, func(v reflect.Value) error { return elem(e, v, encOpts{}) }, 0, 0, false)
	}
}

// addrFree reports whether a value of type t encodes the same whether or
// not it is addressable: an interface (its dynamic value never is) or a
// scalar without marshaling methods on the type or its pointer.
func addrFree(t reflect.Type) bool {
	switch t.Kind() {
	case reflect.Interface:
		return true
	case reflect.Bool, reflect.String,
		reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr,
		reflect.Float32, reflect.Float64:
		return marshals(t) == ""
	}
	return false
}

func validMapKey(k reflect.Type) bool {
	switch k.Kind() {
	case reflect.String,
		reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return true
	}
	return k.Implements(textMarshalerType)
}

type mapEntry struct {
	key string // resolved key
	out string // key as written
	v   reflect.Value
	val []byte // encoded value, on the slow path
}

// encodeMap writes a map. Keys are resolved as encoding/json does and then
// redacted: by the detectors, or with (keyCat, keyAct) when keyOp is set
// (a ",keys" tag). When no key changes, entries are sorted by key exactly as
// encoding/json sorts them. When some key changes, entries are sorted by the
// written key and then by the encoded value, so the order reveals nothing
// about the hidden keys, and keys that became equal are made unique with a
// " (2)", " (3)"… suffix so that no member is silently lost.
func (e *encodeState) encodeMap(v reflect.Value, elem func(reflect.Value) error, keyCat catIndex, keyAct action, keyOp bool) error {
	if v.IsNil() {
		e.buf = append(e.buf, "null"...)
		return nil
	}
	if err := e.enter(v); err != nil {
		return err
	}
	defer func() { e.depth-- }()
	n := v.Len()
	entries := make([]mapEntry, 0, n)
	changed := false
	// Keys and values are copied into two slices made once, rather than
	// by it.Key and it.Value, which allocate a copy of each. Slice elements
	// are addressable and map entries are not, which decides whether a
	// pointer-receiver MarshalJSON runs (condAddrEncoder), so this is done
	// only where addressability changes nothing (addrFree).
	t := v.Type()
	batch := addrFree(t.Key()) && addrFree(t.Elem())
	var keys, vals reflect.Value
	if batch {
		keys = reflect.MakeSlice(reflect.SliceOf(t.Key()), n, n)
		vals = reflect.MakeSlice(reflect.SliceOf(t.Elem()), n, n)
	}
	it := v.MapRange()
	for i := 0; it.Next(); i++ {
		var kv, vv reflect.Value
		if batch && i < n {
			kv, vv = keys.Index(i), vals.Index(i)
			kv.SetIterKey(it)
			vv.SetIterValue(it)
		} else {
			kv, vv = it.Key(), it.Value()
		}
		ks, err := resolveKeyName(kv)
		if err != nil {
			return fmt.Errorf("%w: map key of %v: %w", ErrUnsupported, v.Type(), err)
		}
		out := ks
		switch {
		case keyOp && ks != "":
			out = e.apply(keyCat, keyAct, ks)
			changed = true
		case !keyOp:
			var ch bool
			out, ch = e.run.textJSON(ks)
			changed = changed || ch
		}
		entries = append(entries, mapEntry{key: ks, out: out, v: vv})
	}
	if !changed {
		// Sorted through an index: moving the entries themselves (80
		// bytes with pointers) costs a write barrier per move.
		order := make([]int32, len(entries))
		for i := range order {
			order[i] = int32(i)
		}
		slices.SortFunc(order, func(a, b int32) int { return strings.Compare(entries[a].key, entries[b].key) })
		e.buf = append(e.buf, '{')
		for i, j := range order {
			if i > 0 {
				e.buf = append(e.buf, ',')
			}
			e.appendJSONString(entries[j].key)
			e.buf = append(e.buf, ':')
			if err := elem(entries[j].v); err != nil {
				return err
			}
		}
		e.buf = append(e.buf, '}')
		return nil
	}
	for i := range entries {
		start := len(e.buf)
		if err := elem(entries[i].v); err != nil {
			return err
		}
		entries[i].val = bytes.Clone(e.buf[start:])
		e.buf = e.buf[:start]
	}
	slices.SortFunc(entries, func(a, b mapEntry) int {
		if c := strings.Compare(a.out, b.out); c != 0 {
			return c
		}
		return bytes.Compare(a.val, b.val)
	})
	seen := make(map[string]bool, len(entries))
	e.buf = append(e.buf, '{')
	for i := range entries {
		k := entries[i].out
		for n := 2; seen[k]; n++ {
			k = entries[i].out + " (" + strconv.Itoa(n) + ")"
		}
		seen[k] = true
		if i > 0 {
			e.buf = append(e.buf, ',')
		}
		e.buf = appendString(e.buf, k)
		e.buf = append(e.buf, ':')
		e.buf = append(e.buf, entries[i].val...)
	}
	e.buf = append(e.buf, '}')
	return nil
}

func resolveKeyName(k reflect.Value) (string, error) {
	if k.Kind() == reflect.String {
		return k.String(), nil
	}
	if k.Type().Implements(textMarshalerType) {
		if k.Kind() == reflect.Pointer && k.IsNil() {
			return "", nil
		}
		if !k.CanInterface() {
			return "", fmt.Errorf("cannot call MarshalText of unexported %v", k.Type())
		}
		b, err := k.Interface().(encoding.TextMarshaler).MarshalText()
		return string(b), err
	}
	switch k.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return strconv.FormatInt(k.Int(), 10), nil
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return strconv.FormatUint(k.Uint(), 10), nil
	}
	return "", fmt.Errorf("unexpected map key type %v", k.Type())
}

func isByteSlice(t reflect.Type) bool {
	if t.Kind() != reflect.Slice || t.Elem().Kind() != reflect.Uint8 {
		return false
	}
	p := reflect.PointerTo(t.Elem())
	return !p.Implements(marshalerType) && !p.Implements(textMarshalerType)
}

func newSliceEncoder(t reflect.Type) encoderFunc {
	if isByteSlice(t) {
		return byteSliceEncoder
	}
	arr := newArrayEncoder(t)
	return func(e *encodeState, v reflect.Value, o encOpts) error {
		if v.IsNil() {
			e.buf = append(e.buf, "null"...)
			return nil
		}
		if err := e.enter(v); err != nil {
			return err
		}
		err := arr(e, v, o)
		e.depth--
		return err
	}
}

// byteSliceEncoder writes base64, as encoding/json does, of the bytes after
// the detectors have run over them: base64 must not become a way to carry
// personal data past the redactor.
func byteSliceEncoder(e *encodeState, v reflect.Value, _ encOpts) error {
	if v.IsNil() {
		e.buf = append(e.buf, "null"...)
		return nil
	}
	b := v.Bytes()
	if s := e.run.text(string(b)); len(s) != len(b) || s != string(b) {
		b = []byte(s)
	}
	e.buf = append(e.buf, '"')
	e.buf = base64.StdEncoding.AppendEncode(e.buf, b)
	e.buf = append(e.buf, '"')
	return nil
}

func newArrayEncoder(t reflect.Type) encoderFunc {
	elem := typeEncoder(t.Elem())
	return func(e *encodeState, v reflect.Value, _ encOpts) error {
		e.buf = append(e.buf, '[')
		n := v.Len()
		for i := 0; i < n; i++ {
			if i > 0 {
				e.buf = append(e.buf, ',')
			}
			if err := elem(e, v.Index(i), encOpts{}); err != nil {
				return err
			}
		}
		e.buf = append(e.buf, ']')
		return nil
	}
}

func newPtrEncoder(t reflect.Type) encoderFunc {
	elem := typeEncoder(t.Elem())
	return func(e *encodeState, v reflect.Value, o encOpts) error {
		if v.IsNil() {
			e.buf = append(e.buf, "null"...)
			return nil
		}
		if err := e.enter(v); err != nil {
			return err
		}
		err := elem(e, v.Elem(), o)
		e.depth--
		return err
	}
}

// validNumber reports whether s is a JSON number literal.
func validNumber(s string) bool {
	i := 0
	if i < len(s) && s[i] == '-' {
		i++
	}
	switch {
	case i < len(s) && s[i] == '0':
		i++
	case i < len(s) && s[i] >= '1' && s[i] <= '9':
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
	default:
		return false
	}
	if i < len(s) && s[i] == '.' {
		i++
		if i >= len(s) || s[i] < '0' || s[i] > '9' {
			return false
		}
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		if i >= len(s) || s[i] < '0' || s[i] > '9' {
			return false
		}
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
	}
	return i == len(s)
}

const hexDigits = "0123456789abcdef"

// htmlSafe marks the ASCII bytes that need no escaping in a JSON string
// when <, > and & are escaped, as encoding/json does by default.
var htmlSafe = func() (t [utf8.RuneSelf]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		t[c] = c != '"' && c != '\\' && c != '<' && c != '>' && c != '&'
	}
	return t
}()

func appendString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	dst = appendStringBody(dst, s)
	return append(dst, '"')
}

// appendStringBody appends s escaped for a JSON string, without quotes:
// control characters, quote, backslash, <, > and & escaped, invalid UTF-8
// replaced by U+FFFD, U+2028 and U+2029 escaped.
func appendStringBody(dst []byte, s string) []byte {
	start := 0
	for i := 0; i < len(s); {
		if b := s[i]; b < utf8.RuneSelf {
			if htmlSafe[b] {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch b {
			case '\\', '"':
				dst = append(dst, '\\', b)
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[b>>4], hexDigits[b&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	return append(dst, s[start:]...)
}
