package conformance

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/tenantmcp/tenantmcp/redact"
	"github.com/tenantmcp/tenantmcp/scope"
)

// within is the grant of lower id l confined to upper id u: what the group
// path .../<upper>/<u>/<lower>/<l> grants.
func within(upper, u, lower, l string) scope.Grant {
	return scope.Grant{Level: lower, ID: l, Within: []scope.Grant{{Level: upper, ID: u}}}
}

// P21: a grant minted from a group path holds along the whole path. For
// every pair of adjacent levels, a lower id granted within its own upper id
// reads exactly the oracle's rows (its subtree); granted within another
// upper id it reads no row of any table and can update or delete none of
// its subtree; and two grants whose ancestors are swapped ((u, l2), (u2, l)
// for l under u and l2 under u2) read nothing, which per-level id sets
// would not catch.
func propPathGrants(p *pt, r *runner) {
	if len(r.g.levels) < 2 {
		p.Skipf("the graph declares a single level; a group path names no ancestors")
	}
	checked, seen := 0, 0
	for li := 0; li+1 < len(r.g.levels); li++ {
		upper, lower := r.g.levels[li].Name, r.g.levels[li+1].Name
		kids := r.children(upper, lower)
		ups := make([]string, 0, len(kids))
		for u := range kids {
			ups = append(ups, u)
		}
		sort.Strings(ups)
		if len(ups) < 2 {
			continue
		}
		pair := pick(p.rng, ups, 2)
		u, u2 := pair[0], pair[1]
		l, l2 := pick(p.rng, kids[u], 1)[0], pick(p.rng, kids[u2], 1)[0]
		if l == l2 {
			continue // the same lower id under two uppers: not a tree here
		}
		cases := []struct {
			what   string
			grants []scope.Grant
			none   bool
		}{
			{fmt.Sprintf("%s:%s within %s:%s", lower, l, upper, u), []scope.Grant{within(upper, u, lower, l)}, false},
			{fmt.Sprintf("%s:%s within %s:%s (not its %s)", lower, l, upper, u2, upper), []scope.Grant{within(upper, u2, lower, l)}, true},
			{fmt.Sprintf("swapped ancestors (%s,%s) (%s,%s)", u, l2, u2, l), []scope.Grant{within(upper, u, lower, l2), within(upper, u2, lower, l)}, true},
		}
		for _, c := range cases {
			ctx := grantsCtx(p.ctx, c.grants)
			for _, name := range r.g.bound {
				got, err := r.guardKeys(p, c.grants, name)
				if err != nil {
					p.Errorf("%s as %s: %v", name, c.what, err)
					continue
				}
				want := r.or.visible(name, c.grants)
				if d := diff(got, want); d != "" {
					p.Errorf("%s as %s: %s", name, c.what, d)
				}
				if c.none && len(got) > 0 {
					p.Errorf("%s as %s reads %d rows; a path whose ancestors disagree with the data grants nothing", name, c.what, len(got))
				}
				seen += len(got)
				checked++
				if !c.none {
					continue
				}
				// Writes: a row of l's subtree is not the caller's.
				var mine []string
				for k := range r.or.visible(name, []scope.Grant{{Level: lower, ID: l}}) {
					mine = append(mine, k)
				}
				slices.Sort(mine)
				for _, k := range pick(p.rng, mine, 1) {
					r.foreignWrites(p, ctx, name, k, c.what)
				}
			}
		}
	}
	if checked == 0 {
		p.Skipf("no two upper-level ids with lower-level ids under them in the seed")
	}
	if seen == 0 {
		p.Errorf("control: the grants within their own ancestors read no row; the property proves nothing")
	}
}

