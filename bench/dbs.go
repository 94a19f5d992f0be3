package main

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tenantmcp/tenantmcp/guardedsql"
	gmysql "github.com/tenantmcp/tenantmcp/guardedsql/mysql"
)

// appRole is the PostgreSQL application role of the bench: neither
// superuser nor BYPASSRLS, so row-level security applies to it. It is
// its own role (not the engine benchmark's tenantmcp_bench_app), so that
// the two can run at the same time; its password is new every run.
const appRole = "tenantmcp_benchcmd_app"

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// pgConnect opens a pool on the admin DSN, switched to database db when
// db is not empty, and checks it answers.
func pgConnect(ctx context.Context, dsn, db string) (*pgxpool.Pool, *pgxpool.Config, error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, nil, guardedsql.RedactDSNError(fmt.Errorf("PostgreSQL DSN: %w", err), dsn)
	}
	if db != "" {
		cfg.ConnConfig.Database = db
	}
	return pgOpen(ctx, cfg)
}

func pgOpen(ctx context.Context, cfg *pgxpool.Config) (*pgxpool.Pool, *pgxpool.Config, error) {
	cctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	p, err := pgxpool.NewWithConfig(cctx, cfg)
	if err != nil {
		return nil, nil, err
	}
	if err := p.Ping(cctx); err != nil {
		p.Close()
		return nil, nil, fmt.Errorf("connecting to PostgreSQL as %s: %w", cfg.ConnConfig.User, err)
	}
	return p, cfg, nil
}

// pgEnsureDatabase creates database name unless it exists, and (re)sets
// the bench's application role with a fresh password, which it returns.
func pgEnsureDatabase(ctx context.Context, adminDSN, name string, fresh bool) (appPassword string, err error) {
	return pgEnsureDatabaseRole(ctx, adminDSN, name, appRole, fresh)
}

