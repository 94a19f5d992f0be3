package redact

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

// The encoder caches (encoderCache, taggedCache, fieldCache, piiCache) are
// keyed by reflect.Type, which is type identity: two types that differ in
// anything (a tag, a name, a field's type) are different keys. These tests
// check what a wrongly keyed cache would break: an encoder built for one
// type and used for another would leak the field the other type tags, and
// an encoder that behaves differently once cached would make the first call
// and the later ones disagree.

// resetEncoderCaches forgets every cached encoder, so the next encoding
// builds them all again. The tests of this package do not run in parallel.
func resetEncoderCaches() {
	encoderCache.Clear()
	taggedCache.Clear()
	fieldCache.Clear()
	piiCache.Clear()
}

// Twins: the same shape, differing only in tags, names or options.
type (
	twinPlain struct {
		Name  string `json:"name"`
		Email string `json:"email"`
	}

	twinTagged struct {
		Name  string `json:"name" pii:"name"`
		Email string `json:"email" pii:"email"`
	}

	twinOtherCat struct {
		Name  string `json:"name" pii:"address"`
		Email string `json:"email" pii:"phone"`
	}

	twinOmit struct {
		Name  string `json:"name,omitempty"`
		Email string `json:"email,omitempty" pii:"email"`
	}

	twinRenamed struct {
		Name  string `json:"full_name"`
		Email string `json:"mail" pii:"email"`
	}

	twinQuoted struct {
		Name  string `json:"name,string"`
		Email string `json:"email" pii:"email"`
	}
)

type twinString string

type twinNamedField struct {
	Name  twinString `json:"name"`
	Email twinString `json:"email" pii:"email"`
}

type twinTextField struct {
	Name  textValue `json:"name"`
	Email string    `json:"email"`
}

type twinEmbedTagged struct {
	twinPlain `pii:"name"`
	N         int `json:"n"`
}

type twinEmbedPlain struct {
	twinPlain
	N int `json:"n"`
}

type twinPtr struct {
	Name  *string `json:"name"`
	Email *string `json:"email" pii:"email"`
}

type twinIface struct {
	Name  any `json:"name"`
	Email any `json:"email" pii:"email"`
}

type twinSlice struct {
	Name  []string `json:"name" pii:"name"`
	Email []string `json:"email"`
}

type twinMapKeys struct {
	Name map[string]int `json:"name" pii:"name,keys"`
}

type twinMapVals struct {
	Name map[string]int `json:"name"`
}

type twinInt struct {
	N int64 `json:"n"`
	C int64 `json:"c" pii:"card"`
}

type twinUint struct {
	N uint64 `json:"n"`
	C uint64 `json:"c,string"`
}

type cacheNode struct {
	Label string       `json:"label"`
	Owner string       `json:"owner" pii:"name"`
	Kids  []*cacheNode `json:"kids,omitempty"`
	Attrs map[string]any
	Next  *cacheNode `json:"next,omitempty"`
}

type cacheRow struct {
	ID      int64     `json:"id"`
	At      time.Time `json:"at"`
	Guest   twinTagged
	Contact *twinPlain `json:"contact"`
	Any     any        `json:"any"`
	Tags    []string   `json:"tags"`
	Extra   map[string]any
	Bytes   []byte      `json:"bytes"`
	Num     json.Number `json:"num"`
	Float   float64     `json:"float"`
	Flag    bool        `json:"flag,omitempty"`
	Text    textValue   `json:"text"`
	Raw     json.RawMessage
}

