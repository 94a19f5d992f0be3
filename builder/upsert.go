package builder

import (
	"slices"
	"strings"

	"github.com/tenantmcp/tenantmcp/internal/guardfault"
	"github.com/tenantmcp/tenantmcp/internal/sqlast"
)

// ConflictBuilder is an INSERT waiting for its conflict action: see
// InsertBuilder.OnConflict.
type ConflictBuilder struct {
	b      InsertBuilder
	target []string
}

type conflictSpec struct {
	target  []string
	nothing bool
	update  []string
}

// OnConflict starts an upsert: when a row with the same values in cols
// (exactly the table's primary key or one of its declared unique keys,
// all of them among Columns) already exists, DoNothing or DoUpdate says
// what happens instead of the insert.
//
// The conflicting row is only ever touched when it is itself in the
// caller's scope: a conflict with another tenant's row changes nothing and
// guardedsql reports it as ErrNotFound, the error of any other write that
// reaches no row in scope (see guardedsql's doc for the engines).
// Build refuses an upsert into a table owned by reference
// (TableDef.OwnedByReference), whose new rows are visible to no one.
func (b InsertBuilder) OnConflict(cols ...string) ConflictBuilder {
	return ConflictBuilder{b: b, target: slices.Clone(cols)}
}

// DoNothing keeps the existing row: the insert affects no row.
func (c ConflictBuilder) DoNothing() InsertBuilder {
	c.b.on = &conflictSpec{target: c.target, nothing: true}
	return c.b
}

// DoUpdate sets the listed columns of the existing row to the values this
// INSERT proposed for them. Build refuses columns outside Columns, the
// conflict columns themselves, and the columns that decide the row's
// tenant (level columns and tenant foreign keys): an upsert never moves a
// row between tenants.
func (c ConflictBuilder) DoUpdate(cols ...string) InsertBuilder {
	c.b.on = &conflictSpec{target: c.target, update: slices.Clone(cols)}
	return c.b
}

// Select makes the INSERT take its rows from q (INSERT ... SELECT), one
// column of q per column of Columns, instead of Values.
//
// q is guarded like any query: it reads only rows in the caller's scope.
// Every row it produces is then checked exactly like a row given to
// Values (its tenant foreign keys must reference rows in scope, its level
// columns hold granted ids), and a single row failing the checks fails the
// whole statement (ErrNotFound or ErrOutOfScope), inserting nothing. The
// rows pass through guardedsql, in one transaction: meant for the tens or
// thousands of rows a tool copies, not bulk loads.
func (b InsertBuilder) Select(q Query) InsertBuilder {
	b.src = &q
	return b
}

// buildWrites validates Returning, OnConflict and Select into s.
func (b InsertBuilder) buildWrites(s *sqlast.Insert) error {
	t := s.Ref.Table
	var err error
	if b.src != nil {
		switch {
		case b.src.s == nil:
			return invalid("INSERT into %s: Select of a zero Query (use Build)", t.Name)
		case len(b.rows) > 0:
			return invalid("INSERT into %s: both Values and Select", t.Name)
		case len(b.src.s.Items) != len(s.Cols):
			return invalid("INSERT into %s: Select produces %d columns for %d Columns", t.Name, len(b.src.s.Items), len(s.Cols))
		}
		s.Source = b.src.s
		s.Refs = append(s.Refs, b.src.s.Refs...)
	}
	if s.Returning, err = returningCols(t, b.ret, "INSERT"); err != nil {
		return err
	}
	if b.on == nil {
		return nil
	}
	on := b.on
	if len(on.target) == 0 {
		return invalid("INSERT into %s: OnConflict without columns", t.Name)
	}
	if err := checkCols(t, on.target); err != nil {
		return err
	}
	if !isExactKey(t, on.target) {
		return invalid("INSERT into %s: OnConflict(%s) is not the primary key or a unique key of the table", t.Name, strings.Join(on.target, ", "))
	}
	for _, c := range on.target {
		if !slices.Contains(s.Cols, c) {
			return invalid("INSERT into %s: conflict column %s is not among Columns", t.Name, c)
		}
	}
	if t.ByRef {
		// A new row of a table owned by reference is visible to no one,
		// and the engines disagree on what a conflict with one does
		// (PostgreSQL's policies test the proposed row's visibility before
		// the conflict, refusing every such upsert; MariaDB could not read
		// a fresh row back), so the upsert is refused on all of them.
		return invalid("INSERT into %s: OnConflict on a table owned by reference: a new row there is visible to no one until a row in scope references it; INSERT the row, or UPDATE it where the caller's rows reference it", t.Name)
	}
	if why, shared := sharedKey(t, on.target); shared && !samePK(t, on.target) && !guardfault.Off(guardfault.SharedUnique) {
		// Invariant: an upsert never resolves a conflict with another
		// tenant's row on a unique key all tenants share, whose outcome
		// (insert, update or ErrNotFound) would reveal that tenant's
		// value. The primary key is the exception: a conflict there is
		// the ErrNotFound of any write under a foreign row (an
		// acknowledged generated id reveals only that it was drawn).
		return invalid("INSERT into %s: OnConflict(%s) is a unique key shared across tenants (%s); upsert on a key with the tenant column",
			t.Name, strings.Join(on.target, ", "), why)
	}
	u := &sqlast.Upsert{Target: slices.Clone(on.target), Nothing: on.nothing}
	if !on.nothing {
		if len(on.update) == 0 {
			return invalid("INSERT into %s: DoUpdate without columns", t.Name)
		}
		if err := checkCols(t, on.update); err != nil {
			return err
		}
		for _, c := range on.update {
			switch {
			case !slices.Contains(s.Cols, c):
				return invalid("INSERT into %s: DoUpdate column %s is not among Columns", t.Name, c)
			case slices.Contains(on.target, c):
				return invalid("INSERT into %s: DoUpdate assigns the conflict column %s", t.Name, c)
			case t.LevelOf(c) != nil || t.FKCovering(c) != nil:
				return invalid("INSERT into %s: DoUpdate assigns %s, a column that decides the row's tenant", t.Name, c)
			}
		}
		u.Update = slices.Clone(on.update)
	}
	s.Upsert = u
	return nil
}

// isExactKey reports whether cols are, as a set, the primary key or one
// unique key of t: the engines accept only such a conflict target.
func isExactKey(t *sqlast.Table, cols []string) bool {
	same := func(key []string) bool {
		if len(key) != len(cols) {
			return false
		}
		for _, k := range key {
			if !slices.Contains(cols, k) {
				return false
			}
		}
		return true
	}
	return same(t.PK) || slices.ContainsFunc(t.Unique, same)
}

// sharedKey returns the reason t's declaration gives for cols being a
// unique key shared across tenants (TableDef.SharedUnique), compared as
// sets of column names.
func sharedKey(t *sqlast.Table, cols []string) (string, bool) {
	for k, why := range t.SharedUnique {
		key := strings.Split(k, ",")
		if len(key) != len(cols) {
			continue
		}
		all := true
		for _, c := range key {
			all = all && slices.ContainsFunc(cols, func(x string) bool { return strings.EqualFold(x, strings.TrimSpace(c)) })
		}
		if all {
			return why, true
		}
	}
	return "", false
}

// samePK reports whether cols are, as a set, t's primary key.
func samePK(t *sqlast.Table, cols []string) bool {
	if len(t.PK) != len(cols) {
		return false
	}
	for _, c := range t.PK {
		if !slices.Contains(cols, c) {
			return false
		}
	}
	return true
}
