package guardedsql

import mysqldialect "github.com/tenantmcp/tenantmcp/guardedsql/internal/engine/mysql"

// MySQLFallbackForTest makes a MariaDB DB render writes as for MySQL 8,
// which has no RETURNING at all: the fallbacks of guard's writes.go run on
// the MariaDB server of the tests. It reports false for other engines.
func MySQLFallbackForTest(db *DB) bool {
	d, ok := db.d.(mysqldialect.Dialect)
	if !ok {
		return false
	}
	d.MariaDB = false
	db.d = d
	return true
}
