package flow

import (
	"slices"
	"testing"

	"github.com/tenantmcp/tenantmcp/redact"
)

type ownerLeaf struct {
	ID    int64  `json:"id"`
	Name  string `json:"name"`
	Email string `json:"email" pii:"email"`
}

// ownerTwin has ownerLeaf's shape without the tag: its address is no owner.
type ownerTwin struct {
	ID    int64  `json:"id"`
	Name  string `json:"name"`
	Email string `json:"email"`
}

type ownerMix struct {
	N      int
	S      *string
	Leaf   ownerLeaf
	Ptr    *ownerLeaf
	Any    any
	List   []ownerLeaf
	ByName map[string]ownerLeaf
	Twin   ownerTwin
	Keys   map[string]int `pii:"email,keys"`
	ownerLeaf
}

// The per-type plan of owner fields (ownerPlan) leaves out scalar fields
// only: addresses behind pointers, interfaces, slices, maps, embedding and
// ",keys" are all found, and a twin type without the tag contributes none.
func TestOwnersThroughEveryShape(t *testing.T) {
	s := "x"
	leaf := func(e string) ownerLeaf { return ownerLeaf{ID: 1, Name: "n", Email: e} }
	v := ownerMix{
		N: 1, S: &s, Leaf: leaf("a@x.example"), Ptr: &ownerLeaf{Email: "b@x.example"},
		Any: leaf("c@x.example"), List: []ownerLeaf{leaf("d@x.example")},
		ByName: map[string]ownerLeaf{"k": leaf("e@x.example")}, Twin: ownerTwin{Email: "twin2@x.example"},
		Keys: map[string]int{"f@x.example": 1}, ownerLeaf: leaf("g@x.example"),
	}
	got, unknown := owners(v, redact.Report{})
	if unknown {
		t.Fatal("owners unknown")
	}
	slices.Sort(got)
	want := []string{"a@x.example", "b@x.example", "c@x.example", "d@x.example", "e@x.example", "f@x.example", "g@x.example"}
	if !slices.Equal(got, want) {
		t.Fatalf("owners %v, want %v", got, want)
	}
	// Behind []any the static type reaches no owner field, so the walk
	// stops there (as before the plan); redact's count of e-mails then
	// exceeds the fields and makes the owners unknown.
	var rep redact.Report
	if got, unknown := owners([]any{leaf("a@x.example")}, rep); !unknown || got != nil {
		t.Fatalf("owners behind []any: %v", got)
	}
	if got, unknown := owners(ownerTwin{Email: "a@x.example"}, redact.Report{}); !unknown || got != nil {
		t.Fatalf("untagged twin gave owners %v", got)
	}
	if got, unknown := owners(ownerLeaf{Email: "not an address"}, redact.Report{}); !unknown || got != nil {
		t.Fatalf("invalid address gave owners %v", got)
	}
}
