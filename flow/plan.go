package flow

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// PlanToolName and PlanToolDescription name and describe the optional
// plan-check tool (see Checker.CheckPlan).
const (
	PlanToolName        = "flow_check_plan"
	PlanToolDescription = "Typecheck a plan of tool calls against the information-flow policy before running any of it. " +
		"Each step names a tool and its arguments; an argument may be \"$ret:N\" (or \"$ret:N.path\") for the result of step N. " +
		"Returns, per step, allow, deny (with the witness a real call would get) or deferred (decided only when the call runs)."
)

// Plan is a CapShim-shaped plan: tool calls in order, whose arguments may
// refer to earlier results as "$ret:N" or "$ret:N.path".
type Plan struct {
	Steps []PlanStep `json:"steps" jsonschema:"the tool calls, in the order they would run"`
}

// PlanStep is one call of a plan.
type PlanStep struct {
	Tool string         `json:"tool" jsonschema:"the tool to call"`
	Args map[string]any `json:"args,omitempty" jsonschema:"its arguments; a string \"$ret:N\" stands for the result of step N"`
	// Declassify is the declassification reason the call would carry
	// (MetaDeclassify). It counts only under a policy that opts in
	// (declassify_from_meta); otherwise a step a rule could allow is
	// "deferred": it runs only if the user consents when it is called.
	Declassify string `json:"declassify,omitempty" jsonschema:"the declassification reason the call would carry, if any"`
}

// Plan verdicts.
const (
	VerdictAllow = "allow"
	VerdictDeny  = "deny"
	// VerdictDeferred: the step's destination comes from an earlier result,
	// or it is allowed only if the destination is the data subject
	// ($owner); the server decides when the call runs. In the second case
	// the step carries the witness of the denial it gets otherwise.
	VerdictDeferred = "deferred"
)

// PlanReport is the outcome of a plan check.
type PlanReport struct {
	// Verdict is deny if any step is denied, else deferred if any step is
	// deferred, else allow.
	Verdict string       `json:"verdict"`
	Steps   []StepReport `json:"steps"`
}

// StepReport is the verdict on one step.
type StepReport struct {
	Step    int    `json:"step"`
	Tool    string `json:"tool"`
	Sink    bool   `json:"sink"`
	Verdict string `json:"verdict"`
	// Label is the session's label before the step runs.
	Label   Label    `json:"label"`
	Reason  string   `json:"reason,omitempty"`
	Witness *Witness `json:"witness,omitempty"`
}

// maxPlanSteps bounds a plan.
const maxPlanSteps = 256

