package claims

import (
	"fmt"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/tenantmcp/tenantmcp/internal/guardfault"
	"github.com/tenantmcp/tenantmcp/scope"
)

// Mapping turns the group strings of a verified token into grants.
//
// For each distinct group string in the token:
//
//  1. If Table has the group as a key, the group grants that entry's Grant
//     and the patterns are not consulted.
//  2. Otherwise the Patterns are tried in order and the first that matches
//     the whole group string grants one grant.
//  3. A group that matches nothing is ignored.
//
// A token whose groups yield no grant at all is refused with ErrNoScope; the
// library never mints an empty scope.
//
// # Roles belong to grants
//
// A role reveals data of the tenant it was given for, not of every tenant
// the token reaches. A pattern binds a role to the grant it makes with the
// role placeholder {@role}: "/tenants/{chain}/hotels/{hotel}/{@role}"
// matched against "/tenants/acme/hotels/acme-paris/front_desk" grants hotel
// acme-paris (within chain acme) with the role front_desk. A Table entry's
// Grant.Roles are bound the same way, and so are the roles a per-group
// roles claim (Options.GroupRolesClaim) gives a group. The token-wide roles claim
// (Options.RolesClaim) cannot say which tenant a role was meant for: its
// roles are bound to the grant only when the token's groups yield exactly
// one distinct grant, and to none when they yield several. The scope's
// effective roles (scope.Scope.Roles, what package redact reveals by) are
// those bound to every grant: the most restrictive choice, so groups
// [/tenants/acme/hotels/acme-paris, /tenants/globex] with roles
// [front_desk] reveal nothing of globex (nor, since a result row's covering
// grant is not known, of acme-paris).
//
// # Patterns
//
// A pattern is literal text with placeholders {level}, where level is a
// scope level name (a lower-case letter, then lower-case letters, digits or
// '_'):
//
//	/tenants/{chain}                  Keycloak group path: grants (chain, id)
//	/tenants/{chain}/hotels/{hotel}   grants (hotel, id) only
//	tenant:{chain}                    grants (chain, id)
//
// The LAST level placeholder is the level granted. Earlier placeholders must
// match a non-empty segment; their values are the ancestors the group path
// names, and the grant is confined to them (scope.Grant.Within, also
// reported in Match.Within): /tenants/initech/hotels/acme-paris grants
// "hotel acme-paris within chain initech", which reaches acme-paris's rows
// only if acme-paris belongs to chain initech in the data. Every level the
// path names is checked by the guard and the generated row-level security
// policies, so a group whose ancestors disagree with the data grants
// nothing; an ancestor at a level the schema does not have makes the grant
// reach nothing. The ancestors grant nothing on their own: membership of
// /tenants/acme/hotels/h-17 admits hotel h-17, not all of chain acme. To
// give a chain-level group its chain grant, add the chain pattern as well.
//
// The placeholder {@role} (at most one per pattern) matches like a level
// placeholder but is not a level: its value is a role bound to the grant
// (see "Roles belong to grants").
//
// A placeholder matches a non-empty run of characters that contains no '/'
// and ends at the first '/' or at the first occurrence of the character that
// begins the literal text following it; the last placeholder of a pattern
// that ends with it takes the rest of the group (still without '/'). So
// matching is deterministic: "/tenants/{chain}" does not match
// "/tenants/acme/hotels/h-17". A value that is not valid UTF-8, contains a
// control character or is longer than scope.MaxIDLength does not match.
//
// Placeholders may not be adjacent ("{a}{b}" has no unambiguous split), may
// not repeat a name within a pattern, and literal text may not contain '{'
// or '}'. A pattern must have at least one placeholder (use Table for fixed
// group names). A pattern that can never match because an earlier one has
// the same shape is a configuration error.
//
// # Table
//
// Table maps exact group strings, typically identity-provider group ids such
// as Entra ID object GUIDs, to one grant each. An entry's Grant.Within
// confines it to ancestors like a pattern's earlier placeholders do, and its
// Grant.Roles are bound to it like a {@role} value.
type Mapping struct {
	Patterns []string
	Table    map[string]scope.Grant
	// Levels, if set, lists every level a rule may name (placeholders and
	// Table grants); a rule naming another level is a configuration error.
	// It catches typos such as {hotle}.
	Levels []string
}

