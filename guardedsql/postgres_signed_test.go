package guardedsql_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tenantmcp/tenantmcp/builder"
	"github.com/tenantmcp/tenantmcp/guardedsql"
	"github.com/tenantmcp/tenantmcp/guardedsql/postgres"
)

// countIn counts a table's rows in tx as the policies let it see them.
func countIn(t *testing.T, tx pgx.Tx, table string) int64 {
	t.Helper()
	var n int64
	if err := tx.QueryRow(context.Background(), `SELECT count(*) FROM `+table).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func nonceOf(t *testing.T, tx pgx.Tx) string {
	t.Helper()
	var nonce string
	if err := tx.QueryRow(context.Background(), postgres.ScopeNonceSQL).Scan(&nonce); err != nil {
		t.Fatal(err)
	}
	return nonce
}

func setScope(t *testing.T, tx pgx.Tx, value string, local bool) {
	t.Helper()
	if _, err := tx.Exec(context.Background(), `SELECT set_config('tenantmcp.scope', $1, $2)`, value, local); err != nil {
		t.Fatal(err)
	}
}

// TestPostgresSignedContextUnforgeable: raw SQL as the application role
// sees no row of any tenant-bound table however it sets the scope setting
// itself: unsigned, at session level, with a made-up MAC, signed with an
// unknown key, or with a correctly signed value replayed from another
// transaction (later on the same connection, or concurrently on another
// connection). The positive control, the same value in the transaction it
// was signed for, sees rows, so every zero below is the signature's doing.
func TestPostgresSignedContextUnforgeable(t *testing.T) {
	h := newPostgresHotel(t, enginePostgres.dsn(t), seedModel(3, 3, 4, 2))
	ctx := context.Background()
	all := `{"chain":["7","acme","globex"]}`
	begin := func(p *pgxpool.Pool) pgx.Tx {
		tx, err := p.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { tx.Rollback(ctx) })
		return tx
	}
	none := func(tx pgx.Tx, what string) {
		t.Helper()
		for _, table := range policyTables {
			if n := countIn(t, tx, table); n != 0 {
				t.Errorf("%s: %s shows %d rows", what, table, n)
			}
		}
	}

	// Positive control: signed for this very transaction.
	a := begin(h.app)
	nonceA := nonceOf(t, a)
	signedA := signedScope(h.key, nonceA, all)
	setScope(t, a, signedA, true)
	if n := countIn(t, a, "bookings"); n != int64(len(h.m.bookings)) {
		t.Fatalf("correctly signed context: %d bookings, want %d", n, len(h.m.bookings))
	}

	// Concurrently, on another connection: the replayed value.
	b := begin(h.app)
	setScope(t, b, signedA, true)
	none(b, "value replayed on another connection")
	b.Rollback(ctx)
	a.Rollback(ctx)

	// Later transactions of any connection.
	for _, c := range []struct {
		name  string
		value func(nonce string) string
		local bool
	}{
		{"unsigned document", func(string) string { return all }, true},
		{"unsigned document, session level", func(string) string { return all }, false},
		{"replayed signed value", func(string) string { return signedA }, true},
		{"replayed signed value, session level", func(string) string { return signedA }, false},
		{"made-up MAC", func(string) string { return "v1." + h.key.ID + "." + strings.Repeat("0", 64) + "." + all }, true},
		{"MAC of another document", func(nonce string) string {
			other := signedScope(h.key, nonce, `{"chain":["acme"]}`)
			mac := strings.Split(other, ".")[2]
			return "v1." + h.key.ID + "." + mac + "." + all
		}, true},
		{"signed with an unknown key", func(nonce string) string {
			k, err := postgres.NewKey(h.key.ID) // same id, other secret
			if err != nil {
				t.Fatal(err)
			}
			return signedScope(k, nonce, all)
		}, true},
		{"signed for the previous nonce of this connection", func(nonce string) string {
			return signedScope(h.key, nonceA, all)
		}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			tx := begin(h.app)
			setScope(t, tx, c.value(nonceOf(t, tx)), c.local)
			none(tx, c.name)
			// Writes: WITH CHECK refuses an insert into any chain.
			_, err := tx.Exec(ctx, `SAVEPOINT s; INSERT INTO chains (id, name) VALUES ('zz', 'z')`)
			if err == nil || !strings.Contains(err.Error(), "row-level security") {
				t.Errorf("insert under a forged context: %v", err)
			}
			tx.Rollback(ctx)
			// A session-level value is still there in the next
			// transaction of this connection, and admits nothing either.
			if !c.local {
				conn, err := h.app.Acquire(ctx)
				if err != nil {
					t.Fatal(err)
				}
				defer conn.Release()
				next, err := conn.Begin(ctx)
				if err != nil {
					t.Fatal(err)
				}
				defer next.Rollback(ctx)
				none(next, c.name+", next transaction")
			}
		})
	}

	// The guarded DB on the same pool still sees its tenant's rows.
	bk := h.sch.Table("bookings")
	n, err := guardedsql.One(grantCtx(chainG("acme")), h.db, builder.Must(builder.Select(builder.CountAll()).From(bk).Build()), guardedsql.Scalar[int64])
	if err != nil || n == 0 || n >= int64(len(h.m.bookings)) {
		t.Fatalf("guarded count for acme: %d %v", n, err)
	}
}

