package guardedsql_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/tenantmcp/tenantmcp/builder"
	"github.com/tenantmcp/tenantmcp/guardedsql"
	gmysql "github.com/tenantmcp/tenantmcp/guardedsql/mysql"
	"github.com/tenantmcp/tenantmcp/guardedsql/postgres"
	"github.com/tenantmcp/tenantmcp/internal/cutproxy"
)

// Check on the embedded engine: reachable and nothing more to check.
func TestCheckSQLite(t *testing.T) {
	h := newHotelSized(t, 1, 1, 1, 1)
	if err := h.db.Check(context.Background()); err != nil {
		t.Fatalf("Check: %v", err)
	}
}

// A PostgreSQL outage, simulated by cutting a loopback proxy between the
// pool and the shared server: Check fails with ErrUnavailable and a
// guarded statement's error is IsUnavailable, neither naming the password;
// once the proxy is restored Check passes again. An RLS policy dropped
// behind the running DB's back makes Check fail with ErrRLSUnsafe.
func TestPostgresCheckThroughOutage(t *testing.T) {
	h := provisionPostgres(t, enginePostgres.dsn(t), seedModel(2, 2, 2, 1))
	ctx := context.Background()
	if err := postgres.ApplyRLS(ctx, h.owner, h.sch, postgres.Options{Key: h.key}); err != nil {
		t.Fatal(err)
	}
	target := net.JoinHostPort(h.appCfg.ConnConfig.Host, strconv.Itoa(int(h.appCfg.ConnConfig.Port)))
	proxy, err := cutproxy.Start(target)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { proxy.Close() })
	cfg := h.appCfg.Copy()
	host, port, _ := net.SplitHostPort(proxy.Addr)
	p, _ := strconv.Atoi(port)
	cfg.ConnConfig.Host, cfg.ConnConfig.Port = host, uint16(p)
	cfg.ConnConfig.ConnectTimeout = 2 * time.Second
	pool := pgConnect(t, cfg)
	t.Cleanup(pool.Close)
	db, err := postgres.New(ctx, pool, h.sch, guardedsql.Options{Engine: postgres.Options{Key: h.key}})
	if err != nil {
		t.Fatal(err)
	}
	outageRoundTrip(t, db, h.sch, proxy, grantCtx(chainG(h.m.chains[0].ID)), cfg.ConnConfig.Password)

	// The RLS check is current: a policy switched off after start-up fails it.
	if _, err := h.owner.Exec(ctx, `ALTER TABLE bookings NO FORCE ROW LEVEL SECURITY`); err != nil {
		t.Fatal(err)
	}
	if err := db.Check(ctx); !errors.Is(err, postgres.ErrRLSUnsafe) || guardedsql.IsUnavailable(err) {
		t.Fatalf("Check with RLS not forced: %v, want ErrRLSUnsafe", err)
	}
}

// The same outage on MariaDB/MySQL: Check wraps ErrUnavailable, a guarded
// query's error is IsUnavailable, and both recover with the proxy.
func TestMySQLCheckThroughOutage(t *testing.T) {
	dsn := engineMySQL.dsn(t)
	ctx := context.Background()
	adminCfg, err := gmysql.Config(dsn)
	if err != nil {
		t.Fatal(err)
	}
	rootConn, err := mysql.NewConnector(adminCfg)
	if err != nil {
		t.Fatal(err)
	}
	root := sql.OpenDB(rootConn)
	t.Cleanup(func() { root.Close() })
	dbName := "tm_health_" + uniqueSuffix(t)
	if _, err := root.ExecContext(ctx, `CREATE DATABASE `+dbName+` CHARACTER SET utf8mb4`); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if _, err := root.ExecContext(context.Background(), `DROP DATABASE IF EXISTS `+dbName); err != nil {
			cleanupError(t, "cleanup: %v", err)
		}
	})
	proxy, err := cutproxy.Start(adminCfg.Addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { proxy.Close() })
	cfg := adminCfg.Clone()
	cfg.DBName, cfg.Addr, cfg.Timeout = dbName, proxy.Addr, 2*time.Second
	conn, err := mysql.NewConnector(cfg)
	if err != nil {
		t.Fatal(err)
	}
	raw := sql.OpenDB(conn)
	t.Cleanup(func() { raw.Close() })
	for _, s := range ddlHotel("mysql") {
		if _, err := raw.ExecContext(ctx, s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
	sch := builder.MustSchema(hotelDef)
	db, err := gmysql.New(ctx, raw, sch, guardedsql.Options{})
	if err != nil {
		t.Fatal(err)
	}
	outageRoundTrip(t, db, sch, proxy, grantCtx(chainG("acme")), cfg.Passwd)
}

// outageRoundTrip checks db and runs a scoped query before, during and
// after an outage made by cutting proxy: Check wraps ErrUnavailable and the
// query's error is IsUnavailable while it is cut, neither error names
// secret, and both succeed again once it is restored.
func outageRoundTrip(t *testing.T, db *guardedsql.DB, sch *builder.Schema, proxy *cutproxy.Proxy, scoped context.Context, secret string) {
	t.Helper()
	ctx := context.Background()
	rooms := sch.Table("rooms")
	q := builder.Must(builder.Select(rooms.Col("id")).From(rooms).Build())
	checkAndQuery := func(what string) {
		t.Helper()
		if err := db.Check(ctx); err != nil {
			t.Fatalf("Check %s: %v", what, err)
		}
		if _, err := guardedsql.All(scoped, db, q, guardedsql.Scalar[int64]); err != nil {
			t.Fatalf("query %s: %v", what, err)
		}
	}
	checkAndQuery("before the outage")

	proxy.Cut()
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	cerr := db.Check(cctx)
	_, qerr := guardedsql.All(scoped, db, q, guardedsql.Scalar[int64])
	t.Logf("during the outage: Check: %v; query: %v", cerr, qerr)
	if !errors.Is(cerr, guardedsql.ErrUnavailable) || !guardedsql.IsUnavailable(cerr) {
		t.Fatalf("Check during the outage: %v, want ErrUnavailable", cerr)
	}
	if !guardedsql.IsUnavailable(qerr) {
		t.Fatalf("query during the outage: %v (%T), want IsUnavailable", qerr, qerr)
	}
	for _, e := range []error{cerr, qerr} {
		if secret != "" && strings.Contains(e.Error(), secret) {
			t.Errorf("error names the password: %v", e)
		}
	}

	proxy.Restore()
	deadline := time.Now().Add(10 * time.Second)
	for err := db.Check(ctx); err != nil; err = db.Check(ctx) {
		if time.Now().After(deadline) {
			t.Fatalf("Check after the outage: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	checkAndQuery("after the outage")
}

// IsUnavailable is false for the failures a retry cannot cure.
func TestIsUnavailableRefusesOtherErrors(t *testing.T) {
	for _, err := range []error{nil, guardedsql.ErrNotFound, guardedsql.ErrNoScope, postgres.ErrRLSUnsafe,
		context.Canceled, context.DeadlineExceeded, fmt.Errorf("query: %w", context.DeadlineExceeded), errors.New("syntax error"), fmt.Errorf("wrapped: %w", guardedsql.ErrTooManyRows)} {
		if guardedsql.IsUnavailable(err) {
			t.Errorf("IsUnavailable(%v) = true", err)
		}
	}
	if !guardedsql.IsUnavailable(fmt.Errorf("x: %w", guardedsql.ErrUnavailable)) {
		t.Error("IsUnavailable(wrapped ErrUnavailable) = false")
	}
}
