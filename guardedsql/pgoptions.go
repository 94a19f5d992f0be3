package guardedsql

import (
	"fmt"

	"github.com/tenantmcp/tenantmcp/guardedsql/internal/dialect/postgres"
)

// WithRLSOnly makes a PostgreSQL DB leave the read predicates to the
// row-level security policies: statements carry no tenant predicates of
// their own, and the policies, reading the signed transaction-local scope
// setting, are the only read boundary (the guard still checks writes).
// Policy drift then goes unnoticed for at most one re-check interval
// (WithRLSRecheck); the default, with the guard's predicates, never serves
// another tenant's row meanwhile.
// The start-up check still runs, so the policies are known to be in force.
// The default (without this option) is defence in depth: both. Other
// engines have no row-level security and ignore the option; their guard
// always applies.
func WithRLSOnly() Option { return func(c *config) { c.rlsOnly = true } }

// WithRLSNamespace changes the namespace of the PostgreSQL scope setting,
// policies, verifying function and key table from "tenantmcp" (setting
// "tenantmcp.scope", policies "tenantmcp_scope", "tenantmcp_scope_doc()",
// "tenantmcp_scope_keys") to ns, a lower-case identifier. Pass the same
// option to RLSDDL, ApplyRLS, CheckRLS, AddRLSKey, RemoveRLSKey,
// SignScope and postgres.New (or Open).
func WithRLSNamespace(ns string) Option { return func(c *config) { c.rlsNamespace = ns } }

// WithRLSKey makes a PostgreSQL DB sign the scope setting with k (see
// RLSKey). postgres.New and Open require it; ApplyRLS given it also
// installs the key (as AddRLSKey does).
func WithRLSKey(k RLSKey) Option { return func(c *config) { c.rlsKey = &k } }

// postgresDialect builds the PostgreSQL dialect from the options.
func postgresDialect(opts []Option) (postgres.Dialect, error) {
	var c config
	for _, o := range opts {
		o(&c)
	}
	if c.rlsNamespace != "" && !postgres.ValidNamespace(c.rlsNamespace) {
		return postgres.Dialect{}, fmt.Errorf("%w: RLS namespace %q is not a lower-case identifier of at most 40 bytes", ErrInvalid, c.rlsNamespace)
	}
	d := postgres.Dialect{Namespace: c.rlsNamespace, RLSOnly: c.rlsOnly,
		Timeouts: postgres.Timeouts{Statement: c.stmtTimeout, Lock: c.lockTimeout}}
	if c.rlsKey != nil {
		k := postgres.Key{ID: c.rlsKey.ID, Secret: c.rlsKey.secret}
		if err := k.Validate(); err != nil {
			return postgres.Dialect{}, fmt.Errorf("%w: %w", ErrInvalid, err)
		}
		d.Key = &k
	}
	return d, nil
}
