package guardfault

// Faults of the read structure (issue 15): each removes the guard from one
// part of a statement so that the conformance mutation check can show a
// property noticing it.
const (
	// SetBranch: the branches of a set operation after the first are
	// rendered without tenant predicates.
	SetBranch Fix = "set_branch"
	// CTEBody: the bodies of common table expressions are rendered without
	// tenant predicates.
	CTEBody Fix = "cte_body"
)