// pgEnsureDatabaseRole is pgEnsureDatabase for application role role (the
// soak has its own, so that a bench run beside it does not change the
// password its server connects with).
func pgEnsureDatabaseRole(ctx context.Context, adminDSN, name, role string, fresh bool) (appPassword string, err error) {
	root, _, err := pgConnect(ctx, adminDSN, "")
	if err != nil {
		return "", err
	}
	defer root.Close()
	if fresh {
		if _, err := root.Exec(ctx, `DROP DATABASE IF EXISTS `+name+` WITH (FORCE)`); err != nil {
			return "", err
		}
	}
	var exists bool
	if err := root.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)`, name).Scan(&exists); err != nil {
		return "", err
	}
	if !exists {
		if _, err := root.Exec(ctx, `CREATE DATABASE `+name); err != nil {
			return "", err
		}
	}
	pw := randomHex(12)
	for _, s := range []string{
		`DO $$ BEGIN IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = '` + role + `') THEN CREATE ROLE ` + role + ` LOGIN NOSUPERUSER NOBYPASSRLS; END IF; END $$`,
		`ALTER ROLE ` + role + ` LOGIN NOSUPERUSER NOBYPASSRLS PASSWORD '` + pw + `'`,
	} {
		if _, err := root.Exec(ctx, s); err != nil {
			return "", err
		}
	}
	return pw, nil
}

func pgDropDatabase(ctx context.Context, adminDSN, name string) {
	root, _, err := pgConnect(ctx, adminDSN, "")
	if err != nil {
		return
	}
	defer root.Close()
	_, _ = root.Exec(ctx, `DROP DATABASE IF EXISTS `+name+` WITH (FORCE)`)
}

// pgWithDB is the admin DSN on database db.
func pgWithDB(adminDSN, db string) (string, error) {
	u, err := url.Parse(adminDSN)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		return "", fmt.Errorf("the PostgreSQL DSN must be a postgres:// URL")
	}
	u.Path = "/" + db
	return u.String(), nil
}

// pgAppDSN is the admin DSN with the application role and database db.
func pgAppDSN(adminDSN, db, password string) (string, error) {
	return pgRoleDSN(adminDSN, appRole, db, password)
}

// pgRoleDSN is the admin DSN with role, its password and database db.
func pgRoleDSN(adminDSN, role, db, password string) (string, error) {
	u, err := url.Parse(adminDSN)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		return "", fmt.Errorf("the PostgreSQL DSN must be a postgres:// URL")
	}
	u.User = url.UserPassword(role, password)
	u.Path = "/" + db
	return u.String(), nil
}

// mysqlOpen opens the admin DSN (mysql://…, or go-sql-driver's own form)
// on database db, creating it first if create is set.
func mysqlOpen(ctx context.Context, dsn, db string, create bool) (*sql.DB, error) {
	cfg, err := mysqlConfig(dsn)
	if err != nil {
		return nil, err
	}
	if create {
		conn, err := mysql.NewConnector(cfg)
		if err != nil {
			return nil, err
		}
		root := sql.OpenDB(conn)
		_, err = root.ExecContext(ctx, `CREATE DATABASE IF NOT EXISTS `+db+` CHARACTER SET utf8mb4`)
		root.Close()
		if err != nil {
			return nil, err
		}
	}
	return mysqlOpenConfig(ctx, cfg, db)
}

// mysqlOpenConfig opens cfg on database db and checks it answers.
func mysqlOpenConfig(ctx context.Context, cfg *mysql.Config, db string) (*sql.DB, error) {
	cfg = cfg.Clone()
	cfg.DBName = db
	conn, err := mysql.NewConnector(cfg)
	if err != nil {
		return nil, err
	}
	sqlDB := sql.OpenDB(conn)
	if err := sqlDB.PingContext(ctx); err != nil {
		sqlDB.Close()
		return nil, err
	}
	return sqlDB, nil
}

func mysqlConfig(dsn string) (*mysql.Config, error) {
	if !strings.HasPrefix(dsn, "mysql://") {
		dsn = "mysql://" + dsn // go-sql-driver's own form
	}
	return gmysql.Config(dsn)
}

// serverVersions reports the versions of the configured servers, or a
// word about why not.
func serverVersions(ctx context.Context, cfg config) (pg, my string) {
	if cfg.pgDSN != "" {
		if p, _, err := pgConnect(ctx, cfg.pgDSN, ""); err != nil {
			pg = "unreachable"
		} else {
			_ = p.QueryRow(ctx, `SHOW server_version`).Scan(&pg)
			p.Close()
		}
	}
	if cfg.myDSN != "" {
		if d, err := mysqlOpen(ctx, cfg.myDSN, "", false); err != nil {
			my = "unreachable"
		} else {
			_ = d.QueryRowContext(ctx, `SELECT VERSION()`).Scan(&my)
			d.Close()
		}
	}
	return pg, my
}

// pgAddrs resolves the host and port of a PostgreSQL DSN to the addresses
// the egress guard must allow.
func pgAddrs(ctx context.Context, dsn string) ([]netip.AddrPort, error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, guardedsql.RedactDSNError(err, dsn)
	}
	hosts := []struct {
		host string
		port uint16
	}{{cfg.ConnConfig.Host, cfg.ConnConfig.Port}}
	for _, f := range cfg.ConnConfig.Fallbacks {
		hosts = append(hosts, struct {
			host string
			port uint16
		}{f.Host, f.Port})
	}
	var out []netip.AddrPort
	for _, h := range hosts {
		if len(h.host) > 0 && h.host[0] == '/' {
			continue // a unix socket: not IP egress
		}
		ips, err := net.DefaultResolver.LookupNetIP(ctx, "ip", h.host)
		if err != nil {
			return nil, fmt.Errorf("resolving %s: %w", h.host, err)
		}
		for _, ip := range ips {
			out = append(out, netip.AddrPortFrom(ip.Unmap(), h.port))
		}
	}
	return out, nil
}

func itoa(n int) string { return strconv.Itoa(n) }
