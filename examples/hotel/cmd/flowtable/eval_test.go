package main

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"
)

// TestEvaluation runs every row of the evaluation and fails on any row
// that is not as expected: an attack allowed or denied by the wrong rule,
// a benign flow denied, a message in the outbox after a denial, a denial
// without its audit record and witness. It then checks the committed
// table is what the command produces now.
func TestEvaluation(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	rows, err := evaluate(ctx)
	if err != nil {
		t.Fatal(err)
	}
	attacks, benign := 0, 0
	for _, r := range rows {
		if r.Want == "DENY" {
			attacks++
		} else {
			benign++
		}
		t.Run(r.ID, func(t *testing.T) {
			if len(r.Problems) > 0 {
				t.Errorf("%s (%s): %s", r.ID, r.Pattern, strings.Join(r.Problems, "; "))
			}
		})
	}
	if attacks < 10 || benign < 10 {
		t.Errorf("%d attacks and %d benign flows; want at least 10 of each", attacks, benign)
	}
	want, err := os.ReadFile("evaluation.md")
	if err != nil {
		t.Fatal(err)
	}
	if got := render(rows); got != string(want) {
		t.Errorf("evaluation.md is not current: regenerate it with\n\tgo run ./examples/hotel/cmd/flowtable -o examples/hotel/cmd/flowtable/evaluation.md\n--- got:\n%s", got)
	}
}
