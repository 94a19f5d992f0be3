package guardedsql

import (
	"fmt"
	"reflect"
	"strings"

	"github.com/tenantmcp/tenantmcp/guardedsql/internal/dialect/postgres"
)

// ErrOptionIgnored is returned (wrapping [ErrInvalid]) by the PostgreSQL
// administration functions — [RLSDDL], guardedsql/postgres.ApplyRLS and CheckRLS,
// postgres.AddRLSKey and RemoveRLSKey, and [SignScope] — when given an [Option]
// that has no effect there. They take the same Option type as [Open] and
// guardedsql/postgres.New so that [WithRLSNamespace] and [WithRLSKey] can be shared,
// but only those two mean anything to them: an observer ([WithObserver]),
// a logger ([WithLogger]), a timeout or a pool setting would be silently
// ignored (no statement of ApplyRLS would reach the observer a caller
// relies on), so they are refused instead. The error names the options.
var ErrOptionIgnored = fmt.Errorf("%w: option has no effect on this function", ErrInvalid)

// optionNames names the Option that sets each config field, for the
// error of adminDialect. A field missing here is named as it is.
var optionNames = map[string]string{
	"observers":    "WithObserver",
	"logger":       "WithLogger",
	"guard":        "a guard option",
	"rlsOnly":      "WithRLSOnly",
	"rlsNamespace": "WithRLSNamespace",
	"rlsKey":       "WithRLSKey",
	"wait":         "WithPoolWait/WithPoolWaitObserver",
	"stmtTimeout":  "WithStatementTimeout",
	"lockTimeout":  "WithLockTimeout",
	"maxConns":     "WithMaxConns",
	"rlsRecheck":   "WithRLSRecheck",
}

// adminDialect is postgresDialect for the administration function fn:
// it refuses (ErrOptionIgnored) every option but WithRLSNamespace and,
// when withKey, WithRLSKey. Invariant: an administration function never
// accepts an option it does not apply, including options added later (any
// config field other than those two counts).
func adminDialect(fn string, opts []Option, withKey bool) (postgres.Dialect, error) {
	var c config
	for _, o := range opts {
		o(&c)
	}
	c.rlsNamespace = ""
	allowed := "WithRLSNamespace"
	if withKey {
		c.rlsKey = nil
		allowed += " and WithRLSKey"
	}
	if v := reflect.ValueOf(c); !v.IsZero() {
		var set []string
		for i := range v.NumField() {
			if !v.Field(i).IsZero() {
				name := v.Type().Field(i).Name
				if o, ok := optionNames[name]; ok {
					name = o
				}
				set = append(set, name)
			}
		}
		return postgres.Dialect{}, fmt.Errorf("%w: %s takes only %s, not %s", ErrOptionIgnored, fn, allowed, strings.Join(set, ", "))
	}
	return postgresDialect(opts)
}