// Match records why a grant was made: which group of the token matched
// which rule.
type Match struct {
	// Group is the group string from the token.
	Group string
	// Rule is the pattern that matched, or "table" for a Table entry.
	Rule string
	// Grant is what the group grants.
	Grant scope.Grant
	// Within holds the values of the pattern's earlier placeholders, outermost
	// first: the ancestors the group path names. The grant is confined to
	// them (Grant.Within holds the same); they grant nothing on their own.
	Within []scope.Grant
}

// RolePlaceholder is the pattern placeholder whose value is a role bound to
// the grant rather than a level.
const RolePlaceholder = "{@role}"

// roleLevel marks the role placeholder among a pattern's levels; it is not
// a valid level name, so it cannot collide with one.
const roleLevel = "@role"

const (
	maxPatternLen          = 1024
	maxPatternPlaceholders = 16
	maxRules               = 4096
)

type pattern struct {
	text   string
	lits   []string // len(levels)+1: lits[i] precedes placeholder i, lits[len(levels)] trails
	levels []string
}

type mapper struct {
	patterns []pattern
	table    map[string]scope.Grant
	declared []string // Mapping.Levels (nil: not declared); see Verifier.Levels
}

func compileMapping(m Mapping) (*mapper, error) {
	if len(m.Patterns) == 0 && len(m.Table) == 0 {
		return nil, fmt.Errorf("%w: mapping has no patterns and no table: no token could ever grant a scope", ErrConfig)
	}
	if len(m.Patterns)+len(m.Table) > maxRules {
		return nil, fmt.Errorf("%w: mapping has more than %d rules", ErrConfig, maxRules)
	}
	var allowed map[string]bool
	if m.Levels != nil {
		allowed = make(map[string]bool, len(m.Levels))
		for _, l := range m.Levels {
			if !scope.ValidLevel(l) {
				return nil, fmt.Errorf("%w: Levels: %q is not a level name (a lower-case letter, then lower-case letters, digits or '_')", ErrConfig, l)
			}
			allowed[l] = true
		}
	}
	checkLevel := func(where, l string) error {
		if allowed != nil && !allowed[l] {
			return fmt.Errorf("%w: %s: level %q is not in Levels %q", ErrConfig, where, l, m.Levels)
		}
		return nil
	}
	mp := &mapper{table: make(map[string]scope.Grant, len(m.Table)), declared: slices.Clone(m.Levels)}
	shapes := make(map[string]string)
	for _, text := range m.Patterns {
		p, err := parsePattern(text)
		if err != nil {
			return nil, err
		}
		for _, l := range p.levels {
			if l == roleLevel {
				continue
			}
			if err := checkLevel(fmt.Sprintf("pattern %q", text), l); err != nil {
				return nil, err
			}
		}
		shape := strings.Join(p.lits, "{}")
		if prev, dup := shapes[shape]; dup {
			return nil, fmt.Errorf("%w: pattern %q can never match: the earlier pattern %q matches the same groups", ErrConfig, text, prev)
		}
		shapes[shape] = text
		mp.patterns = append(mp.patterns, p)
	}
	for group, g := range m.Table {
		if group == "" {
			return nil, fmt.Errorf("%w: table has an empty group name", ErrConfig)
		}
		if !scope.ValidLevel(g.Level) {
			return nil, fmt.Errorf("%w: table entry for group %q: level %q is not a level name (a lower-case letter, then lower-case letters, digits or '_')", ErrConfig, group, g.Level)
		}
		if !validValue(g.ID) {
			return nil, fmt.Errorf("%w: table entry for group %q: id must be 1-%d printable characters", ErrConfig, group, scope.MaxIDLength)
		}
		if err := checkLevel(fmt.Sprintf("table entry for group %q", group), g.Level); err != nil {
			return nil, err
		}
		named := []string{g.Level}
		for _, w := range g.Within {
			if slices.Contains(named, w.Level) {
				return nil, fmt.Errorf("%w: table entry for group %q names level %q twice", ErrConfig, group, w.Level)
			}
			named = append(named, w.Level)
			if !scope.ValidLevel(w.Level) || !validValue(w.ID) || len(w.Within) > 0 || len(w.Roles) > 0 {
				return nil, fmt.Errorf("%w: table entry for group %q: ancestor %q is not a plain grant of a level name and a printable id", ErrConfig, group, w.Level)
			}
			if err := checkLevel(fmt.Sprintf("table entry for group %q", group), w.Level); err != nil {
				return nil, err
			}
		}
		for _, r := range g.Roles {
			if !validValue(r) {
				return nil, fmt.Errorf("%w: table entry for group %q: role must be 1-%d printable characters", ErrConfig, group, scope.MaxIDLength)
			}
		}
		mp.table[group] = g
	}
	return mp, nil
}

