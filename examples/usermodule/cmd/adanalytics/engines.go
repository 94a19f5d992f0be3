package main

// The server opens a DSN of any engine.
import (
	_ "github.com/tenantmcp/tenantmcp/guardedsql/mysql"
	_ "github.com/tenantmcp/tenantmcp/guardedsql/postgres"
	_ "github.com/tenantmcp/tenantmcp/guardedsql/sqlite"
)
