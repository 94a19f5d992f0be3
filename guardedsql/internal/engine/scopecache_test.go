package engine

import (
	"reflect"
	"testing"

	"github.com/tenantmcp/tenantmcp/internal/sqlast"
	"github.com/tenantmcp/tenantmcp/scope"
	"github.com/tenantmcp/tenantmcp/scope/scopetest"
)

// TestEncodeScopeCacheKeyed checks that the cache of EncodeScope never
// hands one scope another's encoding: scopes that differ in one id, only
// in a grant's level, or only in an ancestor, and equal level lists that
// are different schemas' lists, each get what encodeScope computes for
// them, however the calls interleave; scopes that differ only in subject
// or roles share an entry.
func TestEncodeScopeCacheKeyed(t *testing.T) {
	schema := func() []*sqlast.Level {
		return []*sqlast.Level{{Name: "chain", Key: sqlast.TextKey, Index: 0}, {Name: "hotel", Key: sqlast.TextKey, Index: 1}}
	}
	levelLists := [][]*sqlast.Level{schema(), schema()}
	g := func(level, id string, within ...scope.Grant) scope.Grant {
		return scope.Grant{Level: level, ID: id, Within: within}
	}
	scopes := []scope.Scope{
		scopetest.New("u", []scope.Grant{g("chain", "acme")}),
		scopetest.New("u", []scope.Grant{g("chain", "acmf")}),                      // one id differs
		scopetest.New("u", []scope.Grant{g("hotel", "acme")}),                      // only the level differs
		scopetest.New("u", []scope.Grant{g("chain", "acme"), g("hotel", "paris")}), // one grant more
		scopetest.New("u", []scope.Grant{g("hotel", "paris", g("chain", "acme"))}),
		scopetest.New("u", []scope.Grant{g("hotel", "paris", g("chain", "acmf"))}), // only an ancestor differs
		{},
	}
	for round := range 3 {
		for i, sc := range scopes {
			for l, levels := range levelLists {
				got, want := EncodeScope(levels, sc), encodeScope(levels, sc)
				if got.Doc != want.Doc || !reflect.DeepEqual(got.Active, want.Active) || !reflect.DeepEqual(got.Shapes, want.Shapes) {
					t.Fatalf("round %d, scope %d, levels %d: cached %+v, want %+v", round, i, l, got, want)
				}
				for _, a := range got.Active {
					if a != levels[a.Index] {
						t.Fatalf("scope %d: Active points into another level list", i)
					}
				}
			}
		}
	}
	seen := map[string]int{}
	for i, sc := range scopes {
		if j, dup := seen[EncodeScope(levelLists[0], sc).Doc]; dup {
			t.Errorf("scopes %d and %d encode alike", j, i)
		}
		seen[EncodeScope(levelLists[0], sc).Doc] = i
	}
	same := scopetest.New("other", []scope.Grant{{Level: "chain", ID: "acme", Roles: []string{"manager"}}})
	if got := EncodeScope(levelLists[0], same); got.Doc != `{"chain":["acme"]}` {
		t.Errorf("another subject with roles: %s", got.Doc)
	}
}

// TestScopeGrants: Scope.Grants splits a scope into one scope a grant,
// plain ids and grants confined to ancestors alike, each encoded as
// EncodeScope encodes that grant alone.
func TestScopeGrants(t *testing.T) {
	levels := []*sqlast.Level{{Name: "chain", Key: sqlast.TextKey, Index: 0}, {Name: "hotel", Key: sqlast.IntKey, Index: 1}}
	g := func(level, id string, within ...scope.Grant) scope.Grant {
		return scope.Grant{Level: level, ID: id, Within: within}
	}
	grants := []scope.Grant{g("chain", "acme"), g("chain", "globex"), g("hotel", "7"), g("hotel", "9", g("chain", "initech"))}
	got := EncodeScope(levels, scopetest.New("u", grants)).Grants()
	if len(got) != len(grants) {
		t.Fatalf("%d scopes, want %d: %+v", len(got), len(grants), got)
	}
	for i, gr := range grants {
		want := encodeScope(levels, scopetest.New("u", []scope.Grant{gr}))
		if got[i].Doc != want.Doc || !reflect.DeepEqual(got[i].Active, want.Active) || !reflect.DeepEqual(got[i].Shapes, want.Shapes) {
			t.Errorf("grant %d (%v): %+v, want %+v", i, gr, got[i], want)
		}
	}
	if one := EncodeScope(levels, scopetest.New("u", grants[:1])).Grants(); len(one) != 1 {
		t.Errorf("one grant splits into %d scopes", len(one))
	}
}
