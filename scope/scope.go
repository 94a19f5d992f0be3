package scope

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/tenantmcp/tenantmcp/internal/scopehook"
)

// Grant is one tenant a scope reaches: the level of the tenant hierarchy and
// the tenant's id at that level. A Grant on its own confers nothing; only a
// Scope minted by the library does.
//
// Within confines the grant to ancestors: a grant (hotel, acme-paris)
// within (chain, initech) means "hotel acme-paris of chain initech" and
// reaches a row only when every level it names agrees with the data (the
// row's hotel is acme-paris AND its chain is initech). A group path that
// names ancestors the data contradicts therefore grants nothing. A grant
// without Within is a plain grant of the id at its level. The ancestors'
// own Within and Roles must be empty.
//
// Roles are the roles bound to this grant (the roles the identity provider
// gave the caller for this tenant). They are not part of the grant's
// identity: GrantJSON leaves them out, and equal grants merge their roles.
type Grant struct {
	Level  string   `json:"level"`
	ID     string   `json:"id"`
	Within []Grant  `json:"within,omitempty"`
	Roles  []string `json:"-"`
}

// String renders the grant with its ancestors, outermost first
// ("chain:initech/hotel:acme-paris"); roles are not part of it.
func (g Grant) String() string {
	var b strings.Builder
	for _, w := range g.Within {
		b.WriteString(w.Level + ":" + w.ID + "/")
	}
	b.WriteString(g.Level + ":" + g.ID)
	return b.String()
}

// Plain reports whether g names no ancestors.
func (g Grant) Plain() bool { return len(g.Within) == 0 }

// Scope is the immutable tenant scope of one request. The zero value is "no
// scope": it has no grants, IsZero reports true, and every consumer in the
// library treats it as deny.
type Scope struct {
	st *state
}

type state struct {
	subject   string
	grants    []Grant  // sorted by compareGrant, no duplicates, each with its sorted roles
	roles     []string // the effective roles: those every grant carries
	grantJSON []byte
}

// Limits on what a scope may hold. They keep a hostile or misconfigured
// identity provider from turning one token into an unbounded SQL parameter.
const (
	MaxGrants   = 1024
	MaxIDLength = 256
	MaxRoles    = 256
	// MaxDepth bounds the ancestors one grant may name.
	MaxDepth = 15
)

// ErrInvalid is wrapped by every error that refuses to mint a scope.
var ErrInvalid = errors.New("scope: invalid")

// IsZero reports whether s is the zero "no scope" value.
func (s Scope) IsZero() bool { return s.st == nil }

// Subject is the verified subject (the token's sub claim).
func (s Scope) Subject() string {
	if s.st == nil {
		return ""
	}
	return s.st.subject
}

// Grants returns a deep copy of the grants (with their ancestors and
// roles), sorted by level, id, then ancestors.
func (s Scope) Grants() []Grant {
	if s.st == nil {
		return nil
	}
	out := make([]Grant, len(s.st.grants))
	for i, g := range s.st.grants {
		out[i] = Grant{Level: g.Level, ID: g.ID, Within: slices.Clone(g.Within), Roles: slices.Clone(g.Roles)}
	}
	return out
}

// Plain reports whether none of the grants is confined to ancestors.
func (s Scope) Plain() bool {
	if s.st == nil {
		return true
	}
	for _, g := range s.st.grants {
		if !g.Plain() {
			return false
		}
	}
	return true
}

// GrantsAt returns the ids of the plain grants (those without ancestors) at
// level, sorted. A grant confined to ancestors is not among them: it admits
// its id only where the ancestors agree, which a bare id cannot express (see
// Grants and Grant.Within).
func (s Scope) GrantsAt(level string) []string {
	if s.st == nil {
		return nil
	}
	var ids []string
	for _, g := range s.st.grants {
		if g.Level == level && g.Plain() {
			ids = append(ids, g.ID)
		}
	}
	return ids
}

