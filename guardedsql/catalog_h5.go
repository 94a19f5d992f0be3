package guardedsql

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/tenantmcp/tenantmcp/builder"
	"github.com/tenantmcp/tenantmcp/guardedsql/internal/engine"
	"github.com/tenantmcp/tenantmcp/internal/guardfault"
	"github.com/tenantmcp/tenantmcp/internal/sqlast"
)

// tenantTarget reports whether t is a table a write of a tenant row may
// only reference within the writer's scope: tenant-bound, or (once tables
// owned by reference exist) owned by reference, which is not Global either.
func tenantTarget(t *sqlast.Table) bool { return t != nil && !t.Global }

// undeclaredFKs returns an ErrUndeclaredFK for every foreign key of the
// catalog from a tenant-bound table of g to a tenant-bound table of g that
// g does not declare (same referenced table and column pairs).
//
// Invariant: every enforced reference between tenant rows is one the
// graph knows, so the guard's write checks (and this package's docs about
// them) cover all of them.
func undeclaredFKs(g *sqlast.Schema, defs []builder.TableDef, cat map[string]*builder.TableDef) []error {
	var errs []error
	for _, td := range defs {
		from := g.Tables[graphName(g, td.Name)]
		if !tenantTarget(from) {
			continue // not in the graph, or global (ErrGlobalDrift's business)
		}
		for _, cf := range td.ForeignKeys {
			to := g.Tables[graphName(g, cf.RefTable)]
			if !tenantTarget(to) {
				continue
			}
			if slices.ContainsFunc(from.FKs, func(fk *sqlast.FK) bool { return sameFK(fk, cf, cat) }) {
				continue
			}
			ref := cf.RefColumns
			if len(ref) == 0 {
				ref = to.PK
			}
			errs = append(errs, fmt.Errorf("%w: the database has %s(%s) -> %s(%s), the graph does not; declare it in %s's ForeignKeys "+
				"(as its Parent, as a consistency path checked on every write, or with Unchecked set to the reason it need not be checked)",
				ErrUndeclaredFK, from.Name, strings.Join(cf.Columns, ","), to.Name, strings.Join(ref, ","), from.Name))
		}
	}
	return errs
}

// keyID normalises a unique key's columns for comparison with the keys of
// TableDef.SharedUnique: lower case, sorted, joined by ",".
func keyID(cols []string) string {
	c := make([]string, len(cols))
	for i, x := range cols {
		c[i] = strings.ToLower(strings.TrimSpace(x))
	}
	slices.Sort(c)
	return strings.Join(c, ",")
}

// sharedAck returns the reason t gives for its unique key cols, if any.
func sharedAck(t *sqlast.Table, cols []string) (string, bool) {
	id := keyID(cols)
	for k, why := range t.SharedUnique {
		if keyID(strings.Split(k, ",")) == id {
			return why, true
		}
	}
	return "", false
}

// sharedUniques returns an ErrSharedUnique for every unique key of the
// catalog, other than a primary key, on a tenant-bound table of g that
// lacks the tenant path column and is not acknowledged.
func sharedUniques(ctx context.Context, q engine.Querier, d engine.Dialect, g *sqlast.Schema) ([]error, error) {
	ul, ok := d.(engine.UniqueLister)
	if !ok {
		return nil, fmt.Errorf("%w: the %s dialect cannot list unique keys", ErrCatalog, d.Name())
	}
	keys, err := ul.UniqueKeys(ctx, q)
	if err != nil {
		return nil, fmt.Errorf("guardedsql: reading unique keys: %w", err)
	}
	var errs []error
	for _, k := range keys {
		t := g.Tables[graphName(g, k.Table)]
		if t == nil || t.Global || k.Primary || slices.Contains(k.Columns, "") || sharesTenant(t, k.Columns) {
			continue
		}
		if _, ok := sharedAck(t, k.Columns); ok {
			continue
		}
		errs = append(errs, fmt.Errorf("%w: %s unique key %s (%s) has none of the columns through which %s's rows reach their tenant (%s): "+
			"an insert conflicts when another tenant holds the value; make the key per tenant (add such a column to it), "+
			"or acknowledge it in %s's SharedUnique[%q] with what a conflict reveals (and list it in Unique, so the suite's copies renew it)",
			ErrSharedUnique, t.Name, k.Name, strings.Join(k.Columns, ","), t.Name, strings.Join(tenantPathColumns(t), ","), t.Name, strings.Join(k.Columns, ",")))
	}
	return errs, nil
}

