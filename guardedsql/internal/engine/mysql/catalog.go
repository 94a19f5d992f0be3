package mysql

import (
	"context"

	"github.com/tenantmcp/tenantmcp/guardedsql/internal/engine"
)

var _ engine.TriggerLister = Dialect{}

// Triggers implements engine.TriggerLister for the current database from
// information_schema.TRIGGERS, and the foreign keys with a referential
// action (engine.FKAction) from REFERENTIAL_CONSTRAINTS. MySQL shows a trigger only to a role with
// the TRIGGER privilege on its table: a role without it sees none, and the
// check then cannot refuse them (documented in guardedsql's doc).
func (Dialect) Triggers(ctx context.Context, q engine.Querier) ([]engine.Trigger, error) {
	return engine.CollectTriggers(ctx, q, `SELECT EVENT_OBJECT_TABLE, TRIGGER_NAME, 'trigger', ''
FROM information_schema.TRIGGERS WHERE EVENT_OBJECT_SCHEMA = DATABASE()
UNION ALL
SELECT r.TABLE_NAME, CONCAT('fk:', (SELECT GROUP_CONCAT(k.COLUMN_NAME ORDER BY k.ORDINAL_POSITION SEPARATOR ',')
         FROM information_schema.KEY_COLUMN_USAGE k
         WHERE k.CONSTRAINT_SCHEMA = r.CONSTRAINT_SCHEMA AND k.TABLE_NAME = r.TABLE_NAME AND k.CONSTRAINT_NAME = r.CONSTRAINT_NAME),
       '->', r.REFERENCED_TABLE_NAME), '`+engine.FKAction+`', r.REFERENCED_TABLE_NAME
FROM information_schema.REFERENTIAL_CONSTRAINTS r
WHERE r.CONSTRAINT_SCHEMA = DATABASE()
  AND (r.UPDATE_RULE NOT IN ('NO ACTION', 'RESTRICT') OR r.DELETE_RULE NOT IN ('NO ACTION', 'RESTRICT'))
ORDER BY 1, 2`)
}