// P22: roles belong to the grant they came with. A token whose group
// binds a revealing role to tenant A's grant, and whose other group grants
// tenant B without a role, shows none of B's PII canaries, even when the
// token-wide roles claim carries the same role (nothing says it was meant
// for B). Controls: A alone with the role sees its canaries of the
// revealed categories, and A and B both with the role see both tenants'.
func propGrantRoles(p *pt, r *runner) {
	tools := r.target.Tools
	if tools == nil || tools.Calls == nil || tools.Canaries == nil {
		p.Skipf(noTools + " or has no Calls/Canaries")
	}
	canaries := tools.Canaries(r.data)
	var tenants []Tenant
	for _, tn := range r.tenants {
		if len(tn.Grants) == 1 && tn.Grants[0].Within == nil {
			tenants = append(tenants, tn)
		}
	}
	// Two tenants whose rows are disjoint, so a canary is one tenant's.
	var a, b *Tenant
	for i := range tenants {
		for j := range tenants {
			if i != j && a == nil && r.disjoint(tenants[i], tenants[j]) {
				a, b = &tenants[i], &tenants[j]
			}
		}
	}
	if a == nil {
		p.Skipf("no two tenants with disjoint rows")
	}
	ts, err := r.startTools(p)
	if err != nil {
		p.Fatalf("%v", err)
	}
	defer ts.stop()
	shown := 0
	for _, roles := range tools.Callers {
		revealed := map[redact.Category]bool{}
		for _, role := range roles {
			for _, c := range tools.Redaction.Reveal[role] {
				revealed[c] = c != redact.Secret
			}
		}
		if len(revealed) == 0 {
			continue
		}
		withRoles := func(g scope.Grant) scope.Grant { g.Roles = roles; return g }
		type call struct {
			what   string
			grants []scope.Grant
			token  []string // the token-wide roles claim
			see    []Tenant // whose canaries of revealed categories may show
			expect []Tenant // whose canaries must show (controls)
		}
		calls := []call{
			{fmt.Sprintf("%s with %v, %s without", a.Name, roles, b.Name), []scope.Grant{withRoles(a.Grants[0]), b.Grants[0]}, roles, nil, nil},
			{fmt.Sprintf("%s with %v", a.Name, roles), []scope.Grant{withRoles(a.Grants[0])}, nil, []Tenant{*a}, []Tenant{*a}},
			{fmt.Sprintf("%s and %s both with %v", a.Name, b.Name, roles), []scope.Grant{withRoles(a.Grants[0]), withRoles(b.Grants[0])}, nil, []Tenant{*a, *b}, []Tenant{*a, *b}},
		}
		for _, c := range calls {
			text, err := ts.callAll(p, Tenant{Name: "grant-roles", Grants: c.grants}, c.token, tools.Calls(r.data, Tenant{Name: c.what, Grants: c.grants}))
			if err != nil {
				p.Fatalf("%s: %v", c.what, err)
			}
			for _, can := range canaries {
				if !strings.Contains(text, can.Value) {
					for _, tn := range c.expect {
						if revealed[can.Category] && r.or.visible(can.Table, tn.Grants)[can.Key] {
							p.Errorf("control: as %s, canary %q of %s (%s) is not shown", c.what, can.Value, tn.Name, can.Category)
						}
					}
					continue
				}
				ok := false
				for _, tn := range c.see {
					ok = ok || revealed[can.Category] && r.or.visible(can.Table, tn.Grants)[can.Key]
				}
				if !ok {
					p.Errorf("as %s, tool output contains canary %q (%s.%s, %s): a role was applied to a grant it was not given for", c.what, can.Value, can.Table, can.Key, can.Category)
				} else {
					shown++
				}
			}
		}
	}
	if shown == 0 {
		p.Skipf("no caller role set reveals a category the canaries have")
	}
}

// disjoint reports whether two tenants see no common row of any table.
func (r *runner) disjoint(a, b Tenant) bool {
	for _, name := range r.g.bound {
		vb := r.or.visible(name, b.Grants)
		for k := range r.or.visible(name, a.Grants) {
			if vb[k] {
				return false
			}
		}
	}
	return true
}

// callAll makes the calls as one MCP session with a real token for tn's
// grants (roles bound per grant through role-suffixed groups) and the
// token-wide roles claim, and returns all output text; each call is
// recorded for the vacuous-pass rule (vacuous.go).
func (ts *toolServer) callAll(p *pt, tn Tenant, tokenRoles []string, calls []ToolCall) (string, error) {
	return ts.callTools(p, callerName(tn, tokenRoles), tn, tokenRoles, calls)
}
