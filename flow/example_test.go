package flow_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"

	"github.com/tenantmcp/tenantmcp/flow"
	"github.com/tenantmcp/tenantmcp/redact"
	"github.com/tenantmcp/tenantmcp/scope"
)

type Guest struct {
	Name  string `json:"name" pii:"name"`
	Email string `json:"email" pii:"email"`
}

type Webhook struct {
	URL  string `json:"url"`
	Body string `json:"body"`
}

// A checker on its own, as the server drives it: the guest lookup's label
// comes from its pii tags; once a session has received a guest, posting to
// an untrusted webhook is denied with a witness naming the call that
// brought the guest's data in. (With a server, set server.Options.Flow and
// server.Tool.Flow instead of calling Register, Begin and Record.)
func Example() {
	policy, err := flow.ParsePolicy("policy.json", []byte(`{
	  "version": 1,
	  "pii": {"name": "guest.pii", "email": "guest.pii"},
	  "categories": {"guest.pii": {"level": "confidential", "to": ["https://crm.hotels.example"]}},
	  "destinations": {"https://*.hotels.example": "confidential"}
	}`))
	if err != nil {
		fmt.Println(err)
		return
	}
	checker, _ := flow.New(policy, flow.Options{})
	lookup, _ := checker.Register("find_guest", reflect.TypeFor[struct{}](), reflect.TypeFor[Guest](), flow.Decl{})
	hook, _ := checker.Register("post_webhook", reflect.TypeFor[Webhook](), nil,
		flow.Decl{Level: flow.Public, Sink: &flow.Sink{Kind: flow.URL, DestArg: "url"}})
	fmt.Println("find_guest:", lookup.Label())

	// The server's part: begin the call, redact the result, record it.
	session := flow.CallInfo{Subject: "agent-7", SessionID: "s1"}
	session.CallID = "call-1"
	call, _ := lookup.Begin(context.Background(), session)
	guest := Guest{Name: "Ann Lee", Email: "ann@guest.example"}
	red, _ := redact.New(redact.Options{})
	scoped := red.ForScope(scope.Scope{})
	scoped.JSON(guest)
	call.Record(context.Background(), guest, scoped.Report())

	for _, url := range []string{"https://crm.hotels.example/in", "https://paste.evil.example/in"} {
		session.CallID = "call-2"
		session.Args, _ = json.Marshal(Webhook{URL: url, Body: "…"})
		if _, err := hook.Begin(context.Background(), session); err != nil {
			var denial *flow.Denial
			errors.As(err, &denial)
			w := denial.Witness
			fmt.Printf("%s: %s; source %v, categories %v, introduced by %s (%s)\n",
				url, w.Rule, w.Source, w.Categories, w.IntroducedBy[0].Tool, w.IntroducedBy[0].CallID)
			continue
		}
		fmt.Println(url + ": allowed")
	}
	// Output:
	// find_guest: confidential{guest.pii}
	// https://crm.hotels.example/in: allowed
	// https://paste.evil.example/in: flow.category; source confidential{guest.pii}, categories [guest.pii], introduced by find_guest (call-1)
}

// A policy is validated as a whole, and every fault is reported with its
// line.
func ExampleParsePolicy() {
	_, err := flow.ParsePolicy("flow-policy.json", []byte(`{
  "version": 1,
  "destinations": {
    "https://*.hotels.example": "internal",
    "https://*hotels.example": "internal"
  },
  "declassify": [
    {"sink": "send_confirmation_email", "to": "$owner", "max_level": "sekret"}
  ]
}`))
	fmt.Println(err)
	// Output:
	// flow-policy.json:5:5: destinations: pattern "https://*hotels.example": "*" is allowed only as the whole leftmost label ("*.example.com")
	// flow-policy.json:8:70: declassify[0].max_level: unknown level "sekret" (public, internal, confidential, secret)
	// flow-policy.json:8:5: declassify[0]: "reason" is required (a declassification names its reason, the sink, the destinations and how high it reaches)
}
