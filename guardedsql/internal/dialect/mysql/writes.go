package mysql

// ReturningOn implements dialect.ReturningWriter: MariaDB 10.5+ takes
// INSERT ... RETURNING and DELETE ... RETURNING but not UPDATE ...
// RETURNING; MySQL takes none.
func (d Dialect) ReturningOn(stmt string) bool {
	return d.MariaDB && (stmt == "insert" || stmt == "delete")
}