// parsePattern compiles one pattern, reporting syntax errors with the offset
// at which they occur.
func parsePattern(text string) (pattern, error) {
	bad := func(off int, format string, args ...any) (pattern, error) {
		return pattern{}, fmt.Errorf("%w: pattern %q at offset %d: %s", ErrConfig, text, off, fmt.Sprintf(format, args...))
	}
	if text == "" {
		return pattern{}, fmt.Errorf("%w: empty pattern", ErrConfig)
	}
	if len(text) > maxPatternLen {
		return pattern{}, fmt.Errorf("%w: pattern longer than %d bytes", ErrConfig, maxPatternLen)
	}
	if !utf8.ValidString(text) {
		return pattern{}, fmt.Errorf("%w: pattern %q is not valid UTF-8", ErrConfig, text)
	}
	var p pattern
	p.text = text
	var lit strings.Builder
	for i := 0; i < len(text); {
		switch c := text[i]; c {
		case '}':
			return bad(i, "'}' without '{' (literal braces are not supported)")
		case '{':
			end := strings.IndexByte(text[i:], '}')
			if end < 0 {
				return bad(i, "'{' is never closed")
			}
			name := text[i+1 : i+end]
			if strings.IndexByte(name, '{') >= 0 {
				return bad(i, "'{' inside a placeholder")
			}
			if name == "" {
				return bad(i, "empty placeholder {}")
			}
			if name != roleLevel && !scope.ValidLevel(name) {
				return bad(i, "placeholder {%s} is not a level name (a lower-case letter, then lower-case letters, digits or '_') or %s", name, RolePlaceholder)
			}
			if slices.Contains(p.levels, name) {
				return bad(i, "placeholder {%s} appears twice", name)
			}
			if len(p.levels) > 0 && lit.Len() == 0 {
				return bad(i, "placeholder {%s} directly follows {%s}: adjacent placeholders are ambiguous", name, p.levels[len(p.levels)-1])
			}
			if len(p.levels) == maxPatternPlaceholders {
				return bad(i, "more than %d placeholders", maxPatternPlaceholders)
			}
			p.lits = append(p.lits, lit.String())
			lit.Reset()
			p.levels = append(p.levels, name)
			i += end + 1
		default:
			if c < 0x20 || c == 0x7f {
				return bad(i, "control character in literal text")
			}
			lit.WriteByte(c)
			i++
		}
	}
	if len(p.levels) == 0 || len(p.levels) == 1 && p.levels[0] == roleLevel {
		return pattern{}, fmt.Errorf("%w: pattern %q has no placeholder of a level; put fixed group names in Mapping.Table", ErrConfig, text)
	}
	p.lits = append(p.lits, lit.String())
	return p, nil
}

