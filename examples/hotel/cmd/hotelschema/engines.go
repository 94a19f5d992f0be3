package main

// It creates an SQLite database.
import (
	_ "github.com/tenantmcp/tenantmcp/guardedsql/sqlite"
)
