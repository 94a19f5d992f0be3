package redact

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"net/netip"
	"strings"
	"testing"
	"time"
)

// Types for the differential test: values without personal data must
// encode exactly as encoding/json encodes them.

type Inner struct {
	A string `json:"a"`
	B int    `json:"b,omitempty"`
}

type Embedded struct {
	E1 string
	E2 int `json:"e2"`
}

type embeddedUnexported struct {
	U1 string `json:"u1"`
}

type Conflict1 struct{ X, Y string }
type Conflict2 struct {
	X string
	Y string `json:"Y"`
}

type textKey int

func (k textKey) MarshalText() ([]byte, error) { return []byte("k" + string(rune('0'+int(k)))), nil }

type ptrMarshaler struct{ N int }

func (p *ptrMarshaler) MarshalJSON() ([]byte, error) { return []byte(`{"n" : [1, 2]}`), nil }

type valMarshaler struct{}

func (valMarshaler) MarshalJSON() ([]byte, error) { return []byte(` "v<&>" `), nil }

type textValue struct{ S string }

func (t textValue) MarshalText() ([]byte, error) { return []byte("text:" + t.S), nil }

type zeroer struct{ N int }

func (z zeroer) IsZero() bool { return z.N == 42 }

type Everything struct {
	Embedded
	*Inner
	embeddedUnexported
	Conflict1
	Conflict2
	Str      string    `json:"str"`
	Quoted   int       `json:"quoted,string"`
	QStr     string    `json:"qstr,string"`
	QBool    bool      `json:",string"`
	QFloat   float64   `json:"qf,string"`
	Omit     string    `json:"omit,omitempty"`
	OmitZero time.Time `json:"oz,omitzero"`
	OmitZ2   zeroer    `json:"oz2,omitzero"`
	OmitZ3   zeroer    `json:"oz3,omitzero"`
	Skip     string    `json:"-"`
	//lint:ignore SA5008 a field named "-": the differential test needs encoding/json's reading of it
	Dash string `json:"-,"`
	//lint:ignore SA5008 an invalid name, which encoding/json replaces by the field name; so must redact
	BadName    string          `json:"a\"b"`
	Uints      []uint8         `json:"bytes"`
	NilBytes   []byte          `json:"nilbytes"`
	Arr        [3]byte         `json:"arr"`
	Floats     []float64       `json:"floats"`
	F32        float32         `json:"f32"`
	Map        map[string]any  `json:"map"`
	IntMap     map[int]string  `json:"intmap"`
	UintMap    map[uint8]bool  `json:"uintmap"`
	TextMap    map[textKey]int `json:"textmap"`
	NilMap     map[string]int  `json:"nilmap"`
	Iface      any             `json:"iface"`
	NilIface   any             `json:"niliface"`
	Ptr        *int            `json:"ptr"`
	NilPtr     *string         `json:"nilptr"`
	Time       time.Time       `json:"time"`
	TimePtr    *time.Time      `json:"timeptr"`
	Raw        json.RawMessage `json:"raw"`
	Num        json.Number     `json:"num"`
	PM         ptrMarshaler    `json:"pm"`
	PMPtr      *ptrMarshaler   `json:"pmptr"`
	VM         valMarshaler    `json:"vm"`
	TV         textValue       `json:"tv"`
	Addr       netip.Addr      `json:"-"`
	Nested     []map[string][]*Inner
	HTML       string `json:"html"`
	Unicode    string `json:"unicode"`
	Invalid    string `json:"invalid"`
	Control    string `json:"control"`
	unexported string
}

func everything() Everything {
	n := 7
	tm := time.Date(2024, 1, 15, 10, 30, 0, 123456789, time.FixedZone("x", 3600))
	return Everything{
		Embedded:           Embedded{E1: "e1", E2: 2},
		Inner:              &Inner{A: "inner"},
		embeddedUnexported: embeddedUnexported{U1: "u1"},
		Conflict1:          Conflict1{X: "x1", Y: "y1"},
		Conflict2:          Conflict2{X: "x2", Y: "y2"},
		Str:                "plain text, booking BK-2024-0042 on 2024-01-15",
		Quoted:             42,
		QStr:               `say "hi"`,
		QBool:              true,
		QFloat:             1.5,
		OmitZ2:             zeroer{N: 42},
		OmitZ3:             zeroer{N: 1},
		Skip:               "skipped",
		Dash:               "dash",
		BadName:            "bad",
		Uints:              []byte("hello world"),
		Arr:                [3]byte{1, 2, 3},
		Floats:             []float64{0, 1, -1.5, 1e21, 1e-7, 123456789, math.MaxFloat64, math.SmallestNonzeroFloat64},
		F32:                3.14,
		Map:                map[string]any{"b": 1.0, "a": []any{"x", true, nil}, "c": map[string]any{"z": "y"}},
		IntMap:             map[int]string{-3: "m3", 10: "ten", 2: "two"},
		UintMap:            map[uint8]bool{1: true, 200: false},
		TextMap:            map[textKey]int{1: 1, 2: 2},
		Iface:              Inner{A: "via interface", B: 3},
		Ptr:                &n,
		Time:               tm,
		TimePtr:            &tm,
		Raw:                json.RawMessage(` { "raw" : [1, "two", {"三": null}] } `),
		Num:                json.Number("12.5e3"),
		PM:                 ptrMarshaler{N: 1},
		PMPtr:              &ptrMarshaler{N: 2},
		TV:                 textValue{S: "tv"},
		Nested:             []map[string][]*Inner{{"k": {{A: "n1"}, nil}}, nil},
		HTML:               "<script>alert('x') && y</script>",
		Unicode:            "héllo wörld \u2028 \u2029 日本",
		Invalid:            "bad \xff\xfe utf8",
		Control:            "tab\tnl\ncr\rbs\bff\f\x01\x1f",
		unexported:         "hidden",
	}
}

