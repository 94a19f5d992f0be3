package sandbox

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestValidate(t *testing.T) {
	dir := t.TempDir()
	for name, p := range map[string]Policy{
		"relative":      {Paths: []PathRule{ReadOnly("etc")}},
		"unclean":       {Paths: []PathRule{ReadOnly(dir + "/../x")}},
		"trailing":      {Paths: []PathRule{ReadOnly(dir + "/")}},
		"missing":       {Paths: []PathRule{ReadOnly(filepath.Join(dir, "nope"))}},
		"no access":     {Paths: []PathRule{{Paths: []string{dir}}}},
		"unknown bit":   {Paths: []PathRule{{Paths: []string{dir}, Access: Read | 1<<5}}},
		"no paths":      {Paths: []PathRule{{Access: Read}}},
		"connect port0": {ConnectTCP: []uint16{0}},
	} {
		if _, err := p.validate(); !errors.Is(err, ErrInvalidPolicy) {
			t.Errorf("%s: validate = %v, want ErrInvalidPolicy", name, err)
		}
	}
	missing := filepath.Join(dir, "nope")
	got, err := Policy{
		Paths:   []PathRule{{Paths: []string{missing, dir}, Access: Read, Optional: true}, {Paths: []string{missing}, Access: Read, Optional: true}},
		BindTCP: []uint16{0, 8080},
	}.validate()
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Paths) != 1 || len(got.Paths[0].Paths) != 1 || got.Paths[0].Paths[0] != dir {
		t.Errorf("optional missing paths kept: %+v", got.Paths)
	}
}

func TestGrants(t *testing.T) {
	p := Policy{Paths: []PathRule{ReadOnly("/usr"), ReadWriteDirs("/srv/app")}}
	for _, c := range []struct {
		path string
		a    Access
		want bool
	}{
		{"/usr", Read, true}, {"/usr/lib/x", Read, true}, {"/usrx", Read, false}, {"/", Read, false},
		{"/usr/lib", Write, false}, {"/srv/app/db", ReadWrite, true}, {"/srv", Read, false},
	} {
		if got := p.grants(c.path, c.a); got != c.want {
			t.Errorf("grants(%q, %v) = %v, want %v", c.path, c.a, got, c.want)
		}
	}
	if !(Policy{Paths: []PathRule{ReadOnly("/")}}).grants("/", Read) {
		t.Error("a Read rule on / does not grant /")
	}
}

func TestAccessString(t *testing.T) {
	for a, want := range map[Access]string{0: "-", Read: "r", ReadWrite: "rw", ReadExec: "rx", Read | Write | Execute: "rwx", Read | 1<<6: "r+0x40"} {
		if got := a.String(); got != want {
			t.Errorf("%d: %q, want %q", a, got, want)
		}
	}
}

func TestSQLiteDir(t *testing.T) {
	r, err := SQLiteDir("/var/lib/app/db/app.db")
	if err != nil || r.Access != ReadWrite || len(r.Paths) != 1 || r.Paths[0] != "/var/lib/app/db" {
		t.Errorf("SQLiteDir = %+v, %v", r, err)
	}
	wd, _ := os.Getwd()
	if r, _ := SQLiteDir("app.db"); r.Paths[0] != wd {
		t.Errorf("relative SQLiteDir = %v, want %s", r.Paths, wd)
	}
}

// TestInvalidOptionsAlwaysFail: a negative MinABI is refused, naming the
// field, even with BestEffort, before anything is restricted.
func TestInvalidOptionsAlwaysFail(t *testing.T) {
	s, err := Install(t.Context(), Policy{}, Options{MinABI: -1, BestEffort: true})
	if !errors.Is(err, ErrInvalidOptions) || s != nil || !strings.Contains(err.Error(), "Options.MinABI") {
		t.Fatalf("Install = %v, %v; want ErrInvalidOptions naming Options.MinABI", s, err)
	}
}
