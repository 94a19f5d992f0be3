package hotel

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

	"github.com/tenantmcp/tenantmcp/flow/pgtaint"
	"github.com/tenantmcp/tenantmcp/guardedsql"
	gmysql "github.com/tenantmcp/tenantmcp/guardedsql/mysql"
	"github.com/tenantmcp/tenantmcp/guardedsql/postgres"
)

var roleName = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,62}$`)

// SetupDemo is the example's migration for a live database: connected as
// an administrator or the schema owner (adminDSN), it drops the hotel
// tables if they exist, creates them, loads d and, on PostgreSQL, installs
// the generated row-level security policies and grants appRole (created
// if missing: LOGIN, not superuser, no BYPASSRLS) the data rights it needs.
// The server then connects as appRole. On MySQL/MariaDB, which has no
// row-level security, the guard's predicates are the boundary and appRole
// is not used.
//
// It destroys the hotel tables of that database: point it only at a
// database made for the demo.
func SetupDemo(ctx context.Context, adminDSN, appRole string, key postgres.Key, d *Data) error {
	return guardedsql.RedactDSNError(setupDemo(ctx, adminDSN, appRole, key, d), adminDSN)
}

func setupDemo(ctx context.Context, adminDSN, appRole string, key postgres.Key, d *Data) error {
	switch {
	case strings.HasPrefix(adminDSN, "postgres://"), strings.HasPrefix(adminDSN, "postgresql://"):
		return setupPostgres(ctx, adminDSN, appRole, key, d)
	case strings.HasPrefix(adminDSN, "mysql://"):
		return setupMySQL(ctx, adminDSN, d)
	}
	return fmt.Errorf("hotel: SetupDemo needs a postgres:// or mysql:// DSN")
}

var hotelTables = []string{"payments", "bookings", "guests", "rooms", "hotels", "chains", "countries"}

func setupPostgres(ctx context.Context, adminDSN, appRole string, key postgres.Key, d *Data) error {
	if key.ID == "" {
		return fmt.Errorf("hotel: SetupDemo on PostgreSQL needs the scope-signing key the server will use")
	}
	if !roleName.MatchString(appRole) {
		return fmt.Errorf("hotel: application role %q is not a plain lower-case identifier", appRole)
	}
	pool, err := pgxpool.New(ctx, adminDSN)
	if err != nil {
		return err
	}
	defer pool.Close()
	db := stdlib.OpenDBFromPool(pool)
	defer db.Close()
	for _, t := range hotelTables {
		if _, err := db.ExecContext(ctx, "DROP TABLE IF EXISTS "+t+" CASCADE"); err != nil {
			return err
		}
	}
	if err := Create(ctx, db, Postgres, d); err != nil {
		return err
	}
	if err := postgres.ApplyRLS(ctx, pool, Schema, postgres.Options{Key: key}); err != nil {
		return err
	}
	// The flow taints of every replica (kept across demo resets: a reset
	// must not launder what a subject has read).
	if err := pgtaint.Install(ctx, pool, pgtaint.Options{}); err != nil {
		return err
	}
	var exists bool
	if err := db.QueryRowContext(ctx, "SELECT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = $1)", appRole).Scan(&exists); err != nil {
		return err
	}
	if !exists {
		if _, err := db.ExecContext(ctx, "CREATE ROLE "+appRole+" LOGIN NOSUPERUSER NOBYPASSRLS NOCREATEDB NOCREATEROLE"); err != nil {
			return err
		}
	}
	// Exactly the graph's tables and their sequences, and the taint table.
	if err := postgres.GrantApp(ctx, pool, Schema, appRole); err != nil {
		return err
	}
	return pgtaint.Grant(ctx, pool, pgtaint.Options{}, appRole)
}

func setupMySQL(ctx context.Context, adminDSN string, d *Data) error {
	cfg, err := gmysql.Config(adminDSN)
	if err != nil {
		return err
	}
	conn, err := mysql.NewConnector(cfg)
	if err != nil {
		return err
	}
	db := sql.OpenDB(conn)
	defer db.Close()
	for _, t := range hotelTables {
		if _, err := db.ExecContext(ctx, "DROP TABLE IF EXISTS "+t); err != nil {
			return err
		}
	}
	return Create(ctx, db, MySQL, d)
}

// UserOf returns the user name of a postgres:// DSN.
func UserOf(dsn string) string {
	u, err := url.Parse(dsn)
	if err != nil || u.User == nil {
		return ""
	}
	return u.User.Username()
}
