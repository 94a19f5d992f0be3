package main

import (
	"context"
	"fmt"
	"math"
	"slices"
	"time"
)

// An arm is one contender of a comparison: a baseline or a candidate. Run
// performs one timed repetition and returns its cost in nanoseconds per
// operation (for throughput runs: the window's duration divided by the
// operations completed in it).
type arm struct {
	name string
	run  func(ctx context.Context) (nsPerOp float64, err error)
}

// samples holds, per arm, one value per round; round r of every arm ran
// back to back, so values of the same round share the machine's load.
type samples [][]float64

// rounds runs the arms in rounds until budget has passed and at least
// minRounds rounds are done, or maxRounds are done. The order rotates
// every round (A B C, B C A, C A B, …) so that no arm always runs first,
// after a cold cache, or right after the same neighbour.
func rounds(ctx context.Context, arms []arm, budget time.Duration, minRounds, maxRounds int) (samples, error) {
	s := make(samples, len(arms))
	start := time.Now()
	for r := 0; r < maxRounds; r++ {
		if r >= minRounds && time.Since(start) >= budget {
			break
		}
		for k := range arms {
			i := (r + k) % len(arms)
			v, err := arms[i].run(ctx)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", arms[i].name, err)
			}
			s[i] = append(s[i], v)
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// comparison summarises candidate arm c against baseline arm b of s.
type comparison struct {
	BaseNs, CandNs float64 // medians, ns per operation
	// Cost is the median of the per-round ratios cand/base: > 1 means the
	// candidate costs more. Each ratio compares two runs made back to
	// back, under the same load, so it drifts less than either time.
	Cost float64
	// CostOfMedians is CandNs / BaseNs, for comparison.
	CostOfMedians float64
	// PairP25 and PairP75 are quartiles of the per-round ratios: how much
	// the ratio moved while the machine's load changed.
	PairP25, PairP75 float64
	Rounds           int
}

func compare(s samples, b, c int) comparison {
	n := min(len(s[b]), len(s[c]))
	ratios := make([]float64, n)
	for i := range n {
		ratios[i] = s[c][i] / s[b][i]
	}
	cmp := comparison{BaseNs: median(s[b]), CandNs: median(s[c]), Rounds: n}
	cmp.CostOfMedians = cmp.CandNs / cmp.BaseNs
	cmp.Cost, cmp.PairP25, cmp.PairP75 = median(ratios), quantile(ratios, 0.25), quantile(ratios, 0.75)
	return cmp
}

func median(v []float64) float64 { return quantile(v, 0.5) }

// quantile returns the q-quantile of v by linear interpolation between
// closest ranks; NaN for an empty v.
func quantile(v []float64, q float64) float64 {
	if len(v) == 0 {
		return math.NaN()
	}
	s := slices.Clone(v)
	slices.Sort(s)
	pos := q * float64(len(s)-1)
	lo := int(math.Floor(pos))
	hi := int(math.Ceil(pos))
	return s[lo] + (s[hi]-s[lo])*(pos-float64(lo))
}

// op is one operation on input i (an index the operation maps to its
// own inputs: a tenant, a date window).
type op func(ctx context.Context, i int) error

// sameInputs turns ops into arms whose repetitions run a batch of n
// operations each, n chosen so that a batch of the slowest op takes about
// target: short operations are timed in batches (the clock's cost and
// resolution vanish), long ones one at a time. In round r every arm runs
// inputs r*n … r*n+n-1, so the arms of a round do the same work and
// their ratio compares like with like.
func sameInputs(target time.Duration, names []string, ops ...op) []arm {
	n := 0
	arms := make([]arm, len(ops))
	for k, o := range ops {
		round := 0
		arms[k] = arm{name: names[k], run: func(ctx context.Context) (float64, error) {
			if n == 0 {
				var err error
				if n, err = calibrate(ctx, target, ops); err != nil {
					return 0, err
				}
			}
			base := round * n
			round++
			start := time.Now()
			for j := range n {
				if err := o(ctx, base+j); err != nil {
					return 0, err
				}
			}
			return float64(time.Since(start).Nanoseconds()) / float64(n), nil
		}}
	}
	return arms
}

// calibrate runs each op (which also warms it up) for a tenth of target
// and returns how many runs of the slowest fill target.
func calibrate(ctx context.Context, target time.Duration, ops []op) (int, error) {
	var slowest float64
	for _, o := range ops {
		start := time.Now()
		runs := 0
		for time.Since(start) < target/10 || runs < 2 {
			if err := o(ctx, runs); err != nil {
				return 0, err
			}
			runs++
		}
		slowest = max(slowest, float64(time.Since(start))/float64(runs))
	}
	return max(1, int(float64(target)/slowest)), nil
}
