package sqlite

import "github.com/tenantmcp/tenantmcp/guardedsql/internal/dialect"

// ReturningOn implements dialect.ReturningWriter: SQLite 3.35+ (the
// embedded modernc build included) takes RETURNING on every write.
func (Dialect) ReturningOn(string) bool { return true }

// UpsertStyle implements dialect.Upserter: ON CONFLICT ... DO UPDATE ...
// WHERE (SQLite 3.24+).
func (Dialect) UpsertStyle() dialect.UpsertStyle { return dialect.UpsertWhere }