func TestMatchesEncodingJSON(t *testing.T) {
	values := map[string]any{
		"everything":         everything(),
		"pointer":            &[]Everything{everything()}[0],
		"zero":               Everything{},
		"nil":                nil,
		"string":             "hi",
		"int":                -12,
		"float":              1.25,
		"slice":              []string{"a", "b"},
		"nil slice":          []int(nil),
		"empty map":          map[string]int{},
		"nested any":         []any{map[string]any{"x": []any{1.0, "y"}}},
		"addressable pm":     &struct{ P ptrMarshaler }{},
		"unaddressable pm":   struct{ P ptrMarshaler }{},
		"bool map":           map[bool]int(nil),
		"struct with iface":  struct{ X any }{X: &Inner{A: "p"}},
		"array of structs":   [2]Inner{{A: "1"}, {A: "2"}},
		"embedded ptr nil":   struct{ *Inner }{},
		"empty struct":       struct{}{},
		"text marshaler ptr": &textValue{S: "p"},
		"embedded unexported ptr": struct {
			*embeddedUnexported
			N int
		}{&embeddedUnexported{U1: "x"}, 1},
		"time pointers": []*time.Time{nil, &[]time.Time{time.Unix(1700000000, 5).UTC()}[0]},
		"error value":   struct{ Err error }{errors.New("boom")},
	}
	r, _ := New(Options{})
	sc := r.ForScope(testScope(t, "chain", "acme"))
	for name, v := range values {
		t.Run(name, func(t *testing.T) {
			want, werr := json.Marshal(v)
			got, gerr := sc.JSON(v)
			if (werr != nil) != (gerr != nil) {
				t.Fatalf("errors differ: encoding/json %v, redact %v", werr, gerr)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("output differs\n redact: %s\n   json: %s", got, want)
			}
		})
	}
	if rep := sc.Report(); rep.Total() != 0 {
		t.Errorf("PII-free values reported redactions: %v", rep)
	}
}

func TestUnsupported(t *testing.T) {
	type cyc struct {
		Next *cyc
	}
	c := &cyc{}
	c.Next = c
	m := map[string]any{}
	m["self"] = m
	for name, v := range map[string]any{
		"chan":      make(chan int),
		"func":      func() {},
		"complex":   complex(1, 2),
		"nan":       math.NaN(),
		"inf":       math.Inf(1),
		"cycle":     c,
		"map cycle": m,
		"bad num":   json.Number("1x"),
		"bad key":   map[[2]int]int{{1, 2}: 3},
		"bad raw":   json.RawMessage(`{"a":`),
		"year":      time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC),
	} {
		_, err := ForTest().JSON(v)
		if !errors.Is(err, ErrUnsupported) {
			t.Errorf("%s: err = %v, want ErrUnsupported", name, err)
		}
		if _, jerr := json.Marshal(v); jerr == nil {
			t.Errorf("%s: encoding/json accepts it, the test value is wrong", name)
		}
	}
}

func TestHTMLEscapingOfMarshalerOutput(t *testing.T) {
	got, err := ForTest().JSON(valMarshaler{})
	if err != nil {
		t.Fatal(err)
	}
	if want, _ := json.Marshal(valMarshaler{}); string(got) != string(want) {
		t.Errorf("got %s, want %s", got, want)
	}
	if !strings.Contains(string(got), `\u003c`) {
		t.Errorf("< not escaped: %s", got)
	}
}

// JSON's output is the caller's alone: later encodings, large or small,
// never write into it, and a small output keeps at most twice its size.
func TestJSONOutputNotShared(t *testing.T) {
	s := ForTest()
	page := make([]string, 300)
	for i := range page {
		page[i] = strings.Repeat("x", i%40)
	}
	var outs, want [][]byte
	for i := range 6 {
		var v any = page
		if i%2 == 1 {
			v = []string{"small", strings.Repeat("y", i)}
		}
		out, err := s.JSON(v)
		if err != nil {
			t.Fatal(err)
		}
		if len(out) < 1024 && cap(out) > 2*len(out) {
			t.Errorf("a %d-byte output keeps %d bytes", len(out), cap(out))
		}
		outs, want = append(outs, out), append(want, bytes.Clone(out))
	}
	for i := range outs {
		if !bytes.Equal(outs[i], want[i]) {
			t.Fatalf("output %d was overwritten by a later encoding", i)
		}
	}
}