// TestPostgresRLSKeyRotation rotates the signing key without downtime:
// with both keys installed, servers on either key serve; once the old key
// is removed, a server still on it sees nothing and a new one refuses to
// start with ErrRLSKeyUnknown, while the new key keeps serving.
func TestPostgresRLSKeyRotation(t *testing.T) {
	h := newPostgresHotel(t, enginePostgres.dsn(t), seedModel(2, 2, 2, 2), guardedsql.Options{Engine: postgres.Options{RLSOnly: true}})
	ctx := context.Background()
	bk := h.sch.Table("bookings")
	q := builder.Must(builder.Select(builder.CountAll()).From(bk).Build())
	count := func(db *guardedsql.DB) (int64, error) {
		return guardedsql.One(grantCtx(chainG("acme")), db, q, guardedsql.Scalar[int64])
	}
	before, err := count(h.db)
	if err != nil || before == 0 {
		t.Fatalf("old key before rotation: %d %v", before, err)
	}
	k2, err := postgres.NewKey("second")
	if err != nil {
		t.Fatal(err)
	}
	if err := postgres.AddKey(ctx, h.owner, k2, postgres.Options{}); err != nil {
		t.Fatal(err)
	}
	db2, err := postgres.New(ctx, h.app, h.sch, guardedsql.Options{Engine: postgres.Options{RLSOnly: true, Key: k2}})
	if err != nil {
		t.Fatalf("new key: %v", err)
	}
	for name, db := range map[string]*guardedsql.DB{"old": h.db, "new": db2} {
		if n, err := count(db); err != nil || n != before {
			t.Fatalf("%s key during rotation: %d %v, want %d", name, n, err, before)
		}
	}
	if err := postgres.RemoveKey(ctx, h.owner, h.key.ID, postgres.Options{}); err != nil {
		t.Fatal(err)
	}
	if n, err := count(db2); err != nil || n != before {
		t.Fatalf("new key after rotation: %d %v", n, err)
	}
	if n, err := count(h.db); err != nil || n != 0 {
		t.Fatalf("removed key still admits rows: %d %v", n, err)
	}
	if _, err := postgres.New(ctx, h.app, h.sch, guardedsql.Options{Engine: postgres.Options{Key: h.key}}); !errors.Is(err, postgres.ErrRLSKeyUnknown) || !errors.Is(err, postgres.ErrRLSUnsafe) {
		t.Fatalf("start-up with the removed key: %v", err)
	}
	if _, err := postgres.New(ctx, h.app, h.sch, guardedsql.Options{}); !errors.Is(err, postgres.ErrRLSNoKey) {
		t.Fatalf("start-up without a key: %v", err)
	}
	// A key added where ApplyRLS has not run (here: another namespace)
	// says so, rather than "relation … does not exist".
	secret := []byte(strings.Repeat("s3cret-", 5))
	k3, err := postgres.MakeKey("third", secret)
	if err != nil {
		t.Fatal(err)
	}
	err = postgres.AddKey(ctx, h.owner, k3, postgres.Options{Namespace: "nokeys"})
	if err == nil || !strings.Contains(err.Error(), "run ApplyRLS first") || strings.Contains(err.Error(), "s3cret") || strings.Contains(err.Error(), fmt.Sprintf("%x", secret[:8])) {
		t.Fatalf("AddKey before ApplyRLS: %v; want the advice, without the secret", err)
	}
}

