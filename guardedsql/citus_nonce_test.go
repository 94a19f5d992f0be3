package guardedsql_test

import (
	"context"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// TestCitusDefinerNonceRowNotShared measures the candidate shared nonce of
// docs/citus.md on a real cluster, with hand-written SQL (the library has
// no Citus mode): a SECURITY DEFINER function, owned by the tables' owner,
// writes a random nonce and the scope document into a reference table
// inside the caller's transaction and sets the nonce with SET LOCAL
// (propagated by citus.propagate_set_commands = 'local'); a sub-select-free
// policy on a distributed table reads, through a STABLE SECURITY DEFINER
// function, its node's placement of that table and accepts the row only if
// its xmin is the node's current transaction.
//
// What it shows, and why the library does not build on it:
//   - called by the application role, the row is invisible where the policy
//     runs: Citus opens its worker connections per user, so the function's
//     INSERT (running as the owner) travels over the owner's connections,
//     while the application role's reads run on the application role's
//     connections, other backends with other local transactions. The
//     policy admits no row: safe, and useless;
//   - called by the owner itself (same user, same connections) the
//     mechanism admits exactly the document's company;
//   - a nonce committed in one transaction and set again in another admits
//     nothing (its row's xmin is not the new transaction's);
//   - the application role cannot write the table itself.
//
// If a Citus release ever makes the first count non-zero, the candidate
// becomes usable and this test says so. Last, the open alternative: a row
// the application role writes itself is seen by its reads.
func TestCitusDefinerNonceRowNotShared(t *testing.T) {
	c := newCitusDB(t)
	ctx := context.Background()
	execAll(t, c.owner,
		`CREATE TABLE tm_nonces (nonce text PRIMARY KEY, doc jsonb NOT NULL)`,
		`SELECT create_reference_table('tm_nonces')`,
		`REVOKE ALL ON tm_nonces FROM PUBLIC`,
		`ALTER TABLE tm_nonces ENABLE ROW LEVEL SECURITY`)
	var shard string
	if err := c.owner.QueryRow(ctx, `SELECT shard_name('tm_nonces'::regclass, shardid) FROM pg_dist_shard WHERE logicalrelid = 'tm_nonces'::regclass`).Scan(&shard); err != nil {
		t.Fatal(err)
	}
	// The verifying function reads the node's own placement (shard_name
	// qualifies it with the schema; the shard table, never the distributed table: that would be a distributed query
	// from inside a shard's query).
	execAll(t, c.owner,
		`CREATE FUNCTION tm_scope_ids() RETURNS bigint[] LANGUAGE plpgsql STABLE SECURITY DEFINER PARALLEL RESTRICTED
SET search_path = pg_catalog, pg_temp AS $$
DECLARE n text := pg_catalog.current_setting('tm.nonce', true); d jsonb;
BEGIN
  IF n IS NULL OR n = '' THEN RETURN '{}'; END IF;
  SELECT r.doc INTO d FROM `+shard+` AS r
    WHERE r.nonce = n AND r.xmin = pg_catalog.pg_current_xact_id_if_assigned()::text::xid;
  IF d IS NULL THEN RETURN '{}'; END IF;
  RETURN pg_catalog.translate((d -> 'company')::text, '[]', '{}')::bigint[];
END $$`,
		`CREATE FUNCTION tm_begin_scope(c bigint) RETURNS text LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp AS $$
DECLARE n text := pg_catalog.md5(pg_catalog.gen_random_uuid()::text);
BEGIN
  EXECUTE 'SET LOCAL citus.propagate_set_commands = local';
  EXECUTE pg_catalog.format('SET LOCAL tm.nonce = %L', n);
  INSERT INTO `+c.schema+`.tm_nonces VALUES (n, pg_catalog.jsonb_build_object('company', pg_catalog.jsonb_build_array(c)));
  RETURN n;
END $$`,
		`GRANT EXECUTE ON FUNCTION tm_scope_ids(), tm_begin_scope(bigint) TO `+c.appRole,
		// Citus accepts and propagates a policy with no sub-select.
		`ALTER TABLE ads ENABLE ROW LEVEL SECURITY`,
		`ALTER TABLE ads FORCE ROW LEVEL SECURITY`,
		`CREATE POLICY tm_nonce ON ads USING (company_id = ANY (tm_scope_ids()))`)

	// count begins a transaction on pool, runs setup, and counts ads rows
	// (all of them, and company 2's), committing.
	count := func(pool interface {
		Begin(context.Context) (pgx.Tx, error)
	}, setup func(tx pgx.Tx) string) (nonce string, all, two int) {
		t.Helper()
		tx, err := pool.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback(ctx)
		nonce = setup(tx)
		if err := tx.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE company_id = 2) FROM ads`).Scan(&all, &two); err != nil {
			t.Fatal(err)
		}
		if err := tx.Commit(ctx); err != nil {
			t.Fatal(err)
		}
		return nonce, all, two
	}
	begin := func(tx pgx.Tx) string {
		var n string
		if err := tx.QueryRow(ctx, `SELECT tm_begin_scope(1)`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}

	if _, all, _ := count(c.app, begin); all != 0 {
		t.Errorf("application role: the owner's nonce row admitted %d ads rows on the workers; the candidate of docs/citus.md now works across users (revisit issue 31)", all)
	}
	nonce, all, two := count(c.owner, begin)
	if all != 2 || two != 0 {
		t.Errorf("owner: %d rows (company 2: %d), want company 1's 2 rows only", all, two)
	}
	replay := func(tx pgx.Tx) string {
		if _, err := tx.Exec(ctx, `SET LOCAL citus.propagate_set_commands = 'local'`); err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Exec(ctx, `SET LOCAL tm.nonce = '`+nonce+`'`); err != nil {
			t.Fatal(err)
		}
		return nonce
	}
	for name, pool := range map[string]interface {
		Begin(context.Context) (pgx.Tx, error)
	}{"owner": c.owner, "application role": c.app} {
		if _, all, _ := count(pool, replay); all != 0 {
			t.Errorf("%s: the committed nonce set again in a new transaction admitted %d rows", name, all)
		}
	}
	_, err := c.app.Exec(ctx, `INSERT INTO tm_nonces VALUES ('forged', '{"company":[2]}')`)
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || pe.Code != "42501" {
		t.Errorf("application role writing the nonce table: %v, want permission denied (42501)", err)
	}

	// The alternative docs/citus.md leaves open: the application role
	// writes the row over its own connections. With INSERT granted behind
	// a policy whose check admits anything (where a signature check would
	// have to stand), the row is seen: mechanically it works, and without
	// that check it is a forgery (here of company 2).
	execAll(t, c.owner,
		`CREATE POLICY tm_insert ON tm_nonces FOR INSERT TO `+c.appRole+` WITH CHECK (true)`,
		`GRANT INSERT ON tm_nonces TO `+c.appRole)
	own := func(tx pgx.Tx) string {
		for _, s := range []string{
			`SET LOCAL citus.propagate_set_commands = 'local'`,
			`SET LOCAL citus.max_adaptive_executor_pool_size = 1`,
			`SET LOCAL tm.nonce = 'app-written'`,
			`INSERT INTO tm_nonces VALUES ('app-written', '{"company":[2]}')`,
		} {
			if _, err := tx.Exec(ctx, s); err != nil {
				t.Fatalf("%s: %v", s, err)
			}
		}
		return ""
	}
	if _, all, two := count(c.app, own); all != 2 || two != 2 {
		t.Errorf("application role, its own row naming company 2: %d rows (company 2: %d), want company 2's 2 rows", all, two)
	}
}
