package claims

import (
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestParsePatternErrors(t *testing.T) {
	cases := []struct{ pattern, msg string }{
		{"", "empty pattern"},
		{"/tenants/", "no placeholder"},
		{"/tenants/{chain", "offset 9: '{' is never closed"},
		{"/tenants/chain}", "offset 14: '}' without '{'"},
		{"/tenants/{}", "offset 9: empty placeholder"},
		{"/t/{Chain}", "offset 3: placeholder {Chain} is not a level name"},
		{"/t/{1chain}", "is not a level name"},
		{"/t/{ch ain}", "is not a level name"},
		{"/t/{a{b}", "'{' inside a placeholder"},
		{"{chain}{hotel}", "offset 7: placeholder {hotel} directly follows {chain}"},
		{"/t/{chain}/h/{chain}", "offset 13: placeholder {chain} appears twice"},
		{"/t/\x01{chain}", "control character"},
		{"/t/\xff{chain}", "not valid UTF-8"},
		{strings.Repeat("a", maxPatternLen+1) + "{chain}", "longer than"},
	}
	for _, tc := range cases {
		_, err := parsePattern(tc.pattern)
		if err == nil {
			t.Errorf("parsePattern(%q) succeeded", tc.pattern)
			continue
		}
		if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("parsePattern(%q) = %q, want ErrConfig saying %q", tc.pattern, err, tc.msg)
		}
	}
}

func TestPatternMatch(t *testing.T) {
	cases := []struct {
		pattern, group string
		want           []string // nil: no match
	}{
		{"/tenants/{chain}", "/tenants/acme", []string{"acme"}},
		{"/tenants/{chain}", "/tenants/acme/", nil},
		{"/tenants/{chain}", "/tenants/", nil},
		{"/tenants/{chain}", "/Tenants/acme", nil},
		{"/tenants/{chain}/hotels/{hotel}", "/tenants/acme/hotels/h-17", []string{"acme", "h-17"}},
		{"/tenants/{chain}/hotels/{hotel}", "/tenants/acme/x/hotels/h-17", nil},
		{"tenant:{chain}", "tenant:acme:eu", []string{"acme:eu"}},
		{"{chain}:{hotel}", "acme:h:1", []string{"acme", "h:1"}},
		{"{chain}-admins", "acme-admins", []string{"acme"}},
		{"{chain}-admins", "acme-admins-x", nil},
		{"g-{chain}-é{hotel}", "g-ac-é1", []string{"ac", "1"}},
		{"grp {chain}", "grp ácme", []string{"ácme"}},
		{"grp {chain}", "grp " + strings.Repeat("x", 257), nil},
	}
	for _, tc := range cases {
		p, err := parsePattern(tc.pattern)
		if err != nil {
			t.Fatalf("parsePattern(%q): %v", tc.pattern, err)
		}
		got, ok := p.match(tc.group)
		if ok != (tc.want != nil) || !slices.Equal(got, tc.want) {
			t.Errorf("%q.match(%q) = %q, %v; want %q", tc.pattern, tc.group, got, ok, tc.want)
		}
	}
}

func TestClaimPath(t *testing.T) {
	cases := []struct {
		path string
		want claimPath
		err  string
	}{
		{path: "groups", want: claimPath{"groups"}},
		{path: "realm_access.roles", want: claimPath{"realm_access", "roles"}},
		{path: `"https://example.com/groups"`, want: claimPath{"https://example.com/groups"}},
		{path: `resource_access."my.app".roles`, want: claimPath{"resource_access", "my.app", "roles"}},
		{path: `"a\"b".c`, want: claimPath{`a"b`, "c"}},
		{path: `"\u00e9"`, want: claimPath{"é"}},
		{path: "", err: "empty claim path"},
		{path: ".groups", err: "empty segment"},
		{path: "groups.", err: "empty segment"},
		{path: "a..b", err: "empty segment"},
		{path: "https://example.com/groups", err: "must be inside a quoted segment"},
		{path: `"unterminated`, err: "unterminated"},
		{path: `""`, err: "empty quoted segment"},
		{path: `"a"b`, err: "expected '.'"},
		{path: `"\x"`, err: "not a valid JSON string"},
		{path: strings.Repeat("a.", maxPathSegments) + "a", err: "more than"},
	}
	for _, tc := range cases {
		got, err := parseClaimPath(tc.path)
		if tc.err != "" {
			if err == nil || !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("parseClaimPath(%q) = %q, %v; want error saying %q", tc.path, got, err, tc.err)
			}
			continue
		}
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("parseClaimPath(%q) = %q, %v; want %q", tc.path, got, err, tc.want)
		}
		if again, err := parseClaimPath(got.String()); err != nil || !slices.Equal(again, got) {
			t.Errorf("round trip of %q via %q = %q, %v", tc.path, got.String(), again, err)
		}
	}
}

