package builder

import (
	"slices"

	"github.com/tenantmcp/tenantmcp/internal/sqlast"
)

// Statement is a sealed statement: Query, Insert, Update or Delete. Only
// this package can implement it.
type Statement interface {
	// Tables returns every table reference the statement contains.
	Tables() []TableRef
	sealed() sqlast.Stmt
}

// Mutation is a sealed Insert, Update or Delete.
type Mutation interface {
	Statement
	mutation()
}

func (q Query) sealed() sqlast.Stmt {
	if q.s == nil {
		return nil
	}
	return q.s
}

// Insert is a sealed INSERT. The zero value is invalid.
type Insert struct{ s *sqlast.Insert }

// Update is a sealed UPDATE. The zero value is invalid.
type Update struct{ s *sqlast.Update }

// Delete is a sealed DELETE. The zero value is invalid.
type Delete struct{ s *sqlast.Delete }

func (m Insert) sealed() sqlast.Stmt {
	if m.s == nil {
		return nil
	}
	return m.s
}

func (m Update) sealed() sqlast.Stmt {
	if m.s == nil {
		return nil
	}
	return m.s
}

func (m Delete) sealed() sqlast.Stmt {
	if m.s == nil {
		return nil
	}
	return m.s
}

func (Insert) mutation() {}
func (Update) mutation() {}
func (Delete) mutation() {}

// Tables returns the target table reference.
func (m Insert) Tables() []TableRef {
	if m.s == nil {
		return nil
	}
	return refsOut(m.s.Refs)
}

// Tables returns the target and the references of subqueries in WHERE.
func (m Update) Tables() []TableRef {
	if m.s == nil {
		return nil
	}
	return refsOut(m.s.Refs)
}

// Tables returns the target and the references of subqueries in WHERE.
func (m Delete) Tables() []TableRef {
	if m.s == nil {
		return nil
	}
	return refsOut(m.s.Refs)
}

// InsertBuilder assembles an INSERT. Like SelectBuilder it is immutable.
type InsertBuilder struct {
	t    TableRef
	cols []string
	rows [][]any
	ret  []string      // Returning (returning.go)
	on   *conflictSpec // OnConflict (upsert.go)
	src  *Query        // Select (upsert.go)
}

// InsertInto starts an INSERT into t, which must not be aliased.
func InsertInto(t TableRef) InsertBuilder { return InsertBuilder{t: t} }

// Columns sets the columns that Values supplies, in order.
func (b InsertBuilder) Columns(cols ...string) InsertBuilder {
	b.cols = slices.Clone(cols)
	return b
}

// Values adds one row, one value per column. Call it again for more rows;
// guardedsql inserts all of them or none.
func (b InsertBuilder) Values(vals ...any) InsertBuilder {
	b.rows = append(slices.Clip(b.rows), slices.Clone(vals))
	return b
}

func target(t TableRef, verb string) (*sqlast.Ref, error) {
	if t.err != nil {
		return nil, t.err
	}
	if t.ref == nil {
		return nil, invalid("zero TableRef as %s target", verb)
	}
	if t.ref.Virtual() {
		return nil, invalid("%s target %s is a derived table or CTE, not a schema table", verb, t.ref.Alias)
	}
	if t.ref.Alias != t.ref.Table.Name {
		return nil, invalid("%s target %s cannot be aliased (as %s)", verb, t.ref.Table.Name, t.ref.Alias)
	}
	return t.ref, nil
}

func checkCols(t *sqlast.Table, cols []string) error {
	seen := map[string]bool{}
	for _, c := range cols {
		if !t.HasColumn(c) {
			return invalid("table %s has no column %q", t.Name, c)
		}
		if seen[c] {
			return invalid("column %s.%s given twice", t.Name, c)
		}
		seen[c] = true
	}
	return nil
}

// Build validates and seals the INSERT.
func (b InsertBuilder) Build() (Insert, error) {
	ref, err := target(b.t, "INSERT")
	if err != nil {
		return Insert{}, err
	}
	if len(b.cols) == 0 {
		return Insert{}, invalid("INSERT into %s without Columns", ref.Table.Name)
	}
	if err := checkCols(ref.Table, b.cols); err != nil {
		return Insert{}, err
	}
	if len(b.rows) == 0 && b.src == nil {
		return Insert{}, invalid("INSERT into %s without Values", ref.Table.Name)
	}
	s := &sqlast.Insert{Ref: ref, Cols: slices.Clone(b.cols), Refs: []*sqlast.Ref{ref}}
	for i, row := range b.rows {
		if len(row) != len(b.cols) {
			return Insert{}, invalid("INSERT into %s: row %d has %d values for %d columns", ref.Table.Name, i, len(row), len(b.cols))
		}
		vals := make([]sqlast.Value, len(row))
		for j, v := range row {
			if vals[j], err = bindValue(v); err != nil {
				return Insert{}, err
			}
			if vals[j], err = typedFor(ref.Table, b.cols[j], vals[j]); err != nil {
				return Insert{}, err
			}
		}
		s.Rows = append(s.Rows, vals)
	}
	if err := b.buildWrites(s); err != nil {
		return Insert{}, err
	}
	return Insert{s: s}, nil
}

