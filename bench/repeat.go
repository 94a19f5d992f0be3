package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strings"
)

// Repeated runs: -repeat N runs the selected figures N times and ends
// with a summary table giving, per row, the range of its cost ratio over
// the runs; -replot reads the JSON of earlier runs and prints (and plots)
// the same summary without measuring. One run's ratio on a shared 2-core
// machine moves by ±10–20 %; the range over several runs is what the
// README quotes.

// Series is one row (a figure and case) over several runs.
type Series struct {
	Figure string `json:"figure"`
	Case   string `json:"case"`
	Unit   string `json:"unit"`
	// Costs are the row's cost ratios, one per run that measured it.
	Costs []float64 `json:"costs"`
	// Baselines and Candidates are the medians of each of those runs, in Unit.
	Baselines  []float64 `json:"baselines"`
	Candidates []float64 `json:"candidates"`
	// BaselineRoundTrips and CandidateRoundTrips are the round trips per
	// operation counted at the wire, one per run that counted them.
	BaselineRoundTrips  []float64 `json:"baseline_round_trips,omitempty"`
	CandidateRoundTrips []float64 `json:"candidate_round_trips,omitempty"`
	// Missing counts the runs where the row was skipped or failed.
	Missing int    `json:"missing,omitempty"`
	Reason  string `json:"reason,omitempty"` // the last skip or failure
}

// Min, Median and Max of the series' costs (NaN when none was measured).
func (s Series) Min() float64    { return quantile(s.Costs, 0) }
func (s Series) Median() float64 { return median(s.Costs) }
func (s Series) Max() float64    { return quantile(s.Costs, 1) }

// Summary gathers the runs of one -repeat (or -replot) invocation.
type Summary struct {
	Runs   []*Report `json:"runs"`
	Series []Series  `json:"series"`
}

// summarize keys rows by figure and case, in the order they first appear.
func summarize(runs []*Report) *Summary {
	sum := &Summary{Runs: runs}
	index := map[string]int{}
	for _, rep := range runs {
		for _, r := range rep.Rows {
			k := r.Figure + "\x00" + r.Case
			i, ok := index[k]
			if !ok {
				i = len(sum.Series)
				index[k] = i
				sum.Series = append(sum.Series, Series{Figure: r.Figure, Case: r.Case, Unit: r.Unit})
			}
			s := &sum.Series[i]
			switch {
			case r.Failed != "":
				s.Missing++
				s.Reason = "failed: " + r.Failed
			case r.Skipped != "":
				s.Missing++
				s.Reason = "skipped: " + r.Skipped
			case math.IsNaN(r.Cost) || math.IsInf(r.Cost, 0):
				s.Missing++
				s.Reason = "no ratio"
			default:
				s.Costs = append(s.Costs, r.Cost)
				s.Baselines = append(s.Baselines, r.BaselineValue)
				s.Candidates = append(s.Candidates, r.CandidateValue)
				if r.RoundTripOps > 0 {
					s.BaselineRoundTrips = append(s.BaselineRoundTrips, r.BaselineRoundTrips)
					s.CandidateRoundTrips = append(s.CandidateRoundTrips, r.CandidateRoundTrips)
				}
			}
		}
	}
	return sum
}

// runsPerRow says how many runs measured each row: "3 runs", or
// "2–3 runs per row" when rows from different invocations are combined.
func (sum *Summary) runsPerRow() string {
	lo, hi := math.MaxInt, 0
	for _, s := range sum.Series {
		lo, hi = min(lo, len(s.Costs)), max(hi, len(s.Costs))
	}
	switch {
	case hi == 0:
		return "no runs"
	case lo == hi:
		return fmt.Sprintf("%d runs", hi)
	}
	return fmt.Sprintf("%d–%d runs per row", lo, hi)
}

// loadRange is the lowest and highest 1-minute load average seen at the
// start or end of any run.
func (sum *Summary) loadRange() (lo, hi float64) {
	lo, hi = math.Inf(1), math.Inf(-1)
	for _, rep := range sum.Runs {
		for _, l := range []string{rep.Machine.LoadStart, rep.Machine.LoadEnd} {
			var v float64
			if _, err := fmt.Sscan(l, &v); err == nil {
				lo, hi = min(lo, v), max(hi, v)
			}
		}
	}
	if math.IsInf(lo, 1) {
		return math.NaN(), math.NaN()
	}
	return lo, hi
}

func span(vs []float64, unit string) string {
	if len(vs) == 0 {
		return "—"
	}
	lo, hi := slices.Min(vs), slices.Max(vs)
	if len(vs) == 1 || value(lo, "") == value(hi, "") {
		return value(lo, unit)
	}
	return strings.TrimSpace(value(lo, "")) + "–" + value(hi, unit)
}

