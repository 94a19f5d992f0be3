package conformance

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// A check that can pass because its calls failed is not a check. Every
// tool call a property makes is recorded under the caller it was made as
// ("chain acme roles [front_desk]"); after the property, a caller whose
// calls mostly failed (more than half: HTTP 403 or 429, a closed session,
// a tool error, an internal error) or who made no successful call fails
// the property with "vacuous: N of M calls as WHO failed", whatever the
// property's own criterion said about the calls that were left. Property
// 59 audits the same records over a whole repetition, and that every
// tenant and caller role set of the target made successful calls in every
// tool property.

// callTally counts one caller's calls in one property.
type callTally struct {
	calls, failed int
	first         string // the first failure
}

// record notes one call as who; failure is "" for a call that succeeded.
func (p *pt) record(who, failure string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.tallies == nil {
		p.tallies = map[string]*callTally{}
	}
	t := p.tallies[who]
	if t == nil {
		t = &callTally{}
		p.tallies[who] = t
		p.callers = append(p.callers, who)
	}
	t.calls++
	if failure != "" {
		t.failed++
		if t.first == "" {
			t.first = failure
		}
	}
}

// vacuousMsgs returns the messages for the callers whose calls mostly
// failed.
func vacuousMsgs(callers []string, tallies map[string]*callTally) []string {
	var out []string
	for _, who := range callers {
		t := tallies[who]
		if t.failed == t.calls || 2*t.failed > t.calls {
			out = append(out, fmt.Sprintf("vacuous: %d of %d calls as %s failed (the first: %s); the property cannot pass on the calls that were left", t.failed, t.calls, who, t.first))
		}
	}
	return out
}

// checkVacuous fails the property for every caller whose calls mostly
// failed. runProperty calls it after the property.
func (p *pt) checkVacuous() {
	if offVacuous.Load() {
		return
	}
	p.mu.Lock()
	msgs := vacuousMsgs(p.callers, p.tallies)
	p.mu.Unlock()
	for _, m := range msgs {
		p.Errorf("%s", m)
	}
}

// callerName is how a caller is named in the records.
func callerName(tn Tenant, roles []string) string {
	return fmt.Sprintf("%s roles %v", tn, roles)
}

// callTools makes calls as one caller through a real token for tn's grants
// and the token-wide roles, records each call's outcome under who, and
// returns all output text (structured content, text content and error
// messages). A call that fails below the tool (the server answered 403 or
// 429, or closed the session) is followed by a new session for the next
// call: the server may close a session on a refused call, and the calls
// after it must still be made, never silently lost.
func (ts *toolServer) callTools(p *pt, who string, tn Tenant, roles []string, calls []ToolCall) (string, error) {
	cs, err := ts.session(p.ctx, tn, roles)
	if err != nil {
		return "", err
	}
	defer func() { cs.Close() }()
	var out strings.Builder
	for i, call := range calls {
		res, err := cs.CallTool(p.ctx, &mcp.CallToolParams{Name: call.Tool, Arguments: call.Args})
		if err != nil {
			p.record(who, call.Tool+": "+err.Error())
			out.WriteString(err.Error())
			if i < len(calls)-1 && !offVacuous.Load() {
				cs.Close()
				if cs, err = ts.session(p.ctx, tn, roles); err != nil {
					return out.String(), fmt.Errorf("reconnecting after %s failed: %w", call.Tool, err)
				}
			}
			continue
		}
		raw, _ := json.Marshal(res.StructuredContent)
		out.Write(raw)
		var text strings.Builder
		for _, c := range res.Content {
			if tc, ok := c.(*mcp.TextContent); ok {
				text.WriteString(tc.Text)
			}
		}
		out.WriteString(text.String())
		if res.IsError {
			p.record(who, call.Tool+": "+text.String())
		} else {
			p.record(who, "")
		}
	}
	return out.String(), nil
}

// propNoVacuous (P59) audits the repetition: no property's calls as any
// caller mostly failed, and each tool property (20, 22) made successful
// calls as every tenant with every caller role set of the target. It runs
// last, after the properties it audits.
func propNoVacuous(p *pt, r *runner) {
	r.mu.Lock()
	logs := r.calls
	r.mu.Unlock()
	ids := make([]int, 0, len(logs))
	for id := range logs {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	total := 0
	for _, id := range ids {
		l := logs[id]
		for _, m := range vacuousMsgs(l.callers, l.tallies) {
			p.Errorf("P%d: %s", id, m)
		}
		for _, t := range l.tallies {
			total += t.calls
		}
	}
	if tools := r.target.Tools; tools != nil && tools.Calls != nil && tools.Canaries != nil {
		ran := logs[20]
		if ran == nil {
			if !r.ranThisRep(20) {
				p.Skipf("property 20 did not run in this repetition")
			}
			p.Errorf("P20 made no tool call at all")
		} else {
			callers := tools.Callers
			if len(callers) == 0 {
				callers = [][]string{nil}
			}
			for _, tn := range r.tenants {
				for _, roles := range callers {
					who := callerName(tn, roles)
					if t := ran.tallies[who]; t == nil || t.calls == t.failed {
						p.Errorf("P20 covers %s but made no successful call as it", who)
					}
				}
			}
		}
	}
	p.Logf("%d recorded calls in %d properties; none vacuous", total, len(ids))
}

// callLog is one property's records in a repetition.
type callLog struct {
	callers []string
	tallies map[string]*callTally
}

// keepCalls files a property's records for P59.
func (r *runner) keepCalls(id int, x *pt) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if len(x.callers) == 0 || offVacuous.Load() {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.calls == nil {
		r.calls = map[int]*callLog{}
	}
	r.calls[id] = &callLog{callers: slices.Clone(x.callers), tallies: x.tallies}
}

// ranThisRep reports whether property id ran (was touched) in this
// repetition.
func (r *runner) ranThisRep(id int) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.ran[id]
}
