package builder

import (
	"slices"

	"github.com/tenantmcp/tenantmcp/internal/sqlast"
)

// Returning makes the INSERT return the listed columns of every row it
// inserts (RETURNING), read with guardedsql's DB.ExecReturning. This is how
// a caller learns the key of a row whose table has a composite key or a
// key the engine generates, where Result.LastInsertID is 0.
//
// Build refuses a column the table does not have or a column given twice.
func (b InsertBuilder) Returning(cols ...string) InsertBuilder {
	b.ret = slices.Clone(cols)
	if b.ret == nil {
		b.ret = []string{}
	}
	return b
}

// Returning makes the UPDATE return the listed columns of every row it
// changed, with their new values. Only rows in scope are ever updated, so
// only they are returned.
func (b UpdateBuilder) Returning(cols ...string) UpdateBuilder {
	b.ret = slices.Clone(cols)
	if b.ret == nil {
		b.ret = []string{}
	}
	return b
}

// Returning makes the DELETE return the listed columns of every row it
// deleted, with the values they had.
func (b DeleteBuilder) Returning(cols ...string) DeleteBuilder {
	b.ret = slices.Clone(cols)
	if b.ret == nil {
		b.ret = []string{}
	}
	return b
}

// returningCols validates a Returning list: nil means none was asked for;
// an empty non-nil list is a Returning() call without columns.
func returningCols(t *sqlast.Table, cols []string, verb string) ([]string, error) {
	if cols == nil {
		return nil, nil
	}
	if len(cols) == 0 {
		return nil, invalid("%s of %s: Returning without columns", verb, t.Name)
	}
	if err := checkCols(t, cols); err != nil {
		return nil, err
	}
	return slices.Clone(cols), nil
}

// Returns reports the columns a mutation returns; nil when it was built
// without Returning.
func Returns(m Mutation) []string {
	switch x := m.(type) {
	case Insert:
		if x.s != nil {
			return slices.Clone(x.s.Returning)
		}
	case Update:
		if x.s != nil {
			return slices.Clone(x.s.Returning)
		}
	case Delete:
		if x.s != nil {
			return slices.Clone(x.s.Returning)
		}
	}
	return nil
}
