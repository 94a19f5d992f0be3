package guardedsql_test

import (
	"context"
	"database/sql"
	"path/filepath"
	"strings"
	"testing"

	sq "github.com/Masterminds/squirrel"
	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tenantmcp/tenantmcp/builder"
	"github.com/tenantmcp/tenantmcp/guardedsql"
	gmysql "github.com/tenantmcp/tenantmcp/guardedsql/mysql"
	"github.com/tenantmcp/tenantmcp/guardedsql/postgres"
	"github.com/tenantmcp/tenantmcp/guardedsql/sqlite"
)

// scratch is a fresh, empty database on one engine for tests that need
// tables of their own (the modelling-gap tests): created with a unique
// name, dropped at cleanup.
type scratch struct {
	e engine
	// exec runs q ('?' placeholders) as the tables' owner / administrator.
	exec func(q string, args ...any) error
	// adminExec (PostgreSQL) runs q as the administrator, whom row-level
	// security does not confine (the owner's is forced once open ran).
	adminExec func(q string, args ...any) error
	// count returns the single integer q selects, read unguarded (on
	// PostgreSQL as the administrator, whom row-level security does not
	// confine).
	count func(q string, args ...any) int
	// open guards the database with sch: on PostgreSQL it installs the
	// row-level security of sch as the owner, grants the application role
	// and opens the guarded DB as that role (start-up check included).
	open func(sch *builder.Schema, opts ...guardedsql.Options) (*guardedsql.DB, error)
	// introspect builds a schema from the database's catalog.
	introspect func(ten builder.Tenancy) (*builder.Schema, error)
	// appExec (PostgreSQL) runs q as the application role in a transaction
	// that first sets the scope document doc: raw SQL under row-level
	// security only.
	appExec func(doc, q string, args ...any) error
}

// mustWrite runs q (with ddlTypes applied) past the guard and row-level
// security: data written outside the application (a migration, an
// import).
func (s *scratch) mustWrite(t testing.TB, q string, args ...any) {
	t.Helper()
	exec := s.exec
	if s.adminExec != nil {
		exec = s.adminExec
	}
	if err := exec(ddlTypes(s.e.name, q), args...); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
}

// mustExec runs q (with ddlTypes applied) as the owner.
func (s *scratch) mustExec(t testing.TB, q string, args ...any) {
	t.Helper()
	if err := s.exec(ddlTypes(s.e.name, q), args...); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
}

// scratchKey signs the scope context of the PostgreSQL scratch databases.
var scratchKey = func() postgres.Key {
	k, err := postgres.NewKey("scratch")
	if err != nil {
		panic(err)
	}
	return k
}()

// newScratch provisions the database and runs ddl in it.
func newScratch(t testing.TB, e engine, ddl []string) *scratch {
	t.Helper()
	ctx := context.Background()
	var s *scratch
	switch e.name {
	case "postgres":
		s = newScratchPostgres(t, e)
	case "mysql":
		s = newScratchMySQL(t, e)
	default:
		path := filepath.Join(t.TempDir(), "scratch.db")
		raw, err := sql.Open("sqlite", path+"?_pragma=foreign_keys(1)")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { raw.Close() })
		s = &scratch{e: e,
			exec:  func(q string, args ...any) error { _, err := raw.ExecContext(ctx, q, args...); return err },
			count: sqlCount(t, raw),
			open: func(sch *builder.Schema, opts ...guardedsql.Options) (*guardedsql.DB, error) {
				db, err := guardedsql.Open(ctx, "sqlite:"+path, sch, options(opts))
				if err == nil {
					t.Cleanup(func() { db.Close() })
				}
				return db, err
			},
			introspect: func(ten builder.Tenancy) (*builder.Schema, error) { return sqlite.Introspect(ctx, raw, ten) }}
	}
	for _, q := range ddl {
		s.mustExec(t, q)
	}
	return s
}