// CheckPlan typechecks p before anything runs, from the taint of the
// caller in ctx (NewContext; a ctx without a call starts from nothing):
// each step's result is assumed to carry its tool's static label, and each
// sink step is judged as the server would judge the call, with the same
// witness (its call ids are "plan:N"). Run time can only add to a taint
// (categories found in free text), so a plan that checks deny is denied
// when run.
func (c *Checker) CheckPlan(ctx context.Context, p Plan) (PlanReport, error) {
	if len(p.Steps) > maxPlanSteps {
		return PlanReport{}, fmt.Errorf("%w: a plan has at most %d steps", ErrPlan, maxPlanSteps)
	}
	var snap snapshot
	var key Key
	session := ""
	call, haveCall := FromContext(ctx)
	if haveCall {
		key, session = call.key, call.session
		var err error
		if snap, err = c.load(ctx, key); err != nil {
			return PlanReport{}, err
		}
	}
	start := snap // the stored taint, for the origins of what it held
	// Plan steps join a private copy; origins fall back to the stored ones.
	type planOrigin struct {
		cats map[int]origin
		lv   [rSecret + 1]origin
	}
	po := planOrigin{cats: map[int]origin{}}
	rep := PlanReport{Verdict: VerdictAllow}
	for i, st := range p.Steps {
		sr := StepReport{Step: i, Tool: st.Tool, Verdict: VerdictAllow, Label: c.labelOf(snap.lab)}
		t := c.tool(st.Tool)
		if t == nil {
			sr.Verdict, sr.Reason = VerdictDeny, fmt.Sprintf("%s: no tool %q", RulePlan, st.Tool)
			rep.add(sr)
			continue
		}
		sr.Sink = t.sink != nil
		if err := checkRefs(st.Args, i); err != nil {
			sr.Verdict, sr.Reason = VerdictDeny, RulePlan+": "+err.Error()
			rep.add(sr)
			continue
		}
		if t.sink != nil {
			raw, d, derr, dynamic := t.planDestination(st.Args)
			origins := func(bad catSet, lv rank) (map[int]origin, origin) {
				stored, slo := map[int]origin{}, origin{}
				if haveCall {
					stored, slo = c.origins(&start, bad, lv)
				}
				out := map[int]origin{}
				bad.each(func(ix int) {
					if o, ok := stored[ix]; ok {
						out[ix] = o
					} else if o, ok := po.cats[ix]; ok {
						out[ix] = o
					}
				})
				lo := slo
				if lo.tool == "" && lv <= rSecret {
					lo = po.lv[lv]
				}
				return out, lo
			}
			switch {
			case dynamic:
				// Any destination: allowed only if public data with no
				// category may go anywhere.
				if snap.lab.cats != 0 || snap.lab.level > rPublic || st.Declassify != "" {
					sr.Verdict = VerdictDeferred
					sr.Reason = fmt.Sprintf("the destination comes from %s; the server checks the call when it runs", raw)
				}
			default:
				// As at call time: the step's reason counts only when the
				// policy lets _meta declassify; otherwise the user decides.
				reason := st.Declassify
				if !c.pol.metaDeclassify {
					reason = ""
				}
				dec := c.decide(t, &snap, &d, derr, reason, ownerNever)
				if dec.denial != nil {
					c.witness(dec.denial, &dec, t, &snap, raw, reason, origins, session, i)
					sr.Verdict, sr.Reason, sr.Witness = VerdictDeny, dec.denial.Rule+": "+dec.denial.Reason, &dec.denial.Witness
					if offer := ""; derr == nil && (dec.denial.Rule == RuleCategory || dec.denial.Rule == RuleLevel) {
						if offer = c.offer(t, &snap, &d); offer != "" {
							sr.Verdict = VerdictDeferred
							sr.Reason = fmt.Sprintf("allowed only if the user consents to the declassification %q when the call runs; otherwise %s", offer, sr.Reason)
						}
					}
					if again := c.decide(t, &snap, &d, derr, reason, ownerAlways); again.denial == nil {
						// The witness stays: it is the denial the call
						// gets unless the destination is the subject.
						sr.Verdict = VerdictDeferred
						sr.Reason = "allowed only if the destination is the data subject of everything the session holds ($owner), checked when the call runs; otherwise " + sr.Reason
					}
				}
			}
		}
		rep.add(sr)
		// The step's result joins the taint, as Record would.
		o := origin{tool: t.name, callID: "plan:" + strconv.Itoa(i), session: session}
		for lv := snap.lab.level + 1; lv <= t.lab.level; lv++ {
			po.lv[lv] = o
		}
		(t.lab.cats &^ snap.lab.cats).each(func(ix int) { po.cats[ix] = o })
		snap.lab = snap.lab.join(t.lab)
		if t.lab.cats != 0 {
			// The data subjects of a result are known only when it exists.
			snap.t.OwnersUnknown, snap.t.Owners = true, nil
		}
	}
	return rep, nil
}

func (r *PlanReport) add(s StepReport) {
	r.Steps = append(r.Steps, s)
	switch {
	case s.Verdict == VerdictDeny:
		r.Verdict = VerdictDeny
	case s.Verdict == VerdictDeferred && r.Verdict == VerdictAllow:
		r.Verdict = VerdictDeferred
	}
}

// ErrPlan is wrapped by the error CheckPlan returns for a plan it cannot
// check at all.
var ErrPlan = errors.New("flow: invalid plan")

// planDestination returns the destination of a sink step, or dynamic if
// it is a $ret reference.
func (t *Tool) planDestination(args map[string]any) (raw string, d Destination, err error, dynamic bool) {
	if t.sink.Dest != "" {
		return t.sink.Dest, t.dest, t.destErr, false
	}
	js, jerr := json.Marshal(args)
	if jerr != nil {
		return "", Destination{Kind: t.sink.Kind}, fmt.Errorf("%w: arguments: %v", ErrDestination, jerr), false
	}
	s, err := t.destArg(js)
	if err != nil {
		return "", Destination{Kind: t.sink.Kind}, err, false
	}
	if isRef(s) {
		return s, Destination{Kind: t.sink.Kind}, nil, true
	}
	d, err = ParseDestination(t.sink.Kind, s)
	return s, d, err, false
}

func isRef(s string) bool { return strings.HasPrefix(s, "$ret:") }

// checkRefs checks every "$ret:N…" string in v refers to a step before i.
func checkRefs(v any, i int) error {
	switch x := v.(type) {
	case string:
		if !isRef(x) {
			return nil
		}
		num, _, _ := strings.Cut(strings.TrimPrefix(x, "$ret:"), ".")
		n, err := strconv.Atoi(num)
		if err != nil || n < 0 {
			return fmt.Errorf("%q is not a reference $ret:N", x)
		}
		if n >= i {
			return fmt.Errorf("%q refers to step %d, which does not run before step %d", x, n, i)
		}
	case map[string]any:
		for _, e := range x {
			if err := checkRefs(e, i); err != nil {
				return err
			}
		}
	case []any:
		for _, e := range x {
			if err := checkRefs(e, i); err != nil {
				return err
			}
		}
	}
	return nil
}
