package flow

import (
	"errors"
	"testing"
)

func TestPatternMatching(t *testing.T) {
	cases := []struct {
		pattern string
		kind    SinkKind
		dest    string
		want    bool
	}{
		{"https://*.example.com", URL, "https://a.example.com/x", true},
		{"https://*.example.com", URL, "https://a.b.example.com", true},
		{"https://*.example.com", URL, "https://A.Example.COM./x", true},
		{"https://*.example.com", URL, "https://a.example.com:8443/x", true},
		{"https://*.example.com", URL, "https://example.com/", false},
		{"https://*.example.com", URL, "https://evilexample.com/", false},
		{"https://*.example.com", URL, "https://example.com.evil.net/", false},
		{"https://*.example.com", URL, "https://a.example.com.evil.net/", false},
		{"https://*.example.com", URL, "https://a.example.com@evil.net/", false},
		{"https://*.example.com", URL, "https://evil.net/?next=a.example.com", false},
		{"https://*.example.com", URL, "https://evil.net#a.example.com", false},
		{"https://*.example.com", URL, "http://a.example.com/", false},
		{"https://api.example.com", URL, "https://api.example.com/v1", true},
		{"https://api.example.com", URL, "https://x.api.example.com/v1", false},
		{"https://api.example.com", URL, "https://api.example.co/v1", false},
		{"http://10.0.0.5", URL, "http://10.0.0.5:8080/hook", true},
		{"https://*.example.com", URL, "https://10.0.0.5/", false},
		{"email:*@example.com", Email, "Ann@Example.com", true},
		{"email:*@example.com", Email, "ann@mail.example.com", false},
		{"email:*@example.com", Email, "ann@example.com.evil.net", false},
		{"email:*@example.com", Email, "ann@evilexample.com", false},
		{"email:*@*.example.com", Email, "ann@mail.example.com", true},
		{"email:*@*.example.com", Email, "ann@example.com", false},
		{"email:ann@example.com", Email, "ann@example.com", true},
		{"email:ann@example.com", Email, "bob@example.com", false},
		{"*", URL, "https://anything.example/", true},
		{"https://*.example.com", Email, "ann@a.example.com", false},
		{"email:*@example.com", URL, "https://example.com/", false},
	}
	for _, c := range cases {
		p, err := parsePattern(c.pattern)
		if err != nil {
			t.Fatalf("%s: %v", c.pattern, err)
		}
		d, err := ParseDestination(c.kind, c.dest)
		if err != nil {
			t.Fatalf("%s: %v", c.dest, err)
		}
		if got := p.match(&d); got != c.want {
			t.Errorf("%s matches %s (%s): %v, want %v", c.pattern, c.dest, d, got, c.want)
		}
	}
}

func TestDestinationRefusals(t *testing.T) {
	for _, c := range []struct {
		kind SinkKind
		raw  string
	}{
		{Email, "ann@example.com, eve@evil.net"},
		{Email, "ann@example.com;eve@evil.net"},
		{Email, "Ann <ann@example.com>"},
		{Email, "ann@example.com\r\nBcc: eve@evil.net"},
		{Email, "ann@example.com@evil.net"},
		{Email, "\"ann@example.com\"@evil.net"},
		{Email, "ann@[10.0.0.1]"},
		{Email, "ann@10.0.0.1"},
		{Email, "annexample.com"},
		{Email, "ann@exämple.com"},
		{Email, ""},
		{URL, "ftp://example.com/"},
		{URL, "https:///path"},
		{URL, "mailto:ann@example.com"},
		{URL, "https://exa%6dple.com/"},
		{URL, "https://evil.net\\@example.com/"},
		{URL, "//example.com/x"},
		{URL, "https://ex_ample.com/"},
		{URL, "https://exämple.com/"},
		{"sms", "+33123456789"},
	} {
		if d, err := ParseDestination(c.kind, c.raw); !errors.Is(err, ErrDestination) {
			t.Errorf("%s %q accepted as %+v (err %v)", c.kind, c.raw, d, err)
		}
	}
}

func TestPatternRefusals(t *testing.T) {
	for _, p := range []string{
		"https://*.com", "https://ex*ample.com", "https://a.*.example.com", "https://*example.com",
		"https://Example.com", "https://example.com.", "https://example.com/path", "https://example.com:443",
		"https://user@example.com", "email:*@*", "email:ann@*.example.com", "email:a*@example.com",
		"example.com", "ftp://example.com", "email:*@*.com", "https://*.10.0.0.1",
	} {
		if _, err := parsePattern(p); err == nil {
			t.Errorf("pattern %q accepted", p)
		}
	}
}
