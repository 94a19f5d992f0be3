package conformance

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"github.com/go-sql-driver/mysql"
	_ "github.com/jackc/pgx/v5/stdlib" // registers the "pgx" driver for the owner connection
	_ "modernc.org/sqlite"             // registers the "sqlite" driver for the owner connection

	"github.com/tenantmcp/tenantmcp/guardedsql"
	"github.com/tenantmcp/tenantmcp/guardedsql/postgres"
)

// scratch is the database the suite creates for itself, seeds, and drops:
// never the database a DSN names.
//
//   - SQLite: a new file in a new temporary directory.
//   - PostgreSQL: a new database tm_conf_<random>, owned by the DSN's
//     account (which seeds it and installs row-level security), and a new
//     login role tm_conf_app_<random> (NOSUPERUSER NOBYPASSRLS, DML rights
//     only) through which the guard connects.
//   - MySQL/MariaDB: a new database tm_conf_<random> and a new user
//     tm_conf_app_<random>@'%' with DML rights on it only, through which
//     the guard connects.
type scratch struct {
	engine  Engine
	version string
	where   string // what was created, for the log and the summary

	owner      *sql.DB // the scratch database as its owner, unguarded
	guardedDSN string  // the scratch database as the app role, for guardedsql.Open
	ownerDSN   string  // the scratch database as the owner, for guardedsql.Open in checks

	appRole  string
	dbName   string
	adminDSN string   // PostgreSQL: the target DSN, to create roles for checks
	ownerURL *url.URL // PostgreSQL: the scratch database as the owner
	close    []func() error
	// rlsKey signs the PostgreSQL scope context (installed by
	// prepareEngine, given to every guarded DB).
	rlsKey postgres.Key
}

// engineOf names the engine of a DSN.
func engineOf(dsn string) (Engine, error) {
	if strings.ContainsAny(strings.TrimSpace(dsn), " \t\n") {
		// TENANTMCP_DSN's list passed as one DSN ("sqlite: postgres://…"):
		// the first scheme decided the engine and the rest went unread, so
		// a run that tested SQLite alone looked like a run on all three.
		return "", fmt.Errorf("conformance: Target.DSN holds several DSNs separated by spaces; run one Target per DSN (conformance.FromEnv().DSNs splits %s)", EnvDSN)
	}
	switch {
	case dsn == "" || dsn == "sqlite" || strings.HasPrefix(dsn, "sqlite:") || strings.HasPrefix(dsn, "file:"):
		return SQLite, nil
	case strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://"):
		return Postgres, nil
	case strings.HasPrefix(dsn, "mysql://"):
		return MySQL, nil
	}
	return "", fmt.Errorf("conformance: DSN scheme %q not understood (want sqlite:, postgres:// or mysql://)", guardedsql.DSNScheme(dsn))
}

func randomSuffix() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func newScratch(ctx context.Context, dsn string) (s *scratch, err error) {
	e, err := engineOf(dsn)
	if err != nil {
		return nil, err
	}
	s = &scratch{engine: e}
	defer func() {
		if err != nil {
			s.drop()
			s = nil
			// Driver errors may quote the DSN: never its password.
			err = guardedsql.RedactDSNError(err, dsn)
		}
	}()
	switch e {
	case SQLite:
		err = s.sqlite(ctx)
	case Postgres:
		err = s.postgres(ctx, dsn)
	case MySQL:
		err = s.mysql(ctx, dsn)
	}
	return s, err
}

// drop releases and deletes everything the scratch created, newest first.
func (s *scratch) drop() error {
	var errs []error
	for i := len(s.close) - 1; i >= 0; i-- {
		errs = append(errs, s.close[i]())
	}
	s.close = nil
	return errors.Join(errs...)
}

func (s *scratch) sqlite(ctx context.Context) error {
	dir, err := os.MkdirTemp("", "tenantmcp-conformance-")
	if err != nil {
		return err
	}
	s.close = append(s.close, func() error { return os.RemoveAll(dir) })
	path := filepath.Join(dir, "conformance.db")
	owner, err := sql.Open("sqlite", "file:"+path+"?_pragma=foreign_keys(1)&_pragma=busy_timeout(5000)")
	if err != nil {
		return err
	}
	s.close = append(s.close, owner.Close)
	s.owner = owner
	if err := owner.QueryRowContext(ctx, `SELECT sqlite_version()`).Scan(&s.version); err != nil {
		return err
	}
	s.version = "SQLite " + s.version
	s.guardedDSN = "sqlite:" + path
	s.ownerDSN = s.guardedDSN
	s.where = "temporary SQLite file " + path
	return nil
}

