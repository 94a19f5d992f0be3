package egress

import (
	"strconv"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/tenantmcp/tenantmcp/internal/proptest"
)

// helperBench times three loopback loops, unguarded and guarded, in
// alternating rounds of the same process:
//
//	tcp_connect: socket, connect, write 64 B, close (with RST, no TIME_WAIT)
//	tcp_write:   64 B write on one established connection
//	udp_sendto:  64 B sendto on an unconnected socket
func helperBench(a helperArgs) int {
	r := result{}
	n := a.Iterations
	payload := make([]byte, 64)
	linger := &unix.Linger{Onoff: 1, Linger: 0}
	dst := loop4(a.AllowTCP)
	_, tcpSA := sockaddr(dst)
	_, udpSA := sockaddr(loop4(a.AllowUDP))
	loops := map[string]func() error{
		"tcp_connect": func() error {
			for range n {
				fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
				if err != nil {
					return err
				}
				unix.SetsockoptLinger(fd, unix.SOL_SOCKET, unix.SO_LINGER, linger)
				if err := unix.Connect(fd, tcpSA); err != nil {
					unix.Close(fd)
					return err
				}
				if _, err := unix.Write(fd, payload); err != nil {
					unix.Close(fd)
					return err
				}
				unix.Close(fd)
			}
			return nil
		},
		"tcp_write": func() error {
			fd, err := dial(unix.SOCK_STREAM, dst)
			if err != nil {
				return err
			}
			defer unix.Close(fd)
			for range n {
				if _, err := unix.Write(fd, payload); err != nil {
					return err
				}
			}
			return nil
		},
		"udp_sendto": func() error {
			fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
			if err != nil {
				return err
			}
			defer unix.Close(fd)
			for range n {
				if err := unix.Sendto(fd, payload, 0, udpSA); err != nil {
					return err
				}
			}
			return nil
		},
	}
	// ABBA order over 8 rounds (U G G U U G G U): each adjacent pair holds
	// one guarded and one unguarded round; drift and load from neighbours
	// hit both sides alike.
	pattern := proptest.ABBA
	// In-kernel cost per program run, from the kernel's BPF run-time
	// statistics (enabled only while this file descriptor is open).
	if st, err := ebpf.EnableStats(uint32(unix.BPF_STATS_RUN_TIME)); err == nil {
		defer st.Close()
	}
	progTime := map[string]time.Duration{}
	progRuns := map[string]uint64{}
	if only, ok := loops[a.Variant]; ok {
		loops = map[string]func() error{a.Variant: only}
	}
	ratios := map[string]*proptest.Ratios{}
	for name := range loops {
		ratios[name] = &proptest.Ratios{}
	}
	for _, guarded := range pattern {
		var g *Guard
		if guarded {
			var err error
			if g, err = installFor(a, policyFor(a)); err != nil {
				r.Set("install", err)
				proptest.Emit(r)
				return 0
			}
		}
		for name, loop := range loops {
			start := time.Now()
			if err := loop(); err != nil {
				r.Set(name, err)
				proptest.Emit(r)
				return 0
			}
			ratios[name].Add(guarded, time.Since(start))
		}
		if g != nil {
			for name, p := range map[string]*ebpf.Program{
				"connect4": g.impl.objs.Connect4, "sendmsg4": g.impl.objs.Sendmsg4, "egress": g.impl.objs.Egress,
			} {
				if st, err := p.Stats(); err == nil {
					progTime[name] += st.Runtime
					progRuns[name] += st.RunCount
				}
			}
			if err := g.Close(); err != nil {
				r.Set("close", err)
				proptest.Emit(r)
				return 0
			}
		}
	}
	per := float64(len(pattern) / 2 * n)
	for name, rs := range ratios {
		r[name+"_guarded"] = strconv.FormatFloat(float64(rs.Candidate.Nanoseconds())/per, 'f', 1, 64)
		r[name+"_unguarded"] = strconv.FormatFloat(float64(rs.Baseline.Nanoseconds())/per, 'f', 1, 64)
		r[name+"_median_pair_ratio"] = strconv.FormatFloat(rs.MedianPair(), 'f', 4, 64)
	}
	for name, runs := range progRuns {
		if runs > 0 {
			r[name+"_ns_per_run"] = strconv.FormatFloat(float64(progTime[name].Nanoseconds())/float64(runs), 'f', 1, 64)
		}
	}
	r["install"] = "ok"
	proptest.Emit(r)
	return 0
}

// BenchmarkOverhead measures the guard's cost on loopback traffic as a ratio
// guarded/unguarded, both measured in the same helper process in alternating
// rounds. ns/op is the guarded time; the unguarded baseline, the ratio of the
// totals and the median ratio of adjacent guarded/unguarded rounds are
// reported beside it. b.N iterations run in each of 8 rounds.
func BenchmarkOverhead(b *testing.B) {
	requireGuard(b)
	for _, loop := range []string{"tcp_connect", "tcp_write", "udp_sendto"} {
		b.Run(loop, func(b *testing.B) {
			a := benchFixture(b)
			a.Iterations = max(b.N, 1)
			a.Variant = loop
			res, err := collect(helperCmd("bench", a))
			if err != nil {
				b.Fatal(err)
			}
			if res["install"] != "ok" {
				b.Fatalf("bench helper: %v", res)
			}
			g, _ := strconv.ParseFloat(res[loop+"_guarded"], 64)
			u, _ := strconv.ParseFloat(res[loop+"_unguarded"], 64)
			if u == 0 {
				b.Fatalf("no baseline: %v", res)
			}
			b.ReportMetric(g, "ns/op")
			b.ReportMetric(u, "unguarded-ns/op")
			b.ReportMetric(g/u, "ratio")
			if m, err := strconv.ParseFloat(res[loop+"_median_pair_ratio"], 64); err == nil {
				b.ReportMetric(m, "median-pair-ratio")
			}
			// The programs this loop runs (the others ran only for the canary).
			progs := map[string][]string{
				"tcp_connect": {"connect4", "egress"},
				"tcp_write":   {"egress"},
				"udp_sendto":  {"sendmsg4", "egress"},
			}[loop]
			for _, prog := range progs {
				if v, err := strconv.ParseFloat(res[prog+"_ns_per_run"], 64); err == nil {
					b.ReportMetric(v, prog+"-bpf-ns/run")
				}
			}
		})
	}
}

// benchFixture opens discard sinks for the benchmark.
func benchFixture(b *testing.B) helperArgs {
	b.Helper()
	return helperArgs{AllowTCP: tcpSink(b, "tcp4", "127.0.0.1:0").Port, AllowUDP: udpSink(b).Port, DenyTCP: 1, DenyUDP: 1}
}