// UpdateBuilder assembles an UPDATE. Like SelectBuilder it is immutable.
type UpdateBuilder struct {
	t     TableRef
	set   []setSpec
	where []Pred
	one   bool
	ret   []string // Returning (returning.go)
}

type setSpec struct {
	col string
	v   any
}

// UpdateTable starts an UPDATE of t, which must not be aliased.
func UpdateTable(t TableRef) UpdateBuilder { return UpdateBuilder{t: t} }

// Set assigns v (a bind value; nil for NULL) to column col.
func (b UpdateBuilder) Set(col string, v any) UpdateBuilder {
	b.set = append(slices.Clip(b.set), setSpec{col, v})
	return b
}

// Where adds conditions on the rows to update. At least one is required:
// to update every row in scope, say so with a condition that is always
// true for your data.
func (b UpdateBuilder) Where(ps ...Pred) UpdateBuilder {
	b.where = append(slices.Clip(b.where), ps...)
	return b
}

// ExpectOne makes the update affect exactly one row: guardedsql reports
// ErrNotFound when no row in scope matches (including a row that exists
// in another tenant) and ErrTooManyRows when several do, and changes
// nothing in either case.
func (b UpdateBuilder) ExpectOne() UpdateBuilder { b.one = true; return b }

// Build validates and seals the UPDATE.
func (b UpdateBuilder) Build() (Update, error) {
	ref, err := target(b.t, "UPDATE")
	if err != nil {
		return Update{}, err
	}
	if len(b.set) == 0 {
		return Update{}, invalid("UPDATE of %s without Set", ref.Table.Name)
	}
	s := &sqlast.Update{Ref: ref, ExpectOne: b.one}
	var cols []string
	for _, a := range b.set {
		if se, ok := a.v.(setExpr); ok {
			x, err := se.assign(ref, a.col)
			if err != nil {
				return Update{}, err
			}
			cols = append(cols, a.col)
			s.Set = append(s.Set, sqlast.Assign{Col: a.col, X: x})
			continue
		}
		v, err := bindValue(a.v)
		if err != nil {
			return Update{}, err
		}
		cols = append(cols, a.col)
		s.Set = append(s.Set, sqlast.Assign{Col: a.col, V: v})
	}
	if err := checkCols(ref.Table, cols); err != nil {
		return Update{}, err
	}
	for i := range s.Set {
		if s.Set[i].V, err = typedFor(ref.Table, s.Set[i].Col, s.Set[i].V); err != nil {
			return Update{}, err
		}
	}
	if s.Where, s.Refs, err = mutationWhere(ref, b.where, "UPDATE"); err != nil {
		return Update{}, err
	}
	if s.Returning, err = returningCols(ref.Table, b.ret, "UPDATE"); err != nil {
		return Update{}, err
	}
	return Update{s: s}, nil
}

// DeleteBuilder assembles a DELETE. Like SelectBuilder it is immutable.
type DeleteBuilder struct {
	t     TableRef
	where []Pred
	one   bool
	ret   []string // Returning (returning.go)
}

// DeleteFrom starts a DELETE from t, which must not be aliased.
func DeleteFrom(t TableRef) DeleteBuilder { return DeleteBuilder{t: t} }

// Where adds conditions on the rows to delete; at least one is required.
func (b DeleteBuilder) Where(ps ...Pred) DeleteBuilder {
	b.where = append(slices.Clip(b.where), ps...)
	return b
}

// ExpectOne makes the delete affect exactly one row, as for UpdateBuilder.
func (b DeleteBuilder) ExpectOne() DeleteBuilder { b.one = true; return b }

// Build validates and seals the DELETE.
func (b DeleteBuilder) Build() (Delete, error) {
	ref, err := target(b.t, "DELETE")
	if err != nil {
		return Delete{}, err
	}
	s := &sqlast.Delete{Ref: ref, ExpectOne: b.one}
	if s.Where, s.Refs, err = mutationWhere(ref, b.where, "DELETE"); err != nil {
		return Delete{}, err
	}
	if s.Returning, err = returningCols(ref.Table, b.ret, "DELETE"); err != nil {
		return Delete{}, err
	}
	return Delete{s: s}, nil
}

func mutationWhere(ref *sqlast.Ref, where []Pred, verb string) (sqlast.Pred, []*sqlast.Ref, error) {
	if len(where) == 0 {
		return nil, nil, invalid("%s of %s without Where", verb, ref.Table.Name)
	}
	p, err := conj(where)
	if err != nil {
		return nil, nil, err
	}
	v := newScopeCheck()
	if err := v.declare(ref); err != nil {
		return nil, nil, err
	}
	if err := v.pred(p, false); err != nil {
		return nil, nil, err
	}
	if err := v.finish(); err != nil {
		return nil, nil, err
	}
	if len(v.outer) > 0 {
		o := v.outer[0]
		if o.Table == ref.Table {
			return nil, nil, invalid("%s of %s uses a column of another reference to %s; take columns from the TableRef passed to the builder", verb, ref.Table.Name, o.Table.Name)
		}
		return nil, nil, invalid("%s of %s uses columns of %s (%s), which it does not reference", verb, ref.Table.Name, o.Alias, o.Table.Name)
	}
	return p, v.refs, nil
}