// decidesTenant reports whether the foreign key of t named by action
// (engine.FKActionName: "fk:cols->table") keeps the rows its action reaches
// in the referenced row's tenant: t's scope parent where the parent decides
// a level of t's rows (t carries no column of it), or a key one of whose
// columns is a level column of t onto a column of the same level (a team's
// rows' teamId onto the team; Citus's (company_id, campaign_id) onto
// campaigns (company_id, id)): the rows it reaches carry the referenced
// row's id of that level.
func decidesTenant(t *sqlast.Table, action string) bool {
	cols, _, _ := strings.Cut(strings.TrimPrefix(action, "fk:"), "->")
	i := slices.IndexFunc(t.FKs, func(fk *sqlast.FK) bool { return strings.EqualFold(cols, strings.Join(fk.Cols, ",")) })
	if i < 0 {
		return false
	}
	fk := t.FKs[i]
	for k, c := range fk.Cols {
		if l := t.LevelOf(c); l != nil && l == fk.To.LevelOf(fk.RefCols[k]) {
			return true
		}
	}
	path := tenantPathColumns(t)
	return fk == t.Parent && slices.ContainsFunc(fk.Cols, func(c string) bool {
		return slices.ContainsFunc(path, func(p string) bool { return strings.EqualFold(p, c) })
	})
}

// sharesTenant reports whether the key cols include a tenant path column
// of t.
func sharesTenant(t *sqlast.Table, cols []string) bool {
	path := tenantPathColumns(t)
	return slices.ContainsFunc(cols, func(c string) bool {
		return slices.ContainsFunc(path, func(p string) bool { return strings.EqualFold(p, c) })
	})
}

// unacknowledgedTriggers returns an ErrTrigger for every trigger or rule
// on a table of g that the table's TableDef.Triggers does not name.
//
// Invariant: no code the engine runs on a table of the graph moves rows
// without the guard's predicates unless the schema says why it may.
func unacknowledgedTriggers(ctx context.Context, q engine.Querier, d engine.Dialect, g *sqlast.Schema) ([]error, error) {
	tl, ok := d.(engine.TriggerLister)
	if !ok {
		return nil, fmt.Errorf("%w: the %s dialect cannot list triggers", ErrCatalog, d.Name())
	}
	trs, err := tl.Triggers(ctx, q)
	if err != nil {
		return nil, fmt.Errorf("guardedsql: reading triggers: %w", err)
	}
	// A read-only global table is never written through the guard (nor,
	// on PostgreSQL, by the application role): its triggers and the
	// actions its writes would fire do not run for a tenant.
	readOnly := func(t *sqlast.Table) bool { return t.Global && t.GlobalWritable == "" }
	var errs []error
	for _, tr := range trs {
		t := g.Tables[graphName(g, tr.Table)]
		if t == nil || readOnly(t) {
			continue
		}
		if tr.Kind == engine.FKAction {
			ref := g.Tables[graphName(g, tr.Ref)]
			if ref == nil || readOnly(ref) || guardfault.Off(guardfault.FKActions) {
				continue
			}
			if t.Triggers[tr.Name] != "" && (ref.Global || decidesTenant(t, tr.Name) || guardfault.Off(guardfault.FKActionAck)) {
				continue
			}
			if t.Triggers[tr.Name] != "" {
				// Invariant: an acknowledged action reaches only rows of
				// the referenced row's tenant: the key must be the one that
				// decides the referencing row's tenant.
				errs = append(errs, fmt.Errorf("%w: foreign key %s of %s has an ON UPDATE or ON DELETE action (CASCADE, SET NULL or SET DEFAULT) and is not the key that decides %s's tenant "+
					"(its Parent, where %s has no level column for the levels it reaches, or a key through a level column onto the same level): its rows may reference another tenant's %s row, so a tenant's write of that row changes or deletes them "+
					"(Cal.com: deleting a user of org 1 deleted team 2's event types); the acknowledgement cannot hold: make it NO ACTION or RESTRICT",
					ErrTrigger, tr.Name, t.Name, t.Name, t.Name, ref.Name))
				continue
			}
			if !ref.Global && !decidesTenant(t, tr.Name) {
				// No acknowledgement could hold (above): say so now.
				errs = append(errs, fmt.Errorf("%w: foreign key %s of %s has an ON UPDATE or ON DELETE action (CASCADE, SET NULL or SET DEFAULT) and is not the key that decides %s's tenant: "+
					"a tenant's write of a %s row changes or deletes the %s rows referencing it with no tenant predicate, another tenant's among them; "+
					"make it NO ACTION or RESTRICT (an acknowledgement holds only on %s's Parent, or a key through a level column onto the same level)",
					ErrTrigger, tr.Name, t.Name, t.Name, ref.Name, t.Name, t.Name))
				continue
			}
			errs = append(errs, fmt.Errorf("%w: foreign key %s of %s has an ON UPDATE or ON DELETE action (CASCADE, SET NULL or SET DEFAULT): "+
				"a tenant's write of a %s row changes or deletes the %s rows referencing it with no tenant predicate, another tenant's among them; "+
				"make it NO ACTION or RESTRICT, or acknowledge it in %s's Triggers[%q] with why no row references another tenant's",
				ErrTrigger, tr.Name, t.Name, ref.Name, t.Name, t.Name, tr.Name))
			continue
		}
		if why := t.Triggers[tr.Name]; why != "" {
			continue
		}
		errs = append(errs, fmt.Errorf("%w: %s %s on %s runs without tenant predicates and can move rows between tenants; "+
			"drop it, or acknowledge it in %s's Triggers[%q] with why it cannot", ErrTrigger, tr.Kind, tr.Name, t.Name, t.Name, tr.Name))
	}
	return errs, nil
}