// writeMarkdown prints the summary table: per row, the range of the cost
// over the runs and of the two medians.
func (sum *Summary) writeMarkdown(w io.Writer) {
	fmt.Fprintf(w, "## Summary of %d runs (%s)\n\n", len(sum.Runs), sum.runsPerRow())
	fmt.Fprintln(w, "Cost × min–max (median) over the runs that measured the row; Baseline and Candidate are the ranges of the runs' medians.")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| Figure | Case | Baseline | Candidate | Cost × min–max | median | Runs |")
	fmt.Fprintln(w, "| --- | --- | ---: | ---: | ---: | ---: | ---: |")
	for _, s := range sum.Series {
		if len(s.Costs) == 0 {
			fmt.Fprintf(w, "| %s | %s | %s | — | — | — | 0 |\n", s.Figure, s.Case, cell(s.Reason))
			continue
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s | **%.2f–%.2f** | %.2f | %d |\n", s.Figure, s.Case,
			span(s.Baselines, s.Unit), span(s.Candidates, s.Unit), s.Min(), s.Max(), s.Median(), len(s.Costs))
	}
	head := false
	for _, s := range sum.Series {
		if len(s.BaselineRoundTrips) == 0 {
			continue
		}
		if !head {
			head = true
			fmt.Fprintln(w)
			fmt.Fprintln(w, "Database round trips per operation counted at the wire, min–max over the runs:")
			fmt.Fprintln(w)
			fmt.Fprintln(w, "| Figure | Case | Baseline round trips/op | Candidate round trips/op | Runs |")
			fmt.Fprintln(w, "| --- | --- | ---: | ---: | ---: |")
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s | %d |\n", s.Figure, s.Case,
			strings.TrimSpace(span(s.BaselineRoundTrips, "")), strings.TrimSpace(span(s.CandidateRoundTrips, "")), len(s.BaselineRoundTrips))
	}
	fmt.Fprintln(w)
	if len(sum.Runs) > 0 {
		m := sum.Runs[0].Machine
		lo, hi := sum.loadRange()
		fmt.Fprintf(w, "Machine: %s, %d cores, kernel %s, %s. 1-minute load average %.1f–%.1f over the runs.\n",
			m.CPU, m.Cores, m.Kernel, m.Go, lo, hi)
	}
}

func (sum *Summary) writeJSON(path string) error {
	b, err := json.MarshalIndent(sum, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

// readReports reads the JSON files of earlier runs: each holds one
// Report (a plain run's -json) or a Summary (a -repeat run's -json).
func readReports(paths []string) ([]*Report, error) {
	var out []*Report
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			return nil, err
		}
		var probe struct {
			Runs []*Report `json:"runs"`
			Rows []Row     `json:"rows"`
		}
		if err := json.Unmarshal(b, &probe); err != nil {
			return nil, fmt.Errorf("%s: %w", p, err)
		}
		switch {
		case probe.Runs != nil:
			out = append(out, probe.Runs...)
		case probe.Rows != nil:
			var rep Report
			if err := json.Unmarshal(b, &rep); err != nil {
				return nil, fmt.Errorf("%s: %w", p, err)
			}
			out = append(out, &rep)
		default:
			return nil, fmt.Errorf("%s: neither a bench report (rows) nor a -repeat summary (runs)", p)
		}
	}
	return out, nil
}

// finish writes what the runs leave behind: with -repeat above 1 the
// summary table and, with -json, the summary (every run and the series);
// otherwise, with -json, the one run's report. -png plots the summary of
// however many runs there were.
func finish(cfg config, runs []*Report) int {
	code := 0
	sum := summarize(runs)
	if len(runs) > 1 {
		sum.writeMarkdown(os.Stdout)
	}
	if cfg.jsonPath != "" {
		var err error
		if len(runs) > 1 {
			err = sum.writeJSON(cfg.jsonPath)
		} else if len(runs) == 1 {
			err = runs[0].writeJSON(cfg.jsonPath)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			code = 1
		}
	}
	if cfg.pngPath != "" {
		if err := sum.writePNG(cfg.pngPath); err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			code = 1
		}
	}
	return code
}

// replotMain is -replot: the summary of earlier runs, without measuring.
func replotMain(cfg config) int {
	runs, err := readReports(cfg.replot)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		return 1
	}
	sum := summarize(runs)
	sum.writeMarkdown(os.Stdout)
	if cfg.jsonPath != "" {
		if err := sum.writeJSON(cfg.jsonPath); err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			return 1
		}
	}
	if cfg.pngPath != "" {
		if err := sum.writePNG(cfg.pngPath); err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			return 1
		}
	}
	return 0
}
