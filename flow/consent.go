package flow

import (
	"fmt"
	"strings"
)

// metaReason is the declassification reason a call's _meta names, "" for
// none. A value that is not a non-empty string is kept (as text) so that
// it is denied as an unknown reason rather than silently ignored.
func metaReason(meta map[string]any) string {
	v, ok := meta[MetaDeclassify]
	if !ok {
		return ""
	}
	s, isStr := v.(string)
	if !isStr || s == "" {
		s = fmt.Sprintf("%v", v)
		if s == "" {
			s = "(empty)"
		}
	}
	return s
}

// offer returns the reason of the first declassification rule (in policy
// order) that would allow sink t to send what snap holds to d, or "" if
// none would. It only proposes: the call is still denied, and the rule
// applies only when the user accepts it (CallInfo.Consent).
func (c *Checker) offer(t *Tool, snap *snapshot, d *Destination) string {
	seen := map[string]bool{}
	for _, r := range c.pol.declassify {
		if seen[r.reason] {
			continue
		}
		seen[r.reason] = true
		if dec := c.decide(t, snap, d, nil, r.reason, ownerFromTaint); dec.denial == nil {
			return r.reason
		}
	}
	return ""
}

// Explain describes the denied call of w in plain words for a person to
// accept or decline: which data (the categories and the level), from
// which calls, to which destination, through which tool, and under which
// declassification reason. It names categories, tools and call ids, never
// a data value: the destination is the only argument it repeats, because
// that is what the user decides about.
func (d *Denial) Explain() string {
	w := &d.Witness
	var b strings.Builder
	fmt.Fprintf(&b, "The assistant wants %s to send data to %s.", w.Sink.Tool, w.Sink.Destination)
	what := string(w.Source.Level) + " data"
	if len(w.Categories) > 0 {
		what += " (" + strings.Join(w.Categories, ", ") + ")"
	} else if len(w.Source.Categories) > 0 {
		what += " (" + strings.Join(w.Source.Categories, ", ") + ")"
	}
	fmt.Fprintf(&b, " This conversation holds %s, which the policy does not let reach that destination on its own", what)
	if w.Clearance != "" {
		fmt.Fprintf(&b, " (it is cleared for %s data)", w.Clearance)
	}
	b.WriteString(".")
	var from []string
	for _, o := range w.IntroducedBy {
		what := o.Category
		if what == "" {
			what = string(o.Level) + " data"
		}
		src := fmt.Sprintf("%s from %s (call %s", what, o.Tool, o.CallID)
		if !o.SameSession {
			src += ", in another session"
		}
		from = append(from, src+")")
	}
	if len(from) > 0 {
		fmt.Fprintf(&b, " It came from: %s.", strings.Join(from, "; "))
	}
	fmt.Fprintf(&b, " Allow it this once, as %q?", d.Offer)
	return b.String()
}
