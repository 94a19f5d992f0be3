package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"strings"
	"time"
)

// Units of Row values.
const (
	unitMicros = "µs/op"
	unitCalls  = "calls/s"
	unitMBps   = "MB/s"
)

// Row is one line of the result table: a candidate against its baseline,
// measured in the same rounds.
type Row struct {
	Figure    string `json:"figure"`
	Case      string `json:"case"`
	Baseline  string `json:"baseline"`  // what the baseline runs
	Candidate string `json:"candidate"` // what the candidate runs
	Unit      string `json:"unit"`
	// BaselineValue and CandidateValue are medians over the rounds, in Unit.
	BaselineValue  float64 `json:"baseline_value"`
	CandidateValue float64 `json:"candidate_value"`
	// Cost is the candidate's time per operation over the baseline's, the
	// median of the per-round ratios: above 1 the candidate is slower. For
	// throughput units it is baseline throughput / candidate throughput.
	Cost float64 `json:"cost"`
	// CostOfMedians is the candidate's median time over the baseline's.
	CostOfMedians float64 `json:"cost_of_medians"`
	// PairP25 and PairP75 are the quartiles of the per-round ratios.
	PairP25 float64 `json:"pair_ratio_p25"`
	PairP75 float64 `json:"pair_ratio_p75"`
	Rounds  int     `json:"rounds"`
	// BaselineRoundTrips and CandidateRoundTrips are the database round
	// trips per operation, counted at the wire by a relay (relay.go) over
	// RoundTripOps operations of each arm in a separate, untimed pass; 0
	// when not counted (no network database, or the count failed: see
	// the notes).
	BaselineRoundTrips  float64 `json:"baseline_round_trips,omitempty"`
	CandidateRoundTrips float64 `json:"candidate_round_trips,omitempty"`
	RoundTripOps        int     `json:"round_trip_ops,omitempty"`
	// Skipped says why the row was not measured; Failed that it broke.
	Skipped string `json:"skipped,omitempty"`
	Failed  string `json:"failed,omitempty"`
	Note    string `json:"note,omitempty"`
}

// measured fills the values of r from a comparison, converting ns/op to
// r.Unit; bytes is the payload per operation for MB/s.
func (r Row) measured(c comparison, bytes int) Row {
	conv := func(ns float64) float64 {
		switch r.Unit {
		case unitMicros:
			return ns / 1e3
		case unitCalls:
			return 1e9 / ns
		case unitMBps:
			return float64(bytes) / ns * 1e3
		}
		return ns
	}
	r.BaselineValue, r.CandidateValue = conv(c.BaseNs), conv(c.CandNs)
	r.Cost, r.CostOfMedians, r.PairP25, r.PairP75, r.Rounds = c.Cost, c.CostOfMedians, c.PairP25, c.PairP75, c.Rounds
	return r
}

// Report is the whole run, as written to -json.
type Report struct {
	Started time.Time `json:"started"`
	Seconds float64   `json:"seconds"`
	Command string    `json:"command"`
	Smoke   bool      `json:"smoke"`
	Scale   float64   `json:"scale"`
	Machine Machine   `json:"machine"`
	Rows    []Row     `json:"rows"`
	Notes   []string  `json:"notes,omitempty"`
}

