package conformance

// A Target names its database by DSN, any engine's, so the suite links all three.
import (
	_ "github.com/tenantmcp/tenantmcp/guardedsql/mysql"
	_ "github.com/tenantmcp/tenantmcp/guardedsql/postgres"
	_ "github.com/tenantmcp/tenantmcp/guardedsql/sqlite"
)
