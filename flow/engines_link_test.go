package flow_test

// The tests open SQLite databases by DSN.
import (
	_ "github.com/tenantmcp/tenantmcp/guardedsql/sqlite"
)
