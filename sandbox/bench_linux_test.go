package sandbox

import (
	"strconv"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/tenantmcp/tenantmcp/internal/proptest"
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
			r.Set("open", err)
			proptest.Emit(r)
			return 0
		}
		if _, err := unix.Read(fd, buf); err != nil {
			r.Set("read", err)
			proptest.Emit(r)
			return 0
		}
		unix.Close(fd)
	}
	r["ns"] = strconv.FormatInt(time.Since(start).Nanoseconds(), 10)
	proptest.Emit(r)
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
	var ratios proptest.Ratios
	for _, sb := range proptest.ABBA {
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
		ratios.Add(sb, time.Duration(ns))
	}
	per := float64(len(proptest.ABBA) / 2 * n)
	b.ReportMetric(float64(ratios.Candidate.Nanoseconds())/per, "ns/op")
	b.ReportMetric(float64(ratios.Baseline.Nanoseconds())/per, "plain-ns/op")
	b.ReportMetric(ratios.Ratio(), "ratio")
	b.ReportMetric(ratios.MedianPair(), "median-pair-ratio")
}
