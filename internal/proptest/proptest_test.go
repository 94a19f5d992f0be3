package proptest

import (
	"errors"
	"fmt"
	"syscall"
	"testing"
	"time"
)

func TestRatios(t *testing.T) {
	var r Ratios
	// B A A B B A A B with the candidate always 1.5× its neighbour except
	// one pair at 3×: pair ratios 1.5, 1.5, 3, 1.5 → median 1.5.
	for i, d := range []time.Duration{100, 150, 300, 100, 100, 150, 150, 100} {
		r.Add(ABBA[i], d)
	}
	if got := r.MedianPair(); got != 1.5 {
		t.Errorf("MedianPair = %v, want 1.5", got)
	}
	if r.Baseline != 400 || r.Candidate != 750 {
		t.Errorf("totals %v / %v, want 400 / 750", r.Baseline, r.Candidate)
	}
	if got := r.Ratio(); got != 750.0/400 {
		t.Errorf("Ratio = %v", got)
	}
}

func TestErrName(t *testing.T) {
	for err, want := range map[error]string{
		nil:                                     "ok",
		syscall.EACCES:                          "EACCES",
		fmt.Errorf("open x: %w", syscall.EPERM): "EPERM",
		errors.New("boom"):                      "error: boom",
	} {
		if got := ErrName(err); got != want {
			t.Errorf("ErrName(%v) = %q, want %q", err, got, want)
		}
	}
}