func (s *scratch) postgres(ctx context.Context, dsn string) error {
	u, err := url.Parse(dsn)
	if err != nil {
		return fmt.Errorf("conformance: PostgreSQL DSN must be a URL (postgres://user@host:port/db?...): %v", err)
	}
	admin, err := sql.Open("pgx", dsn)
	if err != nil {
		return err
	}
	defer admin.Close()
	if err := admin.PingContext(ctx); err != nil {
		return fmt.Errorf("conformance: connecting to PostgreSQL: %w", err)
	}
	if err := admin.QueryRowContext(ctx, `SELECT version()`).Scan(&s.version); err != nil {
		return err
	}
	if i := strings.Index(s.version, " on "); i > 0 {
		s.version = s.version[:i]
	}
	// The DSN's account owns the scratch tables and reads them whole to
	// compare with the seed; with FORCE ROW LEVEL SECURITY only a role that
	// bypasses the policies can.
	var super bool
	if err := admin.QueryRowContext(ctx, `SELECT rolsuper OR rolbypassrls FROM pg_roles WHERE rolname = current_user`).Scan(&super); err != nil {
		return err
	}
	if !super {
		return errors.New("conformance: the PostgreSQL DSN's role must be a superuser (or BYPASSRLS, with CREATEDB and CREATEROLE): it owns the scratch database and reads it whole, past the row-level security it installs")
	}
	s.adminDSN = dsn
	sfx := randomSuffix()
	dbName, role, pw := "tm_conf_"+sfx, "tm_conf_app_"+sfx, randomSuffix()+randomSuffix()
	// One closer drops the database, then the role that has rights in it.
	var created []string
	s.close = append(s.close, func() error {
		a, err := sql.Open("pgx", dsn)
		if err != nil {
			return err
		}
		defer a.Close()
		var errs []error
		for i := len(created) - 1; i >= 0; i-- {
			_, err := a.ExecContext(context.Background(), created[i])
			errs = append(errs, err)
		}
		return errors.Join(errs...)
	})
	if _, err := admin.ExecContext(ctx, `CREATE ROLE `+role+` LOGIN PASSWORD '`+pw+`' NOSUPERUSER NOBYPASSRLS NOCREATEDB NOCREATEROLE NOINHERIT`); err != nil {
		return fmt.Errorf("conformance: creating the app role: %w", err)
	}
	created = append(created, `DROP ROLE IF EXISTS `+role)
	if _, err := admin.ExecContext(ctx, `CREATE DATABASE `+dbName); err != nil {
		return fmt.Errorf("conformance: creating the scratch database: %w", err)
	}
	created = append(created, `DROP DATABASE IF EXISTS `+dbName+` WITH (FORCE)`)
	s.appRole = role
	ou := *u
	ou.Path = "/" + dbName
	s.ownerDSN = ou.String()
	s.ownerURL, s.dbName = &ou, dbName
	owner, err := sql.Open("pgx", s.ownerDSN)
	if err != nil {
		return err
	}
	s.close = append(s.close, owner.Close)
	s.owner = owner
	if _, err := owner.ExecContext(ctx, `REVOKE ALL ON DATABASE `+dbName+` FROM PUBLIC`); err != nil {
		return err
	}
	if _, err := owner.ExecContext(ctx, `GRANT CONNECT ON DATABASE `+dbName+` TO `+role); err != nil {
		return err
	}
	au := ou
	au.User = url.UserPassword(role, pw)
	s.guardedDSN = au.String()
	s.where = fmt.Sprintf("PostgreSQL database %s, guard connected as role %s (NOSUPERUSER NOBYPASSRLS)", dbName, role)
	return nil
}

