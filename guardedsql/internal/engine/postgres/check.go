package postgres

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/tenantmcp/tenantmcp/guardedsql/internal/engine"
	"github.com/tenantmcp/tenantmcp/internal/guardfault"
	"github.com/tenantmcp/tenantmcp/internal/sqlast"
)

// unsafeError is ErrRLSUnsafe: its text names row-level security, and it
// matches engine.ErrUnsafe, which engine-neutral code tests for.
type unsafeError struct{}

func (unsafeError) Error() string {
	return "guardedsql: row-level security is not in force for this PostgreSQL connection"
}
func (unsafeError) Is(target error) bool { return target == engine.ErrUnsafe }

// Errors of Check; guardedsql/postgres re-exports them. Every one of them
// matches ErrRLSUnsafe with errors.Is, and ErrRLSUnsafe matches
// engine.ErrUnsafe.
var (
	ErrRLSUnsafe           error = unsafeError{}
	ErrRLSSuperuser              = fmt.Errorf("%w: the role is a superuser (superusers bypass every policy)", ErrRLSUnsafe)
	ErrRLSBypassRLS              = fmt.Errorf("%w: the role has BYPASSRLS", ErrRLSUnsafe)
	ErrRLSOwnerNotForced         = fmt.Errorf("%w: the role owns a tenant-bound table without FORCE ROW LEVEL SECURITY (owners bypass its policies)", ErrRLSUnsafe)
	ErrRLSNotEnabled             = fmt.Errorf("%w: a tenant-bound table does not have row-level security enabled and forced", ErrRLSUnsafe)
	ErrRLSPolicyMissing          = fmt.Errorf("%w: a tenant-bound table lacks the expected policy, or has an outdated or altered one", ErrRLSUnsafe)
	ErrRLSPolicyUnexpected       = fmt.Errorf("%w: another permissive policy applying to the role widens access to a tenant-bound table", ErrRLSUnsafe)
	ErrRLSTableMissing           = fmt.Errorf("%w: a tenant-bound table of the schema is not visible on the search_path", ErrRLSUnsafe)
	ErrRLSSigning                = fmt.Errorf("%w: the signed scope context is not in force (verifying function or key table missing, altered or reachable by the role)", ErrRLSUnsafe)
	ErrRLSKeyUnknown             = fmt.Errorf("%w: the scope-signing key is not installed (add it as the tables' owner)", ErrRLSUnsafe)
)

// checkSignedSQL reads back the verifying function and the key table
// ($1 function name, $2 key table name, $3 the expected body with
// @SCHEMA@ for the schema): for the function its owner's relation to the
// current role, SECURITY DEFINER, volatility, configuration and whether
// its body is the generated one; for the key table its row-level security,
// its policies and its owner.
const checkSignedSQL = `SELECT
  coalesce(f.oid::int8, 0),
  coalesce(pg_catalog.pg_has_role(current_user, f.proowner, 'MEMBER'), false),
  coalesce(f.prosecdef, false),
  coalesce(f.provolatile::text, ''),
  coalesce(pg_catalog.array_to_string(f.proconfig, ';'), ''),
  coalesce(f.prosrc = pg_catalog.replace($3, '@SCHEMA@', pg_catalog.quote_ident(n.nspname)), false),
  coalesce(k.oid::int8, 0),
  coalesce(pg_catalog.pg_has_role(current_user, k.relowner, 'MEMBER'), false),
  coalesce(k.relrowsecurity, false),
  coalesce(k.relforcerowsecurity, false),
  (SELECT count(*) FROM pg_catalog.pg_policy p WHERE p.polrelid = k.oid),
  coalesce(f.pronamespace = k.relnamespace, false)
FROM (SELECT 1) AS one
LEFT JOIN pg_catalog.pg_proc f ON f.oid = pg_catalog.to_regprocedure(pg_catalog.quote_ident($1) || '()')
LEFT JOIN pg_catalog.pg_namespace n ON n.oid = f.pronamespace
LEFT JOIN pg_catalog.pg_class k ON k.oid = pg_catalog.to_regclass(pg_catalog.quote_ident($2))`