// FuzzPattern checks the mapping-rule parser and matcher: no panics, a match
// reassembles to exactly the group, and a group built from the pattern with
// ordinary values matches with those values.
func FuzzPattern(f *testing.F) {
	for _, s := range [][2]string{
		{"/tenants/{chain}", "/tenants/acme"},
		{"/tenants/{chain}/hotels/{hotel}", "/tenants/acme/hotels/h-17"},
		{"tenant:{chain}", "tenant:acme"},
		{"{chain}-admins", "acme-admins"},
		{"{chain}:{hotel}", "a:b:c"},
		{"g-{chain}-é{hotel}", "g-ac-é1"},
		{"{a}{b}", "ab"},
		{"/t/{chain", "/t/x"},
		{"}{", ""},
	} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, text, group string) {
		p, err := parsePattern(text)
		if err != nil {
			if !errors.Is(err, ErrConfig) {
				t.Fatalf("parse error %v does not wrap ErrConfig", err)
			}
			return
		}
		if len(p.lits) != len(p.levels)+1 {
			t.Fatalf("%q: %d literals for %d placeholders", text, len(p.lits), len(p.levels))
		}
		if vals, ok := p.match(group); ok {
			if got := assemble(p, vals); got != group {
				t.Fatalf("%q matched %q with %q, which reassembles to %q", text, group, vals, got)
			}
			for _, v := range vals {
				if !validValue(v) || strings.Contains(v, "/") {
					t.Fatalf("%q matched %q with invalid value %q", text, group, v)
				}
			}
		}
		vals := make([]string, len(p.levels))
		for i := range vals {
			vals[i] = safeValue(p.lits[i+1])
		}
		built := assemble(p, vals)
		got, ok := p.match(built)
		if !ok || !slices.Equal(got, vals) {
			t.Fatalf("%q.match(%q) = %q, %v; want %q", text, built, got, ok, vals)
		}
	})
}

func assemble(p pattern, vals []string) string {
	var b strings.Builder
	for i, v := range vals {
		b.WriteString(p.lits[i])
		b.WriteString(v)
	}
	b.WriteString(p.lits[len(vals)])
	return b.String()
}

// safeValue returns a value that cannot contain the rune starting next.
func safeValue(next string) string {
	r, _ := utf8.DecodeRuneInString(next)
	for _, c := range []string{"q7", "zz", "k"} {
		if !strings.ContainsRune(c, r) {
			return c
		}
	}
	return "x"
}

// FuzzClaimPath checks the claim-path parser: no panics, and what it parses
// prints back to a path that parses to the same segments.
func FuzzClaimPath(f *testing.F) {
	for _, s := range []string{"groups", "realm_access.roles", `"https://example.com/groups"`, `a."b.c".d`, `"\u0000"`, `"`, "a..b", `"a"."b"`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p, err := parseClaimPath(s)
		if err != nil {
			if !errors.Is(err, ErrConfig) {
				t.Fatalf("error %v does not wrap ErrConfig", err)
			}
			return
		}
		if len(p) == 0 || len(p) > maxPathSegments {
			t.Fatalf("%q parsed to %d segments", s, len(p))
		}
		again, err := parseClaimPath(p.String())
		if err != nil || !slices.Equal(again, p) {
			t.Fatalf("%q → %q → %q, %v", s, p, again, err)
		}
		_, _ = p.lookup(map[string]any{p[0]: map[string]any{"x": strconv.Itoa(len(p))}})
	})
}
