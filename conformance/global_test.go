package conformance

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/tenantmcp/tenantmcp/guardedsql"
)

// TestWrongGlobalFailsSuite: a target whose graph declares a tenant-bound
// table global (here guests, which references chains and carries
// chain_id) fails the suite at start-up with guardedsql.ErrGlobalDrift,
// before any property could take the graph's word for it. Before the
// catalog check the suite ran and reported the other tenants' guests it
// read as allowed.
func TestWrongGlobalFailsSuite(t *testing.T) {
	tg := hotelTarget("", 1)
	tg.Schema = nil
	tg.Graph.Tables = slices.Clone(tg.Graph.Tables)
	found := false
	for i := range tg.Graph.Tables {
		if tb := &tg.Graph.Tables[i]; tb.Name == "guests" {
			tb.Global, tb.Levels, tb.Parent, found = true, nil, "", true
		}
	}
	if !found {
		t.Fatal("hotel graph has no guests table")
	}
	r, err := newRunner(tg)
	if err != nil {
		t.Fatal(err)
	}
	err = r.setup(context.Background())
	if err == nil {
		_ = r.teardown()
		t.Fatal("the suite started on a graph declaring guests global")
	}
	if !errors.Is(err, guardedsql.ErrGlobalDrift) || !strings.Contains(err.Error(), "guests") {
		t.Fatalf("setup: err = %v, want ErrGlobalDrift naming guests", err)
	}
}

// runSome sets up tg and runs the properties ids once each (nil: every
// property for the engine but coverage), returning their outcomes; a
// target that does not open returns the error instead.
func runSome(t *testing.T, tg Target, ids ...int) (map[int]outcome, error) {
	t.Helper()
	r, err := newRunner(tg)
	if err != nil {
		return nil, err
	}
	ctx := context.Background()
	if err := r.setup(ctx); err != nil {
		return nil, err
	}
	defer func() {
		if err := r.teardown(); err != nil {
			t.Errorf("teardown: %v", err)
		}
	}()
	out := map[int]outcome{}
	for _, p := range properties {
		if (len(ids) == 0 && !p.last) || slices.Contains(ids, p.id) {
			out[p.id] = r.runProperty(ctx, p, nil, 1)
		}
	}
	return out, nil
}

// declareGlobal returns tg with table declared global, with the reason
// guardedsql's start-up error asks for.
func declareGlobal(tg Target, table string) Target {
	tg.Schema = nil
	tg.Graph.Tables = slices.Clone(tg.Graph.Tables)
	for i := range tg.Graph.Tables {
		if tb := &tg.Graph.Tables[i]; tb.Name == table {
			tb.Global, tb.Levels, tb.Parent = true, nil, ""
			tb.GlobalReason = "shared lookup data"
		}
	}
	return tg
}

// TestGlobalWithReasonFailsOracle: a tenant table declared global with a
// GlobalReason opens (the start-up check takes the reason's word) but the
// run fails: property 58 attributes its rows from the live catalog and
// names the table. Before P58 the whole suite passed on such a graph.
func TestGlobalWithReasonFailsOracle(t *testing.T) {
	forEachDSN(t, func(t *testing.T, dsn string) { globalWithReason(t, dsn) })
}

// forEachDSN runs fn once per target of TENANTMCP_DSN (the embedded
// SQLite database when unset), as a subtest named by the engine.
func forEachDSN(t *testing.T, fn func(t *testing.T, dsn string)) {
	env, err := FromEnv()
	if err != nil {
		t.Fatal(err)
	}
	dsns := env.DSNs
	if len(dsns) == 0 {
		dsns = []string{""}
	}
	for _, dsn := range dsns {
		e, _ := EngineOf(dsn)
		t.Run(string(e), func(t *testing.T) { fn(t, dsn) })
	}
}

func globalWithReason(t *testing.T, dsn string) {
	for _, table := range []string{"payments", "guests"} {
		t.Run(table, func(t *testing.T) {
			out, err := runSome(t, declareGlobal(hotelTarget(dsn, 1), table), 58)
			if err != nil {
				t.Fatalf("setup: %v", err)
			}
			o := out[58]
			if !o.failed || !strings.Contains(strings.Join(o.msgs, "\n"), table+" (declared global") {
				t.Fatalf("P58 with %s declared global: failed=%v %v; want a failure naming %s", table, o.failed, o.msgs, table)
			}
			t.Logf("P58: %s", o.msgs[0])
		})
	}
	// The acknowledgement is the run's: without it, the hotel's countries
	// (which hotels and guests reference) fail as well.
	tg := hotelTarget(dsn, 1)
	tg.Shared = nil
	out, err := runSome(t, tg, 58)
	if err != nil {
		t.Fatal(err)
	}
	if o := out[58]; !o.failed || !strings.Contains(strings.Join(o.msgs, "\n"), "countries (declared global)") {
		t.Fatalf("P58 without acknowledging countries: failed=%v %v", o.failed, o.msgs)
	}
}
