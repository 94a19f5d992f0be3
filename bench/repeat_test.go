package main

import (
	"image/color"
	"image/png"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tenantmcp/tenantmcp/internal/benchdata"
)

func twoRuns() []*Report {
	mk := func(load string, p1, p5 float64, p2 Row) *Report {
		return &Report{Machine: Machine{CPU: "test cpu", Cores: 2, LoadStart: load, LoadEnd: "0.50 1 1"}, Rows: []Row{
			{Figure: "P1", Case: "guard path", Unit: unitMicros, BaselineValue: 500, CandidateValue: 500 * p1, Cost: p1},
			{Figure: "P5", Case: "SQLite, 1 client", Unit: unitCalls, BaselineValue: 300, CandidateValue: 300 / p5, Cost: p5},
			p2,
		}}
	}
	return []*Report{
		mk("2.50 1 1", 1.5, 1.2, Row{Figure: "P2", Case: "PostgreSQL", Skipped: "no DSN"}),
		mk("7.25 1 1", 1.7, 1.4, Row{Figure: "P2", Case: "PostgreSQL", Unit: unitMicros, BaselineValue: 1000, CandidateValue: 1100, Cost: 1.1}),
		mk("3 1 1", 1.6, 1.0, Row{Figure: "P2", Case: "PostgreSQL", Failed: "refused"}),
	}
}

// The summary keeps one series per figure and case, in first-seen order,
// with the ratios of the runs that measured it and the count of those
// that did not.
func TestSummarize(t *testing.T) {
	sum := summarize(twoRuns())
	if len(sum.Series) != 3 {
		t.Fatalf("%d series, want 3", len(sum.Series))
	}
	p1, p5, p2 := sum.Series[0], sum.Series[1], sum.Series[2]
	if p1.Figure != "P1" || p5.Figure != "P5" || p2.Figure != "P2" {
		t.Fatalf("order %s %s %s", p1.Figure, p5.Figure, p2.Figure)
	}
	if p1.Min() != 1.5 || p1.Max() != 1.7 || math.Abs(p1.Median()-1.6) > 1e-9 {
		t.Errorf("P1 range %v–%v median %v, want 1.5–1.7 median 1.6", p1.Min(), p1.Max(), p1.Median())
	}
	if p5.Min() != 1.0 || p5.Max() != 1.4 {
		t.Errorf("P5 range %v–%v, want 1.0–1.4", p5.Min(), p5.Max())
	}
	if len(p2.Costs) != 1 || p2.Costs[0] != 1.1 || p2.Missing != 2 || p2.Reason != "failed: refused" {
		t.Errorf("P2 %+v: want one ratio 1.1 and two missing runs, the last failed", p2)
	}
	if lo, hi := sum.loadRange(); lo != 0.5 || hi != 7.25 {
		t.Errorf("load range %v–%v, want 0.5–7.25", lo, hi)
	}
	var b strings.Builder
	sum.writeMarkdown(&b)
	for _, want := range []string{"| P1 | guard path | 500 µs/op | 750–850 µs/op | **1.50–1.70** | 1.60 | 3 |", "load average 0.5–7.2 over the runs"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("summary lacks %q:\n%s", want, b.String())
		}
	}
}

// -replot reads both a plain run's JSON and a -repeat summary's, and
// refuses a file that is neither.
func TestReadReports(t *testing.T) {
	dir := t.TempDir()
	runs := twoRuns()
	one, many, bad := filepath.Join(dir, "one.json"), filepath.Join(dir, "many.json"), filepath.Join(dir, "bad.json")
	if err := runs[0].writeJSON(one); err != nil {
		t.Fatal(err)
	}
	if err := summarize(runs[1:]).writeJSON(many); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bad, []byte(`{"x": 1}`), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := readReports([]string{one, many})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 || got[0].Rows[0].Cost != 1.5 || got[2].Rows[0].Cost != 1.6 {
		t.Fatalf("read %d reports, want the three in order", len(got))
	}
	if _, err := readReports([]string{bad}); err == nil {
		t.Error("a JSON file with neither rows nor runs was accepted")
	}
}

// The plot draws each series' median dot and min–max bar where the axis
// puts them, the goal tick in red, and grows a line per series.
func TestPlot(t *testing.T) {
	sum := summarize(twoRuns())
	img := sum.plot()
	g := plotGeometry{x0: 2*margin + labelChars*charW, xMax: sum.axisMax()}
	if g.xMax < 1.7 {
		t.Fatalf("axis ends at %v, below the largest ratio", g.xMax)
	}
	mid := func(i int) int { return 3*lineH + i*lineH + lineH/2 }
	at := func(x, y int) [3]uint8 {
		c := img.RGBAAt(x, y)
		return [3]uint8{c.R, c.G, c.B}
	}
	bar, goal := rgbOf(colBar), rgbOf(colGoal)
	// P1: median 1.6 (dot), bar from 1.5 to 1.7, goal 1.15.
	if c := at(g.x(1.6), mid(0)); c != rgbOf(colMedian) {
		t.Errorf("P1 median pixel %v, want the median colour", c)
	}
	if c := at(g.x(1.69), mid(0)); c != bar {
		t.Errorf("P1 bar pixel near its max %v, want the bar colour", c)
	}
	if c := at(g.x(1.8), mid(0)); c == bar {
		t.Error("P1 bar drawn beyond its max")
	}
	if c := at(g.x(1.15), mid(0)-8); c != goal {
		t.Errorf("P1 goal tick %v, want red", c)
	}
	// P2: one ratio, 1.1: the dot is there, nothing at 1.3.
	if c := at(g.x(1.1), mid(2)); c != rgbOf(colMedian) {
		t.Errorf("P2 median pixel %v", c)
	}
	dir := t.TempDir()
	p := filepath.Join(dir, "p.png")
	if err := sum.writePNG(p); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	dec, err := png.Decode(f)
	if err != nil {
		t.Fatal(err)
	}
	more := summarize(append(twoRuns(), &Report{Rows: []Row{{Figure: "P3", Case: "extra", Cost: 1.2}}}))
	if h1, h2 := dec.Bounds().Dy(), more.plot().Bounds().Dy(); h2 != h1+lineH {
		t.Errorf("a fourth series made the plot %d px high, want %d", h2, h1+lineH)
	}
}