// checkExchangeSQL reads back the exchange functions ($1 their
// signatures, $2 their expected bodies with @SCHEMA@ for the schema, $3
// the verifying function's name): whether each exists, its owner's
// relation to the current role, SECURITY DEFINER, volatility,
// configuration, whether its body is the generated one, whether it has
// the verifying function's owner and schema, whether the current role may
// execute it, and whether its owner may create the temporary counter.
const checkExchangeSQL = `SELECT
  coalesce(f.oid::int8, 0),
  coalesce(pg_catalog.pg_has_role(current_user, f.proowner, 'MEMBER'), false),
  coalesce(f.prosecdef, false),
  coalesce(f.provolatile::text, ''),
  coalesce(pg_catalog.array_to_string(f.proconfig, ';'), ''),
  coalesce(f.prosrc = pg_catalog.replace(w.body, '@SCHEMA@', pg_catalog.quote_ident(n.nspname)), false),
  coalesce(f.proowner = s.proowner AND f.pronamespace = s.pronamespace, false),
  coalesce(pg_catalog.has_function_privilege(current_user, f.oid, 'EXECUTE'), false),
  coalesce(pg_catalog.has_database_privilege(f.proowner, pg_catalog.current_database(), 'TEMPORARY'), false)
FROM ROWS FROM (pg_catalog.unnest($1::text[]), pg_catalog.unnest($2::text[])) WITH ORDINALITY AS w(sig, body, i)
LEFT JOIN pg_catalog.pg_proc f ON f.oid = pg_catalog.to_regprocedure(w.sig)
LEFT JOIN pg_catalog.pg_namespace n ON n.oid = f.pronamespace
LEFT JOIN pg_catalog.pg_proc s ON s.oid = pg_catalog.to_regprocedure(pg_catalog.quote_ident($3) || '()')
ORDER BY w.i`

// checkExchange verifies the exchange functions (see signed.go) as
// checkSigned verifies the verifying function, and adds to why what is
// wrong: each exists, is SECURITY DEFINER, VOLATILE, with search_path
// pinned and the generated body, has the verifying function's owner (not
// a role the current role is a member of) and schema, is executable by
// the current role, and its owner has TEMPORARY on the database (the
// counter is a temporary sequence).
func (d Dialect) checkExchange(ctx context.Context, q engine.Querier, user string) ([]string, error) {
	names := []string{d.OpenFunc() + "()", d.ExchangeFunc() + "(text)"}
	sigs := []string{d.Quote(d.OpenFunc()) + "()", d.Quote(d.ExchangeFunc()) + "(text)"}
	bodies := []string{d.openFuncBody(), d.exchangeFuncBody("@SCHEMA@")}
	var why []string
	i := 0
	err := eachBounded(ctx, q, checkExchangeSQL, []any{sigs, bodies, d.ScopeFunc()}, func(r engine.Rows) error {
		var (
			oid                                         int64
			owned, secdef, bodyOK, sameOwner, exec, tmp bool
			vol, config                                 string
		)
		if err := r.Scan(&oid, &owned, &secdef, &vol, &config, &bodyOK, &sameOwner, &exec, &tmp); err != nil {
			return err
		}
		name := names[min(i, len(names)-1)]
		i++
		if oid == 0 {
			why = append(why, "function "+name+" is missing")
			return nil
		}
		for _, c := range []struct {
			bad  bool
			what string
		}{
			{owned, "role " + user + " is a member of its owner"},
			{!secdef, "it is not SECURITY DEFINER"},
			{vol != "v", "it is not VOLATILE"},
			{config != "search_path=pg_catalog, pg_temp", "its search_path is not pinned to pg_catalog, pg_temp"},
			{!bodyOK, "its body was altered"},
			{!sameOwner, "its owner or schema is not the verifying function's"},
			{!exec, "role " + user + " may not execute it"},
			{!tmp, "its owner lacks TEMPORARY on the database"},
		} {
			if c.bad {
				why = append(why, name+": "+c.what)
			}
		}
		return nil
	})
	if err == nil && i != len(names) {
		err = fmt.Errorf("read %d of %d exchange functions", i, len(names))
	}
	return why, err
}

