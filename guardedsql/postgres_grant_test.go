package guardedsql_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tenantmcp/tenantmcp/builder"
	"github.com/tenantmcp/tenantmcp/guardedsql"
	"github.com/tenantmcp/tenantmcp/guardedsql/postgres"
)

func TestAppGrantDDLRefusesBadInput(t *testing.T) {
	sch := builder.MustSchema(hotelDef)
	for _, role := range []string{"", "public", "PUBLIC", strings.Repeat("r", 64)} {
		if _, err := postgres.AppGrantDDL(sch, role); !errors.Is(err, guardedsql.ErrInvalid) {
			t.Errorf("role %q: %v, want ErrInvalid", role, err)
		}
	}
	if _, err := postgres.AppGrantDDL(nil, "app"); !errors.Is(err, guardedsql.ErrInvalid) {
		t.Errorf("nil schema: %v, want ErrInvalid", err)
	}
	// A role name is an identifier, never SQL.
	stmts, err := postgres.AppGrantDDL(sch, `app"; DROP TABLE chains; --`)
	if err != nil {
		t.Fatal(err)
	}
	if want := `TO "app""; DROP TABLE chains; --"`; !strings.Contains(stmts[1], want) {
		t.Errorf("role not quoted as an identifier:\n%s", stmts[1])
	}
}

// TestGrantApp gives a fresh role the graph's privileges on live
// PostgreSQL and proves it can do what guardedsql needs (read, write,
// draw identity values) and nothing else: a table outside the graph stays
// unreadable, and roles that would bypass row-level security are refused.
func TestGrantApp(t *testing.T) {
	dsn := enginePostgres.dsn(t)
	ctx := context.Background()
	adminCfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	root := pgConnect(t, adminCfg)
	t.Cleanup(root.Close) // after the drops below: cleanups run last-in first-out
	id := uniqueSuffix(t)
	schema, app, bypass, pw := "tm_test_"+id, "tm_app_"+id, "tm_app_bypass_"+id, uniqueSuffix(t)
	t.Cleanup(func() {
		for _, s := range []string{`DROP SCHEMA IF EXISTS ` + schema + ` CASCADE`, `DROP ROLE IF EXISTS ` + app, `DROP ROLE IF EXISTS ` + bypass} {
			if _, err := root.Exec(context.Background(), s); err != nil {
				cleanupError(t, "cleanup: %s: %v", s, err)
			}
		}
	})
	for _, s := range []string{
		`CREATE ROLE ` + app + ` LOGIN NOSUPERUSER NOBYPASSRLS PASSWORD '` + pw + `'`,
		`CREATE ROLE ` + bypass + ` LOGIN NOSUPERUSER BYPASSRLS`,
		`CREATE SCHEMA ` + schema,
	} {
		if _, err := root.Exec(ctx, s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
	admin := pgConnect(t, pgConfigFor(adminCfg, adminCfg.ConnConfig.User, adminCfg.ConnConfig.Password, schema))
	defer admin.Close()
	for _, s := range append(ddlHotel("postgres"),
		`CREATE TABLE signing_keys (id int PRIMARY KEY, secret text NOT NULL)`,
		`INSERT INTO signing_keys VALUES (1, 'do-not-read')`,
		`INSERT INTO chains VALUES ('acme', 'Acme')`) {
		if _, err := admin.Exec(ctx, s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
	sch := builder.MustSchema(hotelDef)

	if err := postgres.GrantApp(ctx, admin, sch, bypass); !errors.Is(err, postgres.ErrRLSBypassRLS) {
		t.Errorf("BYPASSRLS role: %v, want ErrRLSBypassRLS", err)
	}
	if err := postgres.GrantApp(ctx, admin, sch, adminCfg.ConnConfig.User); !errors.Is(err, postgres.ErrRLSSuperuser) {
		t.Errorf("superuser: %v, want ErrRLSSuperuser", err)
	}
	if err := postgres.GrantApp(ctx, admin, sch, "tm_no_such_role_"+id); !errors.Is(err, guardedsql.ErrInvalid) {
		t.Errorf("missing role: %v, want ErrInvalid", err)
	}
	if err := postgres.GrantApp(ctx, admin, sch, app); err != nil {
		t.Fatalf("GrantApp: %v", err)
	}

	pool := pgConnect(t, pgConfigFor(adminCfg, app, pw, schema))
	defer pool.Close()
	var n int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM chains`).Scan(&n); err != nil || n != 1 {
		t.Errorf("read a graph table: n=%d, %v", n, err)
	}
	// An identity column draws from its sequence: INSERT needs USAGE on it.
	if _, err := pool.Exec(ctx, `INSERT INTO hotels (chain_id, name) VALUES ('acme', 'Acme Paris')`); err != nil {
		t.Errorf("insert with an identity column: %v", err)
	}
	if _, err := pool.Exec(ctx, `UPDATE hotels SET name = 'Acme Lyon'`); err != nil {
		t.Errorf("update: %v", err)
	}
	if _, err := pool.Exec(ctx, `DELETE FROM hotels`); err != nil {
		t.Errorf("delete: %v", err)
	}
	var secret string
	err = pool.QueryRow(ctx, `SELECT secret FROM signing_keys`).Scan(&secret)
	if err == nil || !strings.Contains(err.Error(), "permission denied") {
		t.Errorf("a table outside the graph is readable: %q, %v", secret, err)
	}
	if _, err := pool.Exec(ctx, `TRUNCATE chains`); err == nil {
		t.Error("TRUNCATE was granted")
	}
	// Issue 25 §3: a global table is read-only for the application role
	// unless declared writable.
	if _, err := admin.Exec(ctx, `INSERT INTO countries VALUES ('FR', 'France')`); err != nil {
		t.Fatal(err)
	}
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM countries`).Scan(&n); err != nil || n != 1 {
		t.Errorf("read a global table: n=%d, %v", n, err)
	}
	for _, q := range []string{`UPDATE countries SET name = 'Hacked'`, `INSERT INTO countries VALUES ('XX', 'x')`, `DELETE FROM countries`} {
		if _, err := pool.Exec(ctx, q); err == nil || !strings.Contains(err.Error(), "permission denied") {
			t.Errorf("app role's raw %s on read-only global countries: %v, want permission denied", q, err)
		}
	}
	def := hotelDef
	def.Tables = slices.Clone(hotelDef.Tables)
	for i := range def.Tables {
		if def.Tables[i].Name == "countries" {
			def.Tables[i].GlobalWritable = "test: country names are edited by every chain"
		}
	}
	if err := postgres.GrantApp(ctx, admin, builder.MustSchema(def), app); err != nil {
		t.Fatalf("GrantApp with countries writable: %v", err)
	}
	if _, err := pool.Exec(ctx, `UPDATE countries SET name = 'République française'`); err != nil {
		t.Errorf("UPDATE of a global declared writable: %v", err)
	}
	// Back to read-only: GrantApp revokes what it granted before.
	if err := postgres.GrantApp(ctx, admin, sch, app); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `UPDATE countries SET name = 'France'`); err == nil {
		t.Error("UPDATE of countries still allowed after it became read-only again")
	}
}
