package flow

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// testPolicy is the policy of the package's tests.
const testPolicy = `{
  "version": 1,
  "pii": {"email": "guest.pii", "name": "guest.pii", "phone": "guest.pii", "card": "payment"},
  "categories": {
    "guest.pii": {"level": "confidential", "to": ["$owner", "email:*@staff.example"]},
    "payment":   {"level": "secret"},
    "finance":   {"level": "internal", "to": ["https://*.corp.example"]}
  },
  "destinations": {
    "$owner": "confidential",
    "email:*@staff.example": "confidential",
    "https://*.corp.example": "internal"
  },
  "tools": {"rooms": "public", "revenue": {"level": "internal", "categories": ["finance"]}},
  "declassify": [
    {"reason": "invoice", "sink": "mail", "to": "$owner", "categories": ["payment"], "max_level": "secret"}
  ]
}`

func TestParsePolicy(t *testing.T) {
	p, err := ParsePolicy("test.json", []byte(testPolicy))
	if err != nil {
		t.Fatal(err)
	}
	if p.Scope() != ScopeSubject || p.retain != DefaultRetain || p.defaultLevel != rInternal {
		t.Errorf("defaults: scope %s retain %s default %s", p.Scope(), p.retain, p.defaultLevel)
	}
	if p.pii["ip"] != "pii" || p.pii["card"] != "payment" || p.pii["email"] != "guest.pii" {
		t.Errorf("pii mapping = %v (defaults must fill the unnamed categories)", p.pii)
	}
	if len(p.destinations) != 3 || len(p.declassify) != 1 || p.tools["revenue"].cats[0] != "finance" {
		t.Errorf("parsed %+v", p)
	}
	// The example of the hotel server parses too.
	if _, err := LoadPolicy(filepath.Join("..", "examples", "hotel", "hotel", "flow-policy.json")); err != nil {
		t.Errorf("hotel policy: %v", err)
	}
}

// TestPolicyErrorsHaveLines checks that each fault is reported at its line,
// all faults at once, each matching ErrPolicy.
func TestPolicyErrorsHaveLines(t *testing.T) {
	bad := `{
  "version": 1,
  "default_level": "top",
  "categories": {
    "guest.pii": {"level": "confidential", "to": ["https://*.com"]},
    "Payment": {"level": "secret"}
  },
  "destinations": {
    "https://*.corp.example": "internal",
    "https://evil*.example": "internal",
    "*": "secret"
  },
  "colour": "blue",
  "declassify": [
    {"reason": "invoice", "sink": "mail", "to": "*", "max_level": "secret"},
    {"sink": "mail", "to": "$owner"}
  ],
  "taint": {"scope": "global", "retain": "5s"}
}`
	_, err := ParsePolicy("bad.json", []byte(bad))
	if !errors.Is(err, ErrPolicy) {
		t.Fatalf("err = %v", err)
	}
	want := map[int]string{
		3:  `default_level: unknown level "top"`,
		5:  `wildcard must sit over a domain of at least two labels`,
		6:  `category "Payment"`,
		10: `"*" is allowed only as the whole leftmost label`,
		11: `"*" would clear every destination`,
		13: `unknown key "colour"`,
		15: `"*" would declassify to every destination`,
		16: `"reason" is required`,
		18: `taint.scope: "global"`,
	}
	got := map[int][]string{}
	for _, e := range unwrapAll(err) {
		var pe *PolicyError
		if !errors.As(e, &pe) {
			t.Fatalf("%v is not a *PolicyError", e)
		}
		if pe.File != "bad.json" {
			t.Errorf("file %q", pe.File)
		}
		got[pe.Line] = append(got[pe.Line], pe.Msg)
	}
	for line, frag := range want {
		found := false
		for _, m := range got[line] {
			found = found || strings.Contains(m, frag)
		}
		if !found {
			t.Errorf("line %d: no error containing %q; got %q", line, frag, got[line])
		}
	}
	if !strings.Contains(err.Error(), "bad.json:3:") {
		t.Errorf("message does not start with file:line: %v", err)
	}
	if !strings.Contains(strings.Join(got[18], " "), "retain") {
		t.Errorf("line 18: retain of 5s not refused: %q", got[18])
	}
}

func unwrapAll(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}

func TestPolicySyntaxErrors(t *testing.T) {
	for name, c := range map[string]struct {
		src  string
		line int
		frag string
	}{
		"syntax":        {"{\n  \"version\": 1,\n  \"tools\": {\"a\": \"public\",}\n}", 3, "JSON syntax"},
		"duplicate key": {"{\n  \"version\": 1,\n  \"tools\": {\n    \"a\": \"public\",\n    \"a\": \"secret\"\n  }\n}", 5, `duplicate key "a"`},
		"trailing":      {"{\"version\": 1}\n{}", 2, "after the top-level value"},
		"no version":    {"{\n  \"tools\": {}\n}", 1, "version"},
		"wrong version": {"{\n  \"version\": 2\n}", 2, "version must be 1"},
		"truncated":     {"{\n  \"version\": 1,\n  \"tools\": {", 3, "end of file"},
		"not object":    {"[1]", 1, "policy must be an object"},
		"owner unused":  {"{\"version\": 1,\n\"categories\": {\"x\": {\"to\": [\"$owner\"]}}}", 2, "$owner no clearance"},
		"unknown pii":   {"{\"version\": 1,\n\"pii\": {\"dna\": \"x\"}}", 2, "not a redact category"},
		"secret pii":    {"{\"version\": 1,\n\"pii\": {\"secret\": \"x\"}}", 2, "always dropped"},
		"declass typo":  {"{\"version\": 1,\n\"declassify\": [{\"reason\": \"r\", \"sink\": \"s\", \"to\": \"$owner\", \"categories\": [\"paymnet\"], \"max_level\": \"secret\"}]}", 2, `"paymnet" appears nowhere`},
		"bad reason":    {"{\"version\": 1,\n\"declassify\": [{\"reason\": \"Because I Said So\", \"sink\": \"s\", \"to\": \"$owner\", \"max_level\": \"secret\"}]}", 2, "short name"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := ParsePolicy("p.json", []byte(c.src))
			var pe *PolicyError
			if !errors.As(err, &pe) || !errors.Is(err, ErrPolicy) {
				t.Fatalf("err = %v", err)
			}
			if pe.Line != c.line || !strings.Contains(err.Error(), c.frag) {
				t.Errorf("got line %d %q, want line %d containing %q", pe.Line, err, c.line, c.frag)
			}
		})
	}
}

func TestLoadPolicy(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "p.json")
	if err := os.WriteFile(path, []byte(testPolicy), 0o600); err != nil {
		t.Fatal(err)
	}
	p, err := LoadPolicy(path)
	if err != nil || p.Name() != path {
		t.Fatalf("LoadPolicy = %v, %v", p, err)
	}
	if _, err := LoadPolicy(filepath.Join(dir, "missing.json")); !errors.Is(err, ErrPolicy) {
		t.Errorf("missing file: %v", err)
	}
	if _, err := ParsePolicy("big", make([]byte, MaxPolicyBytes+1)); !errors.Is(err, ErrPolicy) {
		t.Errorf("oversized: %v", err)
	}
}
