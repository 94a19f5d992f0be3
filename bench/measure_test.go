package main

import (
	"context"
	"errors"
	"math"
	"slices"
	"testing"
	"time"
)

func TestQuantile(t *testing.T) {
	v := []float64{5, 1, 4, 2, 3}
	for _, c := range []struct{ q, want float64 }{{0, 1}, {0.25, 2}, {0.5, 3}, {0.75, 4}, {1, 5}} {
		if got := quantile(v, c.q); got != c.want {
			t.Errorf("quantile(%v, %v) = %v, want %v", v, c.q, got, c.want)
		}
	}
	if got := median([]float64{1, 2, 3, 10}); got != 2.5 {
		t.Errorf("median of four = %v, want 2.5 (interpolated)", got)
	}
	if !math.IsNaN(median(nil)) {
		t.Error("median of nothing is not NaN")
	}
	if !slices.Equal(v, []float64{5, 1, 4, 2, 3}) {
		t.Error("quantile sorted its argument in place")
	}
}

// The order of the arms rotates every round, so none always runs first.
func TestRoundsRotate(t *testing.T) {
	var order []string
	mk := func(name string, v float64) arm {
		return arm{name: name, run: func(context.Context) (float64, error) { order = append(order, name); return v, nil }}
	}
	s, err := rounds(context.Background(), []arm{mk("a", 1), mk("b", 2), mk("c", 4)}, 0, 3, 3)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"a", "b", "c", "b", "c", "a", "c", "a", "b"}
	if !slices.Equal(order, want) {
		t.Fatalf("order %v, want %v", order, want)
	}
	c := compare(s, 0, 2)
	if c.Cost != 4 || c.CostOfMedians != 4 || c.Rounds != 3 || c.PairP25 != 4 || c.PairP75 != 4 {
		t.Fatalf("compare = %+v, want cost 4 over 3 rounds", c)
	}
}

func TestRoundsStopsOnError(t *testing.T) {
	boom := errors.New("boom")
	n := 0
	_, err := rounds(context.Background(), []arm{{name: "x", run: func(context.Context) (float64, error) {
		n++
		if n == 2 {
			return 0, boom
		}
		return 1, nil
	}}}, time.Hour, 5, 5)
	if !errors.Is(err, boom) || n != 2 {
		t.Fatalf("err %v after %d runs, want boom after 2", err, n)
	}
}

// Per-round ratios compare the arms on the same inputs.
func TestSameInputs(t *testing.T) {
	seen := make([][]int, 2)
	ops := []op{
		func(_ context.Context, i int) error { seen[0] = append(seen[0], i); return nil },
		func(_ context.Context, i int) error {
			seen[1] = append(seen[1], i)
			time.Sleep(50 * time.Microsecond)
			return nil
		},
	}
	arms := sameInputs(2*time.Millisecond, []string{"fast", "slow"}, ops...)
	run := func() {
		for _, a := range arms {
			if _, err := a.run(context.Background()); err != nil {
				t.Fatal(err)
			}
		}
	}
	run() // the first round also calibrates, on both ops
	calib := len(seen[0])
	seen[0], seen[1] = nil, nil
	run()
	run()
	if len(seen[1]) == 0 || !slices.Equal(seen[0], seen[1]) {
		t.Fatalf("arms saw different inputs after %d calibration runs:\n%v\n%v", calib, seen[0], seen[1])
	}
}

func TestSSEData(t *testing.T) {
	stream := "event: message\nid: 1\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\"}\n\n" +
		"event: message\nid: 2\ndata: {\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{\"ok\":true}}\n\n"
	got := string(sseData([]byte(stream)))
	if got != `{"jsonrpc":"2.0","id":7,"result":{"ok":true}}` {
		t.Fatalf("sseData = %q", got)
	}
	if sseData([]byte("event: message\ndata: {\"method\":\"x\"}\n\n")) != nil {
		t.Fatal("a stream without a response yielded data")
	}
}

func TestDollarize(t *testing.T) {
	if got := dollarize("a = ? AND b IN (?, ?)"); got != "a = $1 AND b IN ($2, $3)" {
		t.Fatalf("dollarize = %q", got)
	}
}
