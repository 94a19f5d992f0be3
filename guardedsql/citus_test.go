package guardedsql_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tenantmcp/tenantmcp/builder"
	"github.com/tenantmcp/tenantmcp/guardedsql"
	"github.com/tenantmcp/tenantmcp/guardedsql/postgres"
)

// Issue 31: the guard and its signed row-level security on a Citus
// cluster. These tests need a Citus coordinator (with workers added) and
// its superuser's DSN in TENANTMCP_TEST_CITUS_DSN; docs/citus.md says how
// to start a local one.
const envCitus = "TENANTMCP_TEST_CITUS_DSN"

func citusDSN(t testing.TB) string {
	t.Helper()
	v := os.Getenv(envCitus)
	if v == "" {
		t.Skipf("citus: set %s to a Citus coordinator's superuser connection with workers added, e.g. %s=postgres://postgres@127.0.0.1:9700/postgres?sslmode=disable; the test creates and drops its own schema and roles (docs/citus.md)",
			envCitus, envCitus)
	}
	return v
}

// The schema in Citus's multi-tenant shape: every table carries the
// tenant column company_id (companies: id), keys are composite with it,
// the tenant tables are co-located (distributed by it, four shards), and
// ad_kinds is a reference table (a copy on every node).
var citusDDL = []string{
	`CREATE TABLE companies (id bigint PRIMARY KEY, name text NOT NULL)`,
	`SELECT create_distributed_table('companies', 'id', shard_count => 4)`,
	`CREATE TABLE campaigns (company_id bigint NOT NULL, id bigint NOT NULL, name text NOT NULL,
		PRIMARY KEY (company_id, id), FOREIGN KEY (company_id) REFERENCES companies (id))`,
	`SELECT create_distributed_table('campaigns', 'company_id', colocate_with => 'companies')`,
	`CREATE TABLE ad_kinds (id bigint PRIMARY KEY, name text NOT NULL)`,
	`SELECT create_reference_table('ad_kinds')`,
	`CREATE TABLE ads (company_id bigint NOT NULL, id bigint NOT NULL, campaign_id bigint NOT NULL,
		kind_id bigint NOT NULL REFERENCES ad_kinds (id), title text NOT NULL,
		PRIMARY KEY (company_id, id))`,
	`SELECT create_distributed_table('ads', 'company_id', colocate_with => 'companies')`,
	`ALTER TABLE ads ADD FOREIGN KEY (company_id, campaign_id) REFERENCES campaigns (company_id, id)`,
	`INSERT INTO companies VALUES (1, 'one'), (2, 'two'), (3, 'three')`,
	`INSERT INTO ad_kinds VALUES (1, 'banner'), (2, 'video')`,
	`INSERT INTO campaigns SELECT c, i, 'c' || c || '-camp' || i FROM generate_series(1, 3) c, generate_series(1, 2) i`,
	`INSERT INTO ads SELECT c, i, i, 1 + i % 2, 'c' || c || '-ad' || i FROM generate_series(1, 3) c, generate_series(1, 2) i`,
}

// citusTables are its tenant-bound tables, in name order (the check's).
var citusTables = []string{"ads", "campaigns", "companies"}

func citusSchema() *builder.Schema {
	company := map[string]string{"company_id": "company"}
	return builder.MustSchema(builder.SchemaDef{
		Levels: []builder.Level{{Name: "company", Key: builder.IntKey}},
		Tables: []builder.TableDef{
			{Name: "companies", Columns: []string{"id", "name"}, PrimaryKey: []string{"id"},
				Levels: map[string]string{"id": "company"}},
			{Name: "campaigns", Columns: []string{"company_id", "id", "name"}, PrimaryKey: []string{"company_id", "id"},
				Levels:      company,
				ForeignKeys: []builder.ForeignKey{{Columns: []string{"company_id"}, RefTable: "companies"}}},
			{Name: "ad_kinds", Columns: []string{"id", "name"}, PrimaryKey: []string{"id"}, Global: true},
			{Name: "ads", Columns: []string{"company_id", "id", "campaign_id", "kind_id", "title"}, PrimaryKey: []string{"company_id", "id"},
				Levels: company,
				ForeignKeys: []builder.ForeignKey{
					{Columns: []string{"company_id", "campaign_id"}, RefTable: "campaigns", RefColumns: []string{"company_id", "id"}},
					{Columns: []string{"kind_id"}, RefTable: "ad_kinds"},
				}},
		},
	})
}