func (rep *Report) writeJSON(path string) error {
	b, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

// writeMarkdown prints the table, its legend, the notes and the machine.
func (rep *Report) writeMarkdown(w io.Writer) {
	fmt.Fprintf(w, "## tenantmcp bench — %s\n\n", rep.Started.UTC().Format("2006-01-02 15:04 UTC"))
	if rep.Smoke {
		fmt.Fprintf(w, "**Smoke mode: every figure ran for a fraction of a second. These numbers are not measurements.**\n\n")
	}
	fmt.Fprintln(w, "Baseline and Candidate are medians over rounds that run the two back to back, in alternating order. Cost × = candidate time per operation / baseline time per operation, the median of the per-round ratios (above 1: the library costs more; for calls/s and MB/s it is baseline rate / candidate rate); p25–p75 are the quartiles of those ratios.")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| Figure | Case | Baseline | Candidate | Cost × | Per-round p25–p75 | Rounds |")
	fmt.Fprintln(w, "| --- | --- | ---: | ---: | ---: | ---: | ---: |")
	for _, r := range rep.Rows {
		switch {
		case r.Failed != "":
			fmt.Fprintf(w, "| %s | %s | FAILED: %s | — | — | — | — |\n", r.Figure, r.Case, cell(r.Failed))
		case r.Skipped != "":
			fmt.Fprintf(w, "| %s | %s | skipped: %s | — | — | — | — |\n", r.Figure, r.Case, cell(r.Skipped))
		default:
			fmt.Fprintf(w, "| %s | %s | %s | %s | **%.2f** | %.2f–%.2f | %d |\n", r.Figure, r.Case,
				value(r.BaselineValue, r.Unit), value(r.CandidateValue, r.Unit), r.Cost, r.PairP25, r.PairP75, r.Rounds)
		}
	}
	rep.writeRoundTrips(w)
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Baselines and candidates:")
	fmt.Fprintln(w)
	seen := map[string]bool{}
	for _, r := range rep.Rows {
		k := r.Figure + "\x00" + r.Baseline + "\x00" + r.Candidate
		if seen[k] || r.Baseline == "" {
			continue
		}
		seen[k] = true
		fmt.Fprintf(w, "- %s: baseline: %s; candidate: %s.\n", r.Figure, r.Baseline, r.Candidate)
	}
	for _, r := range rep.Rows {
		if r.Note != "" && r.Failed == "" && r.Skipped == "" {
			fmt.Fprintf(w, "- %s %s: %s.\n", r.Figure, r.Case, r.Note)
		}
	}
	if len(rep.Notes) > 0 {
		fmt.Fprintln(w)
		fmt.Fprintln(w, "Notes:")
		fmt.Fprintln(w)
		for _, n := range rep.Notes {
			fmt.Fprintf(w, "- %s\n", n)
		}
	}
	m := rep.Machine
	fmt.Fprintln(w)
	fmt.Fprintf(w, "Machine: %s, %d cores (GOMAXPROCS %d), %s, kernel %s, %s", m.CPU, m.Cores, m.GOMAXPROCS, m.OS, m.Kernel, m.Go)
	if m.Postgres != "" {
		fmt.Fprintf(w, ", PostgreSQL %s", m.Postgres)
	}
	if m.MySQL != "" {
		fmt.Fprintf(w, ", MySQL/MariaDB %s", m.MySQL)
	}
	fmt.Fprintf(w, ".\nLoad average (1/5/15 min): %s at start, %s at end. Whole run: %.0f s. Command: `%s`.\n",
		m.LoadStart, m.LoadEnd, rep.Seconds, rep.Command)
}

// writeRoundTrips prints the rows whose round trips were counted.
func (rep *Report) writeRoundTrips(w io.Writer) {
	head := false
	for _, r := range rep.Rows {
		if r.RoundTripOps == 0 || r.Failed != "" || r.Skipped != "" {
			continue
		}
		if !head {
			head = true
			fmt.Fprintln(w)
			fmt.Fprintln(w, "Database round trips per operation, counted at the wire: a loopback TCP relay between each arm's database client and the database counts the bursts the client sends after the database has answered, summed over its connections, divided by the operations; counted in a separate pass of sequential operations (one client), not in the timed rounds.")
			fmt.Fprintln(w)
			fmt.Fprintln(w, "| Figure | Case | Baseline round trips/op | Candidate round trips/op | Operations counted |")
			fmt.Fprintln(w, "| --- | --- | ---: | ---: | ---: |")
		}
		fmt.Fprintf(w, "| %s | %s | %.2f | %.2f | %d |\n", r.Figure, r.Case, r.BaselineRoundTrips, r.CandidateRoundTrips, r.RoundTripOps)
	}
}

func value(v float64, unit string) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return "—"
	}
	switch {
	case v >= 100:
		return fmt.Sprintf("%.0f %s", v, unit)
	case v >= 10:
		return fmt.Sprintf("%.1f %s", v, unit)
	default:
		return fmt.Sprintf("%.2f %s", v, unit)
	}
}

// cell keeps a message on one table line.
func cell(s string) string {
	s = strings.ReplaceAll(s, "\n", " ")
	return strings.ReplaceAll(s, "|", "\\|")
}
