package sqlast

// Upsert is the conflict clause of an INSERT: when a row with the same
// values in Target (a primary or unique key of the table) exists, either
// nothing happens (Nothing) or the columns of Update take the values the
// INSERT proposed for them. The guard only ever touches a conflicting row
// that is itself in scope.
type Upsert struct {
	Target  []string
	Nothing bool
	Update  []string
}