// citusDB is one provisioned copy of the schema on the cluster.
type citusDB struct {
	schema, ownerRole, appRole string
	adminCfg                   *pgxpool.Config
	root, owner, app           *pgxpool.Pool
	key                        postgres.Key
	sch                        *builder.Schema
	// workers are the owner's pools on the worker nodes, by "host:port".
	workers map[string]*pgxpool.Pool
}

// newCitusDB creates the roles, the schema (both propagated to every
// node by Citus) and the distributed tables, seeded; no row-level
// security yet.
func newCitusDB(t *testing.T) *citusDB {
	t.Helper()
	ctx := context.Background()
	adminCfg, err := pgxpool.ParseConfig(citusDSN(t))
	if err != nil {
		t.Fatalf("%s: %v", envCitus, err)
	}
	id := uniqueSuffix(t)
	key, err := postgres.NewKey("k" + id)
	if err != nil {
		t.Fatal(err)
	}
	c := &citusDB{schema: "tm_citus_" + id, ownerRole: "tm_cowner_" + id, appRole: "tm_capp_" + id,
		adminCfg: adminCfg, key: key, sch: citusSchema(), workers: map[string]*pgxpool.Pool{}}
	c.root = pgConnect(t, adminCfg)
	var citus bool
	if err := c.root.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus')`).Scan(&citus); err != nil || !citus {
		c.root.Close()
		t.Fatalf("%s does not name a database with the citus extension (%v)", envCitus, err)
	}
	ownerPW, appPW := uniqueSuffix(t), uniqueSuffix(t)
	// Citus propagates the roles and the schema to every node.
	execAll(t, c.root,
		fmt.Sprintf(`CREATE ROLE %s LOGIN NOSUPERUSER NOBYPASSRLS PASSWORD '%s'`, c.ownerRole, ownerPW),
		fmt.Sprintf(`CREATE ROLE %s LOGIN NOSUPERUSER NOBYPASSRLS PASSWORD '%s'`, c.appRole, appPW),
		fmt.Sprintf(`CREATE SCHEMA %s AUTHORIZATION %s`, c.schema, c.ownerRole),
		fmt.Sprintf(`GRANT USAGE ON SCHEMA %s TO %s`, c.schema, c.appRole))
	t.Cleanup(func() {
		for _, p := range c.workers {
			p.Close()
		}
		for _, p := range []*pgxpool.Pool{c.app, c.owner} {
			if p != nil {
				p.Close()
			}
		}
		endSessions(c.root, c.appRole, c.ownerRole)
		for _, s := range []string{
			`DROP SCHEMA IF EXISTS ` + c.schema + ` CASCADE`,
			`DROP ROLE IF EXISTS ` + c.appRole,
			`DROP ROLE IF EXISTS ` + c.ownerRole,
		} {
			if _, err := c.root.Exec(context.Background(), s); err != nil {
				cleanupError(t, "cleanup: %s: %v", s, err)
			}
		}
		c.root.Close()
	})
	c.owner = pgConnect(t, pgConfigFor(adminCfg, c.ownerRole, ownerPW, c.schema))
	execAll(t, c.owner, citusDDL...)
	execAll(t, c.owner,
		`GRANT SELECT, INSERT, UPDATE, DELETE ON companies, campaigns, ads TO `+c.appRole,
		`GRANT SELECT ON ad_kinds TO `+c.appRole)
	c.app = pgConnect(t, pgConfigFor(adminCfg, c.appRole, appPW, c.schema))
	// The owner's pools on the workers, which the tests change behind the
	// coordinator's back.
	var host string
	var port uint16
	// (pgx: a failed Query returns Rows whose Err, checked by ForEachRow, is that error.)
	rows, _ := c.root.Query(ctx, `SELECT nodename, nodeport::int4 FROM pg_dist_node WHERE groupid <> 0 AND noderole = 'primary' AND isactive`)
	_, err = pgx.ForEachRow(rows, []any{&host, &port}, func() error {
		cfg := pgConfigFor(adminCfg, c.ownerRole, ownerPW, c.schema)
		cfg.ConnConfig.Host, cfg.ConnConfig.Port = host, port
		c.workers[fmt.Sprintf("%s:%d", host, port)] = pgConnect(t, cfg)
		return nil
	})
	if err != nil || len(c.workers) == 0 {
		t.Fatalf("reading the cluster's workers: %d found, %v (add workers with citus_add_node)", len(c.workers), err)
	}
	return c
}

