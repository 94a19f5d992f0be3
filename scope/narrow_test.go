package scope_test

import (
	"errors"
	"slices"
	"testing"

	"github.com/tenantmcp/tenantmcp/internal/mint"
	"github.com/tenantmcp/tenantmcp/scope"
)

// TestNarrowOnlyNarrows: a scope narrows to exactly one of its own grants
// (with that grant's roles), by value or by path; every selector naming
// anything else — another tenant, a level above, an ancestor the caller
// lacks, the same id without (or with other) ancestors, a malformed path —
// fails with ErrNotGranted, and the result never holds a grant the scope
// did not.
func TestNarrowOnlyNarrows(t *testing.T) {
	paris := scope.Grant{Level: "hotel", ID: "acme-paris", Within: []scope.Grant{{Level: "chain", ID: "initech"}}, Roles: []string{"manager"}}
	s, err := mint.Scope("alice", []scope.Grant{
		{Level: "company", ID: "1", Roles: []string{"analyst", "viewer"}},
		{Level: "company", ID: "4", Roles: []string{"viewer"}},
		paris,
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	held := s.Grants()
	for _, c := range []struct {
		sel   scope.Grant
		path  string
		roles []string
	}{
		{scope.Grant{Level: "company", ID: "1"}, "company:1", []string{"analyst", "viewer"}},
		{scope.Grant{Level: "company", ID: "4", Roles: []string{"admin"}}, "company:4", []string{"viewer"}},
		{scope.Grant{Level: "hotel", ID: "acme-paris", Within: []scope.Grant{{Level: "chain", ID: "initech"}}}, "chain:initech/hotel:acme-paris", []string{"manager"}},
	} {
		for _, n := range []func() (scope.Scope, error){
			func() (scope.Scope, error) { return s.Narrow(c.sel) },
			func() (scope.Scope, error) { return s.NarrowPath(c.path) },
		} {
			got, err := n()
			if err != nil {
				t.Fatalf("%s: %v", c.path, err)
			}
			gs := got.Grants()
			if len(gs) != 1 || gs[0].String() != c.path || got.Subject() != "alice" {
				t.Fatalf("%s: narrowed to %v", c.path, got)
			}
			if !slices.ContainsFunc(held, func(h scope.Grant) bool { return h.String() == gs[0].String() }) {
				t.Fatalf("%s: narrowed to a grant the scope did not hold: %v", c.path, gs[0])
			}
			if !slices.Equal(got.Roles(), c.roles) || !slices.Equal(gs[0].Roles, c.roles) {
				t.Fatalf("%s: roles %v / %v, want %v", c.path, got.Roles(), gs[0].Roles, c.roles)
			}
			// Narrowing again to the same grant is the identity.
			again, err := got.NarrowPath(c.path)
			if err != nil || !again.Equal(got) {
				t.Fatalf("%s: narrowing twice: %v %v", c.path, again, err)
			}
		}
	}
	refused := []scope.Grant{
		{Level: "company", ID: "2"},  // another tenant
		{Level: "company", ID: "14"}, // a prefix/suffix of own ids
		{Level: "chain", ID: "initech"},
		{Level: "hotel", ID: "acme-paris"}, // without its ancestors
		{Level: "hotel", ID: "acme-paris", Within: []scope.Grant{{Level: "chain", ID: "globex"}}}, // other ancestors
		{Level: "company", ID: "1", Within: []scope.Grant{{Level: "chain", ID: "initech"}}},
		{},
	}
	for _, g := range refused {
		if got, err := s.Narrow(g); !errors.Is(err, scope.ErrNotGranted) || !got.IsZero() {
			t.Errorf("Narrow(%v) = %v, %v; want ErrNotGranted", g, got, err)
		}
	}
	for _, p := range []string{"company:2", "company:1 ", "Company:1", "company/1", "1", "", "chain:initech", "hotel:acme-paris",
		"company:1/company:4", "chain:globex/hotel:acme-paris", `{"level":"company","id":"1"}`} {
		if got, err := s.NarrowPath(p); !errors.Is(err, scope.ErrNotGranted) || !got.IsZero() {
			t.Errorf("NarrowPath(%q) = %v, %v; want ErrNotGranted", p, got, err)
		}
	}
	if _, err := (scope.Scope{}).NarrowPath("company:1"); !errors.Is(err, scope.ErrNotGranted) {
		t.Errorf("zero scope narrowed: %v", err)
	}
	// Two grants writing the same path (an id holding the separator) are
	// not told apart by a path: refused.
	odd, err := mint.Scope("bob", []scope.Grant{
		{Level: "hotel", ID: "p", Within: []scope.Grant{{Level: "chain", ID: "a"}}},
		{Level: "chain", ID: "a/hotel:p"},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	// "chain:a/hotel:p" is how both grants write.
	if _, err := odd.NarrowPath("chain:a/hotel:p"); !errors.Is(err, scope.ErrNotGranted) {
		t.Errorf("an ambiguous path narrowed: %v", err)
	}
}
