package claims_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/golang-jwt/jwt/v5"

	"github.com/tenantmcp/tenantmcp/claims"
	"github.com/tenantmcp/tenantmcp/scope"
)

func g(level, id string) scope.Grant { return scope.Grant{Level: level, ID: id} }

// gw is a grant within ancestors, given as alternating level, id.
func gw(level, id string, within ...string) scope.Grant {
	gr := g(level, id)
	for i := 0; i+1 < len(within); i += 2 {
		gr.Within = append(gr.Within, g(within[i], within[i+1]))
	}
	return gr
}

// sameGrants compares grants by level, id and ancestors (not roles).
func sameGrants(a, b []scope.Grant) bool {
	return slices.EqualFunc(a, b, func(x, y scope.Grant) bool { return x.String() == y.String() })
}

// Each case signs a real token with the groups and checks the minted scope.
func TestGroupMapping(t *testing.T) {
	k := testKeys(t)
	keycloak := claims.Mapping{Patterns: []string{"/tenants/{chain}", "/tenants/{chain}/hotels/{hotel}"}}
	prefixed := claims.Mapping{Patterns: []string{"tenant:{chain}", "hotel:{chain}:{hotel}", "{chain}-admins"}}
	table := claims.Mapping{Table: map[string]scope.Grant{
		"7c9e6679-7425-40de-944b-e07fc1f90ae7": g("chain", "acme"),
		"a3bb189e-8bf9-3888-9912-ace4e6543002": g("hotel", "h-17"),
	}}
	both := claims.Mapping{
		Patterns: []string{"tenant:{chain}"},
		Table:    map[string]scope.Grant{"tenant:legacy": g("chain", "acme")},
	}
	cases := []struct {
		name    string
		mapping claims.Mapping
		groups  []any
		want    []scope.Grant // nil: ErrNoScope
		within  map[string][]scope.Grant
	}{
		{"keycloak chain", keycloak, []any{"/tenants/acme"}, []scope.Grant{g("chain", "acme")}, nil},
		{"keycloak hotel grants the hotel within its chain only", keycloak, []any{"/tenants/acme/hotels/h-17"},
			[]scope.Grant{gw("hotel", "h-17", "chain", "acme")}, map[string][]scope.Grant{"/tenants/acme/hotels/h-17": {g("chain", "acme")}}},
		{"hierarchical: chain and another chain's hotel", keycloak,
			[]any{"/tenants/acme", "/tenants/globex/hotels/h-9", "/tenants/globex/hotels/h-10"},
			[]scope.Grant{g("chain", "acme"), gw("hotel", "h-10", "chain", "globex"), gw("hotel", "h-9", "chain", "globex")}, nil},
		{"keycloak deeper path ignored", keycloak, []any{"/tenants/acme/hotels/h-17/rooms/12"}, nil, nil},
		{"keycloak empty segment ignored", keycloak, []any{"/tenants//hotels/h-17", "/tenants/"}, nil, nil},
		{"keycloak wrong prefix ignored", keycloak, []any{"/staff/acme", "tenants/acme"}, nil, nil},
		{"unmatched groups beside a match", keycloak, []any{"offline_access", "/tenants/acme", "uma_authorization"},
			[]scope.Grant{g("chain", "acme")}, nil},
		{"duplicate groups", keycloak, []any{"/tenants/acme", "/tenants/acme"}, []scope.Grant{g("chain", "acme")}, nil},
		{"prefix pattern", prefixed, []any{"tenant:acme"}, []scope.Grant{g("chain", "acme")}, nil},
		{"prefix placeholder stops at the next literal", prefixed, []any{"hotel:acme:h-17"},
			[]scope.Grant{gw("hotel", "h-17", "chain", "acme")}, map[string][]scope.Grant{"hotel:acme:h-17": {g("chain", "acme")}}},
		{"last placeholder takes the rest", prefixed, []any{"hotel:acme:h:17"}, []scope.Grant{gw("hotel", "h:17", "chain", "acme")}, nil},
		{"suffix pattern", prefixed, []any{"globex-admins"}, []scope.Grant{g("chain", "globex")}, nil},
		{"suffix placeholder ends at the first '-'", prefixed, []any{"glob-ex-admins"}, nil, nil},
		{"placeholder never spans '/'", prefixed, []any{"tenant:acme/evil"}, nil, nil},
		{"empty value ignored", prefixed, []any{"tenant:", "-admins"}, nil, nil},
		{"control character ignored", prefixed, []any{"tenant:ac\x01me"}, nil, nil},
		{"table GUIDs", table, []any{"7c9e6679-7425-40de-944b-e07fc1f90ae7", "a3bb189e-8bf9-3888-9912-ace4e6543002"},
			[]scope.Grant{g("chain", "acme"), g("hotel", "h-17")}, nil},
		{"table is exact", table, []any{"7C9E6679-7425-40DE-944B-E07FC1F90AE7", "7c9e6679"}, nil, nil},
		{"table before patterns", both, []any{"tenant:legacy", "tenant:globex"},
			[]scope.Grant{g("chain", "acme"), g("chain", "globex")}, nil},
		{"single string claim", keycloak, nil, []scope.Grant{g("chain", "acme")}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			v := staticVerifier(t, func(c *claims.Options) { c.Mapping = tc.mapping })
			c := claimsFor("alice", tc.groups...)
			if tc.groups == nil {
				c["groups"] = "/tenants/acme"
			}
			sc, info, err := v.Verify(context.Background(), sign(t, k.ed, c))
			if tc.want == nil {
				if !errors.Is(err, claims.ErrNoScope) {
					t.Fatalf("Verify = %v, %v; want ErrNoScope", sc, err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Verify: %v", err)
			}
			if got := sc.Grants(); !sameGrants(got, tc.want) {
				t.Errorf("grants = %v, want %v", got, tc.want)
			}
			for _, m := range info.Matches {
				if tc.within == nil {
					break
				}
				if want := tc.within[m.Group]; !sameGrants(m.Within, want) {
					t.Errorf("match %q: within = %v, want %v", m.Group, m.Within, want)
				}
			}
		})
	}
}

func TestRolesAndClaimPaths(t *testing.T) {
	k := testKeys(t)
	cases := []struct {
		name        string
		groupsClaim string
		rolesClaim  string
		claims      map[string]any
		wantGrants  []scope.Grant
		wantRoles   []string
		wantErr     error
	}{
		{
			name:       "defaults",
			claims:     map[string]any{"groups": []any{"/tenants/acme"}, "roles": []any{"manager", "auditor", "manager"}},
			wantGrants: []scope.Grant{g("chain", "acme")},
			wantRoles:  []string{"auditor", "manager"},
		},
		{
			name:        "keycloak realm roles as groups, client roles as roles",
			groupsClaim: "realm_access.roles",
			rolesClaim:  `resource_access."tenant-app".roles`,
			claims: map[string]any{
				"realm_access":    map[string]any{"roles": []any{"tenant:acme", "offline_access"}},
				"resource_access": map[string]any{"tenant-app": map[string]any{"roles": []any{"front-desk"}}, "other": map[string]any{"roles": []any{"admin"}}},
			},
			wantGrants: []scope.Grant{g("chain", "acme")},
			wantRoles:  []string{"front-desk"},
		},
		{
			name:        "namespaced claim URLs (Auth0)",
			groupsClaim: `"https://example.com/groups"`,
			rolesClaim:  `"https://example.com/roles"`,
			claims: map[string]any{
				"https://example.com/groups": []any{"/tenants/globex/hotels/h-9"},
				"https://example.com/roles":  []any{"manager"},
				"groups":                     []any{"/tenants/acme"}, // not the configured claim
			},
			wantGrants: []scope.Grant{gw("hotel", "h-9", "chain", "globex")},
			wantRoles:  []string{"manager"},
		},
		{
			name:        "quoted key with a dot inside a nested path",
			groupsClaim: `ext."tenant.groups"`,
			claims:      map[string]any{"ext": map[string]any{"tenant.groups": "tenant:acme", "tenant": map[string]any{"groups": "tenant:evil"}}},
			wantGrants:  []scope.Grant{g("chain", "acme")},
		},
		{
			name:        "path through a non-object",
			groupsClaim: "realm_access.roles",
			claims:      map[string]any{"realm_access": "tenant:acme"},
			wantErr:     claims.ErrNoScope,
		},
		{
			name:       "roles claim of the wrong type",
			claims:     map[string]any{"groups": []any{"/tenants/acme"}, "roles": map[string]any{"a": 1}},
			wantErr:    claims.ErrMalformed,
			wantGrants: nil,
		},
		{
			name:        "overage on a namespaced groups claim",
			groupsClaim: `"https://example.com/groups"`,
			claims:      map[string]any{"_claim_names": map[string]any{"https://example.com/groups": "src1"}},
			wantErr:     claims.ErrGroupOverage,
		},
		{
			name:       "overage of another claim does not matter",
			rolesClaim: "roles",
			claims: map[string]any{
				"groups":       []any{"/tenants/acme"},
				"_claim_names": map[string]any{"memberOf": "src1"},
			},
			wantGrants: []scope.Grant{g("chain", "acme")},
		},
		{
			name:       "overage with some groups present is still refused",
			claims:     map[string]any{"groups": []any{"/tenants/acme"}, "_claim_names": map[string]any{"groups": "src1"}},
			wantErr:    claims.ErrGroupOverage,
			wantGrants: nil,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			v := staticVerifier(t, func(c *claims.Options) {
				c.GroupsClaim = tc.groupsClaim
				c.RolesClaim = tc.rolesClaim
			})
			c := validClaims()
			delete(c, "groups")
			for name, val := range tc.claims {
				c[name] = val
			}
			sc, _, err := v.Verify(context.Background(), sign(t, k.ed, jwt.MapClaims(c)))
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("Verify = %v, %v; want %v", sc, err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Verify: %v", err)
			}
			if got := sc.Grants(); !sameGrants(got, tc.wantGrants) {
				t.Errorf("grants = %v, want %v", got, tc.wantGrants)
			}
			if got := sc.Roles(); !slices.Equal(got, tc.wantRoles) {
				t.Errorf("roles = %v, want %v", got, tc.wantRoles)
			}
			for _, r := range tc.wantRoles {
				if !sc.HasRole(r) {
					t.Errorf("HasRole(%q) = false", r)
				}
			}
		})
	}
}