func newScratchPostgres(t testing.TB, e engine) *scratch {
	ctx := context.Background()
	adminCfg, err := pgxpool.ParseConfig(e.dsn(t))
	if err != nil {
		t.Fatal(err)
	}
	root := pgConnect(t, adminCfg)
	defer root.Close()
	id := uniqueSuffix(t)
	schema, ownerRole, appRole := "tm_gap_"+id, "tm_gowner_"+id, "tm_gapp_"+id
	ownerPW, appPW := uniqueSuffix(t), uniqueSuffix(t)
	for _, q := range []string{
		`CREATE ROLE ` + ownerRole + ` LOGIN NOSUPERUSER NOBYPASSRLS PASSWORD '` + ownerPW + `'`,
		`CREATE ROLE ` + appRole + ` LOGIN NOSUPERUSER NOBYPASSRLS PASSWORD '` + appPW + `'`,
		`CREATE SCHEMA ` + schema + ` AUTHORIZATION ` + ownerRole,
		`GRANT USAGE ON SCHEMA ` + schema + ` TO ` + appRole,
	} {
		if _, err := root.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	var pools []*pgxpool.Pool
	t.Cleanup(func() {
		for _, p := range pools {
			p.Close()
		}
		root, err := pgxpool.NewWithConfig(context.Background(), adminCfg)
		if err != nil {
			t.Errorf("cleanup: connect: %v", err)
			return
		}
		defer root.Close()
		endSessions(root, appRole, ownerRole)
		for _, q := range []string{`DROP SCHEMA IF EXISTS ` + schema + ` CASCADE`, `DROP ROLE IF EXISTS ` + appRole, `DROP ROLE IF EXISTS ` + ownerRole} {
			if _, err := root.Exec(context.Background(), q); err != nil {
				t.Errorf("cleanup: %s: %v", q, err)
			}
		}
	})
	owner := pgConnect(t, pgConfigFor(adminCfg, ownerRole, ownerPW, schema))
	app := pgConnect(t, pgConfigFor(adminCfg, appRole, appPW, schema))
	// Counts read as the administrator: the owner is subject to its
	// tables' forced row-level security.
	admin := pgConnect(t, pgConfigFor(adminCfg, adminCfg.ConnConfig.User, adminCfg.ConnConfig.Password, schema))
	pools = append(pools, owner, app, admin)
	dollar := func(q string) string {
		q, err := sq.Dollar.ReplacePlaceholders(q)
		if err != nil {
			t.Fatal(err)
		}
		return q
	}
	return &scratch{e: e,
		exec:      func(q string, args ...any) error { _, err := owner.Exec(ctx, dollar(q), args...); return err },
		adminExec: func(q string, args ...any) error { _, err := admin.Exec(ctx, dollar(q), args...); return err },
		count: func(q string, args ...any) int {
			var n int
			if err := admin.QueryRow(ctx, dollar(q), args...).Scan(&n); err != nil {
				t.Fatalf("%s: %v", q, err)
			}
			return n
		},
		open: func(sch *builder.Schema, opts ...guardedsql.Options) (*guardedsql.DB, error) {
			if err := postgres.ApplyRLS(ctx, owner, sch, postgres.Options{Key: scratchKey}); err != nil {
				return nil, err
			}
			o := options(opts)
			po, _ := o.Engine.(postgres.Options)
			po.Key = scratchKey
			o.Engine = po
			if _, err := owner.Exec(ctx, `GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA `+schema+` TO `+appRole); err != nil {
				return nil, err
			}
			return postgres.New(ctx, app, sch, o)
		},
		introspect: func(ten builder.Tenancy) (*builder.Schema, error) {
			return postgres.Introspect(ctx, owner, ten)
		},
		appExec: func(doc, q string, args ...any) error {
			tx, err := app.Begin(ctx)
			if err != nil {
				return err
			}
			defer tx.Rollback(ctx)
			var nonce string
			if err := tx.QueryRow(ctx, postgres.ScopeNonceSQL).Scan(&nonce); err != nil {
				return err
			}
			signed, err := postgres.SignScope(scratchKey, nonce, doc, postgres.Options{})
			if err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, `SELECT set_config('tenantmcp.scope', $1, true)`, signed); err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, dollar(q), args...); err != nil {
				return err
			}
			return tx.Commit(ctx)
		}}
}

func newScratchMySQL(t testing.TB, e engine) *scratch {
	ctx := context.Background()
	_, raw := scratchMySQLDB(t, e, "tm_gap_")
	return &scratch{e: e,
		exec:  func(q string, args ...any) error { _, err := raw.ExecContext(ctx, q, args...); return err },
		count: sqlCount(t, raw),
		open: func(sch *builder.Schema, opts ...guardedsql.Options) (*guardedsql.DB, error) {
			return gmysql.New(ctx, raw, sch, options(opts))
		},
		introspect: func(ten builder.Tenancy) (*builder.Schema, error) { return gmysql.Introspect(ctx, raw, ten) }}
}

// scratchMySQLDB creates a database named prefix plus a unique suffix,
// dropped when the test ends, and returns the admin's configuration for it
// and a connection to it as the admin.
func scratchMySQLDB(t testing.TB, e engine, prefix string) (*mysql.Config, *sql.DB) {
	ctx := context.Background()
	adminCfg, err := gmysql.Config(e.dsn(t))
	if err != nil {
		t.Fatal(err)
	}
	rootConn, err := mysql.NewConnector(adminCfg)
	if err != nil {
		t.Fatal(err)
	}
	root := sql.OpenDB(rootConn)
	defer root.Close()
	dbName := prefix + uniqueSuffix(t)
	if _, err := root.ExecContext(ctx, `CREATE DATABASE `+dbName+` CHARACTER SET utf8mb4`); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		root := sql.OpenDB(rootConn)
		defer root.Close()
		if _, err := root.ExecContext(context.Background(), `DROP DATABASE IF EXISTS `+dbName); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	})
	cfg := adminCfg.Clone()
	cfg.DBName = dbName
	conn, err := mysql.NewConnector(cfg)
	if err != nil {
		t.Fatal(err)
	}
	raw := sql.OpenDB(conn)
	t.Cleanup(func() { raw.Close() })
	return cfg, raw
}

// ddlTypes replaces the type words KEY (a text key column: VARCHAR on
// MySQL, which cannot index TEXT) and INT in q with engine's spelling.
func ddlTypes(engine, q string) string {
	key, integer := "TEXT", "BIGINT"
	switch engine {
	case "mysql":
		key = "VARCHAR(64)"
	case "sqlite":
		integer = "INTEGER"
	}
	return strings.NewReplacer(" KEY_T", " "+key, " INT_T", " "+integer).Replace(q)
}

// sqlCount is scratch.count on a database/sql handle.
func sqlCount(t testing.TB, db *sql.DB) func(q string, args ...any) int {
	return func(q string, args ...any) int {
		var n int
		if err := db.QueryRowContext(context.Background(), q, args...).Scan(&n); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		return n
	}
}
