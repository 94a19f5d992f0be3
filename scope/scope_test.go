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
