package conformance

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"text/tabwriter"
)

// Report is the tally of one Run: for every property, how many of its
// repetitions passed, failed or were skipped.
type Report struct {
	Target      string
	Engine      Engine
	Version     string // engine and version, e.g. "PostgreSQL 15.20"
	Where       string // the scratch database the run created
	Embedded    bool   // no DSN: the embedded SQLite default
	Repetitions int
	OrderSeed   uint64
	// Error is set when the run could not start (bad target, no server).
	Error   string
	Results []*PropertyResult
	// Shared lists the run's acknowledgements of shared tables
	// (Target.Shared), which property 58 exempts, with their reasons.
	Shared []Acknowledgement
	// Unchecked lists the graph's foreign keys declared
	// builder.ForeignKey.Unchecked, with their reasons and the run's
	// acknowledgements (Target.Unchecked): the guard does not check the
	// rows they reference, so a tenant may write a link to another
	// tenant's row there. Listed so that the opt-out is read, not assumed.
	Unchecked []UncheckedKey
}

// UncheckedKey is one foreign key of the graph declared Unchecked.
type UncheckedKey struct {
	Table    string
	Columns  []string
	RefTable string
	Reason   string // the declaration's (ForeignKey.Unchecked)
	// Acknowledged is the run's reason (Target.Unchecked), empty when the
	// run does not acknowledge the key: property 9 then fails on it.
	Acknowledged string
}

// Acknowledgement is one table a run acknowledged as shared.
type Acknowledgement struct {
	Table, Reason string
	// OwnedRows counts the table's rows that the live catalog attributes
	// to tenants (read by every tenant because of the acknowledgement);
	// zero means the acknowledgement exempts nothing.
	OwnedRows int
}

// PropertyResult counts one property's outcomes over the repetitions.
type PropertyResult struct {
	ID                     int
	Name, Title, Criterion string
	Pass, Fail, Skip       int
	SkipReason             string
	// Failures holds the first messages of failed runs.
	Failures []string

	mu sync.Mutex
}

func (r *Report) result(id int) *PropertyResult {
	for _, p := range r.Results {
		if p.ID == id {
			return p
		}
	}
	panic(fmt.Sprintf("conformance: no property %d", id))
}

func (p *PropertyResult) add(o outcome) {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case o.skip != "":
		p.Skip++
		p.SkipReason = o.skip
	case o.failed:
		p.Fail++
		if len(p.Failures) < 10 {
			p.Failures = append(p.Failures, o.msgs...)
		}
	default:
		p.Pass++
	}
}

// Passed reports whether no property failed and the run started.
func (r *Report) Passed() bool {
	if r.Error != "" {
		return false
	}
	for _, p := range r.Results {
		if p.Fail > 0 {
			return false
		}
	}
	return true
}

// cell renders one property's result for one engine: "5/5" (passed/run),
// "skip" when it never ran, with failures marked.
func (p *PropertyResult) cell() string {
	run := p.Pass + p.Fail
	switch {
	case run == 0 && p.Skip > 0:
		return "skip"
	case run == 0:
		return "-"
	case p.Fail > 0:
		return fmt.Sprintf("%d/%d FAIL", p.Pass, run)
	}
	return fmt.Sprintf("%d/%d", p.Pass, run)
}

