package flow

import (
	"encoding/json"
	"errors"
	"fmt"
)

// The rules a denial names. Each corresponds to a CapShim typing rule.
const (
	// RuleDestination: the sink's destination is missing or cannot be
	// judged exactly (several recipients, no host, …).
	RuleDestination = "flow.destination"
	// RuleDeclassify: the call asked for a declassification (CapShim
	// T-Declassify) that no rule of the policy grants: an unknown reason,
	// or a reason whose rule does not cover this sink, destination,
	// category or level.
	RuleDeclassify = "flow.declassify"
	// RuleCategory: the session holds a category that the policy does not
	// let reach this destination (CapShim T-Net-Egress).
	RuleCategory = "flow.category"
	// RuleLevel: the session's level is above the destination's clearance
	// (CapShim T-Net-Confidentiality).
	RuleLevel = "flow.level"
	// RulePlan: a plan step is malformed: an unknown tool, or a $ret:N
	// reference to a step that does not come before it.
	RulePlan = "flow.plan"
	// RuleTaintStore: the caller's taint could not be read from the
	// Store (ErrTaintStore), so the sink call is denied unjudged.
	RuleTaintStore = "flow.taint_store"
)

// ErrDenied is matched (errors.Is) by every *Denial.
var ErrDenied = errors.New("flow: denied")

// Denial is the refusal of a sink call (or of a plan step), with its
// witness. The server turns it into a JSON-RPC error whose data carries
// the witness.
type Denial struct {
	Rule    string
	Reason  string
	Witness Witness
	// Offer is the reason of a declassification rule that would allow
	// this call if the client's user consents ("" if none would). The
	// server may ask the user (MCP elicitation) and call Begin again with
	// CallInfo.Consent set; nothing else grants it.
	Offer string
}

func (d *Denial) Error() string { return fmt.Sprintf("flow: denied by %s: %s", d.Rule, d.Reason) }

// Is makes every *Denial match ErrDenied.
func (d *Denial) Is(target error) bool { return target == ErrDenied }

// Witness is the evidence of a flow decision: what the session held, where
// it came from, and where it was going.
type Witness struct {
	Rule string `json:"rule"`
	// Source is the session's label when the sink was called: the join of
	// every result it had received.
	Source Label `json:"source"`
	// Categories are the categories that may not reach the destination
	// (RuleCategory, RuleDeclassify).
	Categories []string `json:"categories,omitempty"`
	// Clearance is the highest level the destination may receive.
	Clearance Level `json:"clearance,omitempty"`
	// IntroducedBy names, for each offending category (and for a level
	// above the clearance), the call that first brought it into the
	// session's taint.
	IntroducedBy []Origin `json:"introduced_by,omitempty"`
	// Sink is the tool that would have sent the data, and where.
	Sink SinkView `json:"sink"`
	// Declassify is the declassification the call asked for, if any.
	Declassify string `json:"declassify,omitempty"`
	// Step is the plan step (from 0) of a plan-check witness; -1 outside
	// a plan.
	Step int `json:"step"`
}

// Origin is the call that introduced a category or a level.
type Origin struct {
	Category string `json:"category,omitempty"`
	Level    Level  `json:"level,omitempty"`
	Tool     string `json:"tool"`
	// CallID is the server's correlation id of the call (its audit
	// record), or "plan:N" for step N of a checked plan.
	CallID string `json:"call_id"`
	// SameSession is false when the call was made in another session or
	// conversation of the same subject (ScopeSubject).
	SameSession bool `json:"same_session"`
}

// SinkView describes the sink of a witness.
type SinkView struct {
	Tool string   `json:"tool"`
	Kind SinkKind `json:"kind"`
	// Arg is the input property that held the destination ("" for a sink
	// with a fixed destination).
	Arg string `json:"arg,omitempty"`
	// Destination is the destination as given.
	Destination string `json:"destination"`
}

// Map returns the witness as a JSON object (for server.DenyError).
func (w *Witness) Map() map[string]any {
	b, err := json.Marshal(w)
	if err != nil {
		return map[string]any{"rule": w.Rule}
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		return map[string]any{"rule": w.Rule}
	}
	return m
}
