package engine

import "context"

// Trigger is a trigger, or on PostgreSQL a rewrite rule, attached to a
// table: code the engine runs on a table's writes (or reads) with no tenant
// predicate, which can copy or move rows between tenants behind the guard.
type Trigger struct {
	Table, Name string
	// Kind is "trigger" or "rule".
	Kind string
}

// TriggerLister is implemented by the engine dialects: the triggers (and
// rules) of the tables of the connection's current schema or database,
// as the connected role sees them.
type TriggerLister interface {
	Triggers(ctx context.Context, q Querier) ([]Trigger, error)
}

// CollectTriggers runs query, whose rows are (table, name, kind).
func CollectTriggers(ctx context.Context, q Querier, query string) ([]Trigger, error) {
	rows, err := q.Query(ctx, query)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Trigger
	for rows.Next() {
		var t Trigger
		if err := rows.Scan(&t.Table, &t.Name, &t.Kind); err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	return out, rows.Close()
}