// checkSigned verifies that the policies obtain the scope only through a
// verifying function the role cannot subvert: it exists, is SECURITY
// DEFINER, STABLE, with search_path pinned, has the generated body, and
// neither it nor the key table is owned by a role the current role is a
// member of; the key table has row-level security enabled (not forced, so
// the owner's function reads it) and no policy, so no grant opens it;
// and the exchange functions pass checkExchange. Then, if a key is
// configured, it probes that a context signed with it verifies (through
// the exchange, on the pgx driver).
func (d Dialect) checkSigned(ctx context.Context, q engine.Querier, user string) error {
	var (
		fOID, kOID                     int64
		fOwned, secdef, bodyOK, kOwned bool
		vol, config                    string
		rls, forced, sameSchema        bool
		kPolicies                      int64
	)
	err := eachBounded(ctx, q, checkSignedSQL, []any{d.ScopeFunc(), d.KeyTable(), d.scopeFuncBody("@SCHEMA@")}, func(r engine.Rows) error {
		return r.Scan(&fOID, &fOwned, &secdef, &vol, &config, &bodyOK, &kOID, &kOwned, &rls, &forced, &kPolicies, &sameSchema)
	})
	if err != nil {
		return fmt.Errorf("guardedsql: reading the signed-context objects: %w", err)
	}
	var why []string
	switch {
	case fOID == 0:
		why = append(why, "function "+d.ScopeFunc()+"() is missing")
	case kOID == 0:
		why = append(why, "key table "+d.KeyTable()+" is missing")
	default:
		if fOwned {
			why = append(why, "role "+user+" is a member of the function's owner")
		}
		if kOwned {
			why = append(why, "role "+user+" is a member of the key table's owner")
		}
		if !secdef {
			why = append(why, "the function is not SECURITY DEFINER")
		}
		if vol != "s" {
			why = append(why, "the function is not STABLE")
		}
		if config != "search_path=pg_catalog, pg_temp" {
			why = append(why, "the function's search_path is not pinned to pg_catalog, pg_temp")
		}
		if !bodyOK {
			why = append(why, "the function's body was altered")
		}
		if !sameSchema {
			why = append(why, "the function and the key table are in different schemas")
		}
		if !rls || forced || kPolicies != 0 {
			why = append(why, "the key table must have row-level security enabled, not forced, and no policy")
		}
	}
	if len(why) == 0 {
		xwhy, err := d.checkExchange(ctx, q, user)
		if err != nil {
			return fmt.Errorf("guardedsql: reading the exchange functions: %w", err)
		}
		why = xwhy
	}
	if len(why) > 0 {
		return fmt.Errorf("%w (%s; re-apply postgres.RLSDDL as the tables' owner)", ErrRLSSigning, strings.Join(why, ", "))
	}
	if d.Key == nil {
		return nil
	}
	tx, err := beginCheck(ctx, q)
	if err != nil {
		return err
	}
	defer tx.Rollback(ctx)
	if err := d.session(ctx, tx, "{}"); err != nil {
		return err
	}
	var verified bool
	if err := each(ctx, tx, d.checkKeySQL(), nil, func(r engine.Rows) error { return r.Scan(&verified) }); err != nil {
		if AsPgError != nil {
			if pe, ok := AsPgError(err); ok && pe.Code == ErrCodeNotVerified {
				return fmt.Errorf("%w (key %q)", ErrRLSKeyUnknown, d.Key.ID)
			}
		}
		return fmt.Errorf("guardedsql: probing the signed context: %w", err)
	}
	if !verified {
		return fmt.Errorf("%w (key %q)", ErrRLSKeyUnknown, d.Key.ID)
	}
	return nil
}

