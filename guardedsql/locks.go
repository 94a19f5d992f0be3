package guardedsql

import "github.com/tenantmcp/tenantmcp/guardedsql/internal/engine"

// writesInTx reports whether every write on d runs in a transaction of its
// own even where one statement would do: on a engine.KeyedWriter
// (MySQL/MariaDB) the transaction is what carries READ COMMITTED, under
// which the guard's write checks (INSERT ... SELECT ... WHERE EXISTS
// (parent in scope)) read their parents without locking them; in an
// autocommit statement at the session's REPEATABLE READ they would take
// shared locks on the rows they read and wait for another tenant's locked
// parent (issue 26 §1).
func writesInTx(d engine.Dialect) bool {
	kw, ok := d.(engine.KeyedWriter)
	return ok && kw.WritesByKey()
}
