package postgres

import (
	"context"
	"fmt"

	"github.com/tenantmcp/tenantmcp/guardedsql/internal/engine"
	"github.com/tenantmcp/tenantmcp/internal/guardfault"
)

// PostgreSQL resolves an unqualified table name through the session's
// temporary schema (pg_temp) before any schema of search_path unless
// search_path names pg_temp explicitly. A temporary table that raw SQL
// created on a pooled connection would then shadow a tenant table for
// every later guarded statement on that connection: it would serve rows
// the guard never filtered (no row-level security on it either) and
// receive the guard's inserts. So every guarded transaction first sets its
// search_path, transaction-locally, to the schemas the start-up check
// read with pg_temp named last.

// SearchPathFor returns the search_path guarded transactions pin: the
// schemas of the connection's effective search_path (current_schemas,
// which leaves out schemas that do not exist and the implicit pg_catalog
// and pg_temp), quoted, followed by pg_temp.
func SearchPathFor(ctx context.Context, q engine.Querier) (string, error) {
	var sp string
	err := each(ctx, q, `SELECT pg_catalog.array_to_string(ARRAY(SELECT pg_catalog.quote_ident(s)
  FROM pg_catalog.unnest(pg_catalog.current_schemas(false)) AS s WHERE s NOT LIKE 'pg\_temp\_%'), ', ')`, nil,
		func(r engine.Rows) error { return r.Scan(&sp) })
	if err != nil {
		return "", fmt.Errorf("postgres: reading search_path: %w", err)
	}
	if sp == "" {
		return "pg_catalog, pg_temp", nil
	}
	return sp + ", pg_temp", nil
}

// searchPathSQL sets the transaction's search_path; $1 is the value.
const searchPathSQL = `SELECT pg_catalog.set_config('search_path', $1, true)`

// pinSearchPath sets d.SearchPath for the transaction, deferred into the
// next round trip where the driver allows.
func (d Dialect) pinSearchPath(ctx context.Context, tx engine.Querier) error {
	if d.SearchPath == "" || guardfault.Off(guardfault.SearchPath) {
		return nil
	}
	if dt, ok := driverTx[deferrer](tx); ok {
		dt.Defer(searchPathSQL, d.SearchPath)
		return nil
	}
	_, err := tx.Exec(ctx, searchPathSQL, d.SearchPath)
	return err
}