// cacheValues returns values of many types built from two strings and a
// number, the twins among them.
func cacheValues(s1, s2 string, n int64) []any {
	p1, p2 := s1, s2
	tree := &cacheNode{Label: s1, Owner: s2, Attrs: map[string]any{s1: s2, "n": float64(n)}}
	tree.Kids = []*cacheNode{{Label: s2, Owner: s1}, {Label: "leaf", Owner: s2, Next: tree.Kids2()}}
	return []any{
		twinPlain{s1, s2}, twinTagged{s1, s2}, twinOtherCat{s1, s2}, twinOmit{s1, s2}, twinRenamed{s1, s2},
		twinQuoted{s1, s2}, twinNamedField{twinString(s1), twinString(s2)}, twinTextField{textValue{s1}, s2},
		twinEmbedTagged{twinPlain{s1, s2}, int(n)}, twinEmbedPlain{twinPlain{s1, s2}, int(n)},
		twinPtr{&p1, &p2}, twinPtr{}, twinIface{s1, []any{s2, n, nil}}, twinIface{twinTagged{s1, s2}, twinPlain{s2, s1}},
		twinSlice{[]string{s1, s2}, []string{s2}}, twinMapKeys{map[string]int{s1: 1, s2: 2}},
		twinMapVals{map[string]int{s1: 1, s2: 2}}, twinInt{n, n}, twinUint{uint64(n), uint64(n)},
		&twinTagged{s1, s2}, []twinTagged{{s1, s2}, {s2, s1}}, map[string]twinTagged{s1: {s2, s1}},
		map[string]any{s1: []any{s2, map[string]any{s2: s1}}, "x": true},
		tree,
		cacheRow{ID: n, At: time.Unix(n%1e9, 0).UTC(), Guest: twinTagged{s1, s2}, Contact: &twinPlain{s2, s1},
			Any: map[string]any{s1: s2}, Tags: []string{s1, s2, s1}, Extra: map[string]any{s2: float64(n) / 3},
			Bytes: []byte(s2), Num: "12.5", Float: float64(n) / 7, Text: textValue{s2}, Raw: json.RawMessage(`{"k":"v"}`)},
		[]any{s1, s2, float64(n), nil, true},
	}
}

// Kids2 gives the tree a nested pointer chain.
func (c *cacheNode) Kids2() *cacheNode { return &cacheNode{Label: "deep", Owner: "x"} }

// encodeAll encodes every value with a fresh Scoped of the same policy and
// scope and returns the outputs (or errors) in the order of vals.
func encodeAll(t testing.TB, r *Redactor, vals []any, order []int) []string {
	t.Helper()
	out := make([]string, len(vals))
	for _, i := range order {
		sc := r.ForScope(testScope(t, "chain", "acme", "front_desk"))
		b, err := sc.JSON(vals[i])
		if err != nil {
			out[i] = "error: " + err.Error()
			continue
		}
		out[i] = fmt.Sprintf("%s %v", b, sc.Report())
	}
	return out
}

func cacheRedactors(t testing.TB) []*Redactor {
	t.Helper()
	var out []*Redactor
	for _, c := range []Options{
		{},
		{Reveal: map[string][]Category{"front_desk": {Name, Phone}}},
		{TokenKey: testKey, Operators: map[Category]Operator{Email: Token, Name: Drop}},
	} {
		r, err := New(c)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, r)
	}
	return out
}

// checkCacheIndependence encodes vals three ways under each policy: with
// empty caches in order, again with the caches full, and with empty caches
// in reverse order (so each twin's encoder is built after the other's).
// All three must agree byte for byte, report included.
func checkCacheIndependence(t testing.TB, vals []any) {
	t.Helper()
	fwd := make([]int, len(vals))
	rev := make([]int, len(vals))
	for i := range vals {
		fwd[i], rev[i] = i, len(vals)-1-i
	}
	for ri, r := range cacheRedactors(t) {
		resetEncoderCaches()
		fresh := encodeAll(t, r, vals, fwd)
		cached := encodeAll(t, r, vals, fwd)
		resetEncoderCaches()
		reversed := encodeAll(t, r, vals, rev)
		for i := range vals {
			if fresh[i] != cached[i] || fresh[i] != reversed[i] {
				t.Fatalf("policy %d, %T: outputs differ\n fresh    %s\n cached   %s\n reversed %s", ri, vals[i], fresh[i], cached[i], reversed[i])
			}
		}
	}
}

