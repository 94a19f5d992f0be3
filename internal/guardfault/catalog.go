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
	// FKActions: Open refuses unacknowledged foreign keys between tables
	// written for tenants whose ON UPDATE or ON DELETE action writes the
	// referencing rows (property 57).
	FKActions Fix = "fk_actions"
	// FKActionAck: Open accepts an acknowledged foreign-key action only on
	// the key that decides the referencing row's tenant. Disabled, an
	// acknowledged cascade on a consistency path (deleting a user of one
	// org deletes another team's rows) opens (property 57).
	FKActionAck Fix = "fk_action_ack"
	// SearchPath: PostgreSQL guarded transactions pin search_path with
	// pg_temp last (property 57).
	SearchPath Fix = "search_path"
)

// BypassPaths: the PostgreSQL start-up check refuses a role that can
// use a partition, a view or a materialized view reaching a tenant-bound
// table's rows around its row-level security (property 17).
const BypassPaths Fix = "bypass_paths"

// PolicyFuncs: the PostgreSQL start-up check verifies the functions the
// policies call (keep, sees and counting functions) against the generated
// ones: body, security, search_path and owner (property 17).
const PolicyFuncs Fix = "policy_funcs"

// GlobalNamedRef, GlobalPolymorphic and GlobalRoot: Open refuses, without
// a GlobalReason, a table declared global with a column named like a
// reference to a tenant-bound table and no foreign key on it, one with a
// polymorphic reference (a "<p>_type", "<p>_id" pair), and one a level
// column references, by a foreign key or by its name (property 27).
const (
	GlobalNamedRef    Fix = "global_named_ref"
	GlobalPolymorphic Fix = "global_polymorphic"
	GlobalRoot        Fix = "global_root"
)

// LevelAnchor: Open refuses a level column the database's foreign keys
// show to hold another table's non-level column, or a second column of
// one level anchored by no foreign key or primary key (property 27).
const LevelAnchor Fix = "level_anchor"

// UndeclaredLevel: Open refuses a checked foreign key, besides the Parent,
// whose column is named like a level and holds that level's keys while the
// table reaches the level through its Parent, undeclared (property 27).
const UndeclaredLevel Fix = "undeclared_level"

// GrantPairing: under a scope of several grants the guard wants an
// inserted row's scope checks to hold under one grant. Disabled, each may
// hold under a different grant, and a writer granted two tenants files a
// row under one through its parent and under the other through a
// consistency path (property 53).
const GrantPairing Fix = "grant_pairing"