// match reports the placeholder values if the whole group matches.
func (p *pattern) match(group string) ([]string, bool) {
	rest, ok := strings.CutPrefix(group, p.lits[0])
	if !ok {
		return nil, false
	}
	vals := make([]string, 0, len(p.levels))
	for i := range p.levels {
		next := p.lits[i+1]
		var v string
		if next == "" { // only the last placeholder can have no literal after it
			if strings.IndexByte(rest, '/') >= 0 {
				return nil, false
			}
			v, rest = rest, ""
		} else {
			first, _ := utf8.DecodeRuneInString(next)
			stop := "/"
			if first != '/' {
				stop += string(first)
			}
			j := strings.IndexAny(rest, stop)
			if j < 0 {
				return nil, false
			}
			v = rest[:j]
			if rest, ok = strings.CutPrefix(rest[j:], next); !ok {
				return nil, false
			}
		}
		if !validValue(v) {
			return nil, false
		}
		vals = append(vals, v)
	}
	if rest != "" {
		return nil, false
	}
	return vals, true
}

// mapGroups applies the rules to the groups of one token and binds roles
// to the grants: a pattern's {@role} value, a Table entry's roles and the
// group's entry in groupRoles (Options.GroupRolesClaim) to the grant that
// group makes, and tokenRoles (the token-wide roles claim) to
// every grant only when there is exactly one distinct grant, since with
// several nothing says which tenant they were given for. It returns
// ErrNoScope if no group grants anything.
func (m *mapper) mapGroups(groups, tokenRoles []string, groupRoles map[string][]string) ([]scope.Grant, []Match, error) {
	var (
		grants  []scope.Grant
		matches []Match
		seen    = make(map[string]bool, len(groups))
	)
	for _, g := range groups {
		if seen[g] {
			continue
		}
		seen[g] = true
		if gr, ok := m.table[g]; ok {
			gr = scope.Grant{Level: gr.Level, ID: gr.ID, Within: slices.Clone(gr.Within), Roles: append(slices.Clone(gr.Roles), groupRoles[g]...)}
			grants = append(grants, gr)
			matches = append(matches, Match{Group: g, Rule: "table", Grant: gr, Within: slices.Clone(gr.Within)})
			continue
		}
		for i := range m.patterns {
			p := &m.patterns[i]
			vals, ok := p.match(g)
			if !ok {
				continue
			}
			var (
				path  []scope.Grant
				roles []string
			)
			for j, l := range p.levels {
				if l == roleLevel {
					roles = append(roles, vals[j])
					continue
				}
				path = append(path, scope.Grant{Level: l, ID: vals[j]})
			}
			last := len(path) - 1
			gr := scope.Grant{Level: path[last].Level, ID: path[last].ID, Within: path[:last:last], Roles: append(roles, groupRoles[g]...)}
			if last == 0 {
				gr.Within = nil
			}
			grants = append(grants, gr)
			matches = append(matches, Match{Group: g, Rule: p.text, Grant: gr, Within: slices.Clone(gr.Within)})
			break
		}
	}
	if len(grants) == 0 {
		return nil, nil, ErrNoScope
	}
	// Invariant: a token-wide role is bound only where it cannot be meant
	// for another tenant. (The guardfault hook is a test-only mutation.)
	if len(tokenRoles) > 0 && (distinctGrants(grants) == 1 || guardfault.TokenRolesEverywhere()) {
		for i := range grants {
			grants[i].Roles = append(grants[i].Roles, tokenRoles...)
		}
	}
	return grants, matches, nil
}

// distinctGrants counts grants that differ in level, id or ancestors.
func distinctGrants(gs []scope.Grant) int {
	keys := make(map[string]bool, len(gs))
	for _, g := range gs {
		var b strings.Builder
		for _, x := range append(slices.Clone(g.Within), scope.Grant{Level: g.Level, ID: g.ID}) {
			fmt.Fprintf(&b, "%q=%q;", x.Level, x.ID)
		}
		keys[b.String()] = true
	}
	return len(keys)
}

// validValue mirrors package scope's rule for grant ids: 1 to
// scope.MaxIDLength bytes of UTF-8 without control characters.
func validValue(s string) bool {
	if s == "" || len(s) > scope.MaxIDLength || !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if unicode.IsControl(r) {
			return false
		}
	}
	return true
}
