package engine

import "context"

// Trigger is a trigger, or on PostgreSQL a rewrite rule, attached to a
// table: code the engine runs on a table's writes (or reads) with no tenant
// predicate, which can copy or move rows between tenants behind the guard.
type Trigger struct {
	Table, Name string
	// Kind is "trigger", "rule" or FKAction.
	Kind string
	// Ref is, for an FKAction, the referenced table, whose writes fire it.
	Ref string
}

// FKAction is the Kind of a foreign key whose ON UPDATE or ON DELETE
// action is CASCADE, SET NULL or SET DEFAULT: a write of the referenced
// row changes or deletes the referencing rows with no tenant predicate
// (and, on PostgreSQL, past row-level security), whatever tenant they
// belong to. Its Name is "fk:" + the referencing columns, comma-separated,
// + "->" + the referenced table, the same on every engine.
const FKAction = "foreign key action"

// FKActionName is the Name of an FKAction.
func FKActionName(cols, ref string) string { return "fk:" + cols + "->" + ref }

// TriggerLister is implemented by the engine dialects: the triggers (and
// rules) of the tables of the connection's current schema or database,
// as the connected role sees them.
type TriggerLister interface {
	Triggers(ctx context.Context, q Querier) ([]Trigger, error)
}

// CollectTriggers runs query, whose rows are (table, name, kind, ref).
func CollectTriggers(ctx context.Context, q Querier, query string) ([]Trigger, error) {
	rows, err := q.Query(ctx, query)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Trigger
	for rows.Next() {
		var t Trigger
		if err := rows.Scan(&t.Table, &t.Name, &t.Kind, &t.Ref); err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	return out, rows.Close()
}
