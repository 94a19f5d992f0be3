package pgtaint_test

import (
	"context"
	"testing"
	"time"

	"github.com/tenantmcp/tenantmcp/flow"
	"github.com/tenantmcp/tenantmcp/flow/pgtaint"
	"github.com/tenantmcp/tenantmcp/internal/guardfault"
)

// TestEraseCheckIsLoadBearing is the mutation check of
// TestAppRoleCannotEraseTaint and TestNewRefusesUnsafeRole: with the
// functions-only grant switched off (the application role may write the
// table, as before issue 29), New starts, the role's raw DELETE erases a
// taint, and the subject's send to an outsider goes through — the leak
// those tests refuse.
func TestEraseCheckIsLoadBearing(t *testing.T) {
	if !guardfault.Enabled {
		t.Skip(guardfault.NotBuilt)
	}
	defer guardfault.Disable(guardfault.TaintFunctionsOnly)()
	db := liveDB(t)
	clk := &clock{now: time.Now().Add(-time.Minute)}
	r := newReplica(t, db.app, clk)
	r.readGuests(t, "ann-reader", "read-1")
	if den := r.send("ann-reader", "x@evil.example"); den == nil || den.Rule != flow.RuleCategory {
		t.Fatalf("tainted send before the erase: %v, want %s (the scenario did not run)", den, flow.RuleCategory)
	}
	if _, err := pool(t, db.app).Exec(context.Background(), `DELETE FROM `+pgtaint.DefaultTable); err != nil {
		t.Fatalf("raw DELETE as the application role with the fix off: %v (the fault did not take)", err)
	}
	if den := r.send("ann-reader", "x@evil.example"); den != nil {
		t.Fatalf("send after the erase: %v; want it allowed (the erase tests would not notice the grant)", den)
	}
}
