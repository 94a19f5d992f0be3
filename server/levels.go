package server

import (
	"fmt"
	"slices"

	"github.com/tenantmcp/tenantmcp/scope"
)

// ErrLevels is wrapped by the error [New] returns when the scope levels
// are configured inconsistently: [Options.Levels] differ from the levels
// of the database schema ([guardedsql.DB.Schema]), a level name is not
// valid ([scope.ValidLevel]), or the claims mapping of [Options.Verifier]
// may grant a level the schema does not have ([claims.Verifier.Levels]).
// It matches [ErrConfig] too.
//
// The schema is the one place levels are declared; everything else is
// checked against it, because a mismatch fails silently otherwise: a
// level missing from Options.Levels is not forbidden as a tool input, and
// a mapping level unknown to the schema mints grants that match no row.
var ErrLevels = fmt.Errorf("%w: scope levels disagree", ErrConfig)

// resolveLevels derives opts.Levels from the schema when unset and refuses
// (ErrLevels) any disagreement between Options.Levels, the schema and the
// claims mapping. Invariant: after it returns nil, opts.Levels holds
// exactly the schema's levels whenever the DB has a schema.
func resolveLevels(opts *Options) error {
	for _, l := range opts.Levels {
		if !scope.ValidLevel(l) {
			return fmt.Errorf("%w: Options.Levels: %q is not a level name (a lower-case letter, then lower-case letters, digits or '_')", ErrLevels, l)
		}
	}
	sch := opts.DB.Schema()
	if sch == nil {
		return nil
	}
	var schema []string
	for _, l := range sch.Levels() {
		schema = append(schema, l.Name)
	}
	if len(opts.Levels) == 0 {
		opts.Levels = schema
	} else if !sameSet(opts.Levels, schema) {
		return fmt.Errorf("%w: Options.Levels %q are not the schema's levels %q (leave Levels empty to use the schema's)", ErrLevels, opts.Levels, schema)
	}
	for _, l := range opts.Verifier.Levels() {
		if !slices.Contains(schema, l) {
			return fmt.Errorf("%w: the claims mapping grants level %q, which the schema does not have (its levels: %q)", ErrLevels, l, schema)
		}
	}
	return nil
}

func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(slices.Compact(a), slices.Compact(b))
}
