package guardfault

// (h4-ref) Faults of issue 25 §1–2.
const (
	// ByRef: the write rules of tables owned by reference: an UPDATE or
	// DELETE needs every referencing row in scope, and a tenant row may
	// reference only a row that is unreferenced or visible to the writer.
	// Disabled, a tenant points its row at another tenant's address and
	// reads it, and changes an address another tenant references;
	// conformance property 52 must notice.
	ByRef Fix = "by_ref"
	// ConsistencyPaths: an UPDATE or DELETE needs the rows its unassigned
	// consistency paths reference in scope. Disabled, a store completes a
	// rental whose clerk is another store's; conformance property 53 must
	// notice.
	ConsistencyPaths Fix = "consistency_paths"
	// ByRefExists: a claim of a row owned by reference needs the row to
	// exist, so that a row only other tenants reference is refused exactly
	// as a missing one is (by the guard, with one error text) and not by the
	// database's foreign key. Disabled, a tool that shows its errors tells
	// another tenant's row from no row; conformance property 52 must notice.
	ByRefExists Fix = "by_ref_exists"
	// LevelParentCheck: on PostgreSQL the WITH CHECK expression of a table
	// with level columns of its own tests its scope parent too (a row is in
	// scope by its level column, so USING never looks at the parent).
	// Disabled, raw SQL as the application role points a row of its own
	// tenant at another tenant's parent row; conformance property 16 must
	// notice.
	LevelParentCheck Fix = "level_parent_check"
	// LevelColumnCheck: on PostgreSQL the WITH CHECK expression tests each
	// level column on its own (granted, the key of a row the writer sees,
	// or unchanged), also where a foreign key covers it. Disabled, raw SQL
	// as the application role moves a row it holds by one level column
	// into another tenant by another (a hotel's manager moves the hotel to
	// another chain); conformance property 16 must notice.
	LevelColumnCheck Fix = "level_column_check"
	// UpKeyCheck: on PostgreSQL the WITH CHECK expression tests a checked
	// foreign key up the hierarchy (a project's task, its org's assignee):
	// a row the writer sees, or the value the row holds. Disabled, raw SQL
	// as the application role points its row at another tenant's row there
	// and tells another tenant's key from a missing one;
	// TestUpHierarchyKeyRawSQL must notice.
	UpKeyCheck Fix = "up_key_check"
	// CompositeLevelCheck: on PostgreSQL the WITH CHECK expression admits
	// a level column covered by a composite foreign key only when a row
	// the writer sees holds the tuple (or the column is granted, or kept).
	// Disabled, a fully non-NULL composite key is trusted, and raw SQL as
	// a project's member moves its project, by its identity in scope, to
	// another org's workspace ((org_id, workspace_id) is that org's);
	// conformance property 16 must notice.
	CompositeLevelCheck Fix = "composite_level_check"
	// SelfKeyCheck: on PostgreSQL the WITH CHECK expression tests a
	// checked foreign key of a table into itself (a document's parent
	// document): a row the writer sees, or the value the row holds.
	// Disabled, raw SQL as the application role files its row under
	// another tenant's and tells that tenant's ids from missing ones;
	// conformance property 16 must notice.
	SelfKeyCheck Fix = "self_key_check"
)
