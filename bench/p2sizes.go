package main

import (
	"fmt"
	"strings"

	"github.com/tenantmcp/tenantmcp/internal/benchdata"
)

// P2 at several dataset sizes (-p2-sizes 10k,100k,1M): the number of
// chains grows with the size while each chain keeps its 2 hotels, 50
// rooms and 1,000 bookings, so every size runs the same per-tenant work
// against a larger table. What grows with the size is what the table's
// size costs: index depth, the planner's choices, the guard's id-set
// subqueries over hotels and rooms. The 1M size is benchdata.Default in
// the -p2-db database (shared with the guardedsql engine benchmark); the
// others live in their own databases, -p2-db with the size appended, so
// that switching sizes never regenerates another's data.

// p2Size is one P2 dataset.
type p2Size struct {
	name string // "10k"
	size benchdata.Size
}

func p2SizeOf(chains int) benchdata.Size {
	s := benchdata.Default
	s.Chains = chains
	return s
}

var p2SizeList = []p2Size{
	{"10k", p2SizeOf(10)},
	{"100k", p2SizeOf(100)},
	{"1M", benchdata.Default},
}

func p2SizeNames() string {
	names := make([]string, len(p2SizeList))
	for i, s := range p2SizeList {
		names[i] = s.name
	}
	return strings.Join(names, ",")
}

func parseP2Sizes(list string) ([]p2Size, error) {
	var out []p2Size
next:
	for n := range strings.SplitSeq(list, ",") {
		n = strings.TrimSpace(n)
		for _, s := range p2SizeList {
			if strings.EqualFold(n, s.name) {
				out = append(out, s)
				continue next
			}
		}
		return nil, fmt.Errorf("unknown -p2-sizes entry %q (want some of %s)", n, p2SizeNames())
	}
	return out, nil
}

// p2DB is the database holding the current P2 dataset.
func (e *env) p2DB() string {
	if e.cfg.smoke || e.p2cur.size == benchdata.Default {
		return e.cfg.p2DB
	}
	return e.cfg.p2DB + "_" + strings.ToLower(e.p2cur.name)
}

// p2Sizes are the sizes a run measures: the tiny smoke dataset alone
// under -smoke.
func (e *env) p2Sizes() []p2Size {
	if e.cfg.smoke {
		return []p2Size{{"smoke", smokeSize}}
	}
	return e.cfg.p2Sizes
}

// p2CaseSuffix tells the sizes apart in a row's case when a run measures
// more than one (a single size keeps the case the earlier runs used).
func (e *env) p2CaseSuffix() string {
	if len(e.p2Sizes()) < 2 {
		return ""
	}
	return ", " + e.p2cur.name + " bookings"
}
