package sqlite

import "github.com/tenantmcp/tenantmcp/guardedsql/internal/engine"

// ReturningOn implements engine.ReturningWriter: SQLite 3.35+ (the
// embedded modernc build included) takes RETURNING on every write.
func (Dialect) ReturningOn(string) bool { return true }

// UpsertStyle implements engine.Upserter: ON CONFLICT ... DO UPDATE ...
// WHERE (SQLite 3.24+).
func (Dialect) UpsertStyle() engine.UpsertStyle { return engine.UpsertWhere }