const checkRoleSQL = `SELECT current_user::text, r.rolsuper, r.rolbypassrls,
	EXISTS (SELECT 1 FROM pg_catalog.pg_extension WHERE extname = 'citus')
FROM pg_catalog.pg_roles r WHERE r.rolname = current_user`

// checkTablesSQL resolves the tables the way the guarded statements will
// and reports, for each, its RLS flags and whether the
// current role has the owner's privileges (owner or member of the owning
// role), which is what makes PostgreSQL skip non-forced policies.
// The tables are looked up in the current schema, where the catalog check
// reads them and where guarded statements, whose search_path puts pg_temp
// last, find them: an unqualified name would resolve to a temporary table
// of the same name first (issue 25 §6).
const checkTablesSQL = `SELECT t.name, coalesce(c.oid::int8, 0), coalesce(c.relkind::text, ''),
       coalesce(c.relrowsecurity, false), coalesce(c.relforcerowsecurity, false),
       coalesce(pg_catalog.pg_has_role(current_user, c.relowner, 'USAGE'), false)
FROM pg_catalog.unnest($1::text[]) AS t(name)
LEFT JOIN pg_catalog.pg_class c ON c.oid = pg_catalog.to_regclass(pg_catalog.quote_ident(current_schema()) || '.' || pg_catalog.quote_ident(t.name))
ORDER BY t.name`

// checkPoliciesSQL lists every policy on those tables (by oid) with
// whether it applies to the current role (PUBLIC, the role, or a role it is
// a member of) and the hash of its deparsed expressions; it runs under
// search_path pg_catalog, as the stamp in RLSDDL does.
const checkPoliciesSQL = `SELECT c.relname::text, p.polname::text, p.polpermissive, p.polcmd::text,
       p.polqual IS NOT NULL, p.polwithcheck IS NOT NULL,
       COALESCE(pg_catalog.obj_description(p.oid, 'pg_policy'), ''),
       (0::oid = ANY (p.polroles) OR EXISTS (
           SELECT 1 FROM pg_catalog.unnest(p.polroles) AS r(oid)
           WHERE pg_catalog.pg_has_role(current_user, r.oid, 'MEMBER'))),
       ` + deparseHash + `
FROM pg_catalog.pg_policy p
JOIN pg_catalog.pg_class c ON c.oid = p.polrelid
WHERE p.polrelid::int8 = ANY ($1::int8[])
ORDER BY c.relname, p.polname`

