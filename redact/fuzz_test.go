package redact

import (
	"bytes"
	"encoding/json"
	"testing"
	"unicode/utf8"

	"github.com/tenantmcp/tenantmcp/redact/internal/detect"
	"github.com/tenantmcp/tenantmcp/scope"
)

var fuzzSeeds = []string{
	"alice@example.com", "+1 (202) 555-0143", "4111 1111 1111 1111", "DE89 3704 0044 0532 0130 00",
	"123-45-6789", "[2001:db8::1]:443", "password=x", "eyJhbGciOiJub25lIn0.eyJzdWIiOiJ4In0.", "-----BEGIN PRIVATE KEY-----",
	"a%40b.co", "\xff\xfe@\x80.com", "<&>\u2028", "***@example.com", "[redacted:email]", "x://u:p@h",
	"Bearer 2YotnFZFEjr1zCsicMWpAA", "tok_email_abcdefghijklmnopqrstuvwx", "",
	"ann&#64;ex.com", "b\uff20ex.com", "0044 20 7946 0958", "\"q\"@ex.com", "de89 3704 0044 0532 0130 00", "078 05 1120",
}

// FuzzString: free-text redaction never panics, is idempotent, and leaves
// nothing a detector would still report.
func FuzzString(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add(s)
	}
	sc := defaultRedactor.ForScope(scope.Scope{})
	f.Fuzz(func(t *testing.T, s string) {
		out := sc.String(s)
		if utf8.ValidString(s) && !utf8.ValidString(out) {
			t.Fatalf("String(%q) = %q is not UTF-8", s, out)
		}
		if again := sc.String(out); again != out {
			t.Fatalf("not idempotent: %q → %q → %q", s, out, again)
		}
		if sp := detect.Scan(nil, out); len(sp) != 0 {
			t.Fatalf("String(%q) = %q still has detections %v", s, out, sp)
		}
	})
}

type fuzzPlain struct {
	S   string            `json:"s"`
	N   int64             `json:"n,omitempty"`
	F   float64           `json:"f"`
	B   []byte            `json:"b"`
	M   map[string]string `json:"m"`
	Any any               `json:"any"`
	Q   string            `json:"q,string"`
}

type fuzzTagged struct {
	Email string            `json:"email" pii:"email"`
	Phone []string          `json:"phone" pii:"phone"`
	Name  map[string]string `json:"name" pii:"name,keys"`
	Card  int64             `json:"card" pii:"card"`
	Plain fuzzPlain         `json:"plain"`
}

// FuzzJSON: the encoder never panics and always produces valid JSON; a
// value in which no detector finds anything encodes exactly as
// encoding/json encodes it.
func FuzzJSON(f *testing.F) {
	for i, s := range fuzzSeeds {
		f.Add(s, fuzzSeeds[(i+1)%len(fuzzSeeds)], int64(i)*4111111111111, float64(i)/3)
	}
	r, _ := New(Options{TokenKey: testKey, Operators: map[Category]Operator{Name: Token}})
	sc := r.ForScope(testScope(f, "chain", "acme"))
	f.Fuzz(func(t *testing.T, s1, s2 string, n int64, x float64) {
		p := fuzzPlain{S: s1, N: n, F: x, B: []byte(s2), M: map[string]string{s1: s2, s2: s1}, Any: []any{s1, x}, Q: s2}
		got, err := sc.JSON(p)
		want, jerr := json.Marshal(p)
		if (err != nil) != (jerr != nil) {
			t.Fatalf("errors differ: %v vs %v", err, jerr)
		}
		if err != nil {
			return
		}
		if !json.Valid(got) {
			t.Fatalf("invalid JSON %s", got)
		}
		// What a JSON reader sees: invalid UTF-8 becomes U+FFFD.
		clean := len(detect.Scan(nil, validUTF8(s1))) == 0 && len(detect.Scan(nil, validUTF8(s2))) == 0
		if clean && !bytes.Equal(got, want) {
			t.Fatalf("differs from encoding/json\n got %s\nwant %s", got, want)
		}
		tv := fuzzTagged{Email: s1, Phone: []string{s2, s1}, Name: map[string]string{s1: s2, s2: "x"}, Card: n, Plain: p}
		got, err = sc.JSON(tv)
		if err != nil {
			t.Fatalf("tagged: %v", err)
		}
		if !json.Valid(got) {
			t.Fatalf("invalid JSON %s", got)
		}
	})
}

// FuzzRawMessage: whatever JSON a MarshalJSON method returns, the rewritten
// output is valid JSON with nothing a detector would still report in it.
func FuzzRawMessage(f *testing.F) {
	for _, s := range []string{
		`{"a":"alice@example.com","alice@example.com":1}`, `["\u0061lice@example.com", 1e5, true, null]`,
		`"\ud800\udc00 \ud800 x"`, `{"a":{"a":{"a":[]}}}`, `  {"k" : "v" , "k":"w"}  `, `"x\"y\\z\/"`,
	} {
		f.Add([]byte(s))
	}
	sc := defaultRedactor.ForScope(scope.Scope{})
	f.Fuzz(func(t *testing.T, data []byte) {
		got, err := sc.JSON(json.RawMessage(data))
		if !json.Valid(data) {
			if err == nil {
				t.Fatalf("invalid input accepted: %q → %s", data, got)
			}
			return
		}
		if err != nil {
			t.Fatalf("valid input %q refused: %v", data, err)
		}
		if !json.Valid(got) {
			t.Fatalf("invalid output %s from %q", got, data)
		}
		var v any
		dec := json.NewDecoder(bytes.NewReader(got))
		dec.UseNumber()
		if err := dec.Decode(&v); err != nil {
			t.Fatal(err)
		}
		var walk func(any)
		walk = func(v any) {
			switch x := v.(type) {
			case string:
				if sp := detect.Scan(nil, x); len(sp) != 0 {
					t.Fatalf("string %q left with detections in %s (from %q)", x, got, data)
				}
			case []any:
				for _, e := range x {
					walk(e)
				}
			case map[string]any:
				for k, e := range x {
					walk(k)
					walk(e)
				}
			}
		}
		walk(v)
	})
}
