package flow

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// TestBeginReturnsDenialError: a denied sink call's error is a *Denial
// (errors.As) matching ErrDenied, whose message names the rule once, with
// no "flow: flow" stutter; an allowed call's error is a true nil.
func TestBeginReturnsDenialError(t *testing.T) {
	f := newFixture(t, testPolicy)
	x := CallInfo{Subject: "x"}
	f.read(t, x, "guests", both)
	x.CallID = "send-1"
	x.Args, _ = json.Marshal(map[string]any{"to": "eve@evil.example", "body": "x"})
	_, err := f.tools["mail"].Begin(context.Background(), x)
	var d *Denial
	if !errors.As(err, &d) || !errors.Is(err, ErrDenied) {
		t.Fatalf("err = %v (%T), want a *Denial matching ErrDenied", err, err)
	}
	if d.Rule != RuleCategory || d.Witness.Rule != RuleCategory {
		t.Fatalf("denial %+v", d)
	}
	if strings.Contains(err.Error(), "flow: flow") || strings.Contains(ErrDenied.Error(), "flow: flow") {
		t.Fatalf("stutter: %q / %q", err, ErrDenied)
	}
	y := CallInfo{Subject: "y", CallID: "send-2"}
	y.Args, _ = json.Marshal(map[string]any{"to": "eve@evil.example", "body": "x"})
	call, err := f.tools["mail"].Begin(context.Background(), y)
	if err != nil || call == nil {
		t.Fatalf("a clean subject's call: %v (%T)", err, err)
	}
}
