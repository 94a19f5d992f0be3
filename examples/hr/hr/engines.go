package hr

// The example runs on any engine, chosen by its DSN.
import (
	_ "github.com/tenantmcp/tenantmcp/guardedsql/mysql"
	_ "github.com/tenantmcp/tenantmcp/guardedsql/postgres"
	_ "github.com/tenantmcp/tenantmcp/guardedsql/sqlite"
)
