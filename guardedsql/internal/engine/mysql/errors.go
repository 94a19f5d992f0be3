package mysql

import (
	"context"
	"regexp"
	"strconv"

	"github.com/tenantmcp/tenantmcp/guardedsql/internal/engine"
)

var _ engine.ErrorClassifier = Dialect{}

var (
	// dupKey is the end of ER_DUP_ENTRY: "... for key 'table.name'" (or
	// 'name'); the value before it is never read.
	dupKey = regexp.MustCompile(` for key '(?:([A-Za-z0-9_$]+)\.)?([A-Za-z0-9_$]+)'$`)
	// fkParts reads ER_ROW_IS_REFERENCED_2 / ER_NO_REFERENCED_ROW_2, which
	// carry names only: "(`db`.`child`, CONSTRAINT `fk` FOREIGN KEY (`col`) ...".
	fkParts = regexp.MustCompile("\\(`[^`]*`\\.`([A-Za-z0-9_$]+)`, CONSTRAINT `([A-Za-z0-9_$]+)` FOREIGN KEY \\(`([A-Za-z0-9_$]+)`")
	// forColumn reads the column of the conversion and range errors:
	// "... for column 'c' at row 1" or "... for column `db`.`t`.`c` at row 1".
	forColumn = regexp.MustCompile("for column (?:'([A-Za-z0-9_$]+)'|(?:`[^`]*`\\.)*`([A-Za-z0-9_$]+)`) at row [0-9]+$")
	// nullColumn reads ER_BAD_NULL_ERROR: "Column 'c' cannot be null".
	nullColumn = regexp.MustCompile(`^Column '([A-Za-z0-9_$]+)' cannot be null$`)
	// checkName reads ER_CHECK_CONSTRAINT_VIOLATED / MariaDB's
	// ER_CONSTRAINT_FAILED: "CONSTRAINT `name` failed for `db`.`t`" /
	// "Check constraint 'name' is violated.".
	checkName = regexp.MustCompile("(?:CONSTRAINT `([A-Za-z0-9_$]+)` failed|Check constraint '([A-Za-z0-9_$]+)' is violated)")
)

// ServerError is the part of a server error (go-sql-driver's
// *mysql.MySQLError) that Classify reads. This package does not import the
// driver: the driver package (guardedsql/mysql) sets
// AsServerError when it is linked.
type ServerError struct {
	Number uint16
	// Message is the server's message; Text the error's whole text.
	Message, Text string
}

// AsServerError finds a server error in err's chain; nil until the
// driver package registers it.
var AsServerError func(err error) (ServerError, bool)

// Classify implements engine.ErrorClassifier for *mysql.MySQLError (read
// through AsServerError), by error number.
func (Dialect) Classify(err error) (engine.EngineError, bool) {
	if AsServerError == nil {
		return engine.EngineError{}, false
	}
	me, ok := AsServerError(err)
	if !ok {
		return engine.EngineError{}, false
	}
	e := engine.EngineError{
		Code:    strconv.Itoa(int(me.Number)),
		Message: me.Text,
	}
	switch me.Number {
	case 1062, 1586: // ER_DUP_ENTRY, ER_DUP_ENTRY_WITH_KEY_NAME
		e.Kind = engine.EngineUnique
		if m := dupKey.FindStringSubmatch(me.Message); m != nil {
			e.Table, e.Constraint = engine.Ident(m[1]), engine.Ident(m[2])
		}
	case 1451, 1217: // ER_ROW_IS_REFERENCED_2, ER_ROW_IS_REFERENCED
		e.Kind = engine.EngineReferenced
		e.Table, e.Constraint, e.Columns = fk(me.Message)
	case 1452, 1216: // ER_NO_REFERENCED_ROW_2, ER_NO_REFERENCED_ROW
		e.Kind = engine.EngineMissingRef
		e.Table, e.Constraint, e.Columns = fk(me.Message)
	case 1213, 1205, 1020, 3572, 1467:
		// ER_LOCK_DEADLOCK (the transaction was rolled back),
		// ER_LOCK_WAIT_TIMEOUT (the statement was), ER_CHECKREAD
		// (MariaDB's snapshot isolation: "record has changed since last
		// read"), ER_LOCK_NOWAIT: lost a race with another transaction.
		// ER_AUTOINC_READ_FAILED is how InnoDB reports a deadlock or lock
		// wait timeout on a table's AUTO-INC lock (which an INSERT …
		// SELECT, the guard's checked insert, takes): it marks the
		// transaction rolled back like a deadlock, and measured under
		// SERIALIZABLE it is exactly that (TestTakeFreeUnit).
		e.Kind = engine.EngineRetryable
	case 1048: // ER_BAD_NULL_ERROR
		e.Kind = engine.EngineInvalid
		if m := nullColumn.FindStringSubmatch(me.Message); m != nil {
			e.Columns = []string{m[1]}
		}
	case 1264, 1265, 1366, 1406, 1292, 1367, 1411, 1690, 3819, 4025, 1918, 1138:
		// out of range, truncated, incorrect value, too long, truncated
		// incorrect value, illegal value, incorrect datetime, value out of
		// range, CHECK violated (MySQL, MariaDB), conversion failed,
		// invalid use of NULL
		e.Kind = engine.EngineInvalid
		if m := forColumn.FindStringSubmatch(me.Message); m != nil {
			e.Columns = []string{m[1] + m[2]}
		}
		if m := checkName.FindStringSubmatch(me.Message); m != nil {
			e.Constraint = engine.Ident(m[1] + m[2])
		}
	}
	return e, true
}

func fk(msg string) (table, constraint string, cols []string) {
	m := fkParts.FindStringSubmatch(msg)
	if m == nil {
		return "", "", nil
	}
	if c := engine.Ident(m[3]); c != "" {
		cols = []string{c}
	}
	return engine.Ident(m[1]), engine.Ident(m[2]), cols
}

var _ engine.UniqueLister = Dialect{}

// UniqueKeys implements engine.UniqueLister for the current database.
func (Dialect) UniqueKeys(ctx context.Context, q engine.Querier) ([]engine.UniqueKey, error) {
	return engine.CollectUniqueKeys(ctx, q, "SELECT TABLE_NAME, INDEX_NAME, INDEX_NAME = 'PRIMARY', "+
		"GROUP_CONCAT(COLUMN_NAME ORDER BY SEQ_IN_INDEX SEPARATOR ',') FROM information_schema.STATISTICS "+
		"WHERE TABLE_SCHEMA = DATABASE() AND NON_UNIQUE = 0 GROUP BY TABLE_NAME, INDEX_NAME ORDER BY 1, 2")
}
