package devserver

import (
	"context"
	"database/sql"
	"fmt"
	"net/url"
	"regexp"
	"strings"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/tenantmcp/tenantmcp/builder"
	"github.com/tenantmcp/tenantmcp/guardedsql"
	gmysql "github.com/tenantmcp/tenantmcp/guardedsql/mysql"
	"github.com/tenantmcp/tenantmcp/guardedsql/postgres"
)

var roleName = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,62}$`)

// Demo describes an example's migration for a live database.
type Demo struct {
	// AdminDSN connects as an administrator or the schema owner
	// (postgres:// or mysql://).
	AdminDSN string
	// AppRole is the PostgreSQL role the server connects as.
	AppRole string
	// Key is the scope-signing key the server will use (PostgreSQL).
	Key    postgres.Key
	Schema *builder.Schema
	// Drop lists the example's tables, each before any table it references.
	Drop []string
	// Create creates the tables and loads the demo data; engine is
	// "postgres" or "mysql".
	Create func(ctx context.Context, db *sql.DB, engine string) error
	// Postgres, if set, runs last on PostgreSQL (an example's own tables).
	Postgres func(ctx context.Context, pool *pgxpool.Pool, appRole string) error
}

// SetupDemo drops the example's tables if they exist, creates them, loads
// the data and, on PostgreSQL, installs the generated row-level security
// policies and grants AppRole (created if missing: LOGIN, not superuser, no
// BYPASSRLS) exactly the graph's tables. On MySQL/MariaDB, which has no
// row-level security, the guard's predicates are the boundary and AppRole
// is not used. It destroys those tables: point it only at a database made
// for the demo. Errors never carry the DSN's password.
func SetupDemo(ctx context.Context, d Demo) error {
	var err error
	switch {
	case strings.HasPrefix(d.AdminDSN, "postgres://"), strings.HasPrefix(d.AdminDSN, "postgresql://"):
		err = setupPostgres(ctx, d)
	case strings.HasPrefix(d.AdminDSN, "mysql://"):
		err = setupMySQL(ctx, d)
	default:
		err = fmt.Errorf("setting up the demo needs a postgres:// or mysql:// DSN")
	}
	return guardedsql.RedactDSNError(err, d.AdminDSN)
}

func setupPostgres(ctx context.Context, d Demo) error {
	if d.Key.ID == "" {
		return fmt.Errorf("setting up the demo on PostgreSQL needs the scope-signing key the server will use")
	}
	if !roleName.MatchString(d.AppRole) {
		return fmt.Errorf("application role %q is not a plain lower-case identifier", d.AppRole)
	}
	pool, err := pgxpool.New(ctx, d.AdminDSN)
	if err != nil {
		return err
	}
	defer pool.Close()
	db := stdlib.OpenDBFromPool(pool)
	defer db.Close()
	for _, t := range d.Drop {
		if _, err := db.ExecContext(ctx, "DROP TABLE IF EXISTS "+t+" CASCADE"); err != nil {
			return err
		}
	}
	if err := d.Create(ctx, db, "postgres"); err != nil {
		return err
	}
	if err := postgres.ApplyRLS(ctx, pool, d.Schema, postgres.Options{Key: d.Key}); err != nil {
		return err
	}
	var exists bool
	if err := db.QueryRowContext(ctx, "SELECT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = $1)", d.AppRole).Scan(&exists); err != nil {
		return err
	}
	if !exists {
		if _, err := db.ExecContext(ctx, "CREATE ROLE "+d.AppRole+" LOGIN NOSUPERUSER NOBYPASSRLS NOCREATEDB NOCREATEROLE"); err != nil {
			return err
		}
	}
	if err := postgres.GrantApp(ctx, pool, d.Schema, d.AppRole); err != nil {
		return err
	}
	if d.Postgres != nil {
		return d.Postgres(ctx, pool, d.AppRole)
	}
	return nil
}

func setupMySQL(ctx context.Context, d Demo) error {
	cfg, err := gmysql.Config(d.AdminDSN)
	if err != nil {
		return err
	}
	conn, err := mysql.NewConnector(cfg)
	if err != nil {
		return err
	}
	db := sql.OpenDB(conn)
	defer db.Close()
	// One connection: the session setting below must hold for the drops
	// (tables may reference each other).
	db.SetMaxOpenConns(1)
	if _, err := db.ExecContext(ctx, "SET FOREIGN_KEY_CHECKS = 0"); err != nil {
		return err
	}
	for _, t := range d.Drop {
		if _, err := db.ExecContext(ctx, "DROP TABLE IF EXISTS "+t); err != nil {
			return err
		}
	}
	if _, err := db.ExecContext(ctx, "SET FOREIGN_KEY_CHECKS = 1"); err != nil {
		return err
	}
	return d.Create(ctx, db, "mysql")
}

// UserOf returns the user name of a postgres:// DSN: the application role
// SetupDemo grants.
func UserOf(dsn string) string {
	u, err := url.Parse(dsn)
	if err != nil || u.User == nil {
		return ""
	}
	return u.User.Username()
}
