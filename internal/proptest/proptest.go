// Package proptest runs kernel-enforcement property suites the way
// ContractWarden reports them — every property N times, in a fresh random
// order each round, with a pass/run table — and holds what the suites'
// helper processes share: the "@result" protocol line, errno naming, and
// the ABBA alternation of overhead benchmarks.
//
// Enforcement that binds a whole process (a cgroup, a Landlock domain)
// cannot be tested inside the test process, so the suites re-execute the
// test binary as a helper that enforces, tries, and prints one
// "@result JSON" line of step → outcome ("ok", an errno name such as
// "EACCES", or a value).
package proptest

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// Property is one named property check.
type Property struct {
	Name string
	Run  func(*testing.T)
}

// Run runs every property the number of times the environment variable
// runsEnv says (default 3), in a fresh random order each round, and logs a
// pass/run/skip table (go test -v) after header.
func Run(t *testing.T, runsEnv, header string, props []Property) {
	t.Helper()
	runs := 3
	if v := os.Getenv(runsEnv); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("%s=%q: want a positive integer", runsEnv, v)
		}
		runs = n
	}
	// A property filtered out by -run does not run; one that skips (the
	// kernel lacks what it tests) is counted apart, never as a pass.
	passes, ran, skips := map[string]int{}, map[string]int{}, map[string]int{}
	for round := 1; round <= runs; round++ {
		order := slices.Clone(props)
		rand.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
		for _, p := range order {
			var started, skipped bool
			ok := t.Run(fmt.Sprintf("%s/round%02d", p.Name, round), func(t *testing.T) {
				started = true
				defer func() { skipped = t.Skipped() }()
				p.Run(t)
			})
			switch {
			case !started:
			case skipped:
				skips[p.Name]++
			case ok:
				passes[p.Name]++
				ran[p.Name]++
			default:
				ran[p.Name]++
			}
		}
	}
	var table strings.Builder
	fmt.Fprintf(&table, "\n%s%-40s %5s %5s %5s\n", header, "property", "pass", "runs", "skip")
	total, totalRuns, totalSkips := 0, 0, 0
	for _, p := range props {
		fmt.Fprintf(&table, "%-40s %5d %5d %5d\n", p.Name, passes[p.Name], ran[p.Name], skips[p.Name])
		total, totalRuns, totalSkips = total+passes[p.Name], totalRuns+ran[p.Name], totalSkips+skips[p.Name]
	}
	fmt.Fprintf(&table, "%-40s %5d %5d %5d", "total", total, totalRuns, totalSkips)
	t.Log(table.String())
}

// Result is a helper's observations: step name → "ok", an errno name, or a
// value.
type Result map[string]string

// Set records the outcome of a step.
func (r Result) Set(step string, err error) { r[step] = ErrName(err) }

// ErrName names an outcome: "ok", the errno's name ("EACCES"), or
// "error: " and the message.
func ErrName(err error) string {
	if err == nil {
		return "ok"
	}
	var errno syscall.Errno
	if errors.As(err, &errno) {
		if name := unix.ErrnoName(errno); name != "" {
			return name
		}
	}
	return "error: " + err.Error()
}

// Emit prints the result line on stdout.
func Emit(r Result) {
	b, _ := json.Marshal(r)
	fmt.Printf("@result %s\n", b)
}

// ABBA is the order of the overhead benchmarks' rounds, false for the
// baseline and true for the candidate (B A A B B A A B): each adjacent pair
// holds one of each, so drift and load from neighbours hit both alike.
var ABBA = []bool{false, true, true, false, false, true, true, false}

// Ratios accumulates the rounds of an ABBA benchmark.
type Ratios struct {
	Baseline, Candidate time.Duration // totals
	pairs               []float64
	prev                time.Duration
	rounds              int
}

// Add records round number len(so far) of the ABBA order: candidate says
// which side ran.
func (r *Ratios) Add(candidate bool, d time.Duration) {
	if candidate {
		r.Candidate += d
	} else {
		r.Baseline += d
	}
	if r.rounds%2 == 1 {
		if candidate {
			r.pairs = append(r.pairs, float64(d)/float64(r.prev))
		} else {
			r.pairs = append(r.pairs, float64(r.prev)/float64(d))
		}
	}
	r.prev = d
	r.rounds++
}

// Ratio is candidate ÷ baseline over the totals.
func (r *Ratios) Ratio() float64 { return float64(r.Candidate) / float64(r.Baseline) }

// MedianPair is the median of the adjacent pairs' candidate ÷ baseline.
func (r *Ratios) MedianPair() float64 {
	if len(r.pairs) == 0 {
		return 0
	}
	s := slices.Sorted(slices.Values(r.pairs))
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
