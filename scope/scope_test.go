package scope_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/tenantmcp/tenantmcp/internal/mint"
	"github.com/tenantmcp/tenantmcp/scope"
	"github.com/tenantmcp/tenantmcp/scope/scopetest"
)

func TestZeroScopeIsDeny(t *testing.T) {
	var s scope.Scope
	if !s.IsZero() || s.Has("chain", "acme") || len(s.Grants()) != 0 || s.Subject() != "" {
		t.Fatalf("zero scope must hold nothing: %v", s)
	}
	if got := string(s.GrantJSON()); got != "[]" {
		t.Fatalf("zero scope JSON = %s, want []", got)
	}
	if _, ok := scope.FromContext(context.Background()); ok {
		t.Fatal("empty context reported a scope")
	}
	// A zero scope attached to a context still reads back as "no scope".
	if _, ok := scope.FromContext(mint.NewContext(context.Background(), scope.Scope{})); ok {
		t.Fatal("zero scope in context reported as a scope")
	}
}

func TestMintCanonicalizes(t *testing.T) {
	a, err := mint.Scope("alice", []scope.Grant{{Level: "hotel", ID: "h-2"}, {Level: "chain", ID: "acme"}, {Level: "hotel", ID: "h-1"}, {Level: "chain", ID: "acme"}}, []string{"manager", "front_desk", "manager"})
	if err != nil {
		t.Fatal(err)
	}
	b, err := mint.Scope("alice", []scope.Grant{{Level: "hotel", ID: "h-1"}, {Level: "hotel", ID: "h-2"}, {Level: "chain", ID: "acme"}}, []string{"front_desk", "manager"})
	if err != nil {
		t.Fatal(err)
	}
	if !a.Equal(b) {
		t.Fatalf("same grants in another order differ: %v vs %v", a, b)
	}
	want := `[{"level":"chain","id":"acme"},{"level":"hotel","id":"h-1"},{"level":"hotel","id":"h-2"}]`
	if got := string(a.GrantJSON()); got != want || string(b.GrantJSON()) != want {
		t.Fatalf("GrantJSON = %s, want %s", got, want)
	}
	var decoded []scope.Grant
	if err := json.Unmarshal(a.GrantJSON(), &decoded); err != nil || len(decoded) != 3 {
		t.Fatalf("GrantJSON does not round-trip: %v %v", decoded, err)
	}
	if got := a.GrantsAt("hotel"); strings.Join(got, ",") != "h-1,h-2" {
		t.Fatalf("GrantsAt(hotel) = %v", got)
	}
	if got := a.Levels(); strings.Join(got, ",") != "chain,hotel" {
		t.Fatalf("Levels = %v", got)
	}
	if !a.Has("chain", "acme") || a.Has("chain", "h-1") || a.Has("hotel", "acme") {
		t.Fatal("Has must match level and id exactly")
	}
	if !a.HasRole("front_desk") || a.HasRole("admin") || len(a.Roles()) != 2 {
		t.Fatalf("roles = %v", a.Roles())
	}
}

func TestScopeIsImmutable(t *testing.T) {
	in := []scope.Grant{{Level: "chain", ID: "acme"}}
	roles := []string{"manager"}
	s, err := mint.Scope("alice", in, roles)
	if err != nil {
		t.Fatal(err)
	}
	in[0].ID = "globex"
	roles[0] = "admin"
	out := s.Grants()
	out[0].ID = "globex"
	s.Roles()[0] = "admin"
	js := s.GrantJSON()
	js[0] = 'X'
	if !s.Has("chain", "acme") || s.Has("chain", "globex") || !s.HasRole("manager") || s.HasRole("admin") {
		t.Fatalf("scope changed through an alias: %v", s)
	}
	if string(s.GrantJSON())[0] != '[' {
		t.Fatal("GrantJSON changed through an alias")
	}
}

func TestMintRejects(t *testing.T) {
	long := strings.Repeat("x", scope.MaxIDLength+1)
	many := make([]scope.Grant, scope.MaxGrants+1)
	for i := range many {
		many[i] = scope.Grant{Level: "chain", ID: strings.Repeat("a", 1+i%200) + string(rune('a'+i%26))}
	}
	cases := []struct {
		name    string
		subject string
		grants  []scope.Grant
		roles   []string
	}{
		{"no subject", "", []scope.Grant{{Level: "chain", ID: "acme"}}, nil},
		{"no grants", "alice", nil, nil},
		{"empty level", "alice", []scope.Grant{{Level: "", ID: "acme"}}, nil},
		{"upper-case level", "alice", []scope.Grant{{Level: "Chain", ID: "acme"}}, nil},
		{"level with quote", "alice", []scope.Grant{{Level: "chain'", ID: "acme"}}, nil},
		{"empty id", "alice", []scope.Grant{{Level: "chain", ID: ""}}, nil},
		{"control char id", "alice", []scope.Grant{{Level: "chain", ID: "ac\x00me"}}, nil},
		{"invalid utf-8 id", "alice", []scope.Grant{{Level: "chain", ID: "\xff"}}, nil},
		{"over-long id", "alice", []scope.Grant{{Level: "chain", ID: long}}, nil},
		{"too many grants", "alice", many, nil},
		{"empty role", "alice", []scope.Grant{{Level: "chain", ID: "acme"}}, []string{""}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s, err := mint.Scope(c.subject, c.grants, c.roles)
			if !errors.Is(err, scope.ErrInvalid) {
				t.Fatalf("err = %v, want ErrInvalid", err)
			}
			if !s.IsZero() {
				t.Fatal("a refused mint returned a non-zero scope")
			}
		})
	}
}

