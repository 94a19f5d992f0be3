package sandbox

import (
	"slices"
	"strconv"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// helperBench times Iterations open/read/close transactions on ro/file.txt
// (ContractWarden's file-I/O microbenchmark shape), sandboxed when Variant is
// "sandboxed" and plain otherwise.
func helperBench(a helperArgs) int {
	r := result{}
	if a.Variant == "sandboxed" && !install(a, r) {
		return 0
	}
	path := a.path("ro", "file.txt")
	buf := make([]byte, 4096)
	start := time.Now()
	for range a.Iterations {
		fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			r.set("open", err)
			emit(r)
			return 0
		}
		if _, err := unix.Read(fd, buf); err != nil {
			r.set("read", err)
			emit(r)
			return 0
		}
		unix.Close(fd)
	}
	r["ns"] = strconv.FormatInt(time.Since(start).Nanoseconds(), 10)
	emit(r)
	return 0
}

// BenchmarkOpenReadClose measures the sandbox's cost on open/read/close of a
// file it allows, as the ratio sandboxed/plain. Landlock cannot be lifted,
// so each round is a fresh helper process; rounds alternate in ABBA order
// (P S S P P S S P), b.N transactions each. ns/op is the sandboxed time; the
// plain baseline, the ratio of the totals and the median ratio of adjacent
// pairs are reported beside it. For the 1M-transaction figure run
//
//	go test ./sandbox -run '^$' -bench OpenReadClose -benchtime 1000000x
func BenchmarkOpenReadClose(b *testing.B) {
	requireSandbox(b)
	f := newFixture(b)
	n := max(b.N, 1)
	pattern := []bool{false, true, true, false, false, true, true, false}
	var plain, sandboxed time.Duration
	var pairs []float64
	var prev time.Duration
	for round, sb := range pattern {
		a := f.a
		a.Iterations = n
		a.Variant = "plain"
		if sb {
			a.Variant = "sandboxed"
		}
		r, err := collect(helperCmd("bench", a))
		if err != nil {
			b.Fatal(err)
		}
		ns, err := strconv.ParseInt(r["ns"], 10, 64)
		if err != nil {
			b.Fatalf("bench helper: %v", r)
		}
		d := time.Duration(ns)
		if sb {
			sandboxed += d
		} else {
			plain += d
		}
		if round%2 == 1 {
			if sb {
				pairs = append(pairs, float64(d)/float64(prev))
			} else {
				pairs = append(pairs, float64(prev)/float64(d))
			}
		}
		prev = d
	}
	per := float64(len(pattern) / 2 * n)
	b.ReportMetric(float64(sandboxed.Nanoseconds())/per, "ns/op")
	b.ReportMetric(float64(plain.Nanoseconds())/per, "plain-ns/op")
	b.ReportMetric(float64(sandboxed)/float64(plain), "ratio")
	slices.Sort(pairs)
	b.ReportMetric((pairs[len(pairs)/2-1]+pairs[len(pairs)/2])/2, "median-pair-ratio")
}
