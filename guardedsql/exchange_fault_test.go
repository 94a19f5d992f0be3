package guardedsql_test

import (
	"strings"
	"testing"

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
