package guardfault

// Fixes of issue 25 §2, §3, §5 and §6 (the start-up catalog check and
// the PostgreSQL search_path), each removable for the conformance
// mutation check.
const (
	// UndeclaredFK: Open refuses a foreign key of the database between
	// tenant-bound tables that the graph does not declare (property 54).
	UndeclaredFK Fix = "undeclared_fk"
	// GlobalReadOnly: the guard refuses writes to a global table not
	// declared writable, and AppGrantDDL grants SELECT only on it
	// (property 55).
	GlobalReadOnly Fix = "global_read_only"
	// SharedUnique: Open refuses unacknowledged unique keys without the
	// tenant column, and upserts on acknowledged ones (property 56).
	SharedUnique Fix = "shared_unique"
	// Triggers: Open refuses unacknowledged triggers and rules
	// (property 57).
	Triggers Fix = "triggers"
	// SearchPath: PostgreSQL guarded transactions pin search_path with
	// pg_temp last (property 57).
	SearchPath Fix = "search_path"
)
