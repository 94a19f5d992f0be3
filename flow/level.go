package flow

import (
	"fmt"
	"slices"
	"strings"
)

// Level is a confidentiality level. Levels are totally ordered:
// Public < Internal < Confidential < Secret. The empty Level is below
// every level: it is the label of a session that has received nothing,
// and, in a Decl, means "not declared".
type Level string

// The levels, lowest first.
const (
	Public       Level = "public"
	Internal     Level = "internal"
	Confidential Level = "confidential"
	Secret       Level = "secret"
)

// ParseLevel returns the Level named s.
func ParseLevel(s string) (Level, error) {
	if l := Level(s); l.Valid() {
		return l, nil
	}
	return "", fmt.Errorf("flow: unknown level %q (public, internal, confidential, secret)", s)
}

// Valid reports whether l is one of the four levels.
func (l Level) Valid() bool { return l.rank() != 0 }

// Compare returns -1, 0 or +1 as l is below, equal to or above m.
func (l Level) Compare(m Level) int {
	a, b := l.rank(), m.rank()
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// rank is a Level as a small integer, for the checker: 0 for none (or an
// invalid Level), then 1 (public) to 4 (secret).
type rank uint8

const (
	rNone rank = iota
	rPublic
	rInternal
	rConfidential
	rSecret
)

var rankLevels = [...]Level{"", Public, Internal, Confidential, Secret}

func (l Level) rank() rank {
	switch l {
	case Public:
		return rPublic
	case Internal:
		return rInternal
	case Confidential:
		return rConfidential
	case Secret:
		return rSecret
	}
	return rNone
}

func (r rank) level() Level {
	if int(r) < len(rankLevels) {
		return rankLevels[r]
	}
	return ""
}

func (r rank) String() string {
	if r == rNone {
		return "none"
	}
	return string(r.level())
}

// Label is an information-flow label: a confidentiality level and a set
// of categories (what the data is about: "guest.pii", "payment", …).
// Labels form a lattice ordered by Leq, whose join (least upper bound) is
// Join: the higher level and the union of the categories. A session's
// taint is the join of the labels of every result it has received.
//
// Categories is a set: sorted, without duplicates (Join and NewLabel
// return it so).
type Label struct {
	Level      Level    `json:"level"`
	Categories []string `json:"categories,omitempty"`
}

// NewLabel returns the label of level l and the given categories.
func NewLabel(l Level, categories ...string) Label {
	return Label{Level: l, Categories: normCats(categories)}
}

// Join returns the least upper bound of a and b.
func (a Label) Join(b Label) Label {
	l := a.Level
	if b.Level.Compare(l) > 0 {
		l = b.Level
	}
	return Label{Level: l, Categories: normCats(append(slices.Clone(a.Categories), b.Categories...))}
}

// Leq reports whether a flows to b: a's level is at most b's and every
// category of a is one of b's.
func (a Label) Leq(b Label) bool {
	if a.Level.Compare(b.Level) > 0 {
		return false
	}
	for _, c := range a.Categories {
		if !slices.Contains(b.Categories, c) {
			return false
		}
	}
	return true
}

func (a Label) String() string {
	l := a.Level.rank().String()
	if len(a.Categories) == 0 {
		return l
	}
	return l + "{" + strings.Join(a.Categories, ",") + "}"
}

func normCats(c []string) []string {
	if len(c) == 0 {
		return nil
	}
	c = slices.Clone(c)
	slices.Sort(c)
	return slices.Compact(c)
}

// catSet is a set of interned categories, one bit each: the checker's
// internal representation of Label.Categories, so that a join is an OR.
type catSet uint64

// maxCategories bounds the categories one Checker knows (policy and
// declarations together).
const maxCategories = 64

func (s catSet) has(i int) bool { return s&(1<<uint(i)) != 0 }

// each calls f for every member of s, in index order.
func (s catSet) each(f func(i int)) {
	for i := 0; s != 0; i++ {
		if s&1 != 0 {
			f(i)
		}
		s >>= 1
	}
}

// label is a compiled Label.
type label struct {
	level rank
	cats  catSet
}

func (a label) join(b label) label { return label{level: max(a.level, b.level), cats: a.cats | b.cats} }
