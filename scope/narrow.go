package scope

import (
	"errors"
	"fmt"
	"slices"

	"github.com/tenantmcp/tenantmcp/internal/guardfault"
)

// ErrNotGranted is wrapped by the error of Narrow and NarrowPath when the
// selector names none of the scope's grants. It says nothing about the
// tenant the selector named: whether it exists is not the scope's to know,
// and a caller must not learn it from the answer.
var ErrNotGranted = errors.New("scope: the selector names none of the scope's grants")

// Narrow returns the scope reduced to the one grant equal to g (level, id
// and ancestors, as compared by Grants' order; g's Roles are ignored), with
// the same subject. It can only narrow: the result holds one of s's own
// grants and nothing else, with the roles bound to that grant (so its
// effective roles are that grant's, see [Scope.GrantRoles]). A selector
// naming anything else fails with an error wrapping [ErrNotGranted]: a
// grant at another level that would cover g through the hierarchy, an
// ancestor of one of s's grants, a grant without the ancestors s holds it
// within, or another tenant altogether. The zero scope narrows to nothing.
//
// A Scope reaches a tool only through its context; Narrow cannot put one
// there. Package server narrows the scope of a call whose tool is
// Narrowable, from the caller's selector, before the handler runs.
func (s Scope) Narrow(g Grant) (Scope, error) {
	if s.st == nil {
		return Scope{}, ErrNotGranted
	}
	i, found := slices.BinarySearchFunc(s.st.grants, Grant{Level: g.Level, ID: g.ID, Within: g.Within}, compareGrant)
	if !found {
		if guardfault.Off(guardfault.NarrowCheck) { // test-only mutation: see package guardfault
			return s.only(Grant{Level: g.Level, ID: g.ID, Within: g.Within})
		}
		return Scope{}, ErrNotGranted
	}
	return s.only(s.st.grants[i])
}

// NarrowPath is Narrow for a grant written as [Grant.String] writes it:
// "company:4", or "chain:initech/hotel:acme-paris" for a grant confined to
// ancestors. The path is compared with the scope's own grants, never
// parsed into a new one, so it cannot name more than they do. Should two
// of the scope's grants write the same path (ids containing ':' or '/'),
// the path is refused as naming none.
func (s Scope) NarrowPath(path string) (Scope, error) {
	if s.st == nil {
		return Scope{}, ErrNotGranted
	}
	match := -1
	for i, g := range s.st.grants {
		if g.String() != path {
			continue
		}
		if match >= 0 {
			return Scope{}, fmt.Errorf("%w: the path names more than one", ErrNotGranted)
		}
		match = i
	}
	if match < 0 {
		return Scope{}, ErrNotGranted
	}
	return s.only(s.st.grants[match])
}

// only mints the scope of s's subject holding just g (one of s's grants).
func (s Scope) only(g Grant) (Scope, error) {
	// Invariant: g is one of s.st.grants; the result grants nothing else.
	out, err := mint(s.st.subject, []Grant{{Level: g.Level, ID: g.ID, Within: slices.Clone(g.Within), Roles: slices.Clone(g.Roles)}}, nil)
	if err != nil {
		return Scope{}, fmt.Errorf("%w: %w", ErrNotGranted, err)
	}
	return out, nil
}