// Levels returns the distinct levels that carry at least one grant, sorted.
func (s Scope) Levels() []string {
	if s.st == nil {
		return nil
	}
	var out []string
	for _, g := range s.st.grants {
		if len(out) == 0 || out[len(out)-1] != g.Level {
			out = append(out, g.Level)
		}
	}
	return out
}

// Has reports whether the scope holds exactly the plain grant (level, id).
// It does not follow the hierarchy: whether a chain grant admits a given
// hotel is a question for the schema graph, not for the scope; and a grant
// of the id within ancestors is not the plain grant.
func (s Scope) Has(level, id string) bool {
	if s.st == nil {
		return false
	}
	_, found := slices.BinarySearchFunc(s.st.grants, Grant{Level: level, ID: id}, compareGrant)
	return found
}

// Roles returns the effective roles, sorted: the roles bound to every one
// of the scope's grants. Where a row's covering grant is not known, the
// roles that hold for all grants are the most restrictive choice, so a
// role given for one tenant never reveals another tenant's data. For a
// scope of one grant (or whose grants carry the same roles) these are
// simply its roles. See [Scope.GrantRoles] for the roles of one grant.
func (s Scope) Roles() []string {
	if s.st == nil {
		return nil
	}
	return slices.Clone(s.st.roles)
}

// GrantRoles returns the roles bound to the grant equal to g (level, id and
// ancestors; g's own Roles are ignored), sorted, and whether the scope holds
// such a grant.
func (s Scope) GrantRoles(g Grant) ([]string, bool) {
	if s.st == nil {
		return nil, false
	}
	i, found := slices.BinarySearchFunc(s.st.grants, Grant{Level: g.Level, ID: g.ID, Within: g.Within}, compareGrant)
	if !found {
		return nil, false
	}
	return slices.Clone(s.st.grants[i].Roles), true
}

// HasRole reports whether role is one of the effective roles (see
// [Scope.Roles]): bound to every grant of the scope.
func (s Scope) HasRole(role string) bool {
	if s.st == nil {
		return false
	}
	_, found := slices.BinarySearch(s.st.roles, role)
	return found
}

// GrantJSON returns the canonical JSON encoding of the grant set:
// an array of {"level":…,"id":…} objects sorted by level then id (then
// ancestors), a grant confined to ancestors carrying them as "within":
// [{"level":…,"id":…},…] outermost first; roles are not included. There is
// no insignificant white space. The same grant set always encodes to the same
// bytes. This is the value the SQL layer binds as one parameter; the zero
// Scope encodes as "[]", which matches nothing.
func (s Scope) GrantJSON() []byte {
	if s.st == nil {
		return []byte("[]")
	}
	return slices.Clone(s.st.grantJSON)
}

// String renders the scope for logs: subject, grants and roles. It holds no
// token material.
func (s Scope) String() string {
	if s.st == nil {
		return "scope(none)"
	}
	var b strings.Builder
	b.WriteString("scope(sub=")
	b.WriteString(fmt.Sprintf("%q", s.st.subject))
	b.WriteString(" grants=[")
	for i, g := range s.st.grants {
		if i > 0 {
			b.WriteByte(' ')
		}
		for _, w := range g.Within {
			b.WriteString(fmt.Sprintf("%s:%q/", w.Level, w.ID))
		}
		b.WriteString(fmt.Sprintf("%s:%q", g.Level, g.ID))
	}
	b.WriteString("] roles=[")
	b.WriteString(strings.Join(s.st.roles, " "))
	b.WriteString("])")
	return b.String()
}

// LogValue makes Scope render through log/slog as a group of safe fields.
func (s Scope) LogValue() slog.Value {
	if s.st == nil {
		return slog.StringValue("none")
	}
	gs := make([]string, len(s.st.grants))
	for i, g := range s.st.grants {
		gs[i] = g.String()
	}
	return slog.GroupValue(
		slog.String("sub", s.st.subject),
		slog.Any("grants", gs),
		slog.Any("roles", s.st.roles),
	)
}

