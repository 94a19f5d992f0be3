// Package sqlitedriver links modernc.org/sqlite into guardedsql: it
// registers the "sqlite" database/sql driver and marks the SQLite engine
// available in the driver registry. Only the public package
// guardedsql/sqlite and guardedsql's own tests import it.
package sqlitedriver

import (
	_ "modernc.org/sqlite" // registers the "sqlite" driver

	"github.com/tenantmcp/tenantmcp/guardedsql/internal/driver"
)

func init() { driver.SQLiteEngine = true }