func TestEncoderCacheFreshEqualsCached(t *testing.T) {
	checkCacheIndependence(t, cacheValues("Alice Martin", "alice@example.com", 4111111111111111))
	checkCacheIndependence(t, cacheValues("confirmed", "room 12 <&>", 42))
}

// Twins must never share an encoder: the same strings put in the tagged
// twin and in the plain one come out redacted and in clear.
func TestTwinTypesNeverShareAnEncoder(t *testing.T) {
	sc := ForTest() // default policy: everything masked
	resetEncoderCaches()
	for range 2 { // built in the first round, cached in the second
		plain, err := sc.JSON(twinPlain{"Alice Martin", "not an address"})
		if err != nil {
			t.Fatal(err)
		}
		tagged, err := sc.JSON(twinTagged{"Alice Martin", "alice@example.com"})
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Contains(plain, []byte("Alice Martin")) || !bytes.Contains(plain, []byte("not an address")) {
			t.Fatalf("plain twin lost its clear text: %s", plain)
		}
		if bytes.Contains(tagged, []byte("Alice")) || bytes.Contains(tagged, []byte("alice@")) {
			t.Fatalf("tagged twin leaked: %s", tagged)
		}
		other, err := sc.JSON(twinOtherCat{"Alice Martin", "+44 20 7946 0958"})
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Contains(other, []byte(`"name":"[redacted:address]"`)) || bytes.Contains(other, []byte("7946 0958")) {
			t.Fatalf("twin with other categories encoded as another type: %s", other)
		}
		emb, err := sc.JSON(twinEmbedTagged{twinPlain{"Alice Martin", "x"}, 1})
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Contains(emb, []byte("Alice")) {
			t.Fatalf("tag on the embedded struct ignored: %s", emb)
		}
		emb, err = sc.JSON(twinEmbedPlain{twinPlain{"Alice Martin", "x"}, 1})
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Contains(emb, []byte("Alice Martin")) {
			t.Fatalf("untagged embedding redacted: %s", emb)
		}
	}
}

