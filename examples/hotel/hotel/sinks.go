package hotel

import (
	"context"
	_ "embed"
	"fmt"
	"sync"
	"time"

	"github.com/tenantmcp/tenantmcp/flow"
	"github.com/tenantmcp/tenantmcp/guardedsql"
	"github.com/tenantmcp/tenantmcp/scope"
	"github.com/tenantmcp/tenantmcp/server"
)

// FlowPolicy is the example's information-flow policy (flow-policy.json):
// guest personal data may reach only the guest it is about and the
// hotels' staff addresses, payment data nowhere (but an invoice to the
// guest, declassified by the rule "guest-invoice" when the user accepts
// the server's elicitation), internal data
// only the hotels' own https hosts, public data anywhere. A taint is kept
// per verified subject, across its sessions.
//
//go:embed flow-policy.json
var FlowPolicy []byte

// Outbox records what the sink tools would have sent. The example sends
// nothing: a message is appended here, where tests and the evaluation read
// it.
type Outbox struct {
	mu   sync.Mutex
	msgs []Message
}

// Message is one recorded send.
type Message struct {
	Kind flow.SinkKind
	// To is the destination as the policy judged it (flow.Destination's
	// canonical form); Raw as the call gave it.
	To, Raw string
	Body    string
	// Subject is the verified subject of the call.
	Subject string
	At      time.Time
}

// maxOutbox bounds the outbox; the oldest messages go first.
const maxOutbox = 1000

func (o *Outbox) add(m Message) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if len(o.msgs) == maxOutbox {
		o.msgs = append(o.msgs[:0], o.msgs[1:]...)
	}
	o.msgs = append(o.msgs, m)
}

// Messages returns a copy of the recorded messages, oldest first.
func (o *Outbox) Messages() []Message {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]Message(nil), o.msgs...)
}

// SendEmailIn is the input of send_confirmation_email.
type SendEmailIn struct {
	To   string `json:"to" jsonschema:"one recipient e-mail address"`
	Body string `json:"body" jsonschema:"the message text"`
}

// PostWebhookIn is the input of post_webhook.
type PostWebhookIn struct {
	URL  string `json:"url" jsonschema:"absolute https URL of the webhook"`
	Body string `json:"body" jsonschema:"the payload"`
}

// SentOut reports a recorded send.
type SentOut struct {
	Status string `json:"status"`
	To     string `json:"to"`
}

// RegisterSinks adds the two sink tools to s, recording into box. s must
// have a flow checker (server.Options.Flow): each call is judged against
// the caller's taint before the handler runs.
func RegisterSinks(s *server.Server, box *Outbox) error {
	send := func(kind flow.SinkKind, raw, body string, ctx context.Context) (SentOut, error) {
		d, err := flow.ParseDestination(kind, raw)
		if err != nil {
			return SentOut{}, server.InvalidInput("%v", err)
		}
		sc, _ := scope.FromContext(ctx)
		box.add(Message{Kind: kind, To: d.String(), Raw: raw, Body: body, Subject: sc.Subject(), At: time.Now()})
		return SentOut{Status: "queued", To: d.String()}, nil
	}
	errs := []error{
		server.AddTool(s, server.Tool{
			Name:        "send_confirmation_email",
			Description: "Send an e-mail to one recipient (recorded in the example's outbox; nothing is sent).",
			Flow:        flow.Decl{Level: flow.Public, Sink: &flow.Sink{Kind: flow.Email, DestArg: "to"}},
		}, func(ctx context.Context, _ *guardedsql.DB, in SendEmailIn) (SentOut, error) {
			return send(flow.Email, in.To, in.Body, ctx)
		}),
		server.AddTool(s, server.Tool{
			Name:        "post_webhook",
			Description: "POST a payload to a webhook URL (recorded in the example's outbox; nothing is sent).",
			Flow:        flow.Decl{Level: flow.Public, Sink: &flow.Sink{Kind: flow.URL, DestArg: "url"}},
		}, func(ctx context.Context, _ *guardedsql.DB, in PostWebhookIn) (SentOut, error) {
			return send(flow.URL, in.URL, in.Body, ctx)
		}),
	}
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// RegisterPlanCheck adds flow.PlanToolName to s: it typechecks a plan
// against c from the caller's taint. Its input names no tenant.
func RegisterPlanCheck(s *server.Server, c *flow.Checker) error {
	return server.AddTool(s, server.Tool{
		Name: flow.PlanToolName, Description: flow.PlanToolDescription,
		Flow: flow.Decl{Level: flow.Public, EchoOnly: true},
	}, func(ctx context.Context, _ *guardedsql.DB, p flow.Plan) (flow.PlanReport, error) {
		rep, err := c.CheckPlan(ctx, p)
		if err != nil {
			return flow.PlanReport{}, server.InvalidInput("%v", err)
		}
		return rep, nil
	})
}

// newFlow loads the flow policy (the file at path, or FlowPolicy) with the
// taints in st (nil: in memory).
func newFlow(path string, st flow.Store) (*flow.Checker, error) {
	var p *flow.Policy
	var err error
	if path == "" {
		p, err = flow.ParsePolicy("flow-policy.json", FlowPolicy)
	} else {
		p, err = flow.LoadPolicy(path)
	}
	if err != nil {
		return nil, fmt.Errorf("hotel: flow policy: %w", err)
	}
	return flow.New(p, flow.Options{Store: st})
}

// registerFlowTools adds the sinks and the plan check and verifies the
// policy names only tools that exist.
func registerFlowTools(app *App) error {
	if err := RegisterSinks(app.Server, app.Outbox); err != nil {
		return err
	}
	if err := RegisterPlanCheck(app.Server, app.Flow); err != nil {
		return err
	}
	if err := app.Flow.Verify(); err != nil {
		return fmt.Errorf("hotel: flow policy: %w", err)
	}
	return nil
}