// TestRLSKeyNeverPrinted: the key's secret appears in none of its
// printable forms but Text.
func TestRLSKeyNeverPrinted(t *testing.T) {
	k, err := postgres.NewKey("k1")
	if err != nil {
		t.Fatal(err)
	}
	secret := strings.TrimPrefix(k.Text(), "k1:")
	for _, s := range []string{fmt.Sprint(k), fmt.Sprintf("%v %+v %#v %s", k, k, k, k), k.LogValue().String()} {
		if strings.Contains(s, secret) || !strings.Contains(s, "k1") {
			t.Errorf("printed key %q", s)
		}
	}
	back, err := postgres.ParseKey(k.Text())
	if err != nil || back.Text() != k.Text() {
		t.Fatalf("round trip: %v", err)
	}
	for _, bad := range []string{"", "k1", "k1:zz", "k1:" + strings.Repeat("ab", 16-1), "bad id:" + secret} {
		if _, err := postgres.ParseKey(bad); !errors.Is(err, guardedsql.ErrInvalid) {
			t.Errorf("ParseRLSKey(%q) = %v", bad, err)
		}
	}
}

// TestPostgresUniqueOracles is TestUniqueOraclesReported on PostgreSQL.
func TestPostgresUniqueOracles(t *testing.T) {
	h := newPostgresHotel(t, enginePostgres.dsn(t), seedModel(2, 1, 1, 1))
	ctx := context.Background()
	for _, s := range oracleIndexes {
		if _, err := h.owner.Exec(ctx, s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
	logs := &bytes.Buffer{}
	_, err := postgres.New(ctx, h.app, h.sch, guardedsql.Options{Engine: postgres.Options{Key: h.key}})
	checkSharedUniqueRefused(t, err)
	db, err := postgres.New(ctx, h.app, oracleAckedSchema(), guardedsql.Options{Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})), Engine: postgres.Options{Key: h.key}})
	if err != nil {
		t.Fatal(err)
	}
	checkOracles(t, db.UniqueOracles(), logs.String())
}