// TestRolesBoundPerGrant (issue 13 §2): roles belong to the grant they came
// with. A role-suffixed group binds its role to that group's grant; the
// token-wide roles claim binds only to a token of one grant; the scope's
// effective roles are those every grant carries.
func TestRolesBoundPerGrant(t *testing.T) {
	k := testKeys(t)
	m := claims.Mapping{Patterns: []string{
		"/tenants/{chain}", "/tenants/{chain}/hotels/{hotel}",
		"/tenants/{chain}/roles/" + claims.RolePlaceholder,
		"/tenants/{chain}/hotels/{hotel}/" + claims.RolePlaceholder,
	}, Table: map[string]scope.Grant{
		"guid-paris-desk": {Level: "hotel", ID: "acme-paris", Within: []scope.Grant{g("chain", "acme")}, Roles: []string{"front_desk"}},
	}}
	paris := gw("hotel", "acme-paris", "chain", "acme")
	cases := []struct {
		name       string
		groups     []any
		roles      []any
		effective  []string
		parisRoles []string
	}{
		{"roles claim with two grants binds to neither", []any{"/tenants/acme/hotels/acme-paris", "/tenants/globex"}, []any{"front_desk"}, nil, nil},
		{"roles claim with one grant binds to it", []any{"/tenants/acme/hotels/acme-paris"}, []any{"front_desk"}, []string{"front_desk"}, []string{"front_desk"}},
		{"roles claim with one grant from two groups", []any{"/tenants/acme/hotels/acme-paris", "/tenants/acme/hotels/acme-paris/manager"}, []any{"front_desk"}, []string{"front_desk", "manager"}, []string{"front_desk", "manager"}},
		{"role-suffixed group binds to its grant only", []any{"/tenants/acme/hotels/acme-paris/front_desk", "/tenants/globex"}, nil, nil, []string{"front_desk"}},
		{"a role on each grant", []any{"/tenants/acme/hotels/acme-paris/front_desk", "/tenants/globex/roles/front_desk", "/tenants/globex/roles/manager"}, nil, []string{"front_desk"}, []string{"front_desk"}},
		{"table entry roles", []any{"guid-paris-desk"}, nil, []string{"front_desk"}, []string{"front_desk"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			v := staticVerifier(t, func(c *claims.Options) { c.Mapping = m })
			c := claimsFor("alice", tc.groups...)
			if tc.roles != nil {
				c["roles"] = tc.roles
			}
			sc, _, err := v.Verify(context.Background(), sign(t, k.ed, c))
			if err != nil {
				t.Fatalf("Verify: %v", err)
			}
			if got := sc.Roles(); !slices.Equal(got, tc.effective) {
				t.Errorf("effective roles = %v, want %v", got, tc.effective)
			}
			for _, r := range []string{"front_desk", "manager"} {
				if sc.HasRole(r) != slices.Contains(tc.effective, r) {
					t.Errorf("HasRole(%s) = %v", r, sc.HasRole(r))
				}
			}
			got, ok := sc.GrantRoles(paris)
			if !ok {
				t.Fatalf("no grant %s in %v", paris, sc)
			}
			if !slices.Equal(got, tc.parisRoles) {
				t.Errorf("roles of %s = %v, want %v", paris, got, tc.parisRoles)
			}
		})
	}
}

