package guardedsql

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/tenantmcp/tenantmcp/builder"
	"github.com/tenantmcp/tenantmcp/guardedsql/internal/guard"
	"github.com/tenantmcp/tenantmcp/internal/sqlast"
)

// ErrLockOutsideTx: a query built with ForUpdate or ForShare was run
// outside DB.Tx. Its lock would be released as soon as the statement
// ended, before any write could use what it read, so nothing was sent.
var ErrLockOutsideTx = errors.New("guardedsql: ForUpdate/ForShare outside DB.Tx: the lock would be released at once")

// ErrLockUnsupported: the engine cannot lock the rows the query reads as
// asked (e.g. PostgreSQL with no schema table in the query's own FROM).
var ErrLockUnsupported = guard.ErrLockUnsupported

// locking reports whether q takes row locks.
func locking(q builder.Query) bool {
	s, ok := sqlast.Unseal(q)
	sel, isSel := s.(*sqlast.Select)
	return ok && isSel && sel.Lock != sqlast.NoLock
}

// checkVirtual is ownRefs' part for derived tables and CTEs: their
// references have a synthetic table (their schema tables are checked as
// references of their own), and a CTE must not take the name of a schema
// table, which it would shadow for every reference by that name.
func (db *DB) checkVirtual(s sqlast.Stmt) error {
	sel, ok := s.(*sqlast.Select)
	if !ok {
		return nil
	}
	for _, c := range sel.With {
		// Case-insensitively: SQLite and MariaDB may fold identifiers.
		if slices.ContainsFunc(db.g.Names, func(n string) bool { return strings.EqualFold(n, c.Name) }) {
			return fmt.Errorf("%w: CTE %s has the name of a schema table", ErrInvalid, c.Name)
		}
	}
	return nil
}

// ErrSetOpUnsupported: the engine lacks the set operator (INTERSECT and
// EXCEPT need MySQL 8.0.31 or MariaDB 10.3); nothing was sent.
var ErrSetOpUnsupported = guard.ErrSetOpUnsupported