// TestPostgresScopeFuncSearchPath: nothing the verifying function uses can
// be substituted through the caller's search_path. The application role
// puts a schema of its own before pg_catalog (allowed once search_path
// names pg_catalog) holding an "=" on bytea and an "=" on text that are
// always true and a sha256 that returns a constant, and creates a key
// table of its own in pg_temp (searched first for relations) holding a
// key it knows. Under that path a made-up MAC, and a value signed with its
// own key, still yield NULL and show no row; the correctly signed value,
// under the same path, still verifies (the control).
func TestPostgresScopeFuncSearchPath(t *testing.T) {
	h := newPostgresHotel(t, enginePostgres.dsn(t), seedModel(2, 2, 2, 2))
	ctx := context.Background()
	evil := h.schema + "_evil"
	if _, err := h.admin.Exec(ctx, `CREATE SCHEMA `+evil+` AUTHORIZATION `+h.appRole); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.admin.Exec(context.Background(), `DROP SCHEMA `+evil+` CASCADE`) })
	c, err := pgx.ConnectConfig(ctx, h.appCfg.ConnConfig)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	for _, st := range []string{
		// The function runs as its owner, who sees only the schemas it
		// has USAGE on: the role opens its schema to everyone.
		`GRANT USAGE ON SCHEMA ` + evil + ` TO PUBLIC`,
		`CREATE FUNCTION ` + evil + `.yes(bytea, bytea) RETURNS boolean LANGUAGE sql IMMUTABLE AS 'SELECT true'`,
		`CREATE OPERATOR ` + evil + `.= (LEFTARG = bytea, RIGHTARG = bytea, FUNCTION = ` + evil + `.yes)`,
		`CREATE FUNCTION ` + evil + `.yes(text, text) RETURNS boolean LANGUAGE sql IMMUTABLE AS 'SELECT true'`,
		`CREATE OPERATOR ` + evil + `.= (LEFTARG = text, RIGHTARG = text, FUNCTION = ` + evil + `.yes)`,
		`CREATE FUNCTION ` + evil + `.sha256(bytea) RETURNS bytea LANGUAGE sql IMMUTABLE AS $$SELECT '\x00'::bytea$$`,
		// A key whose secret is 64 zero bytes: its pads are 0x36 and 0x5c
		// repeated, and the role signs with them in SQL below.
		`CREATE TEMP TABLE tenantmcp_scope_keys (id text PRIMARY KEY, inner_pad bytea NOT NULL, outer_pad bytea NOT NULL)`,
		`INSERT INTO pg_temp.tenantmcp_scope_keys VALUES ('` + h.key.ID + `', decode(repeat('36', 64), 'hex'), decode(repeat('5c', 64), 'hex'))`,
	} {
		if _, err := c.Exec(ctx, st); err != nil {
			t.Fatalf("%s: %v", st, err)
		}
	}
	doc := `{"chain":["7","acme","globex"]}`
	own := `SELECT 'v1.` + h.key.ID + `.' || encode(pg_catalog.sha256(k.outer_pad || pg_catalog.sha256(k.inner_pad || convert_to(E'tenantmcp-scope-v1\ntenantmcp\n' || ($1::text) || E'\n' || $2, 'UTF8'))), 'hex') || '.' || $2
FROM pg_temp.tenantmcp_scope_keys AS k`
	fn := h.schema + ".tenantmcp_scope_doc()"
	for _, cs := range []struct {
		name   string
		value  func(tx pgx.Tx, nonce string) string
		admits bool
	}{
		{"correctly signed (control)", func(_ pgx.Tx, nonce string) string { return signedScope(h.key, nonce, doc) }, true},
		{"made-up MAC", func(pgx.Tx, string) string { return "v1." + h.key.ID + "." + strings.Repeat("0", 64) + "." + doc }, false},
		{"signed with the role's own key in pg_temp", func(tx pgx.Tx, nonce string) string {
			var v string
			if err := tx.QueryRow(ctx, own, nonce, doc).Scan(&v); err != nil {
				t.Fatal(err)
			}
			return v
		}, false},
	} {
		t.Run(cs.name, func(t *testing.T) {
			tx, err := c.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer tx.Rollback(ctx)
			nonce := nonceOf(t, tx)
			setScope(t, tx, cs.value(tx, nonce), true)
			if _, err := tx.Exec(ctx, `SELECT pg_catalog.set_config('search_path', $1, true)`, evil+", pg_catalog, "+h.schema); err != nil {
				t.Fatal(err)
			}
			var verified bool
			if err := tx.QueryRow(ctx, `SELECT `+fn+` IS NOT NULL`).Scan(&verified); err != nil {
				t.Fatal(err)
			}
			n := countIn(t, tx, h.schema+".bookings")
			if verified != cs.admits || (n > 0) != cs.admits {
				t.Errorf("under search_path %s, %s: verified %v, %d bookings visible", evil, cs.name, verified, n)
			}
		})
	}
}
