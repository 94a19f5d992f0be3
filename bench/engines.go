package main

// The benchmarks open every engine by DSN.
import (
	_ "github.com/tenantmcp/tenantmcp/guardedsql/mysql"
	_ "github.com/tenantmcp/tenantmcp/guardedsql/postgres"
	_ "github.com/tenantmcp/tenantmcp/guardedsql/sqlite"
)
