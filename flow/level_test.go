package flow

import (
	"slices"
	"testing"
)

func TestLevelOrder(t *testing.T) {
	order := []Level{"", Public, Internal, Confidential, Secret}
	for i, a := range order {
		for j, b := range order {
			want := 0
			if i < j {
				want = -1
			} else if i > j {
				want = 1
			}
			if got := a.Compare(b); got != want {
				t.Errorf("%q.Compare(%q) = %d, want %d", a, b, got, want)
			}
		}
	}
	if _, err := ParseLevel("topsecret"); err == nil {
		t.Error("ParseLevel accepted an unknown level")
	}
	if Level("Public").Valid() {
		t.Error("levels are case-sensitive: \"Public\" must not be valid")
	}
}

func TestLabelLattice(t *testing.T) {
	labels := []Label{
		{},
		NewLabel(Public),
		NewLabel(Internal, "payment"),
		NewLabel(Confidential, "guest.pii"),
		NewLabel(Secret, "guest.pii", "payment"),
		NewLabel(Public, "guest.pii"),
	}
	eq := func(a, b Label) bool { return a.Level == b.Level && slices.Equal(a.Categories, b.Categories) }
	for _, a := range labels {
		if !eq(a.Join(a), a) {
			t.Errorf("join not idempotent for %v", a)
		}
		for _, b := range labels {
			j := a.Join(b)
			if !eq(j, b.Join(a)) {
				t.Errorf("join not commutative: %v, %v", a, b)
			}
			if !a.Leq(j) || !b.Leq(j) {
				t.Errorf("%v is not an upper bound of %v and %v", j, a, b)
			}
			if a.Leq(b) != eq(a.Join(b), b) {
				t.Errorf("Leq(%v, %v) disagrees with the join", a, b)
			}
			for _, c := range labels {
				if !eq(a.Join(b).Join(c), a.Join(b.Join(c))) {
					t.Errorf("join not associative: %v %v %v", a, b, c)
				}
			}
		}
	}
	if NewLabel(Secret).Leq(NewLabel(Confidential, "x")) || NewLabel(Public, "x").Leq(NewLabel(Secret)) {
		t.Error("Leq ignores a level or a category")
	}
	if got := NewLabel(Confidential, "b", "a", "b").String(); got != "confidential{a,b}" {
		t.Errorf("String = %q", got)
	}
}
