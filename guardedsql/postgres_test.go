package guardedsql_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tenantmcp/tenantmcp/builder"
	"github.com/tenantmcp/tenantmcp/guardedsql"
	sqlengine "github.com/tenantmcp/tenantmcp/guardedsql/internal/engine"
	"github.com/tenantmcp/tenantmcp/guardedsql/postgres"
	"github.com/tenantmcp/tenantmcp/internal/sqlast"
	"github.com/tenantmcp/tenantmcp/scope"
	"github.com/tenantmcp/tenantmcp/scope/scopetest"
)

// policyTables are the tenant-bound tables of the hotel schema.
var policyTables = []string{"bookings", "chains", "guests", "hotels", "payments", "rooms"}

// rawIDs runs query (no guard) on pool in a transaction that first sets
// the scope setting to doc signed with key for that transaction (unless
// setDoc is false) and returns the first column of every row.
func rawIDs(t *testing.T, pool *pgxpool.Pool, key postgres.Key, setDoc bool, doc, query string) []string {
	t.Helper()
	return rawIDsSet(t, pool, setDoc, func(nonce string) string { return signedScope(key, nonce, doc) }, query)
}

// rawIDsSet is rawIDs with the setting's value computed by value from the
// transaction's nonce.
func rawIDsSet(t *testing.T, pool *pgxpool.Pool, set bool, value func(nonce string) string, query string) []string {
	t.Helper()
	ctx := context.Background()
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if set {
		var nonce string
		if err := tx.QueryRow(ctx, postgres.ScopeNonceSQL).Scan(&nonce); err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Exec(ctx, `SELECT set_config('tenantmcp.scope', $1, true)`, value(nonce)); err != nil {
			t.Fatal(err)
		}
	}
	rows, err := tx.Query(ctx, query)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for rows.Next() {
		var v any
		if err := rows.Scan(&v); err != nil {
			t.Fatal(err)
		}
		out = append(out, fmt.Sprint(v))
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	slices.Sort(out)
	return out
}

func keysOf(m map[any]bool) []string {
	var out []string
	for k := range m {
		out = append(out, fmt.Sprint(k))
	}
	slices.Sort(out)
	return out
}

// TestPostgresPoliciesAlone checks the row-level security policies with
// no guard at all: raw SQL as the application role, with the scope
// document set by hand, sees exactly the oracle's rows for every scope of
// the isolation table, and nothing without a scope.
func TestPostgresPoliciesAlone(t *testing.T) {
	h := newPostgresHotel(t, enginePostgres.dsn(t), seedModel(3, 3, 4, 2))
	levels := guardedsql.SchemaLevelsForTest(h.sch)
	for _, sc := range isolationScopes {
		t.Run(sc.name, func(t *testing.T) {
			vis := h.m.visible(sc.grants)
			doc := encodeDoc(levels, sc.grants)
			for table, want := range map[string]map[any]bool{
				"chains": vis.chains, "hotels": vis.hotels, "rooms": vis.rooms,
				"bookings": vis.bookings, "payments": vis.payments, "guests": vis.guests,
			} {
				got := rawIDs(t, h.app, h.key, true, doc, `SELECT id FROM `+table)
				if exp := keysOf(want); !slices.Equal(got, exp) {
					t.Errorf("%s under %s: got %v, want %v", table, doc, got, exp)
				}
			}
		})
	}
	// No context, an empty context, an empty document: no rows, no error.
	for _, table := range policyTables {
		if got := rawIDs(t, h.app, h.key, false, "", `SELECT id FROM `+table); len(got) != 0 {
			t.Errorf("%s without context: %v", table, got)
		}
		for _, doc := range []string{"", "{}", `{"chain":[]}`, `{"region":["acme"]}`} {
			if got := rawIDs(t, h.app, h.key, true, doc, `SELECT id FROM `+table); len(got) != 0 {
				t.Errorf("%s with context %q: %v", table, doc, got)
			}
		}
	}
	// WITH CHECK: the policies refuse writes outside the context, too.
	ctx := context.Background()
	tx, err := h.app.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	var nonce string
	if err := tx.QueryRow(ctx, postgres.ScopeNonceSQL).Scan(&nonce); err != nil {
		t.Fatal(err)
	}
	tx.Exec(ctx, `SELECT set_config('tenantmcp.scope', $1, true)`, signedScope(h.key, nonce, `{"chain":["acme"]}`))
	_, err = tx.Exec(ctx, `INSERT INTO rooms (hotel_id, number, rate) VALUES ($1, 'x', 1)`, hotelOfChain(h.hotelDB, "globex"))
	if err == nil || !strings.Contains(err.Error(), "row-level security") {
		t.Fatalf("insert under a foreign hotel: %v", err)
	}
}

// encodeDoc writes the scope document the guard sets for grants.
func encodeDoc(levels []*sqlast.Level, grants []scope.Grant) string {
	return sqlengine.EncodeScope(levels, scopetest.New("t", grants)).Doc
}

// TestPostgresRawSQLWithoutContext: the application role, connected
// directly and running plain SQL with no scope, sees zero rows of every
// tenant-bound table, including on a connection that has just served a
// guarded call (the setting is transaction-local).
func TestPostgresRawSQLWithoutContext(t *testing.T) {
	h := newPostgresHotel(t, enginePostgres.dsn(t), seedModel(3, 3, 4, 2))
	ctx := context.Background()
	one := h.appCfg.Copy()
	one.MaxConns = 1
	pool := pgConnect(t, one)
	defer pool.Close()
	db, err := postgres.New(ctx, pool, h.sch, guardedsql.Options{Engine: postgres.Options{Key: h.key}})
	if err != nil {
		t.Fatal(err)
	}
	b := h.sch.Table("bookings")
	n, err := guardedsql.One(grantCtx(chainG("acme")), db, builder.Must(builder.Select(builder.CountAll()).From(b).Build()), guardedsql.Scalar[int64])
	if err != nil || n == 0 {
		t.Fatalf("guarded count: %d %v", n, err)
	}
	var setting string
	if err := pool.QueryRow(ctx, `SELECT current_setting('tenantmcp.scope', true)`).Scan(&setting); err != nil || setting != "" {
		t.Fatalf("setting after the guarded call: %q %v", setting, err)
	}
	for _, table := range append(policyTables, "countries") {
		var c int64
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM `+table).Scan(&c); err != nil {
			t.Fatal(err)
		}
		if want := int64(0); table == "countries" {
			if c != int64(len(h.m.countries)) {
				t.Errorf("global countries: %d rows", c)
			}
		} else if c != want {
			t.Errorf("%s: %d rows without context", table, c)
		}
	}
	// Writes without context are refused by WITH CHECK or find nothing.
	tag, err := pool.Exec(ctx, `UPDATE bookings SET status = 'x'`)
	if err != nil || tag.RowsAffected() != 0 {
		t.Fatalf("update without context: %v %v", tag, err)
	}
	if _, err := pool.Exec(ctx, `INSERT INTO chains (id, name) VALUES ('zz', 'z')`); err == nil {
		t.Fatal("insert without context accepted")
	}
}

// TestPostgresStartupCheck: NewPostgres refuses, with a specific error,
// every configuration in which the policies would not confine the
// connection, and accepts the owner once its tables are FORCE'd.
func TestPostgresStartupCheck(t *testing.T) {
	h := newPostgresHotel(t, enginePostgres.dsn(t), seedModel(2, 2, 2, 1))
	ctx := context.Background()
	try := func(pool *pgxpool.Pool) error {
		_, err := postgres.New(ctx, pool, h.sch, guardedsql.Options{Engine: postgres.Options{Key: h.key}})
		return err
	}
	owner := func(sql string) {
		t.Helper()
		if _, err := h.owner.Exec(ctx, sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	reapply := func() {
		t.Helper()
		if err := postgres.ApplyRLS(ctx, h.owner, h.sch, postgres.Options{Key: h.key}); err != nil {
			t.Fatal(err)
		}
		if err := try(h.app); err != nil {
			t.Fatalf("after re-applying: %v", err)
		}
	}
	if err := try(h.app); err != nil {
		t.Fatalf("application role: %v", err)
	}
	for _, tc := range []struct {
		name  string
		setup func()
		pool  func() *pgxpool.Pool
		want  error
	}{
		{"superuser", func() {}, func() *pgxpool.Pool { return h.admin }, postgres.ErrRLSSuperuser},
		{"bypassrls", func() {}, func() *pgxpool.Pool { return bypassPool(t, h) }, postgres.ErrRLSBypassRLS},
		// The owner is subject to its FORCE'd policies but can read the
		// scope-signing key (and replace the verifying function): it
		// could sign any scope, so it must not serve.
		{"owner is refused: it holds the key", func() {}, func() *pgxpool.Pool { return h.owner }, postgres.ErrRLSSigning},
		{"verifying function trusts the raw setting", func() {
			owner(`CREATE OR REPLACE FUNCTION tenantmcp_scope_doc() RETURNS jsonb LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$ SELECT nullif(current_setting('tenantmcp.scope', true), '')::jsonb $$`)
		}, func() *pgxpool.Pool { return h.app }, postgres.ErrRLSSigning},
		{"verifying function not SECURITY DEFINER", func() { owner(`ALTER FUNCTION tenantmcp_scope_doc() SECURITY INVOKER`) }, func() *pgxpool.Pool { return h.app }, postgres.ErrRLSSigning},
		{"verifying function search_path not pinned", func() { owner(`ALTER FUNCTION tenantmcp_scope_doc() RESET search_path`) }, func() *pgxpool.Pool { return h.app }, postgres.ErrRLSSigning},
		{"verifying function owned by the app role's group", func() {
			if _, err := h.admin.Exec(ctx, `GRANT `+h.ownerRole+` TO `+h.appRole); err != nil {
				t.Fatal(err)
			}
		}, func() *pgxpool.Pool { return h.app }, postgres.ErrRLSSigning},
		{"key table opened by a policy", func() { owner(`CREATE POLICY everyone ON tenantmcp_scope_keys USING (true)`) }, func() *pgxpool.Pool { return h.app }, postgres.ErrRLSSigning},
		{"key table without row-level security", func() { owner(`ALTER TABLE tenantmcp_scope_keys DISABLE ROW LEVEL SECURITY`) }, func() *pgxpool.Pool { return h.app }, postgres.ErrRLSSigning},
		{"signing key not installed", func() { owner(`DELETE FROM tenantmcp_scope_keys`) }, func() *pgxpool.Pool { return h.app }, postgres.ErrRLSKeyUnknown},
		{"owner without FORCE", func() { owner(`ALTER TABLE payments NO FORCE ROW LEVEL SECURITY`) }, func() *pgxpool.Pool { return h.owner }, postgres.ErrRLSOwnerNotForced},
		{"member of the owner role", func() { owner(`ALTER TABLE rooms NO FORCE ROW LEVEL SECURITY`) }, func() *pgxpool.Pool { return memberPool(t, h) }, postgres.ErrRLSOwnerNotForced},
		{"not forced", func() { owner(`ALTER TABLE payments NO FORCE ROW LEVEL SECURITY`) }, func() *pgxpool.Pool { return h.app }, postgres.ErrRLSNotEnabled},
		{"disabled", func() { owner(`ALTER TABLE hotels DISABLE ROW LEVEL SECURITY`) }, func() *pgxpool.Pool { return h.app }, postgres.ErrRLSNotEnabled},
		{"missing policy", func() { owner(`DROP POLICY tenantmcp_scope ON bookings`) }, func() *pgxpool.Pool { return h.app }, postgres.ErrRLSPolicyMissing},
		{"altered policy", func() { owner(`ALTER POLICY tenantmcp_scope ON guests USING (true)`) }, func() *pgxpool.Pool { return h.app }, postgres.ErrRLSPolicyMissing},
		{"stale marker", func() {
			owner(`COMMENT ON POLICY tenantmcp_scope ON chains IS 'tenantmcp:v1:0123456789abcdef01234567:x'`)
		}, func() *pgxpool.Pool { return h.app }, postgres.ErrRLSPolicyMissing},
		{"extra permissive policy", func() { owner(`CREATE POLICY everyone ON rooms USING (true)`) }, func() *pgxpool.Pool { return h.app }, postgres.ErrRLSPolicyUnexpected},
		{"extra restrictive policy is fine", func() { owner(`CREATE POLICY narrow ON rooms AS RESTRICTIVE USING (rate > 0)`) }, func() *pgxpool.Pool { return h.app }, nil},
		{"policy for another role is fine", func() { owner(`CREATE POLICY other ON rooms TO ` + h.ownerRole + ` USING (true)`) }, func() *pgxpool.Pool { return h.app }, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.setup()
			err := try(tc.pool())
			switch {
			case tc.want == nil && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.want != nil && (!errors.Is(err, tc.want) || !errors.Is(err, postgres.ErrRLSUnsafe)):
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
			if err != nil {
				t.Log(err)
			}
			for _, p := range []string{"everyone", "narrow", "other"} {
				owner(`DROP POLICY IF EXISTS ` + p + ` ON rooms`)
			}
			owner(`DROP POLICY IF EXISTS everyone ON tenantmcp_scope_keys`)
			if _, err := h.admin.Exec(ctx, `REVOKE `+h.ownerRole+` FROM `+h.appRole); err != nil {
				t.Fatal(err)
			}
			reapply()
		})
	}
}

// bypassPool connects as a fresh BYPASSRLS role.
func bypassPool(t *testing.T, h *pgHotel) *pgxpool.Pool {
	return extraRolePool(t, h, "BYPASSRLS", "")
}

// memberPool connects as a fresh role that is a member of the owner role,
// which gives it the owner's privileges (and the owner's exemption from
// non-forced policies).
func memberPool(t *testing.T, h *pgHotel) *pgxpool.Pool {
	return extraRolePool(t, h, "", h.ownerRole)
}

func extraRolePool(t *testing.T, h *pgHotel, attrs, memberOf string) *pgxpool.Pool {
	t.Helper()
	ctx := context.Background()
	name, pw := "tm_extra_"+uniqueSuffix(t), uniqueSuffix(t)
	stmts := []string{`CREATE ROLE ` + name + ` LOGIN ` + attrs + ` PASSWORD '` + pw + `'`,
		`GRANT USAGE ON SCHEMA ` + h.schema + ` TO ` + name,
		`GRANT SELECT ON ALL TABLES IN SCHEMA ` + h.schema + ` TO ` + name}
	if memberOf != "" {
		stmts = append(stmts, `GRANT `+memberOf+` TO `+name)
	}
	for _, s := range stmts {
		if _, err := h.admin.Exec(ctx, s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
	p := pgConnect(t, pgConfigFor(h.adminCfg, name, pw, h.schema))
	t.Cleanup(func() {
		p.Close()
		for _, s := range []string{`DROP OWNED BY ` + name, `DROP ROLE ` + name} {
			if _, err := h.admin.Exec(context.Background(), s); err != nil {
				t.Errorf("%s: %v", s, err)
			}
		}
	})
	return p
}

// TestPostgresRLSDDL pins the policy shape: the context is read through
// current_setting with nullif, each hop is an ARRAY InitPlan, every
// tenant-bound table is enabled and forced, global tables are untouched.
func TestPostgresRLSDDL(t *testing.T) {
	stmts, err := postgres.RLSDDL(builder.MustSchema(hotelDef), postgres.Options{})
	if err != nil {
		t.Fatal(err)
	}
	all := strings.Join(stmts, ";\n")
	for _, table := range policyTables {
		for _, want := range []string{
			`ALTER TABLE "` + table + `" ENABLE ROW LEVEL SECURITY`,
			`ALTER TABLE "` + table + `" FORCE ROW LEVEL SECURITY`,
			`CREATE POLICY "tenantmcp_scope" ON "` + table + `"`,
		} {
			if !strings.Contains(all, want) {
				t.Errorf("missing %q", want)
			}
		}
	}
	if strings.Contains(all, `"countries"`) {
		t.Error("global table touched")
	}
	for _, want := range []string{
		`jsonb_array_elements_text("tenantmcp_scope_doc"() -> 'chain')`,
		`CREATE OR REPLACE FUNCTION %I() RETURNS jsonb
LANGUAGE plpgsql STABLE SECURITY DEFINER PARALLEL RESTRICTED
SET search_path = pg_catalog, pg_temp`,
		`REVOKE ALL ON "tenantmcp_scope_keys" FROM PUBLIC`,
		// bookings has no level column of its own: its policy defers
		// to the visible rooms (see internal/engine/postgres chained).
		`("room_id" = ANY (ARRAY(SELECT "_p1"."id" FROM "rooms" AS "_p1")) OR "room_id" = ANY ('{}'))`,
	} {
		if !strings.Contains(all, want) {
			t.Errorf("missing %q in\n%s", want, all)
		}
	}
	if strings.Contains(strings.ToUpper(all), "IMMUTABLE") || strings.Contains(all, "set_config('tenantmcp.scope'") {
		t.Error("policy DDL must not define IMMUTABLE helpers or set the context")
	}
}

// signedScope is the setting value that makes doc verify in the
// transaction whose nonce (postgres.ScopeNonceSQL) is nonce.
func signedScope(k postgres.Key, nonce, doc string) string {
	s, err := postgres.SignScope(k, nonce, doc, postgres.Options{})
	if err != nil {
		panic(err)
	}
	return s
}

// TestPostgresRelationsAroundPolicies: the start-up check refuses an
// application role that can use a relation reaching a tenant-bound table's
// rows around its policies — a view owned by a superuser (directly, or
// under a security_invoker view), a materialized view, an inheritance
// child — with ErrRLSBypassPath naming it, and accepts the views that
// keep the policies (security_invoker, owned by a role subject to them,
// over a global table, or in a schema the role cannot use). Each refused
// view is first shown to read other tenants' rows as the role with no
// scope, each accepted one to read none of them.
func TestPostgresRelationsAroundPolicies(t *testing.T) {
	h := newPostgresHotel(t, enginePostgres.dsn(t), seedModel(2, 2, 2, 1))
	ctx := context.Background()
	exec := func(pool *pgxpool.Pool, sql string) {
		t.Helper()
		if _, err := pool.Exec(ctx, sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	var total int
	if err := h.admin.QueryRow(ctx, `SELECT count(*) FROM bookings`).Scan(&total); err != nil || total == 0 {
		t.Fatalf("bookings: %d rows, %v", total, err)
	}
	grant := `GRANT SELECT ON tm_around TO ` + h.appRole
	for _, tc := range []struct {
		name  string
		setup []string // as the superuser, then the grant
		owner bool     // create as the tables' owner instead
		leaks bool     // the app role with no scope reads bookings through it
		want  error
	}{
		{"view owned by the superuser", []string{`CREATE VIEW tm_around AS SELECT * FROM bookings`}, false, true, postgres.ErrRLSBypassPath},
		// The role cannot use the inner view, but the outer one reads it
		// with its owner's rights, and it reads bookings as the superuser.
		{"owner's view over the superuser's", []string{`CREATE VIEW tm_around_inner AS SELECT * FROM bookings`,
			`GRANT SELECT ON tm_around_inner TO ` + h.ownerRole, `@owner CREATE VIEW tm_around AS SELECT * FROM tm_around_inner`}, false, true, postgres.ErrRLSBypassPath},
		{"materialized view", []string{`CREATE MATERIALIZED VIEW tm_around AS SELECT * FROM bookings`}, false, true, postgres.ErrRLSBypassPath},
		{"inheritance child", []string{`CREATE TABLE tm_around () INHERITS (payments)`}, true, false, postgres.ErrRLSBypassPath},
		{"security_invoker view", []string{`CREATE VIEW tm_around WITH (security_invoker = true) AS SELECT * FROM bookings`}, false, false, nil},
		{"view owned by the tables' owner", []string{`CREATE VIEW tm_around AS SELECT * FROM bookings`}, true, false, nil},
		{"view of a global table", []string{`CREATE VIEW tm_around AS SELECT * FROM countries`}, false, false, nil},
		{"view revoked", []string{`CREATE VIEW tm_around AS SELECT * FROM bookings`, `REVOKE ALL ON tm_around FROM ` + h.appRole}, false, false, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pool := h.admin
			if tc.owner {
				pool = h.owner
			}
			for _, s := range tc.setup {
				switch {
				case strings.HasPrefix(s, "@owner "):
					pool = h.owner
					exec(pool, strings.TrimPrefix(s, "@owner "))
				case strings.HasPrefix(s, "REVOKE"):
					exec(pool, grant)
					exec(pool, s)
				default:
					exec(pool, s)
				}
			}
			if !strings.HasPrefix(tc.setup[len(tc.setup)-1], "REVOKE") {
				exec(pool, grant)
			}
			defer func() {
				for _, s := range []string{`DROP VIEW IF EXISTS tm_around`, `DROP VIEW IF EXISTS tm_around_inner`, `DROP MATERIALIZED VIEW IF EXISTS tm_around`, `DROP TABLE IF EXISTS tm_around`} {
					if _, err := h.admin.Exec(context.Background(), s); err != nil && !strings.Contains(err.Error(), "is not a") {
						t.Errorf("%s: %v", s, err)
					}
				}
			}()
			var n int
			err := h.app.QueryRow(ctx, `SELECT count(*) FROM tm_around`).Scan(&n)
			switch {
			case strings.Contains(tc.name, "revoked"):
				if err == nil {
					t.Fatalf("the revoked view is readable (%d rows)", n)
				}
			case err != nil:
				t.Fatalf("reading tm_around as the app role: %v", err)
			case tc.leaks && n != total:
				t.Fatalf("control: the app role with no scope reads %d rows through it, want all %d", n, total)
			case !tc.leaks && n != 0 && !strings.Contains(tc.name, "global"):
				t.Fatalf("the app role with no scope reads %d rows through it, want none", n)
			}
			_, err = postgres.New(ctx, h.app, h.sch, guardedsql.Options{Engine: postgres.Options{Key: h.key}})
			switch {
			case tc.want == nil && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.want != nil && (!errors.Is(err, tc.want) || !errors.Is(err, postgres.ErrRLSUnsafe)):
				t.Fatalf("err = %v, want %v", err, tc.want)
			case tc.want != nil && !strings.Contains(err.Error(), "tm_around"):
				t.Fatalf("the error does not name the relation: %v", err)
			}
			if err != nil {
				t.Log(err)
			}
		})
	}
	// SECURITY DEFINER functions: PUBLIC may execute a new function.
	for _, tc := range []struct {
		name, create string
		owner, leaks bool
		revoke       bool
	}{
		{"definer function of the superuser", `CREATE FUNCTION tm_around_f() RETURNS bigint LANGUAGE sql SECURITY DEFINER AS $$ SELECT count(*) FROM bookings $$`, false, true, false},
		{"definer plpgsql function of the superuser", `CREATE FUNCTION tm_around_f() RETURNS bigint LANGUAGE plpgsql SECURITY DEFINER AS $$ BEGIN RETURN (SELECT count(*) FROM public_bookings_alias_is_not_it, bookings); END $$`, false, true, false},
		{"invoker function of the superuser", `CREATE FUNCTION tm_around_f() RETURNS bigint LANGUAGE sql AS $$ SELECT count(*) FROM bookings $$`, false, false, false},
		{"definer function of the tables' owner", `CREATE FUNCTION tm_around_f() RETURNS bigint LANGUAGE sql SECURITY DEFINER AS $$ SELECT count(*) FROM bookings $$`, true, false, false},
		{"definer function of the superuser, not executable", `CREATE FUNCTION tm_around_f() RETURNS bigint LANGUAGE sql SECURITY DEFINER AS $$ SELECT count(*) FROM bookings $$`, false, false, true},
		{"definer function of the superuser naming no tenant table", `CREATE FUNCTION tm_around_f() RETURNS bigint LANGUAGE sql SECURITY DEFINER AS $$ SELECT count(*) FROM countries $$`, false, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pool := h.admin
			if tc.owner {
				pool = h.owner
			}
			create := tc.create
			if strings.Contains(create, "plpgsql") {
				// The body names bookings only in a cross join; the other
				// relation must exist for the call to run.
				exec(h.admin, `CREATE VIEW public_bookings_alias_is_not_it AS SELECT 1 AS one`)
				exec(h.admin, `GRANT SELECT ON public_bookings_alias_is_not_it TO `+h.ownerRole)
				defer exec(h.admin, `DROP VIEW public_bookings_alias_is_not_it`)
			}
			exec(pool, create)
			defer exec(h.admin, `DROP FUNCTION tm_around_f()`)
			if tc.revoke {
				exec(pool, `REVOKE EXECUTE ON FUNCTION tm_around_f() FROM PUBLIC`)
			}
			var n int
			err := h.app.QueryRow(ctx, `SELECT tm_around_f()`).Scan(&n)
			switch {
			case tc.revoke:
				if err == nil {
					t.Fatalf("the revoked function runs (%d)", n)
				}
			case err != nil:
				t.Fatalf("calling tm_around_f as the app role: %v", err)
			case tc.leaks && n != total:
				t.Fatalf("control: the app role with no scope counts %d bookings through it, want all %d", n, total)
			case !tc.leaks && strings.Contains(create, "bookings") && n != 0:
				t.Fatalf("the app role with no scope counts %d bookings through it, want none", n)
			}
			_, err = postgres.New(ctx, h.app, h.sch, guardedsql.Options{Engine: postgres.Options{Key: h.key}})
			switch {
			case tc.leaks && (!errors.Is(err, postgres.ErrRLSBypassPath) || !strings.Contains(err.Error(), "tm_around_f()")):
				t.Fatalf("err = %v, want ErrRLSBypassPath naming tm_around_f()", err)
			case !tc.leaks && err != nil:
				t.Fatalf("refused: %v", err)
			}
			if err != nil {
				t.Log(err)
			}
		})
	}
	// A schema the role cannot use hides a leaking view.
	exec(h.admin, `CREATE SCHEMA tm_around_hidden`)
	defer exec(h.admin, `DROP SCHEMA tm_around_hidden CASCADE`)
	exec(h.admin, `CREATE VIEW tm_around_hidden.v AS SELECT * FROM bookings`)
	exec(h.admin, `GRANT SELECT ON tm_around_hidden.v TO `+h.appRole)
	if _, err := postgres.New(ctx, h.app, h.sch, guardedsql.Options{Engine: postgres.Options{Key: h.key}}); err != nil {
		t.Fatalf("a view in a schema the role cannot use: refused: %v", err)
	}
	exec(h.admin, `GRANT USAGE ON SCHEMA tm_around_hidden TO `+h.appRole)
	defer exec(h.admin, `REVOKE USAGE ON SCHEMA tm_around_hidden FROM `+h.appRole)
	if _, err := postgres.New(ctx, h.app, h.sch, guardedsql.Options{Engine: postgres.Options{Key: h.key}}); !errors.Is(err, postgres.ErrRLSBypassPath) {
		t.Fatalf("the same view once the schema is usable: err = %v, want ErrRLSBypassPath", err)
	}
}
