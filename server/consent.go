package server

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tenantmcp/tenantmcp/flow"
)

// DefaultConsentTimeout bounds how long the answer to a declassification
// request (and to Input) may take: a requestState expires this long after
// it is issued (Options.ConsentTimeout).
const DefaultConsentTimeout = 2 * time.Minute

// Consent outcomes, in the audit record's "consent" field.
const (
	ConsentRequested   = "requested" // asked: the call was answered with an input-required result
	ConsentAccepted    = "accepted"
	ConsentDeclined    = "declined"
	ConsentCancelled   = "cancelled"
	ConsentUnsupported = "unsupported" // the client cannot be asked (no elicitation capability, a pre-2026 client without a session)
	ConsentTimeout     = "timeout"     // a session client did not answer in time (an expired requestState is refused as any invalid one)
)

// consentSchema is the form the user answers: one explicit yes/no.
var consentSchema = json.RawMessage(`{"type":"object","properties":{"allow":{"type":"boolean","title":"Allow this once","description":"Send this data to this destination, this one time."}},"required":["allow"]}`)

// consent asks the client's user whether a sink call the flow policy
// denied may go ahead under the declassification rule the denial offers,
// showing the witness in plain words: the first pass answers with an
// input-required result (an elicitation form) whose requestState is
// signed and bound to the caller, the call, the rule and the witness; the
// retry (by a 2026-07-28 client itself, or by the go-sdk on a 2025-era
// session) brings the answer.
//
// Invariant: a declassification is applied only when the user answered
// "accept" with allow=true to this very request, in a retry whose state
// verifies and is spent once, and the flow check, run again, still
// denies with the same offer and the same witness the user saw; decline,
// cancel, a client that cannot be asked and anything else keep the
// denial. The model cannot answer for the user: the answer comes from
// the client's elicitation handler, not from the call's arguments.
func (s *Server) consent(ctx context.Context, a *request, ft *flow.Tool, ci flow.CallInfo, fd *flow.Denial) (*flow.Call, *flow.Denial, error) {
	if fd.Offer == "" {
		return nil, fd, nil
	}
	in := a.in
	wit := witnessHash(fd)
	if in.state == "" {
		ask := &mcp.ElicitParams{Mode: "form", Message: a.red.String(fd.Explain()), RequestedSchema: consentSchema}
		if in.can(ask) != nil {
			a.consent = ConsentUnsupported
			return nil, fd, nil
		}
		state, err := in.issue(stateConsent, fd.Offer, wit, []string{consentID}, nil)
		if err != nil {
			return nil, fd, nil // cannot ask: denied
		}
		a.consent = ConsentRequested
		return nil, nil, &inputRequired{reqs: mcp.InputRequestMap{consentID: ask}, state: state}
	}
	st, err := in.open(ctx)
	if err != nil {
		return nil, nil, err
	}
	if st.Rule != fd.Offer || st.Witness != wit {
		// The person saw another offer or another witness.
		return nil, nil, &stateError{"consent rule or witness changed"}
	}
	if st.Kind == stateInput {
		a.consent = ConsentAccepted // accepted in an earlier round of this call
	} else {
		a.consent = consentAnswer(in.responses[consentID])
	}
	if a.consent != ConsentAccepted {
		return nil, fd, nil
	}
	ci.Consent = fd.Offer
	fc, again := beginFlow(ctx, ft, ci)
	if again != nil {
		return nil, again, nil
	}
	in.consentRule, in.consentWit = fd.Offer, wit
	// The witness the user accepted goes into the audit record.
	if w, err := json.Marshal(fd.Witness); err == nil {
		a.witness = s.logRedactor().String(string(w))
	}
	return fc, nil, nil
}

// witnessHash is the hex SHA-256 of the witness's JSON: what the person
// was shown, bound into the consent state.
func witnessHash(fd *flow.Denial) string {
	w, _ := json.Marshal(fd.Witness)
	h := sha256.Sum256(w)
	return hex.EncodeToString(h[:])
}

// consentAnswer reads the user's answer: only accept with allow=true
// consents.
func consentAnswer(r mcp.InputResponse) string {
	res, ok := r.(*mcp.ElicitResult)
	switch {
	case !ok:
		return ConsentDeclined
	case res.Action == "accept":
		if allow, _ := res.Content["allow"].(bool); allow {
			return ConsentAccepted
		}
	case res.Action == "cancel":
		return ConsentCancelled
	}
	return ConsentDeclined
}
