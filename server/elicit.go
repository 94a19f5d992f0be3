package server

import (
	"context"
	"encoding/json"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tenantmcp/tenantmcp/flow"
	"github.com/tenantmcp/tenantmcp/redact"
)

// DefaultConsentTimeout bounds how long a sink call waits for its user to
// answer a declassification request (Options.ConsentTimeout).
const DefaultConsentTimeout = 2 * time.Minute

// Consent outcomes, in the audit record's "consent" field.
const (
	ConsentAccepted    = "accepted"
	ConsentDeclined    = "declined"
	ConsentCancelled   = "cancelled"
	ConsentUnsupported = "unsupported" // the client cannot be asked (no elicitation capability, stateless HTTP)
	ConsentTimeout     = "timeout"
)

// consentSchema is the form the user answers: one explicit yes/no.
var consentSchema = json.RawMessage(`{"type":"object","properties":{"allow":{"type":"boolean","title":"Allow this once","description":"Send this data to this destination, this one time."}},"required":["allow"]}`)

// consent asks the client's user, through MCP elicitation, whether a sink
// call the flow policy denied may go ahead under the declassification
// rule the denial offers, showing the witness in plain words.
//
// Invariant: a declassification is applied only when the user answered
// "accept" with allow=true to this very request; decline, cancel, a client
// that cannot be asked, an error and a timeout all keep the denial. The
// model cannot answer for the user: the answer comes from the client's
// elicitation handler, not from anything in the call.
func (s *Server) consent(ctx context.Context, a *request, ft *flow.Tool, ci flow.CallInfo, fd *flow.Denial) (*flow.Call, *flow.Denial) {
	if fd.Offer == "" {
		return nil, fd
	}
	a.consent = s.ask(ctx, a.red, fd, a.session)
	if a.consent != ConsentAccepted {
		return nil, fd
	}
	ci.Consent = fd.Offer
	fc, again := beginFlow(ctx, ft, ci)
	if again != nil {
		// The taint grew while the user was deciding, beyond the rule.
		return nil, again
	}
	// The witness the user accepted goes into the audit record.
	if w, err := json.Marshal(fd.Witness); err == nil {
		a.witness = s.logRedactor().String(string(w))
	}
	return fc, nil
}

func (s *Server) ask(ctx context.Context, red *redact.Scoped, fd *flow.Denial, ss *mcp.ServerSession) string {
	if ss == nil {
		return ConsentUnsupported
	}
	if ip := ss.InitializeParams(); ip == nil || ip.Capabilities == nil || ip.Capabilities.Elicitation == nil {
		return ConsentUnsupported
	}
	ctx, cancel := context.WithTimeout(ctx, s.opts.ConsentTimeout)
	defer cancel()
	res, err := ss.Elicit(ctx, &mcp.ElicitParams{
		Mode:            "form",
		Message:         red.String(fd.Explain()),
		RequestedSchema: consentSchema,
	})
	switch {
	case err != nil && ctx.Err() != nil:
		return ConsentTimeout
	case err != nil:
		return ConsentUnsupported
	case res.Action == "accept":
		if allow, _ := res.Content["allow"].(bool); allow {
			return ConsentAccepted
		}
		return ConsentDeclined
	case res.Action == "cancel":
		return ConsentCancelled
	}
	return ConsentDeclined
}
