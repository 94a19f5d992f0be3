package mysql

import (
	"context"

	"github.com/tenantmcp/tenantmcp/guardedsql/internal/engine"
)

var _ engine.TriggerLister = Dialect{}

// Triggers implements engine.TriggerLister for the current database from
// information_schema.TRIGGERS. MySQL shows a trigger only to a role with
// the TRIGGER privilege on its table: a role without it sees none, and the
// check then cannot refuse them (documented in guardedsql's doc).
func (Dialect) Triggers(ctx context.Context, q engine.Querier) ([]engine.Trigger, error) {
	return engine.CollectTriggers(ctx, q, `SELECT EVENT_OBJECT_TABLE, TRIGGER_NAME, 'trigger'
FROM information_schema.TRIGGERS WHERE EVENT_OBJECT_SCHEMA = DATABASE() ORDER BY 1, 2`)
}
