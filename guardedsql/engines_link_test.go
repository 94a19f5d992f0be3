package guardedsql_test

// The tests open every engine by DSN (guardedsql.Open), so they link all
// three engine packages; a program links only those it imports.
import (
	_ "github.com/tenantmcp/tenantmcp/guardedsql/mysql"
	_ "github.com/tenantmcp/tenantmcp/guardedsql/postgres"
	_ "github.com/tenantmcp/tenantmcp/guardedsql/sqlite"
)
