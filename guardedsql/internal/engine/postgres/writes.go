package postgres

import "github.com/tenantmcp/tenantmcp/guardedsql/internal/engine"

// ReturningOn implements engine.ReturningWriter: every write takes
// RETURNING.
func (Dialect) ReturningOn(string) bool { return true }

// UpsertStyle implements engine.Upserter: INSERT ... ON CONFLICT DO
// NOTHING, then a guarded UPDATE. A single ON CONFLICT DO UPDATE would meet
// the forced row-level security on a hidden conflicting row with an error
// (42501) before evaluating its WHERE, telling the caller the row exists.
func (Dialect) UpsertStyle() engine.UpsertStyle { return engine.UpsertThenUpdate }