// The scalar fields the struct encoder writes inline (encodeField) give the
// bytes the field's own encoder gives, for every inlined kind and for
// strings that need escaping, detection or neither.
func TestInlineFieldsMatchTheirEncoders(t *testing.T) {
	type allKinds struct {
		S   string      `json:"s"`
		N   twinString  `json:"n"`
		I   int         `json:"i"`
		I8  int8        `json:"i8"`
		I64 int64       `json:"i64"`
		U   uint        `json:"u"`
		U8  uint8       `json:"u8"`
		UP  uintptr     `json:"up"`
		Q   string      `json:"q,string"`
		QI  int         `json:"qi,string"`
		Num json.Number `json:"num"`
		T   textValue   `json:"t"`
		F   float64     `json:"f"`
	}
	strs := []string{"", "plain", "<&>\u2028\"\\\n", "\xff bad", "alice@example.com", "call +44 20 7946 0958", "Grand Hôtel"}
	var inlined int
	for i, s := range strs {
		v := reflect.ValueOf(allKinds{S: s, N: twinString(s), I: -i, I8: -128, I64: 1 << 62, U: uint(i), U8: 255, UP: 7,
			Q: s, QI: i, Num: "1e3", T: textValue{s}, F: 0.1})
		info := cachedFields(v.Type())
		for j := range info.fields {
			f := &info.fields[j]
			prepareField(v.Type(), f)
			if f.fast != fastNone && !f.quoted {
				inlined++
			}
			fv := v.Field(f.index[0])
			a, b := newEncodeState(ForTest()), newEncodeState(ForTest())
			errA := f.enc(a, fv, encOpts{quoted: f.quoted})
			errB := b.encodeField(f, fv)
			if (errA == nil) != (errB == nil) || !bytes.Equal(a.buf, b.buf) || a.redacted != b.redacted {
				t.Fatalf("field %s of %q: encoder %s (%v), inline %s (%v)", f.name, s, a.buf, errA, b.buf, errB)
			}
			a.release()
			b.release()
		}
	}
	if inlined == 0 {
		t.Fatal("no field was inlined: the test checks nothing")
	}
	// Through a pointer the struct is addressable and its plain string and
	// integer fields are read at their offsets (field.direct); as a value
	// it is not. Both must give the same bytes, with and without a page.
	for _, s := range strs {
		v := allKinds{S: s, N: twinString(s), I: -7, I64: -1 << 62, Q: s, Num: "1", T: textValue{s}}
		page := []allKinds{v, v}
		for _, pair := range [][2]any{{v, &v}, {[]any{v}, page[:1]}, {twinPlain{s, s}, &twinPlain{s, s}}} {
			a, errA := ForTest().JSON(pair[0])
			b, errB := ForTest().JSON(pair[1])
			if (errA == nil) != (errB == nil) || !bytes.Equal(a, b) {
				t.Fatalf("%q: by value %s (%v), addressable %s (%v)", s, a, errA, b, errB)
			}
		}
	}
	var direct []string
	at := reflect.TypeFor[allKinds]()
	for _, f := range cachedFields(at).fields {
		prepareField(at, &f)
		if f.direct != fastNone {
			direct = append(direct, f.name)
		}
	}
	if !slices.Equal(direct, []string{"s", "n", "i", "i64"}) {
		t.Fatalf("fields read directly: %v, want s, n, i, i64", direct)
	}
	if fastKindOf(reflect.TypeFor[textValue]()) != fastNone || fastKindOf(reflect.TypeFor[json.Number]()) != fastNone {
		t.Fatal("a type with its own encoding is inlined as a plain scalar")
	}
}

// A memo slot shared by two strings never answers for the one that was not
// remembered.
func TestCleanMemoCollisionIsAMiss(t *testing.T) {
	e := newEncodeState(ForTest())
	defer e.release()
	first := "confirmed"
	e.rememberClean(first)
	var other string
	for i := 0; other == "" && i < 1<<20; i++ {
		if c := fmt.Sprintf("x%d@example.com", i); memoSlot(c) == memoSlot(first) && c != first {
			other = c
		}
	}
	if other == "" {
		t.Fatal("no colliding string found")
	}
	if !e.lookupClean(first) {
		t.Fatal("remembered string not found")
	}
	if e.lookupClean(other) {
		t.Fatalf("%q found as clean through %q's slot", other, first)
	}
	out, err := ForTest().JSON([]string{first, other, first, other})
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(out, []byte(strings.SplitN(other, "@", 2)[0]+"@")) {
		t.Fatalf("colliding address leaked: %s", out)
	}
	// Same length, first and last eight bytes: the cheap hash collides by
	// construction, the comparison must still tell them apart.
	a, b := "abcdefgh-alice@example.com-12345678", "abcdefgh-alice@example.net-12345678"
	if memoSlot(a) != memoSlot(b) {
		t.Fatal("test strings must share a slot")
	}
	e.rememberClean(a)
	if e.lookupClean(b) {
		t.Fatalf("%q found as clean through %q", b, a)
	}
}

// FuzzEncoderCache: for any strings, every value encodes the same with
// freshly built encoders, with cached ones, and with the twins' encoders
// built in the other order.
func FuzzEncoderCache(f *testing.F) {
	for i, s := range fuzzSeeds {
		f.Add(s, fuzzSeeds[(i+3)%len(fuzzSeeds)], int64(i)*4111111111111)
	}
	f.Fuzz(func(t *testing.T, s1, s2 string, n int64) {
		checkCacheIndependence(t, cacheValues(s1, s2, n))
	})
}
