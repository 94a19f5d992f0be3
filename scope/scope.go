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
type Grant struct {
	Level string `json:"level"`
	ID    string `json:"id"`
}

func (g Grant) String() string { return g.Level + ":" + g.ID }

// Scope is the immutable tenant scope of one request. The zero value is "no
// scope": it has no grants, IsZero reports true, and every consumer in the
// library treats it as deny.
type Scope struct {
	st *state
}

type state struct {
	subject   string
	grants    []Grant // sorted by (Level, ID), no duplicates
	roles     []string
	grantJSON []byte
}

// Limits on what a scope may hold. They keep a hostile or misconfigured
// identity provider from turning one token into an unbounded SQL parameter.
const (
	MaxGrants   = 1024
	MaxIDLength = 256
	MaxRoles    = 256
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

// Grants returns a copy of the grants, sorted by level then id.
func (s Scope) Grants() []Grant {
	if s.st == nil {
		return nil
	}
	return slices.Clone(s.st.grants)
}

// GrantsAt returns the ids granted at level, sorted.
func (s Scope) GrantsAt(level string) []string {
	if s.st == nil {
		return nil
	}
	var ids []string
	for _, g := range s.st.grants {
		if g.Level == level {
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

// Has reports whether the scope holds exactly the grant (level, id). It does
// not follow the hierarchy: whether a chain grant admits a given hotel is a
// question for the schema graph, not for the scope.
func (s Scope) Has(level, id string) bool {
	if s.st == nil {
		return false
	}
	_, found := slices.BinarySearchFunc(s.st.grants, Grant{level, id}, compareGrant)
	return found
}

// Roles returns a copy of the roles, sorted.
func (s Scope) Roles() []string {
	if s.st == nil {
		return nil
	}
	return slices.Clone(s.st.roles)
}

// HasRole reports whether the scope carries role.
func (s Scope) HasRole(role string) bool {
	if s.st == nil {
		return false
	}
	_, found := slices.BinarySearch(s.st.roles, role)
	return found
}

// GrantJSON returns the canonical JSON encoding of the grant set:
// an array of {"level":…,"id":…} objects sorted by level then id, with no
// insignificant white space. The same grant set always encodes to the same
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
		slices.Equal(s.st.grants, o.st.grants) &&
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

func compareGrant(a, b Grant) int {
	if c := strings.Compare(a.Level, b.Level); c != 0 {
		return c
	}
	return strings.Compare(a.ID, b.ID)
}

// validLevel accepts lower-case identifiers: they end up as JSON keys and
// configuration names, never as SQL text, but a narrow alphabet keeps them
// unambiguous everywhere.
func validLevel(l string) bool {
	if l == "" || len(l) > 64 {
		return false
	}
	for i, r := range l {
		switch {
		case r >= 'a' && r <= 'z':
		case i > 0 && (r >= '0' && r <= '9' || r == '_'):
		default:
			return false
		}
	}
	return true
}

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
	gs := slices.Clone(grants)
	for _, g := range gs {
		if !validLevel(g.Level) {
			return Scope{}, fmt.Errorf("%w: level %q is not a lower-case identifier", ErrInvalid, g.Level)
		}
		if !validText(g.ID, MaxIDLength) {
			return Scope{}, fmt.Errorf("%w: grant id at level %q must be 1-%d printable characters", ErrInvalid, g.Level, MaxIDLength)
		}
	}
	slices.SortFunc(gs, compareGrant)
	gs = slices.Compact(gs)
	rs := slices.Clone(roles)
	for _, r := range rs {
		if !validText(r, MaxIDLength) {
			return Scope{}, fmt.Errorf("%w: role must be 1-%d printable characters", ErrInvalid, MaxIDLength)
		}
	}
	slices.Sort(rs)
	rs = slices.Compact(rs)
	js, err := json.Marshal(gs)
	if err != nil {
		return Scope{}, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	return Scope{st: &state{subject: subject, grants: gs, roles: rs, grantJSON: js}}, nil
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