// postgresGrants gives the app role DML rights on what Seed created,
// except on partitions and inheritance children the graph (declared)
// does not name: the guard reads them through their parents, and a
// privilege on one would reach the parent's rows around its row-level
// security, which the start-up check refuses
// (postgres.ErrRLSBypassPath). Views and materialized views keep the
// grant, so one of the seed's that bypasses the policies is refused too.
func (s *scratch) postgresGrants(ctx context.Context, declared []string) error {
	for _, q := range []string{
		`GRANT USAGE ON SCHEMA public TO ` + s.appRole,
		`GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO ` + s.appRole,
		`GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA public TO ` + s.appRole,
	} {
		if _, err := s.owner.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("conformance: %s: %w", q, err)
		}
	}
	rows, err := s.owner.QueryContext(ctx, `SELECT i.inhrelid::regclass::text FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
WHERE c.relnamespace = 'public'::regnamespace AND c.relkind IN ('r', 'p', 'f') AND NOT (c.relname::text = ANY ($1::text[])) ORDER BY 1`, declared)
	if err != nil {
		return fmt.Errorf("conformance: listing partitions: %w", err)
	}
	var kids []string
	for rows.Next() {
		var k string
		if err := rows.Scan(&k); err != nil {
			rows.Close()
			return err
		}
		kids = append(kids, k)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	for _, k := range kids {
		if _, err := s.owner.ExecContext(ctx, `REVOKE ALL ON `+k+` FROM `+s.appRole); err != nil {
			return fmt.Errorf("conformance: revoking on partition %s: %w", k, err)
		}
	}
	return nil
}

func (s *scratch) mysql(ctx context.Context, dsn string) error {
	cfg, err := mysql.ParseDSN(strings.TrimPrefix(dsn, "mysql://"))
	if err != nil {
		return fmt.Errorf("conformance: MySQL DSN (mysql://user@tcp(host:port)/db): %w", err)
	}
	admin, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		return err
	}
	defer admin.Close()
	if err := admin.PingContext(ctx); err != nil {
		return fmt.Errorf("conformance: connecting to MySQL: %w", err)
	}
	if err := admin.QueryRowContext(ctx, `SELECT version()`).Scan(&s.version); err != nil {
		return err
	}
	if strings.Contains(strings.ToLower(s.version), "mariadb") {
		s.version = "MariaDB " + s.version
	} else {
		s.version = "MySQL " + s.version
	}
	sfx := randomSuffix()
	dbName, user, pw := "tm_conf_"+sfx, "tm_conf_app_"+sfx, randomSuffix()+randomSuffix()
	if _, err := admin.ExecContext(ctx, "CREATE DATABASE "+dbName+" CHARACTER SET utf8mb4"); err != nil {
		return fmt.Errorf("conformance: creating the scratch database: %w", err)
	}
	dropDB := func() error {
		a, err := sql.Open("mysql", cfg.FormatDSN())
		if err != nil {
			return err
		}
		defer a.Close()
		_, err = a.ExecContext(context.Background(), "DROP DATABASE IF EXISTS "+dbName)
		return err
	}
	s.close = append(s.close, dropDB)
	if _, err := admin.ExecContext(ctx, "CREATE USER '"+user+"'@'%' IDENTIFIED BY '"+pw+"'"); err != nil {
		return fmt.Errorf("conformance: creating the app user: %w", err)
	}
	s.close = append(s.close, func() error {
		a, err := sql.Open("mysql", cfg.FormatDSN())
		if err != nil {
			return err
		}
		defer a.Close()
		_, err = a.ExecContext(context.Background(), "DROP USER IF EXISTS '"+user+"'@'%'")
		return err
	})
	if _, err := admin.ExecContext(ctx, "GRANT SELECT, INSERT, UPDATE, DELETE ON "+dbName+".* TO '"+user+"'@'%'"); err != nil {
		return fmt.Errorf("conformance: granting the app user: %w", err)
	}
	oc := cfg.Clone()
	oc.DBName = dbName
	// DATE and DATETIME scan as time.Time, as guardedsql's MySQL engine
	// reads them (guardedsql/mysql turns parseTime on), so the owner's
	// snapshot, the Dataset's time.Time values and the guard's rows
	// compare equal.
	oc.ParseTime = true
	s.dbName = dbName
	s.ownerDSN = "mysql://" + oc.FormatDSN()
	owner, err := sql.Open("mysql", oc.FormatDSN())
	if err != nil {
		return err
	}
	s.close = append(s.close, owner.Close)
	s.owner = owner
	ac := oc.Clone()
	ac.User, ac.Passwd = user, pw
	s.guardedDSN = "mysql://" + ac.FormatDSN()
	s.where = fmt.Sprintf("%s database %s, guard connected as user %s (DML rights on it only)", strings.Fields(s.version)[0], dbName, user)
	return nil
}

// dsnAs is the PostgreSQL scratch database's DSN for another role.
func (s *scratch) dsnAs(user, pw string) string {
	u := *s.ownerURL
	u.User = url.UserPassword(user, pw)
	return u.String()
}
