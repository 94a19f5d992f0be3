package devserver

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
)

// Seed is an example's migration in one transaction, as the schema owner:
// the one place the examples write SQL text by hand; tools never do. Rows
// are batched into multi-row INSERTs; the first error sticks and is
// returned by Commit.
type Seed struct {
	ctx      context.Context
	tx       *sql.Tx
	postgres bool // $n placeholders, identity sequences to move
	table    string
	cols     []string
	args     []any
	rows     int
	err      error
}

// BeginSeed opens the transaction and runs ddl; postgres selects $n
// placeholders (else ?).
func BeginSeed(ctx context.Context, db *sql.DB, postgres bool, ddl []string) (*Seed, error) {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return nil, err
	}
	for _, stmt := range ddl {
		if _, err := tx.ExecContext(ctx, stmt); err != nil {
			tx.Rollback()
			return nil, fmt.Errorf("%s: %w", stmt, err)
		}
	}
	return &Seed{ctx: ctx, tx: tx, postgres: postgres}, nil
}

// Row adds a row of table.
func (s *Seed) Row(table string, cols []string, vals ...any) {
	if s.err == nil && (table != s.table || s.rows >= 200) {
		s.err = s.flush()
		s.table, s.cols = table, cols
	}
	s.args = append(s.args, vals...)
	s.rows++
}

// Exec runs a statement after the rows added so far; its placeholders are
// written ? and become $1, $2, … on PostgreSQL.
func (s *Seed) Exec(q string, args ...any) {
	if s.err = s.flush(); s.err == nil {
		_, s.err = s.tx.ExecContext(s.ctx, s.numbered(q), args...)
	}
}

func (s *Seed) flush() error {
	if s.err != nil || s.rows == 0 {
		return s.err
	}
	row := "(" + strings.TrimSuffix(strings.Repeat("?, ", len(s.cols)), ", ") + ")"
	q := fmt.Sprintf("INSERT INTO %s (%s) VALUES %s", s.table, strings.Join(s.cols, ", "), strings.TrimSuffix(strings.Repeat(row+", ", s.rows), ", "))
	_, err := s.tx.ExecContext(s.ctx, s.numbered(q), s.args...)
	s.args, s.rows = s.args[:0], 0
	if err != nil {
		return fmt.Errorf("seeding %s: %w", s.table, err)
	}
	return nil
}

// numbered writes q's placeholders as $1, $2, … on PostgreSQL.
func (s *Seed) numbered(q string) string {
	if !s.postgres {
		return q
	}
	var b strings.Builder
	for i, part := range strings.Split(q, "?") {
		if i > 0 {
			fmt.Fprintf(&b, "$%d", i)
		}
		b.WriteString(part)
	}
	return b.String()
}

// Commit writes what is pending and commits; on PostgreSQL it first moves
// the identity sequence of each table's column in ids (table → column)
// past the ids the seed supplied.
func (s *Seed) Commit(ids map[string]string) error {
	defer s.tx.Rollback()
	if s.err = s.flush(); s.err != nil {
		return s.err
	}
	for t, c := range ids {
		if s.postgres {
			q := fmt.Sprintf(`SELECT setval(pg_get_serial_sequence('%s','%s'), (SELECT COALESCE(max(%s), 0) + 1 FROM %s), false)`, t, c, c, t)
			if _, err := s.tx.ExecContext(s.ctx, q); err != nil {
				return err
			}
		}
	}
	return s.tx.Commit()
}
