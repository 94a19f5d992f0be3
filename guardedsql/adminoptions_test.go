package guardedsql_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/tenantmcp/tenantmcp/builder"
	"github.com/tenantmcp/tenantmcp/guardedsql"
	"github.com/tenantmcp/tenantmcp/guardedsql/postgres"
)

// TestAdminOptionsRefused: the PostgreSQL administration functions refuse
// every option they would ignore (ErrOptionIgnored, naming it) before
// touching the database, and accept the ones they apply. No database is
// needed: the refusal comes first (nil owner and pool are never used).
func TestAdminOptionsRefused(t *testing.T) {
	ctx := context.Background()
	sch := builder.MustSchema(hotelDef)
	key, err := guardedsql.NewRLSKey("k1")
	if err != nil {
		t.Fatal(err)
	}
	observer := guardedsql.WithObserver(func(context.Context, guardedsql.Statement) {})
	logger := guardedsql.WithLogger(slog.New(slog.DiscardHandler))
	calls := map[string]func(...guardedsql.Option) error{
		"RLSDDL": func(o ...guardedsql.Option) error { _, err := guardedsql.RLSDDL(sch, o...); return err },
		"ApplyRLS": func(o ...guardedsql.Option) error {
			return postgres.ApplyRLS(ctx, nil, sch, o...)
		},
		"CheckRLS":     func(o ...guardedsql.Option) error { return postgres.CheckRLS(ctx, nil, sch, o...) },
		"AddRLSKey":    func(o ...guardedsql.Option) error { return postgres.AddRLSKey(ctx, nil, key, o...) },
		"RemoveRLSKey": func(o ...guardedsql.Option) error { return postgres.RemoveRLSKey(ctx, nil, "k1", o...) },
		"SignScope":    func(o ...guardedsql.Option) error { _, err := guardedsql.SignScope(key, "n", "{}", o...); return err },
	}
	refused := []struct {
		opt  guardedsql.Option
		name string
	}{
		{observer, "WithObserver"},
		{logger, "WithLogger"},
		{guardedsql.WithStatementTimeout(time.Second), "WithStatementTimeout"},
		{guardedsql.WithRLSOnly(), "WithRLSOnly"},
		{guardedsql.WithMaxConns(3), "WithMaxConns"},
	}
	for fn, call := range calls {
		for _, r := range refused {
			err := call(guardedsql.WithRLSNamespace("app"), r.opt)
			if !errors.Is(err, guardedsql.ErrOptionIgnored) || !errors.Is(err, guardedsql.ErrInvalid) {
				t.Errorf("%s with %s: err = %v, want ErrOptionIgnored", fn, r.name, err)
				continue
			}
			if !strings.Contains(err.Error(), fn) || !strings.Contains(err.Error(), r.name) {
				t.Errorf("%s with %s: error does not name both: %v", fn, r.name, err)
			}
		}
	}
	// WithRLSKey is applied by ApplyRLS and CheckRLS only.
	for _, fn := range []string{"RLSDDL", "AddRLSKey", "RemoveRLSKey", "SignScope"} {
		if err := calls[fn](guardedsql.WithRLSKey(key)); !errors.Is(err, guardedsql.ErrOptionIgnored) {
			t.Errorf("%s with WithRLSKey: err = %v", fn, err)
		}
	}
	// The controls: the options they apply are accepted.
	if _, err := guardedsql.RLSDDL(sch, guardedsql.WithRLSNamespace("app")); err != nil {
		t.Fatal(err)
	}
	if _, err := guardedsql.SignScope(key, "n", "{}", guardedsql.WithRLSNamespace("app")); err != nil {
		t.Fatal(err)
	}
}
