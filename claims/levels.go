package claims

import (
	"slices"

	"github.com/tenantmcp/tenantmcp/scope"
)

// Levels returns the scope levels the Verifier's mapping may grant,
// sorted: [Mapping.Levels] when the mapping declares them, otherwise every
// level its patterns' placeholders and its table's grants (with their
// Within ancestors) name. Package server compares them with the levels of
// the database schema at start-up, so that a mapping granting a level the
// schema does not have (a typo, or a schema from another application)
// is refused instead of minting grants that match no row.
func (v *Verifier) Levels() []string {
	if v == nil || v.mapper == nil {
		return nil
	}
	return v.mapper.levels()
}

func (m *mapper) levels() []string {
	if m.declared != nil {
		out := slices.Clone(m.declared)
		slices.Sort(out)
		return slices.Compact(out)
	}
	var out []string
	for _, p := range m.patterns {
		for _, l := range p.levels {
			if l != roleLevel {
				out = append(out, l)
			}
		}
	}
	var grant func(g scope.Grant)
	grant = func(g scope.Grant) {
		out = append(out, g.Level)
		for _, w := range g.Within {
			grant(w)
		}
	}
	for _, g := range m.table {
		grant(g)
	}
	slices.Sort(out)
	return slices.Compact(out)
}
