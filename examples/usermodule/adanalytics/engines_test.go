package adanalytics_test

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" driver of the owner's handle

	"example.com/adanalytics/adanalytics"
	"github.com/tenantmcp/tenantmcp/claims"
	"github.com/tenantmcp/tenantmcp/claims/claimstest"
	"github.com/tenantmcp/tenantmcp/guardedsql"
	gmysql "github.com/tenantmcp/tenantmcp/guardedsql/mysql"
	"github.com/tenantmcp/tenantmcp/guardedsql/postgres"
	"github.com/tenantmcp/tenantmcp/redact"
	"github.com/tenantmcp/tenantmcp/server"
)

// served is the tool server on one engine, with the owner's unguarded
// handle on its database (for the oracles and to check what writes did).
type served struct {
	endpoint string
	is       *claimstest.Issuer
	owner    *sql.DB
	engine   string
}

// serveEngine seeds Generate(n, "g") into a database of its own on the
// engine of dsn ("" is embedded SQLite) and serves the tools on it through
// the guard, as a deployment would: on PostgreSQL as a login role without
// RLS bypass, with forced row-level security installed by the owner; on
// MySQL/MariaDB in a scratch database. Everything it creates is dropped
// when the test ends.
func serveEngine(t *testing.T, dsn string, n int) served {
	t.Helper()
	ctx := context.Background()
	engine := "sqlite"
	if dsn != "" {
		engine = engineName(t, dsn)
	}
	sfx := randomName(t)
	var (
		owner *sql.DB
		db    *guardedsql.DB
		err   error
	)
	seed := func(owner *sql.DB) {
		if err := adanalytics.CreateTables(ctx, owner, adanalytics.Engine(engine)); err != nil {
			t.Fatal(err)
		}
		if err := adanalytics.Insert(ctx, owner, adanalytics.Engine(engine), interleaved(adanalytics.Generate(n, "g"))); err != nil {
			t.Fatal(err)
		}
	}
	switch engine {
	case "sqlite":
		path := filepath.Join(t.TempDir(), "ads.db")
		if owner, err = sql.Open("sqlite", path); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { owner.Close() })
		seed(owner)
		if db, err = guardedsql.Open(ctx, "sqlite:"+path, adanalytics.Schema, guardedsql.Options{}); err != nil {
			t.Fatal(err)
		}
	case "postgres":
		owner, db = servePostgres(t, dsn, sfx, seed)
	case "mysql":
		owner, db = serveMySQL(t, dsn, sfx, seed)
	default:
		t.Fatalf("engine %q", engine)
	}
	t.Cleanup(func() { db.Close() })

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	endpoint := "http://" + ln.Addr().String() + "/mcp"
	is := claimstest.Start(t, endpoint)
	red, err := redact.New(adanalytics.Redaction)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := server.New(server.Options{
		Name: "adanalytics", Version: "test", DB: db, Redactor: red, Levels: []string{adanalytics.LevelCompany},
		Verifier: is.Verifier(t, claims.Mapping{Patterns: []string{"/companies/{company}"}, Levels: []string{adanalytics.LevelCompany}}),
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := adanalytics.Register(srv); err != nil {
		t.Fatal(err)
	}
	sctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- srv.Serve(sctx, ln, server.HTTPOptions{ResourceURL: endpoint}) }()
	t.Cleanup(func() {
		stop()
		if err := <-done; err != nil && !errors.Is(err, http.ErrServerClosed) && !errors.Is(err, context.Canceled) {
			t.Errorf("serve: %v", err)
		}
	})
	return served{endpoint: endpoint, is: is, owner: owner, engine: engine}
}

// interleaved orders every table's rows by id, then company: company 1's
// row 1, company 2's row 1, …, company 1's row 2, … — so that the rows of
// the companies alternate in storage as well as repeat ids.
func interleaved(d adanalytics.Data) adanalytics.Data {
	for _, rows := range d {
		sort.SliceStable(rows, func(i, j int) bool {
			a, b := rows[i], rows[j]
			if a["id"].(int64) != b["id"].(int64) {
				return a["id"].(int64) < b["id"].(int64)
			}
			return fmt.Sprint(a["company_id"]) < fmt.Sprint(b["company_id"])
		})
	}
	return d
}

func randomName(t *testing.T) string {
	b := make([]byte, 6)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return "adx_" + hex.EncodeToString(b)
}

