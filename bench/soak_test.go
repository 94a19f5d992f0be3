package main

import (
	"os"
	"strings"
	"testing"
	"time"
)

// The soak's readers of /proc see this process.
func TestSoakProcReaders(t *testing.T) {
	if _, err := os.Stat("/proc/self/status"); err != nil {
		t.Skip("no /proc here")
	}
	rss, err := procRSS(os.Getpid())
	if err != nil || rss <= 0 {
		t.Errorf("procRSS = %d, %v", rss, err)
	}
	// Burn a little CPU so that the reading is above zero.
	end := time.Now().Add(30 * time.Millisecond)
	for x := 0; time.Now().Before(end); x++ {
		_ = x * x
	}
	cpu, err := procCPU(os.Getpid())
	if err != nil || cpu <= 0 {
		t.Errorf("procCPU = %v, %v", cpu, err)
	}
	if _, err := procRSS(1 << 30); err == nil {
		t.Error("procRSS of a pid that does not exist: no error")
	}
}

// The summary gives first, last and max of each series; the loaded
// series skip the sample taken before the load; the CSV has a line per
// sample.
func TestSoakSummary(t *testing.T) {
	samples := []soakSample{
		{At: 0, RSSKiB: 1024, HeapMiB: 2, FDs: 10, Sockets: 2, Goroutines: 5, DBConns: 1},
		{At: 30 * time.Second, RSSKiB: 4096, HeapMiB: 3, FDs: 30, Sockets: 20, Goroutines: 40, DBConns: 8, CPU: 20, OK: 100, Rate: 3.3, P99: 50},
		{At: time.Minute, RSSKiB: 3072, HeapMiB: 2.5, FDs: 25, Sockets: 18, Goroutines: 30, DBConns: 8, CPU: 10, OK: 90, Failed: 1, Rate: 3.0, P99: 70},
	}
	sum := soakSummary(samples, 190, 0, 1, map[string]int{"create_booking: boom": 1}, "")
	for _, want := range []string{
		"| RSS MiB | 1.0 | 3.0 | 4.0 | +2.0 |",
		"| goroutines | 5 | 30 | 40 | +25 |",
		"| heap in use MiB | 2.0 | 2.5 | 3.0 | +0.5 |",
		"| CPU % (one core) | 20 | 10 | 20 | -10 |",
		"| p99 ms | 50.0 | 70.0 | 70.0 | +20.0 |",
		"190 ok, 0 limited (429 or busy), 1 failed",
		"- 1 × create_booking: boom",
	} {
		if !strings.Contains(sum, want) {
			t.Errorf("summary lacks %q:\n%s", want, sum)
		}
	}
	csv := strings.Split(strings.TrimSpace(string(soakCSV(samples))), "\n")
	if len(csv) != 4 || !strings.HasPrefix(csv[2], "30,4096,3.0,30,20,40,8,20.0,100,0,0,") {
		t.Errorf("CSV:\n%s", strings.Join(csv, "\n"))
	}
	if row := samples[0].row(); strings.Count(row, "|") != strings.Count(soakTableHeader, "|") {
		t.Errorf("row %q does not fit the header %q", row, soakTableHeader)
	}
}
