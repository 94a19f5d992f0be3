package server

import (
	"context"
	"errors"

	"github.com/tenantmcp/tenantmcp/flow"
)

// beginFlow starts a flow-checked call: the *flow.Denial that
// [flow.Tool.Begin] returns as its error, or nil. Invariant: any error of
// Begin is a denial here, so a sink never runs after an error, even one
// that is not a *flow.Denial (Begin documents that it always is).
func beginFlow(ctx context.Context, ft *flow.Tool, ci flow.CallInfo) (*flow.Call, *flow.Denial) {
	fc, err := ft.Begin(ctx, ci)
	if err == nil {
		return fc, nil
	}
	var d *flow.Denial
	if errors.As(err, &d) {
		return nil, d
	}
	return nil, &flow.Denial{Rule: flow.RuleTaintStore, Reason: "the flow check failed"}
}