// Equal reports whether two scopes have the same subject, grants and roles.
func (s Scope) Equal(o Scope) bool {
	if s.st == nil || o.st == nil {
		return s.st == o.st
	}
	return s.st.subject == o.st.subject &&
		slices.EqualFunc(s.st.grants, o.st.grants, func(a, b Grant) bool {
			return compareGrant(a, b) == 0 && slices.Equal(a.Roles, b.Roles)
		}) &&
		slices.Equal(s.st.roles, o.st.roles)
}

type ctxKey struct{}

// FromContext returns the scope attached to ctx by the library, and whether
// there was one. A missing scope and a zero scope both report false.
func FromContext(ctx context.Context) (Scope, bool) {
	s, ok := ctx.Value(ctxKey{}).(Scope)
	if !ok || s.IsZero() {
		return Scope{}, false
	}
	return s, true
}

// compareGrant orders grants by level, id, then ancestors; a plain grant
// sorts before the same id within ancestors. Roles are not compared.
func compareGrant(a, b Grant) int {
	if c := strings.Compare(a.Level, b.Level); c != 0 {
		return c
	}
	if c := strings.Compare(a.ID, b.ID); c != 0 {
		return c
	}
	return slices.CompareFunc(a.Within, b.Within, compareGrant)
}

// ValidLevel reports whether name is a valid scope level name: a
// lower-case ASCII letter, then up to 63 lower-case letters, digits or
// '_'. Level names end up as JSON keys, configuration names and (through
// package builder) SQL identifiers; a narrow alphabet keeps them
// unambiguous everywhere. It is the one rule every package applies to
// level names: grants here, mapping rules in package claims, schema levels
// in package builder, forbidden input keys in package server.
func ValidLevel(name string) bool {
	if name == "" || len(name) > 64 {
		return false
	}
	for i, r := range name {
		switch {
		case r >= 'a' && r <= 'z':
		case i > 0 && (r >= '0' && r <= '9' || r == '_'):
		default:
			return false
		}
	}
	return true
}

// ValidID reports whether id can be a grant's id: 1 to [MaxIDLength]
// bytes of UTF-8 text without control characters. A level column's value
// that is not (an empty string standing for "no tenant", as Mattermost's
// direct-message channels hold) names no tenant: no grant can reach it.
func ValidID(id string) bool { return validText(id, MaxIDLength) }

// validText rejects empty, over-long, non-UTF-8 and control-character text.
func validText(s string, max int) bool {
	if s == "" || len(s) > max || !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if unicode.IsControl(r) {
			return false
		}
	}
	return true
}

