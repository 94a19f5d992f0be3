package guardfault

// UpsertConflict is the check that an upsert only ever updates a
// conflicting row in the caller's scope (guard's writes.go); disabled, the
// conflict clause updates whatever row conflicts.
const UpsertConflict Fix = "upsert-conflict"