// execAll runs stmts on pool, in order, failing t at the first error.
func execAll(t *testing.T, pool *pgxpool.Pool, stmts ...string) {
	t.Helper()
	for _, s := range stmts {
		if _, err := pool.Exec(context.Background(), s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
}

// coordinatorOnly runs fn in a transaction of the owner's on pool with
// Citus's DDL propagation off: what it creates stays on that node.
func coordinatorOnly(t *testing.T, pool *pgxpool.Pool, fn func(tx pgx.Tx) error) {
	t.Helper()
	err := pgx.BeginFunc(context.Background(), pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(context.Background(), `SET LOCAL citus.enable_ddl_propagation TO off`); err != nil {
			return err
		}
		return fn(tx)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// applyLocal applies RLSDDL, with the key, on pool's node only.
func (c *citusDB) applyLocal(t *testing.T, pool *pgxpool.Pool) {
	t.Helper()
	coordinatorOnly(t, pool, func(tx pgx.Tx) error {
		return postgres.ApplyRLS(context.Background(), tx, c.sch, postgres.Options{Key: c.key})
	})
}

// applyEverywhere makes the cluster what the check must accept: the
// generated row-level security on the coordinator, the signed-scope
// objects and the key on every worker, and every shard placement of
// every tenant-bound table with the coordinator's policy, created through
// the coordinator (run_command_on_placements) from RLSDDL's own text.
func (c *citusDB) applyEverywhere(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	c.applyLocal(t, c.owner)
	for _, w := range c.workers {
		c.applyLocal(t, w)
	}
	stmts, err := postgres.RLSDDL(c.sch, postgres.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, table := range citusTables {
		create := ""
		for _, s := range stmts {
			if strings.HasPrefix(s, `CREATE POLICY "tenantmcp_scope" ON "`+table+`" `) {
				create = s
			}
		}
		if create == "" {
			t.Fatalf("RLSDDL has no policy for %s", table)
		}
		create = strings.Replace(strings.ReplaceAll(create, "%", "%%"), ` ON "`+table+`" `, ` ON %1$s `, 1)
		cmd := `SET search_path TO ` + c.schema + `; ALTER TABLE %1$s ENABLE ROW LEVEL SECURITY; ALTER TABLE %1$s FORCE ROW LEVEL SECURITY; ` + create
		rows, err := c.owner.Query(ctx, `SELECT nodename || ':' || nodeport, success, result FROM run_command_on_placements($1::regclass, $2)`, table, cmd)
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var node, result string
			var ok bool
			if err := rows.Scan(&node, &ok, &result); err != nil {
				t.Fatal(err)
			}
			if !ok {
				t.Fatalf("creating %s's policy on a placement on %s: %s", table, node, result)
			}
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
	}
}

// open guards the application role's pool.
func (c *citusDB) open(recheck time.Duration) (*guardedsql.DB, error) {
	return postgres.New(context.Background(), c.app, c.sch, guardedsql.Options{Engine: postgres.Options{Key: c.key, Recheck: recheck}})
}

// placement returns one shard placement of table: its shard's qualified
// name and its node ("host:port").
func (c *citusDB) placement(t *testing.T, table string) (shard, node string) {
	t.Helper()
	err := c.root.QueryRow(context.Background(), `SELECT shard_name(s.logicalrelid, s.shardid), p.nodename || ':' || p.nodeport
		FROM pg_dist_shard s JOIN pg_dist_placement pl USING (shardid) JOIN pg_dist_node p USING (groupid)
		WHERE s.logicalrelid = $1::regclass AND p.groupid <> 0 ORDER BY s.shardid DESC LIMIT 1`, c.schema+"."+table).Scan(&shard, &node)
	if err != nil {
		t.Fatal(err)
	}
	return shard, node
}

// assertPlacementErr checks that err is the placement error naming table,
// node (any worker if node is "") and reason, and names no secret.
func (c *citusDB) assertPlacementErr(t *testing.T, err error, table, node, reason string) {
	t.Helper()
	if !errors.Is(err, postgres.ErrRLSPlacement) || !errors.Is(err, postgres.ErrRLSUnsafe) || !errors.Is(err, guardedsql.ErrEngineUnsafe) {
		t.Fatalf("got %v, want postgres.ErrRLSPlacement (matching ErrRLSUnsafe and guardedsql.ErrEngineUnsafe)", err)
	}
	msg := err.Error()
	for _, want := range []string{`table "` + table + `"`, "on node " + node, reason} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q does not say %q", msg, want)
		}
	}
	named := false
	for w := range c.workers {
		named = named || strings.Contains(msg, "on node "+w)
	}
	if !named {
		t.Errorf("error %q names no worker of %v", msg, c.workers)
	}
	if _, secret, _ := strings.Cut(c.key.Text(), ":"); strings.Contains(msg, secret) {
		t.Errorf("error %q contains the key's secret", msg)
	}
}

// TestCitusGeneratedPoliciesRejected reproduces the first finding of
// issue 31: Citus refuses the generated policies (each has a sub-select),
// so ApplyRLS with DDL propagation on fails, as a whole, and the
// application cannot start on it.
func TestCitusGeneratedPoliciesRejected(t *testing.T) {
	c := newCitusDB(t)
	ctx := context.Background()
	err := postgres.ApplyRLS(ctx, c.owner, c.sch, postgres.Options{Key: c.key})
	if err == nil || !strings.Contains(err.Error(), "SubLink") {
		t.Fatalf("ApplyRLS on a Citus cluster: %v, want Citus's \"unexpected non-SELECT command in SubLink\"", err)
	}
	if _, err := c.open(time.Hour); !errors.Is(err, postgres.ErrRLSUnsafe) {
		t.Fatalf("Open after the failed ApplyRLS: %v, want ErrRLSUnsafe", err)
	}
}

// TestCitusCoordinatorOnlyPoliciesRefused: with the policies created on
// the coordinator only (DDL propagation off), the coordinator's catalogs
// show row-level security in force, and raw SQL as the application role,
// with no scope at all, reads every company's rows from the shards (the
// leak of issue 31, asserted here so the test shows it is real). Open
// must refuse to start, naming a table and a node.
func TestCitusCoordinatorOnlyPoliciesRefused(t *testing.T) {
	c := newCitusDB(t)
	ctx := context.Background()
	c.applyLocal(t, c.owner)
	for _, w := range c.workers {
		c.applyLocal(t, w) // the key and function are not what is missing
	}
	var n int
	if err := c.app.QueryRow(ctx, `SELECT count(*) FROM ads`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 6 {
		t.Fatalf("raw SQL as the application role with no scope read %d of 6 ads rows; the leak this test guards against is not reproduced", n)
	}
	var rls, forced bool
	if err := c.owner.QueryRow(ctx, `SELECT relrowsecurity, relforcerowsecurity FROM pg_class WHERE oid = 'ads'::regclass`).Scan(&rls, &forced); err != nil || !rls || !forced {
		t.Fatalf("the coordinator's ads: rls %v, forced %v, %v; want both on", rls, forced, err)
	}
	db, err := c.open(time.Hour)
	if db != nil {
		db.Close()
	}
	c.assertPlacementErr(t, err, "ads", "", "row-level security off (coordinator: on)")
	if err := postgres.CheckRLS(ctx, c.app, c.sch, postgres.Options{Key: c.key}); !errors.Is(err, postgres.ErrRLSPlacement) {
		t.Fatalf("CheckRLS: %v, want ErrRLSPlacement", err)
	}
}

// TestCitusPlacementDriftCaughtWhileServing: on a cluster where every
// placement carries the coordinator's policy and every worker the
// signed-scope objects, Open passes; then one shard loses its policy
// (dropped on its worker), and the periodic check refuses every guarded
// statement with the placement's error, naming the table and that node;
// DB.Check says the same. Then a shard's policy is altered to admit every
// row, and a worker's verifying function is replaced, and the check names
// each.
func TestCitusPlacementDriftCaughtWhileServing(t *testing.T) {
	const recheck = 100 * time.Millisecond
	c := newCitusDB(t)
	ctx := context.Background()
	c.applyEverywhere(t)
	db, err := c.open(recheck)
	if err != nil {
		t.Fatalf("Open on a cluster with every placement's policy in place: %v", err)
	}
	defer db.Close()
	if err := db.Check(ctx); err != nil {
		t.Fatalf("DB.Check before the drift: %v", err)
	}

	shard, node := c.placement(t, "campaigns")
	if _, err := c.workers[node].Exec(ctx, `SET citus.enable_ddl_propagation TO off; DROP POLICY tenantmcp_scope ON `+shard); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * recheck)
	companies := c.sch.Table("companies")
	q := builder.Must(builder.Select(companies.Col("id")).From(companies).Build())
	_, err = guardedsql.All(grantCtx(companyG(1)), db, q, guardedsql.Scalar[int64])
	c.assertPlacementErr(t, err, "campaigns", node, "0 policies (coordinator: 1)")
	c.assertPlacementErr(t, db.Check(ctx), "campaigns", node, "0 policies (coordinator: 1)")

	// Restore the shard's policy: the check passes again.
	c.applyEverywhereAgain(t)
	if err := db.Check(ctx); err != nil {
		t.Fatalf("DB.Check after re-applying: %v", err)
	}

	// A shard's policy altered to admit every row (same name, same
	// count): its deparsed expression differs.
	shard, node = c.placement(t, "companies")
	if _, err := c.workers[node].Exec(ctx, `SET citus.enable_ddl_propagation TO off; ALTER POLICY tenantmcp_scope ON `+shard+` USING (true) WITH CHECK (true)`); err != nil {
		t.Fatal(err)
	}
	c.assertPlacementErr(t, db.Check(ctx), "companies", node, "the policies differ from the coordinator's")
	c.applyEverywhereAgain(t)
	if err := db.Check(ctx); err != nil {
		t.Fatalf("DB.Check after re-applying: %v", err)
	}

	// A worker's verifying function altered (here: made to accept any
	// setting): every placement on that node fails.
	_, node = c.placement(t, "ads")
	if _, err := c.workers[node].Exec(ctx, `SET citus.enable_ddl_propagation TO off; CREATE OR REPLACE FUNCTION tenantmcp_scope_doc() RETURNS jsonb
		LANGUAGE plpgsql STABLE SECURITY DEFINER PARALLEL RESTRICTED SET search_path = pg_catalog, pg_temp
		AS $$ BEGIN RETURN pg_catalog.current_setting('tenantmcp.scope', true)::jsonb; END $$`); err != nil {
		t.Fatal(err)
	}
	c.assertPlacementErr(t, db.Check(ctx), "ads", node, "the verifying function differs from the coordinator's")
}

// applyEverywhereAgain re-creates the placements' policies (after the
// drift test dropped one): drop them all through the coordinator first.
func (c *citusDB) applyEverywhereAgain(t *testing.T) {
	t.Helper()
	for _, table := range citusTables {
		if _, err := c.owner.Exec(context.Background(), `SELECT run_command_on_placements($1::regclass, 'DROP POLICY IF EXISTS tenantmcp_scope ON %s')`, table); err != nil {
			t.Fatal(err)
		}
	}
	c.applyEverywhere(t)
}