// mint builds a scope. roles are bound to every grant in addition to the
// grant's own Roles (package claims passes only roles it can attribute to
// every grant); the effective roles are those all grants carry.
func mint(subject string, grants []Grant, roles []string) (Scope, error) {
	if !validText(subject, MaxIDLength) {
		return Scope{}, fmt.Errorf("%w: subject must be 1-%d printable characters", ErrInvalid, MaxIDLength)
	}
	if len(grants) == 0 {
		return Scope{}, fmt.Errorf("%w: no grants", ErrInvalid)
	}
	if len(grants) > MaxGrants {
		return Scope{}, fmt.Errorf("%w: %d grants exceed the limit of %d", ErrInvalid, len(grants), MaxGrants)
	}
	if len(roles) > MaxRoles {
		return Scope{}, fmt.Errorf("%w: %d roles exceed the limit of %d", ErrInvalid, len(roles), MaxRoles)
	}
	checkRoles := func(rs []string) error {
		if len(rs) > MaxRoles {
			return fmt.Errorf("%w: %d roles exceed the limit of %d", ErrInvalid, len(rs), MaxRoles)
		}
		for _, r := range rs {
			if !validText(r, MaxIDLength) {
				return fmt.Errorf("%w: role must be 1-%d printable characters", ErrInvalid, MaxIDLength)
			}
		}
		return nil
	}
	if err := checkRoles(roles); err != nil {
		return Scope{}, err
	}
	checkGrant := func(g Grant) error {
		if !ValidLevel(g.Level) {
			return fmt.Errorf("%w: level %q is not a lower-case identifier", ErrInvalid, g.Level)
		}
		if !ValidID(g.ID) {
			return fmt.Errorf("%w: grant id at level %q must be 1-%d printable characters", ErrInvalid, g.Level, MaxIDLength)
		}
		return nil
	}
	gs := make([]Grant, len(grants))
	for i, g := range grants {
		if err := checkGrant(g); err != nil {
			return Scope{}, err
		}
		if len(g.Within) > MaxDepth {
			return Scope{}, fmt.Errorf("%w: grant at level %q names %d ancestors, more than %d", ErrInvalid, g.Level, len(g.Within), MaxDepth)
		}
		levels := []string{g.Level}
		for _, w := range g.Within {
			if err := checkGrant(w); err != nil {
				return Scope{}, err
			}
			if len(w.Within) > 0 || len(w.Roles) > 0 {
				return Scope{}, fmt.Errorf("%w: ancestor %q of a grant at level %q has ancestors or roles of its own", ErrInvalid, w.Level, g.Level)
			}
			// One value per level: a path naming a level twice could only
			// be satisfied by a row with two values at that level.
			if slices.Contains(levels, w.Level) {
				return Scope{}, fmt.Errorf("%w: grant at level %q names level %q twice", ErrInvalid, g.Level, w.Level)
			}
			levels = append(levels, w.Level)
		}
		if err := checkRoles(g.Roles); err != nil {
			return Scope{}, err
		}
		rs := append(slices.Clone(g.Roles), roles...)
		slices.Sort(rs)
		rs = slices.Compact(rs)
		if len(rs) > MaxRoles {
			return Scope{}, fmt.Errorf("%w: %d roles exceed the limit of %d", ErrInvalid, len(rs), MaxRoles)
		}
		var within []Grant
		for _, w := range g.Within {
			within = append(within, Grant{Level: w.Level, ID: w.ID})
		}
		gs[i] = Grant{Level: g.Level, ID: g.ID, Within: within, Roles: rs}
	}
	slices.SortStableFunc(gs, compareGrant)
	// Equal grants (from two groups) merge their roles.
	out := gs[:0]
	for _, g := range gs {
		if n := len(out); n > 0 && compareGrant(out[n-1], g) == 0 {
			merged := append(out[n-1].Roles, g.Roles...)
			slices.Sort(merged)
			out[n-1].Roles = slices.Compact(merged)
			if len(out[n-1].Roles) > MaxRoles {
				return Scope{}, fmt.Errorf("%w: %d roles exceed the limit of %d", ErrInvalid, len(out[n-1].Roles), MaxRoles)
			}
			continue
		}
		out = append(out, g)
	}
	gs = out
	// The effective roles: those of every grant (the most restrictive).
	eff := slices.Clone(gs[0].Roles)
	for _, g := range gs[1:] {
		eff = slices.DeleteFunc(eff, func(r string) bool {
			_, ok := slices.BinarySearch(g.Roles, r)
			return !ok
		})
	}
	js, err := json.Marshal(gs)
	if err != nil {
		return Scope{}, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	return Scope{st: &state{subject: subject, grants: gs, roles: eff, grantJSON: js}}, nil
}

func init() {
	scopehook.Mint = func(subject string, grants any, roles []string) (any, error) {
		gs, ok := grants.([]Grant)
		if !ok {
			return Scope{}, fmt.Errorf("%w: grants of type %T", ErrInvalid, grants)
		}
		return mint(subject, gs, roles)
	}
	scopehook.Attach = func(ctx context.Context, s any) context.Context {
		return context.WithValue(ctx, ctxKey{}, s.(Scope))
	}
}
