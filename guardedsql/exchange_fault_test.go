package guardedsql_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/tenantmcp/tenantmcp/guardedsql/postgres"
	"github.com/tenantmcp/tenantmcp/internal/guardfault"
)

// TestExchangeCounterIsLoadBearing is the mutation check of
// TestExchangeReplayRefused: with the counter comparison dropped from the
// generated exchange function (the schema applied, and checked, with the
// fault on), a captured exchange value verifies again on its backend,
// after COMMIT and after ROLLBACK, and the replay test reports it.
func TestExchangeCounterIsLoadBearing(t *testing.T) {
	if !guardfault.Enabled {
		t.Skip(guardfault.NotBuilt)
	}
	defer guardfault.Disable(guardfault.ExchangeCounter)()
	h := newPostgresHotel(t, enginePostgres.dsn(t), seedModel(2, 2, 2, 2))
	p := strings.Join(replayProblems(t, h), "; ")
	for _, want := range []string{"replayed on the same backend", "replayed after ROLLBACK"} {
		if !strings.Contains(p, want) {
			t.Errorf("with the counter comparison dropped, %q was still refused (problems: %q): the replay test cannot see the fault", want, p)
		}
	}
}

// TestRecheckOffCallerIsLoadBearing is the mutation check of
// TestPostgresRecheckSaturatedPool: with the periodic check run by the
// caller that finds it due (inside its transaction, holding a connection)
// and a busy pool failing the verdict, the saturated pool refuses the
// calls as unsafe, and the saturation test sees it.
func TestRecheckOffCallerIsLoadBearing(t *testing.T) {
	if !guardfault.Enabled {
		t.Skip(guardfault.NotBuilt)
	}
	defer guardfault.Disable(guardfault.RecheckOffCaller)()
	h := newPostgresHotel(t, enginePostgres.dsn(t), seedModel(3, 2, 2, 2))
	_, s := saturatePool(t, h)
	unsafe := 0
	for _, err := range s.fails {
		if errors.Is(err, postgres.ErrRLSUnsafe) {
			unsafe++
		}
	}
	t.Logf("%d transactions, %d of %d workers refused as unsafe; first failure: %v", s.txs, unsafe, len(s.fails), s.fails)
	if unsafe == 0 {
		t.Fatalf("with the check run on the callers, no call was refused as unsafe (%d transactions, failures %v): the saturation test cannot see the fault", s.txs, s.fails)
	}
}