// WriteTable writes the summary of one or more reports as a table in the
// style of a paper's results table: one row per property with its primary
// criterion, one column per engine with passed/run, a Pass/Run total, and
// the reasons for skips.
func WriteTable(w io.Writer, reports ...*Report) error {
	if len(reports) == 0 {
		return nil
	}
	labels := make([]string, len(reports))
	engines := map[Engine]int{}
	for _, r := range reports {
		engines[r.Engine]++
	}
	for i, r := range reports {
		labels[i] = string(r.Engine)
		if engines[r.Engine] > 1 || r.Engine == "" {
			labels[i] = r.Target + "/" + string(r.Engine)
		}
	}
	width := 0
	for _, l := range labels {
		width = max(width, len(l))
	}
	var b strings.Builder
	fmt.Fprintf(&b, "\nTABLE: tenantmcp conformance: security properties and results (passed/run per engine)\n")
	for i, r := range reports {
		what := r.Version
		switch {
		case r.Error != "":
			what = "did not run: " + r.Error
		case r.Embedded:
			what += ", embedded (no TENANTMCP_DSN target)"
		}
		fmt.Fprintf(&b, "  %-*s  target %s: %s; %d repetition(s), random order, order seed %d\n", width, labels[i], r.Target, what, r.Repetitions, r.OrderSeed)
		if r.Where != "" {
			fmt.Fprintf(&b, "  %-*s  scratch: %s (dropped afterwards)\n", width, "", r.Where)
		}
	}
	b.WriteString("\n")
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "No.\tProperty\tPrimary criterion")
	for _, l := range labels {
		fmt.Fprintf(tw, "\t%s", l)
	}
	fmt.Fprintln(tw, "\t")
	base := reports[0].Results
	for i, p := range base {
		fmt.Fprintf(tw, "%d\t%s\t%s", p.ID, p.Title, p.Criterion)
		for _, r := range reports {
			if i < len(r.Results) {
				fmt.Fprintf(tw, "\t%s", r.Results[i].cell())
			} else {
				fmt.Fprintf(tw, "\t-")
			}
		}
		fmt.Fprintln(tw, "\t")
	}
	fmt.Fprintf(tw, "\tPass/Run\t")
	for _, r := range reports {
		pass, run := 0, 0
		for _, p := range r.Results {
			pass += p.Pass
			run += p.Pass + p.Fail
		}
		fmt.Fprintf(tw, "\t%d/%d", pass, run)
	}
	fmt.Fprintln(tw, "\t")
	tw.Flush()
	// Skips, grouped by reason: "P15 P16 P17 on sqlite, mysql: reason".
	type where struct{ ids, labels []string }
	byReason := map[string]*where{}
	var reasons []string
	for i, r := range reports {
		for _, p := range r.Results {
			if p.Skip == 0 {
				continue
			}
			w := byReason[p.SkipReason]
			if w == nil {
				w = &where{}
				byReason[p.SkipReason] = w
				reasons = append(reasons, p.SkipReason)
			}
			if id := fmt.Sprintf("P%d", p.ID); !slices.Contains(w.ids, id) {
				w.ids = append(w.ids, id)
			}
			if !slices.Contains(w.labels, labels[i]) {
				w.labels = append(w.labels, labels[i])
			}
		}
	}
	if len(reasons) > 0 {
		b.WriteString("\nSkipped:\n")
		for _, reason := range reasons {
			w := byReason[reason]
			fmt.Fprintf(&b, "  %s on %s: %s\n", strings.Join(w.ids, " "), strings.Join(w.labels, ", "), reason)
		}
	}
	var acks []string
	for i, r := range reports {
		for _, a := range r.Shared {
			what := fmt.Sprintf("%d rows the live catalog attributes to tenants", a.OwnedRows)
			if a.OwnedRows == 0 {
				what = "no row the live catalog attributes to a tenant (the acknowledgement exempts nothing)"
			}
			acks = append(acks, fmt.Sprintf("  %s %s: %s; %s", labels[i], a.Table, a.Reason, what))
		}
	}
	if len(acks) > 0 {
		b.WriteString("\nAcknowledged shared by the run (Target.Shared; property 58 does not check them):\n" + strings.Join(acks, "\n") + "\n")
	}
	var unchecked []string
	for i, r := range reports {
		for _, k := range r.Unchecked {
			ack := "not acknowledged by the run (property 9 fails on it)"
			if k.Acknowledged != "" {
				ack = "acknowledged by the run: " + k.Acknowledged
			}
			unchecked = append(unchecked, fmt.Sprintf("  %s %s(%s) -> %s: %s; %s", labels[i], k.Table, strings.Join(k.Columns, ", "), k.RefTable, k.Reason, ack))
		}
	}
	if len(unchecked) > 0 {
		b.WriteString("\nUnchecked foreign keys (ForeignKey.Unchecked: the guard lets a tenant's row reference another tenant's row there):\n" + strings.Join(unchecked, "\n") + "\n")
	}
	var fails []string
	for i, r := range reports {
		for _, p := range r.Results {
			for j, m := range p.Failures {
				if j == 3 {
					fails = append(fails, fmt.Sprintf("  %s P%d: … %d more", labels[i], p.ID, len(p.Failures)-3))
					break
				}
				fails = append(fails, fmt.Sprintf("  %s P%d: %s", labels[i], p.ID, m))
			}
		}
	}
	if len(fails) > 0 {
		b.WriteString("\nFailures (first messages):\n" + strings.Join(fails, "\n") + "\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}
