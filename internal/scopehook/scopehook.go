// Package scopehook is the untyped seam through which package scope lends
// its private constructor to the rest of the module. Package scope fills the
// variables in its init; package internal/mint wraps them with types. Nothing
// else should touch this package.
package scopehook

import "context"

var (
	// Mint builds a scope.Scope from a subject, a []scope.Grant and roles.
	Mint func(subject string, grants any, roles []string) (any, error)
	// Attach returns ctx carrying the scope.Scope s.
	Attach func(ctx context.Context, s any) context.Context
)