func TestContextRoundTrip(t *testing.T) {
	s := scopetest.New("bob", []scope.Grant{{Level: "hotel", ID: "h-17"}}, "front_desk")
	got, ok := scope.FromContext(scopetest.NewContext(context.Background(), s))
	if !ok || !got.Equal(s) {
		t.Fatalf("FromContext = %v, %v", got, ok)
	}
}

func TestStringAndLogValueAreSafe(t *testing.T) {
	s := scopetest.New("bob\"injected", []scope.Grant{{Level: "hotel", ID: "h 17\"x"}}, "front_desk")
	str := s.String()
	if !strings.Contains(str, `"bob\"injected"`) || !strings.Contains(str, `hotel:"h 17\"x"`) {
		t.Fatalf("String does not quote values: %s", str)
	}
	var b strings.Builder
	slog.New(slog.NewJSONHandler(&b, nil)).Info("call", "scope", s)
	var rec map[string]any
	if err := json.Unmarshal([]byte(b.String()), &rec); err != nil {
		t.Fatalf("log line is not JSON: %v", err)
	}
	group, ok := rec["scope"].(map[string]any)
	if !ok || group["sub"] != "bob\"injected" {
		t.Fatalf("scope logged as %v", rec["scope"])
	}
}

// TestGrantsWithinAncestors: a grant confined to ancestors is its own
// grant: not the plain grant of its id, part of the canonical grant set
// (and so of the redaction tenant key), rendered with its path.
func TestGrantsWithinAncestors(t *testing.T) {
	in := scope.Grant{Level: "hotel", ID: "acme-paris", Within: []scope.Grant{{Level: "chain", ID: "initech"}}}
	s, err := mint.Scope("alice", []scope.Grant{in}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if s.Has("hotel", "acme-paris") || len(s.GrantsAt("hotel")) != 0 {
		t.Fatalf("a grant within ancestors reads as the plain grant: %v", s)
	}
	want := `[{"level":"hotel","id":"acme-paris","within":[{"level":"chain","id":"initech"}]}]`
	if got := string(s.GrantJSON()); got != want {
		t.Fatalf("GrantJSON = %s, want %s", got, want)
	}
	plain, _ := mint.Scope("alice", []scope.Grant{{Level: "hotel", ID: "acme-paris"}}, nil)
	if string(plain.GrantJSON()) == string(s.GrantJSON()) || plain.Equal(s) {
		t.Fatal("plain and confined grants of one id encode alike")
	}
	if got := s.Grants()[0].String(); got != "chain:initech/hotel:acme-paris" {
		t.Fatalf("String = %q", got)
	}
	for _, bad := range [][]scope.Grant{
		{{Level: "hotel", ID: "h", Within: []scope.Grant{{Level: "hotel", ID: "h2"}}}},
		{{Level: "hotel", ID: "h", Within: []scope.Grant{{Level: "chain", ID: "c", Within: []scope.Grant{{Level: "org", ID: "o"}}}}}},
		{{Level: "hotel", ID: "h", Within: []scope.Grant{{Level: "chain", ID: "c", Roles: []string{"admin"}}}}},
		{{Level: "hotel", ID: "h", Within: []scope.Grant{{Level: "Chain", ID: "c"}}}},
	} {
		if _, err := mint.Scope("alice", bad, nil); !errors.Is(err, scope.ErrInvalid) {
			t.Errorf("mint(%v) = %v, want ErrInvalid", bad, err)
		}
	}
}

// TestEffectiveRolesAreTheIntersection (issue 13 §2): the roles the scope
// reports are those bound to every grant; a role given for one tenant does
// not hold for another.
func TestEffectiveRolesAreTheIntersection(t *testing.T) {
	paris := scope.Grant{Level: "hotel", ID: "acme-paris", Roles: []string{"front_desk", "manager"}}
	globex := scope.Grant{Level: "chain", ID: "globex", Roles: []string{"manager"}}
	s, err := mint.Scope("alice", []scope.Grant{paris, globex}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := s.Roles(); strings.Join(got, ",") != "manager" || s.HasRole("front_desk") {
		t.Fatalf("roles = %v", got)
	}
	if got, ok := s.GrantRoles(paris); !ok || strings.Join(got, ",") != "front_desk,manager" {
		t.Fatalf("GrantRoles(paris) = %v, %v", got, ok)
	}
	none, _ := mint.Scope("alice", []scope.Grant{paris, {Level: "chain", ID: "globex"}}, nil)
	if len(none.Roles()) != 0 {
		t.Fatalf("a grant without roles leaves roles %v", none.Roles())
	}
	// Token-wide roles passed to mint hold for every grant.
	all, _ := mint.Scope("alice", []scope.Grant{paris, {Level: "chain", ID: "globex"}}, []string{"auditor"})
	if got := all.Roles(); strings.Join(got, ",") != "auditor" {
		t.Fatalf("roles = %v", got)
	}
	// The same grant from two groups merges its roles.
	merged, _ := mint.Scope("alice", []scope.Grant{{Level: "chain", ID: "globex", Roles: []string{"a"}}, {Level: "chain", ID: "globex", Roles: []string{"b"}}}, nil)
	if got := merged.Roles(); strings.Join(got, ",") != "a,b" || len(merged.Grants()) != 1 {
		t.Fatalf("merged = %v", merged)
	}
}
