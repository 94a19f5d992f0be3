package guard

import (
	"fmt"
	"slices"

	"github.com/tenantmcp/tenantmcp/guardedsql/internal/engine"
	"github.com/tenantmcp/tenantmcp/internal/guardfault"
	"github.com/tenantmcp/tenantmcp/internal/sqlast"
)

// Writes under a scope of several grants.
//
// A scope of several grants (a member of two projects, an agency holding
// two accounts) admits a row when each of its scope checks passes under
// some grant; tested one by one, each may pass under a different grant, so
// that the row reaches one tenant through its parent and another through
// a consistency path (Invoice Ninja: an invoice of account 2's company on
// account 1's client; Taiga: a task of project 3 under project 1's story).
// Its writer would create a reference across tenants: the other tenant
// alone could then not delete the referenced row, and the refusal would
// tell it that a row it cannot see references it.
//
// Invariant: a row inserted under a scope of several grants passes all its
// scope checks under one and the same grant, unless it is a tenant itself
// (its key a level column); a row whose references an UPDATE assigns
// passes them under the grant that admits the row, or, when the UPDATE
// moves the row (assigns its parent or a level column), under one grant
// together with the references it keeps.

// pairedInsert returns checks, the scope checks of a row of t inserted
// with values vals, as one condition when there are two or more of them
// and the scope holds several grants: under one grant alone, every check
// holds.
func (r *renderer) pairedInsert(t *sqlast.Table, vals map[string]sqlast.Value, checks []engine.Frag) ([]engine.Frag, error) {
	// A row of the tenants' own table (its key a level: a new project)
	// is a tenant of its own, granted by its id, and references what its
	// creator sees under other grants (its owner).
	if len(checks) < 2 || t.Identity != "" || guardfault.Off(guardfault.GrantPairing) {
		return checks, nil
	}
	f, err := r.underOneGrant(func(sub *renderer) ([]engine.Frag, error) {
		cs, _, err := sub.writeChecks(t, vals, true)
		if err == nil && len(cs) == 0 {
			err = fmt.Errorf("%w: no scope check for INSERT into %s under one grant", ErrInternal, t.Name)
		}
		return cs, err
	})
	if err != nil || f.SQL == "" {
		return checks, err
	}
	return []engine.Frag{f}, nil
}

// pairedUpdate returns, for an UPDATE of t's rows under alias that
// assigns vals (whose value checks are checks; assigned also holds the
// columns set by expressions), the condition that under one grant alone
// the row's own guard and those checks hold, or, when the UPDATE moves the
// row to another parent or level value, those checks and the consistency
// paths it keeps. A zero Frag when there is nothing to pair.
func (r *renderer) pairedUpdate(t *sqlast.Table, alias string, vals, assigned map[string]sqlast.Value, checks []engine.Frag) (engine.Frag, error) {
	if len(checks) == 0 || t.Global || t.ByRef || guardfault.Off(guardfault.GrantPairing) {
		return engine.Frag{}, nil
	}
	moves := false
	for c := range assigned {
		moves = moves || t.LevelOf(c) != nil || t.Parent != nil && slices.Contains(t.Parent.Cols, c)
	}
	return r.underOneGrant(func(sub *renderer) ([]engine.Frag, error) {
		cs, _, err := sub.writeChecks(t, vals, false)
		if err != nil || !moves {
			return append([]engine.Frag{sub.readGuard(t, alias)}, cs...), err
		}
		cs = append(cs, sub.consistencyGuard(t, alias, assigned)...)
		if len(cs) < 2 {
			return nil, nil // one condition: the whole scope's says as much
		}
		return cs, nil
	})
}

// underOneGrant returns the disjunction, over the scope's grants, of the
// conjunction of the conditions conds renders under that grant alone. A
// zero Frag when the scope holds fewer than two grants or conds renders
// none under some grant (nothing to pair).
func (r *renderer) underOneGrant(conds func(sub *renderer) ([]engine.Frag, error)) (engine.Frag, error) {
	grants := r.sc.Grants()
	if len(grants) < 2 {
		return engine.Frag{}, nil
	}
	var f fb
	f.s("(")
	n := r.n
	for i, g := range grants {
		sub := &renderer{d: r.d, sc: g, seen: map[*sqlast.Ref]bool{}, opt: r.opt, n: n, inline: true}
		cs, err := conds(sub)
		if err != nil || len(cs) == 0 {
			return engine.Frag{}, err
		}
		n = sub.n
		if i > 0 {
			f.s(" OR ")
		}
		f.s("(")
		f.frag(and(cs))
		f.s(")")
	}
	f.s(")")
	r.n = n
	return f.done(), nil
}
