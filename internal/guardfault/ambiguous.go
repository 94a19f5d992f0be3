package guardfault

// Ambiguous: a statement meant for one row that matches several fails
// with guardedsql.ErrAmbiguous (an ExpectOne update or delete, rolled
// back; a QueryRow or One read). Disabled, an ExpectOne write that
// matched two rows commits both changes and a QueryRow returns the first
// row, as before the check; conformance property 45 must notice.
const Ambiguous Fix = "ambiguous"

// NarrowCheck: scope.Scope.Narrow narrows only to one of the scope's own
// grants. Disabled, Narrow hands out the scope of whatever grant it is
// given — a selector that widens; conformance property 46 must notice.
const NarrowCheck Fix = "narrow_check"