// Check reads back, on q (the guarded connection pool), whether the
// row-level security RLSDDL generates for g is in force for the connected
// role, and fails closed with a specific error if not: the role is a
// superuser or has BYPASSRLS; it owns a tenant-bound table that is not
// FORCE'd; a tenant-bound table is missing, has RLS disabled or not forced,
// lacks the expected policy (by name, command, qualifiers and marker
// comment), or carries another permissive policy that applies to the role.
// It checks what is installed (pg_roles, pg_class, pg_policy), never what
// a migration meant to install.
func (d Dialect) Check(ctx context.Context, q engine.Querier, g *sqlast.Schema) error {
	var (
		user          string
		super, bypass bool
		found, citus  bool // citus: the extension is installed (citus.go)
	)
	err := eachBounded(ctx, q, checkRoleSQL, nil, func(r engine.Rows) error {
		found = true
		return r.Scan(&user, &super, &bypass, &citus)
	})
	if err != nil {
		return fmt.Errorf("guardedsql: reading the connected role: %w", err)
	}
	if !found {
		return fmt.Errorf("%w: current_user is not in pg_roles", ErrRLSUnsafe)
	}
	if super {
		return fmt.Errorf("%w (role %q)", ErrRLSSuperuser, user)
	}
	if bypass {
		return fmt.Errorf("%w (role %q)", ErrRLSBypassRLS, user)
	}

	want := d.Policies(g)
	names := make([]string, len(want))
	for i, p := range want {
		names[i] = p.Table
	}
	type tableState struct {
		oid                    int64
		kind                   string
		enabled, forced, owned bool
	}
	tables := map[string]tableState{}
	var oids []int64
	err = eachBounded(ctx, q, checkTablesSQL, []any{names}, func(r engine.Rows) error {
		var n string
		var s tableState
		if err := r.Scan(&n, &s.oid, &s.kind, &s.enabled, &s.forced, &s.owned); err != nil {
			return err
		}
		tables[n] = s
		if s.oid != 0 {
			oids = append(oids, s.oid)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("guardedsql: reading table row-level security flags: %w", err)
	}
	// Ownership first: it is the most specific reason policies are skipped.
	for _, n := range names {
		if s := tables[n]; s.oid != 0 && s.owned && !s.forced {
			return fmt.Errorf("%w (role %q owns table %q)", ErrRLSOwnerNotForced, user, n)
		}
	}
	for _, n := range names {
		s := tables[n]
		switch {
		case s.oid == 0:
			return fmt.Errorf("%w (table %q)", ErrRLSTableMissing, n)
		case s.kind != "r" && s.kind != "p":
			return fmt.Errorf("%w (%q is not a table but relkind %q; views bypass the policies of their tables)", ErrRLSNotEnabled, n, s.kind)
		case !s.enabled:
			return fmt.Errorf("%w (table %q: row-level security disabled)", ErrRLSNotEnabled, n)
		case !s.forced:
			return fmt.Errorf("%w (table %q: row-level security not forced)", ErrRLSNotEnabled, n)
		}
	}

	if err := d.checkAround(ctx, q, user, oids); err != nil { // around.go
		return err
	}

	type policyRow struct {
		table, name, cmd, comment, hash string
		permissive, qual, check         bool
		applies                         bool
	}
	var installed []policyRow
	err = inPinnedPath(ctx, q, func(tx engine.Querier) error {
		return each(ctx, tx, checkPoliciesSQL, []any{oids}, func(r engine.Rows) error {
			var p policyRow
			if err := r.Scan(&p.table, &p.name, &p.permissive, &p.cmd, &p.qual, &p.check, &p.comment, &p.applies, &p.hash); err != nil {
				return err
			}
			installed = append(installed, p)
			return nil
		})
	})
	if err != nil {
		return fmt.Errorf("guardedsql: reading installed policies: %w", err)
	}
	for _, w := range want {
		i := slices.IndexFunc(installed, func(p policyRow) bool { return p.table == w.Table && p.name == w.Name })
		if i < 0 {
			return fmt.Errorf("%w (table %q has no policy %q; apply postgres.RLSDDL)", ErrRLSPolicyMissing, w.Table, w.Name)
		}
		p := installed[i]
		var why []string
		if !p.permissive {
			why = append(why, "restrictive")
		}
		if p.cmd != "*" {
			why = append(why, "not FOR ALL")
		}
		if !p.qual || !p.check {
			why = append(why, "missing USING or WITH CHECK")
		}
		if !p.applies {
			why = append(why, "does not apply to role "+user)
		}
		_, deparsed, _ := strings.Cut(strings.TrimPrefix(p.comment, w.Marker), ":")
		switch {
		case p.comment == "" || !strings.HasPrefix(p.comment, w.Marker+":"):
			why = append(why, "marker "+quoteOr(p.comment)+" is not the current schema's "+w.Marker+" (generated for another schema or namespace, or a migration failed)")
		case deparsed != p.hash:
			why = append(why, "its expressions were altered after it was applied")
		}
		if len(why) > 0 {
			return fmt.Errorf("%w (table %q, policy %q: %s; re-apply postgres.RLSDDL)", ErrRLSPolicyMissing, w.Table, w.Name, strings.Join(why, ", "))
		}
	}
	for _, p := range installed {
		if p.name == d.PolicyName() || !p.permissive || !p.applies {
			continue
		}
		if p.cmd == "a" && !p.check {
			continue // an INSERT policy without WITH CHECK admits nothing
		}
		return fmt.Errorf("%w (table %q, policy %q)", ErrRLSPolicyUnexpected, p.table, p.name)
	}
	if err := d.checkByRef(ctx, q, g); err != nil { // (h4-ref) byref.go
		return err
	}
	if err := d.checkSigned(ctx, q, user); err != nil {
		return err
	}
	if err := d.checkPolicyFuncs(ctx, q, g); err != nil {
		return err
	}
	if !citus {
		return nil
	}
	return d.checkCitus(ctx, q, names) // citus.go: every shard placement on a Citus cluster
}

// policyFunc is a function the generated policies call (keep.go's keep
// and sees functions, byref.go's counting functions) as RLSDDL creates it:
// its body and search_path setting with @SCHEMA@ for the tables' schema.
type policyFunc struct {
	name, body, config string
	definer            bool
}

// policyFuncs returns the functions the policies of g call, besides the
// verifying function (checkSigned's).
func (d Dialect) policyFuncs(g *sqlast.Schema) []policyFunc {
	var out []policyFunc
	d.eachExistsFunc(g, func(t *sqlast.Table, fn string, cols []string) {
		out = append(out, policyFunc{name: fn, body: d.existsFuncBody(t, cols), config: "search_path=pg_catalog, pg_temp"})
	})
	for _, n := range g.Names {
		if t := g.Tables[n]; t.ByRef && len(t.Referrers) > 0 {
			out = append(out, policyFunc{name: d.RefFunc(t), body: d.refFuncBody(t), config: "search_path=pg_catalog, @SCHEMA@, pg_temp", definer: true})
		}
	}
	return out
}

// checkPolicyFuncsSQL reads back, for each function named $1 in the
// current schema, how many there are (one a signature the columns have had)
// and whether every one has the expected body ($2), SECURITY DEFINER or
// not ($3), search_path setting ($4) and the verifying function's ($5)
// owner.
const checkPolicyFuncsSQL = `WITH o AS (SELECT p.proowner FROM pg_catalog.pg_proc p WHERE p.oid = pg_catalog.to_regproc($5)),
s AS (SELECT pg_catalog.quote_ident(pg_catalog.current_schema()) AS q)
SELECT w.name, pg_catalog.count(f.oid),
  coalesce(pg_catalog.bool_and(f.prosrc = pg_catalog.replace(w.body, '@SCHEMA@', s.q)
    AND f.prosecdef = w.definer
    AND coalesce(pg_catalog.array_to_string(f.proconfig, ';'), '') = pg_catalog.replace(w.config, '@SCHEMA@', s.q)
    AND f.proowner IS NOT DISTINCT FROM (SELECT o.proowner FROM o)), false)
FROM ROWS FROM (pg_catalog.unnest($1::text[]), pg_catalog.unnest($2::text[]), pg_catalog.unnest($3::bool[]), pg_catalog.unnest($4::text[])) AS w(name, body, definer, config)
CROSS JOIN s
LEFT JOIN pg_catalog.pg_proc f ON f.proname = w.name AND f.pronamespace = pg_catalog.to_regnamespace(s.q)
GROUP BY w.name
ORDER BY w.name`

// checkPolicyFuncs verifies the functions the policies of g call: each is
// installed, as generated, and owned by the verifying function's owner.
//
// Invariant: a policy Check accepts calls only functions whose body is the
// one RLSDDL generated, so a replaced body (a keep function that returns
// true admits any level value under WITH CHECK) cannot pass for row-level
// security in force; the policy's own hash covers which function it calls.
func (d Dialect) checkPolicyFuncs(ctx context.Context, q engine.Querier, g *sqlast.Schema) error {
	if guardfault.Off(guardfault.PolicyFuncs) {
		return nil
	}
	fns := d.policyFuncs(g)
	if len(fns) == 0 {
		return nil
	}
	names, bodies, configs := make([]string, len(fns)), make([]string, len(fns)), make([]string, len(fns))
	definers := make([]bool, len(fns))
	for i, f := range fns {
		names[i], bodies[i], configs[i], definers[i] = f.name, f.body, f.config, f.definer
	}
	var why []string
	err := each(ctx, q, checkPolicyFuncsSQL, []any{names, bodies, definers, configs, d.Quote(d.ScopeFunc())}, func(r engine.Rows) error {
		var name string
		var n int64
		var ok bool
		if err := r.Scan(&name, &n, &ok); err != nil {
			return err
		}
		switch {
		case n == 0:
			why = append(why, "function "+name+" is missing")
		case !ok:
			why = append(why, "function "+name+" was altered (its body, security, search_path or owner is not the generated one)")
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("guardedsql: reading the functions the policies call: %w", err)
	}
	if len(why) > 0 {
		return fmt.Errorf("%w (%s; re-apply postgres.RLSDDL as the tables' owner)", ErrRLSPolicyMissing, strings.Join(why, ", "))
	}
	return nil
}

// beginCheck begins a transaction of the check on q, which must be a pool,
// with its lock waits bounded by CheckLockTimeout.
//
// Invariant: every statement of Check runs in a transaction begun here, so
// none of them waits longer than CheckLockTimeout for a lock.
func beginCheck(ctx context.Context, q engine.Querier) (engine.Tx, error) {
	p, ok := q.(engine.Pool)
	if !ok {
		return nil, fmt.Errorf("guardedsql: the start-up check needs a pool")
	}
	tx, err := p.Begin(ctx)
	if err != nil {
		return nil, err
	}
	if err := boundLocks(ctx, tx); err != nil {
		return nil, errors.Join(err, tx.Rollback(ctx))
	}
	return tx, nil
}

// eachBounded is each in a transaction of its own begun by beginCheck
// (rolled back: the check only reads).
func eachBounded(ctx context.Context, q engine.Querier, query string, args []any, fn func(engine.Rows) error) error {
	tx, err := beginCheck(ctx, q)
	if err != nil {
		return err
	}
	if err := each(ctx, tx, query, args, fn); err != nil {
		return errors.Join(err, tx.Rollback(ctx))
	}
	return tx.Rollback(ctx)
}

// inPinnedPath runs fn in a transaction whose search_path is pg_catalog
// alone, so that deparsed expressions qualify every table.
func inPinnedPath(ctx context.Context, q engine.Querier, fn func(engine.Querier) error) error {
	tx, err := beginCheck(ctx, q)
	if err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, `SELECT pg_catalog.set_config('search_path', 'pg_catalog', true)`); err != nil {
		return errors.Join(err, tx.Rollback(ctx))
	}
	if err := fn(tx); err != nil {
		return errors.Join(err, tx.Rollback(ctx))
	}
	return tx.Rollback(ctx)
}

func quoteOr(s string) string {
	if s == "" {
		return "(none)"
	}
	return fmt.Sprintf("%q", s)
}

// each runs query and calls fn for every row.
func each(ctx context.Context, q engine.Querier, query string, args []any, fn func(engine.Rows) error) error {
	rows, err := q.Query(ctx, query, args...)
	if err != nil {
		return err
	}
	for rows.Next() {
		if err := fn(rows); err != nil {
			rows.Close()
			return err
		}
	}
	return firstErr(rows.Err(), rows.Close())
}