func TestParseP2Sizes(t *testing.T) {
	got, err := parseP2Sizes("10k, 1m")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].size.Bookings() != 10_000 || got[1].size != benchdata.Default {
		t.Fatalf("parsed %+v", got)
	}
	for _, s := range p2SizeList {
		if s.size.Bookings()/s.size.Chains != benchdata.Default.Bookings()/benchdata.Default.Chains {
			t.Errorf("%s: %d bookings per chain, want the default's", s.name, s.size.Bookings()/s.size.Chains)
		}
	}
	if _, err := parseP2Sizes("10k,2M"); err == nil {
		t.Error("an unknown size was accepted")
	}
	e := &env{cfg: config{p2DB: "tenantmcp_bench"}, p2cur: got[0]}
	if db := e.p2DB(); db != "tenantmcp_bench_10k" {
		t.Errorf("10k database %q", db)
	}
	e.p2cur = got[1]
	if db := e.p2DB(); db != "tenantmcp_bench" {
		t.Errorf("1M database %q, want the shared default", db)
	}
}

func rgbOf(c color.RGBA) [3]uint8 { return [3]uint8{c.R, c.G, c.B} }

// Labels stay within the label column and keep what tells rows apart.
func TestShortLabel(t *testing.T) {
	for _, c := range []struct {
		s    Series
		want string
	}{
		{Series{Figure: "P2", Case: "PostgreSQL (RLS), bookings by date (1 chain, first 50 of a month), 100k bookings"}, "P2 PostgreSQL, first 50 of a month, 100k"},
		{Series{Figure: "P2", Case: "MariaDB (JSON_TABLE), revenue by hotel (1 chain, a quarter, aggregate)"}, "P2 MariaDB, revenue per hotel"},
		{Series{Figure: "P5", Case: "tools/call list_bookings, SQLite, 128 clients"}, "P5 SQLite, 128 clients"},
	} {
		if got := shortLabel(c.s); got != c.want {
			t.Errorf("shortLabel(%q) = %q, want %q", c.s.Case, got, c.want)
		}
	}
	long := shortLabel(Series{Figure: "P9", Case: strings.Repeat("x", 200)})
	if n := len([]rune(long)); n != labelChars || !strings.HasSuffix(long, "..") {
		t.Errorf("a long case gave a %d-rune label %q", n, long)
	}
}

// Round trips counted at the wire show in a run's table and, as ranges,
// in the summary; rows without them add no such table.
func TestRoundTripsReported(t *testing.T) {
	mk := func(base, cand float64) *Report {
		return &Report{Rows: []Row{
			{Figure: "P5", Case: "PostgreSQL, 1 client", Unit: unitCalls, BaselineValue: 400, CandidateValue: 200, Cost: 2,
				BaselineRoundTrips: base, CandidateRoundTrips: cand, RoundTripOps: 200},
			{Figure: "P1", Case: "guard path", Unit: unitMicros, BaselineValue: 500, CandidateValue: 600, Cost: 1.2},
		}}
	}
	var b strings.Builder
	mk(1, 3.5).writeMarkdown(&b)
	if want := "| P5 | PostgreSQL, 1 client | 1.00 | 3.50 | 200 |"; !strings.Contains(b.String(), want) {
		t.Errorf("run table lacks %q:\n%s", want, b.String())
	}
	if strings.Contains(b.String(), "| P1 | guard path | 0.00") {
		t.Errorf("a row without a count shows round trips:\n%s", b.String())
	}
	sum := summarize([]*Report{mk(1, 3.5), mk(1, 3), mk(1.01, 3.5)})
	b.Reset()
	sum.writeMarkdown(&b)
	if want := "| P5 | PostgreSQL, 1 client | 1.00–1.01 | 3.00–3.50 | 3 |"; !strings.Contains(b.String(), want) {
		t.Errorf("summary lacks %q:\n%s", want, b.String())
	}
	b.Reset()
	(&Summary{Series: summarize(twoRuns()).Series}).writeMarkdown(&b)
	if strings.Contains(b.String(), "round trips") {
		t.Errorf("a summary without counts has a round-trip table:\n%s", b.String())
	}
}
