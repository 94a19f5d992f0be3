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
)