// servePostgres makes database and role sfx, seeds it as the DSN's
// (superuser) account, grants the role its DML rights, installs forced RLS
// with a fresh signing key, and opens the guard as the role.
func servePostgres(t *testing.T, dsn, sfx string, seed func(*sql.DB)) (*sql.DB, *guardedsql.DB) {
	ctx := context.Background()
	admin, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	for _, s := range []string{`CREATE ROLE ` + sfx + ` LOGIN NOSUPERUSER NOBYPASSRLS NOCREATEDB NOCREATEROLE`, `CREATE DATABASE ` + sfx} {
		if _, err := admin.ExecContext(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		a, err := sql.Open("pgx", dsn)
		if err != nil {
			t.Error(err)
			return
		}
		defer a.Close()
		for _, s := range []string{`DROP DATABASE IF EXISTS ` + sfx + ` WITH (FORCE)`, `DROP ROLE IF EXISTS ` + sfx} {
			if _, err := a.ExecContext(context.Background(), s); err != nil {
				t.Errorf("cleanup: %v", err)
			}
		}
	})
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	u.Path = "/" + sfx
	owner, err := sql.Open("pgx", u.String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { owner.Close() })
	seed(owner)
	conn, err := pgx.Connect(ctx, u.String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	key, err := postgres.NewKey("adx")
	if err != nil {
		t.Fatal(err)
	}
	if err := postgres.GrantApp(ctx, conn, adanalytics.Schema, sfx); err != nil {
		t.Fatal(err)
	}
	if err := postgres.ApplyRLS(ctx, conn, adanalytics.Schema, postgres.Options{Key: key}); err != nil {
		t.Fatal(err)
	}
	app := *u
	app.User = url.User(sfx)
	pool, err := pgxpool.New(ctx, app.String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	db, err := postgres.New(ctx, pool, adanalytics.Schema, guardedsql.Options{Engine: postgres.Options{Key: key}})
	if err != nil {
		t.Fatal(err)
	}
	return owner, db
}

// serveMySQL makes database sfx, seeds it, and opens the guard on it with
// the DSN's account.
func serveMySQL(t *testing.T, dsn, sfx string, seed func(*sql.DB)) (*sql.DB, *guardedsql.DB) {
	ctx := context.Background()
	cfg, err := mysql.ParseDSN(strings.TrimPrefix(dsn, "mysql://"))
	if err != nil {
		t.Fatal(err)
	}
	admin, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	if _, err := admin.ExecContext(ctx, "CREATE DATABASE "+sfx+" CHARACTER SET utf8mb4"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		a, err := sql.Open("mysql", cfg.FormatDSN())
		if err != nil {
			t.Error(err)
			return
		}
		defer a.Close()
		if _, err := a.ExecContext(context.Background(), "DROP DATABASE IF EXISTS "+sfx); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	})
	cfg.DBName = sfx
	owner, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { owner.Close() })
	seed(owner)
	raw, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { raw.Close() })
	db, err := gmysql.New(ctx, raw, adanalytics.Schema, guardedsql.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return owner, db
}

// forEngine runs f on every engine of TENANTMCP_DSN (or SQLite).
func forEngine(t *testing.T, f func(t *testing.T, dsn string)) {
	for _, dsn := range dsns(t) {
		name := "sqlite"
		if dsn != "" {
			name = engineName(t, dsn)
		}
		t.Run(name, func(t *testing.T) { f(t, dsn) })
	}
}

// table reads every row of a table as the owner, each column's value
// normalised (integers as int64, text as string).
func table(t *testing.T, owner *sql.DB, name string) []map[string]any {
	t.Helper()
	var cols []string
	for _, td := range adanalytics.SchemaDef().Tables {
		if td.Name == name {
			cols = td.Columns
		}
	}
	rows, err := owner.Query("SELECT " + strings.Join(cols, ", ") + " FROM " + name)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []map[string]any
	for rows.Next() {
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			t.Fatal(err)
		}
		r := map[string]any{}
		for i, c := range cols {
			switch v := vals[i].(type) {
			case []byte:
				r[c] = string(v)
			case int32:
				r[c] = int64(v)
			default:
				r[c] = v
			}
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// asInt reads an integer column value (MySQL may give it as text).
func asInt(t *testing.T, v any) int64 {
	t.Helper()
	switch x := v.(type) {
	case int64:
		return x
	case string:
		var n int64
		if _, err := fmt.Sscan(x, &n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	t.Fatalf("not an integer: %T %v", v, v)
	return 0
}