func TestRolePlaceholderRules(t *testing.T) {
	for _, bad := range []string{
		"/roles/" + claims.RolePlaceholder,
		"/tenants/{chain}/" + claims.RolePlaceholder + "/" + claims.RolePlaceholder,
		"/tenants/{chain}/{@admin}",
	} {
		_, err := claims.New(claims.Options{Issuer: "https://idp.example", Audience: []string{"a"}, JWKS: []byte(`{"keys":[]}`),
			Mapping: claims.Mapping{Patterns: []string{bad}}})
		if !errors.Is(err, claims.ErrConfig) || !strings.Contains(err.Error(), "pattern") {
			t.Errorf("pattern %q: %v, want ErrConfig about the pattern", bad, err)
		}
	}
}

// TestGroupRolesClaim: a per-group roles claim binds each group's roles to
// the grant that group makes.
func TestGroupRolesClaim(t *testing.T) {
	k := testKeys(t)
	v := staticVerifier(t, func(c *claims.Options) {
		c.Mapping = claims.Mapping{Patterns: []string{"/tenants/{chain}", "/tenants/{chain}/hotels/{hotel}"}}
		c.GroupRolesClaim = "group_roles"
	})
	paris := gw("hotel", "acme-paris", "chain", "acme")
	verify := func(groupRoles any) (scope.Scope, error) {
		c := claimsFor("alice", "/tenants/acme/hotels/acme-paris", "/tenants/globex")
		c["roles"] = []any{"front_desk"} // two grants: bound to neither
		if groupRoles != nil {
			c["group_roles"] = groupRoles
		}
		sc, _, err := v.Verify(context.Background(), sign(t, k.ed, c))
		return sc, err
	}
	sc, err := verify(map[string]any{"/tenants/acme/hotels/acme-paris": []any{"front_desk"}, "/tenants/other": "manager"})
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := sc.GrantRoles(paris); !slices.Equal(got, []string{"front_desk"}) {
		t.Errorf("roles of %s = %v", paris, got)
	}
	if got, _ := sc.GrantRoles(g("chain", "globex")); len(got) != 0 {
		t.Errorf("roles of globex = %v, want none", got)
	}
	if sc.HasRole("front_desk") || sc.HasRole("manager") {
		t.Errorf("effective roles %v: globex has none", sc.Roles())
	}
	sc, err = verify(map[string]any{"/tenants/acme/hotels/acme-paris": "front_desk", "/tenants/globex": []any{"front_desk", "manager"}})
	if err != nil || !slices.Equal(sc.Roles(), []string{"front_desk"}) {
		t.Errorf("both grants with front_desk: roles %v, %v", sc.Roles(), err)
	}
	for _, bad := range []any{[]any{"front_desk"}, map[string]any{"/tenants/globex": 7}, "x"} {
		if _, err := verify(bad); !errors.Is(err, claims.ErrMalformed) {
			t.Errorf("group_roles %v: %v, want ErrMalformed", bad, err)
		}
	}
}
