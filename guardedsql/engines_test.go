package guardedsql_test

// The engine harness: the hotel database of hotel_test.go provisioned on
// SQLite (always), PostgreSQL and MySQL/MariaDB (when their admin DSNs are
// in the environment), so that one test table runs on all three.
//
// Each live provisioning creates its own schema or database and roles with
// unique names and drops them when the test ends:
//
//	PostgreSQL: roles tm_owner_<id> (owns the tables, applies the RLS DDL)
//	            and tm_app_<id> (LOGIN, not superuser, no BYPASSRLS, not an
//	            owner: the guarded connection); schema tm_test_<id> in the
//	            admin DSN's database, on every connection's search_path.
//	MySQL:      user tm_app_<id> with SELECT/INSERT/UPDATE/DELETE on the
//	            database tm_test_<id>; tables created by the admin.
//
// The unguarded h.raw handle is an admin connection to the test database
// (a superuser on PostgreSQL, so it sees through row-level security) that
// accepts '?' placeholders on every engine.

import (
	"context"
	"crypto/rand"
	"database/sql"
	"database/sql/driver"
	"encoding/hex"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	sq "github.com/Masterminds/squirrel"
	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/tenantmcp/tenantmcp/builder"
	"github.com/tenantmcp/tenantmcp/guardedsql"
	gmysql "github.com/tenantmcp/tenantmcp/guardedsql/mysql"
	"github.com/tenantmcp/tenantmcp/guardedsql/postgres"
	"github.com/tenantmcp/tenantmcp/scope"
)

// Environment variables naming the admin connections of the live engines.
const (
	envPostgres = "TENANTMCP_TEST_POSTGRES_DSN"
	envMySQL    = "TENANTMCP_TEST_MYSQL_DSN"
)

// engine provisions the hotel database on one database engine.
type engine struct {
	name string
	// env is the variable holding the admin DSN ("" for SQLite).
	env  string
	hint string
}

var (
	engineSQLite   = engine{name: "sqlite"}
	enginePostgres = engine{name: "postgres", env: envPostgres,
		hint: "postgres://postgres@127.0.0.1:5432/postgres (a superuser: it creates roles and a schema in that database)"}
	engineMySQL = engine{name: "mysql", env: envMySQL,
		hint: "mysql://root@tcp(127.0.0.1:3306)/test (a user that may CREATE DATABASE and CREATE USER)"}
	allEngines = []engine{engineSQLite, enginePostgres, engineMySQL}
)

// dsn returns the admin DSN, skipping t with instructions when unset.
func (e engine) dsn(t testing.TB) string {
	t.Helper()
	if e.env == "" {
		return ""
	}
	v := os.Getenv(e.env)
	if v == "" {
		t.Skipf("%s: set %s to an admin connection, e.g. %s=%s; the test creates and drops its own schema or database and roles (.ci/databases.sh sets it up)",
			e.name, e.env, e.env, e.hint)
	}
	return v
}

// forEachEngine runs fn as a subtest per engine; live engines skip (with a
// message saying how to enable them) when their DSN is not set.
func forEachEngine(t *testing.T, fn func(t *testing.T, e engine)) {
	for _, e := range allEngines {
		t.Run(e.name, func(t *testing.T) {
			e.dsn(t)
			fn(t, e)
		})
	}
}

// options is the one Options a test helper was given (at most one), or the
// zero Options.
func options(opts []guardedsql.Options) guardedsql.Options {
	switch len(opts) {
	case 0:
		return guardedsql.Options{}
	case 1:
		return opts[0]
	}
	panic("test helper given more than one guardedsql.Options")
}

// newHotel provisions the default-sized hotel database on e.
func (e engine) newHotel(t testing.TB, opts ...guardedsql.Options) *hotelDB {
	return e.newHotelSized(t, 3, 3, 4, 2, opts...)
}

// newHotelSized provisions a fresh hotel database on e, seeded from
// seedModel with these sizes, and returns the guarded DB over it.
func (e engine) newHotelSized(t testing.TB, chains, hotelsPer, roomsPer, bookingsPer int, opts ...guardedsql.Options) *hotelDB {
	t.Helper()
	switch e.name {
	case "postgres":
		return newPostgresHotel(t, e.dsn(t), seedModel(chains, hotelsPer, roomsPer, bookingsPer), opts...).hotelDB
	case "mysql":
		return newMySQLHotel(t, e.dsn(t), seedModel(chains, hotelsPer, roomsPer, bookingsPer), opts...)
	}
	return newHotelSized(t, chains, hotelsPer, roomsPer, bookingsPer, opts...)
}

// sharedHotels caches one default-sized hotel database per live engine for
// the read-only tests of the shared table; TestMain drops them at the end.
var sharedHotels struct {
	sync.Mutex
	byEngine map[string]*hotelDB
	cleanups []func()
}

// sharedTB registers cleanups to run at the end of the package's tests
// instead of the current test's.
type sharedTB struct{ testing.TB }

func (sharedTB) Cleanup(f func()) {
	sharedHotels.cleanups = append(sharedHotels.cleanups, f)
}

// sharedHotel returns the default hotel database on e, provisioned once
// per test binary for tests that only read: the same seed as newHotel.
// SQLite databases are cheap and never shared.
func (e engine) sharedHotel(t *testing.T) *hotelDB {
	t.Helper()
	if e.env == "" {
		return e.newHotel(t)
	}
	sharedHotels.Lock()
	defer sharedHotels.Unlock()
	if h := sharedHotels.byEngine[e.name]; h != nil {
		return h
	}
	h := e.newHotel(sharedTB{t})
	if sharedHotels.byEngine == nil {
		sharedHotels.byEngine = map[string]*hotelDB{}
	}
	sharedHotels.byEngine[e.name] = h
	return h
}

// cleanupError reports a failed cleanup: on the test, or on stderr once
// the test that provisioned a shared database has finished.
// endSessions ends the sessions of roles and waits (at most 10 s) until
// they are gone: each session of the application role holds its scope
// counter (a temporary sequence owned by the tables' owner) until its
// backend exits, which is after the client's pool has closed, and DROP
// ROLE of the owner fails while one remains.
func endSessions(root interface {
	Exec(context.Context, string, ...any) (pgconn.CommandTag, error)
	QueryRow(context.Context, string, ...any) pgx.Row
}, roles ...string) {
	ctx := context.Background()
	_, _ = root.Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = ANY($1) AND pid <> pg_backend_pid()`, roles)
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		var n int
		if root.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE usename = ANY($1)`, roles).Scan(&n) != nil || n == 0 {
			return
		}
	}
}

func cleanupError(t testing.TB, format string, args ...any) {
	if _, ok := t.(sharedTB); ok {
		fmt.Fprintf(os.Stderr, format+"\n", args...)
		return
	}
	t.Errorf(format, args...)
}

func TestMain(m *testing.M) {
	code := m.Run()
	for i := len(sharedHotels.cleanups) - 1; i >= 0; i-- {
		sharedHotels.cleanups[i]()
	}
	os.Exit(code)
}

func uniqueSuffix(t testing.TB) string {
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b[:])
}

// ddlHotel returns the hotel tables for a live engine: the same columns
// and keys as the SQLite hotelDDL, with auto-generated ids for inserts
// that omit them, and check_in kept as text so results compare equal on
// every engine.
func ddlHotel(engine string) []string {
	id, key, text := "BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY", "TEXT", "TEXT"
	if engine == "mysql" {
		// A binary collation: tenant keys compare byte for byte.
		id, key, text = "BIGINT AUTO_INCREMENT PRIMARY KEY", "VARCHAR(64) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin", "VARCHAR(255)"
	}
	return []string{
		`CREATE TABLE countries (code ` + key + ` PRIMARY KEY, name ` + text + ` NOT NULL)`,
		`CREATE TABLE chains (id ` + key + ` PRIMARY KEY, name ` + text + ` NOT NULL)`,
		`CREATE TABLE hotels (id ` + id + `, chain_id ` + key + ` NOT NULL REFERENCES chains(id), name ` + text + ` NOT NULL, country ` + key + ` REFERENCES countries(code))`,
		`CREATE TABLE rooms (id ` + id + `, hotel_id BIGINT NOT NULL REFERENCES hotels(id), number ` + text + ` NOT NULL, rate BIGINT NOT NULL)`,
		`CREATE TABLE guests (id ` + id + `, chain_id ` + key + ` NOT NULL REFERENCES chains(id), name ` + text + ` NOT NULL, email ` + text + ` NOT NULL)`,
		`CREATE TABLE bookings (id ` + id + `, room_id BIGINT NOT NULL REFERENCES rooms(id), guest_id BIGINT REFERENCES guests(id), check_in ` + text + ` NOT NULL, nights BIGINT NOT NULL, status ` + text + ` NOT NULL)`,
		`CREATE TABLE payments (id ` + id + `, booking_id BIGINT NOT NULL REFERENCES bookings(id), amount BIGINT NOT NULL, method ` + text + ` NOT NULL)`,
		`CREATE INDEX hotels_chain ON hotels(chain_id)`,
		`CREATE INDEX rooms_hotel ON rooms(hotel_id)`,
		`CREATE INDEX guests_chain ON guests(chain_id)`,
		`CREATE INDEX bookings_room ON bookings(room_id, check_in)`,
		`CREATE INDEX bookings_guest ON bookings(guest_id)`,
		`CREATE INDEX payments_booking ON payments(booking_id)`,
	}
}

// loadRows inserts the model through exec ('?' placeholders), one
// multi-row INSERT per table.
func (m *model) loadRows(exec func(q string, args ...any) error) error {
	ins := func(table string, ncol int, rows [][]any) error {
		if len(rows) == 0 {
			return nil
		}
		row := "(" + strings.TrimSuffix(strings.Repeat("?, ", ncol), ", ") + ")"
		var args []any
		vals := make([]string, len(rows))
		for i, r := range rows {
			vals[i] = row
			args = append(args, r...)
		}
		return exec(`INSERT INTO `+table+` VALUES `+strings.Join(vals, ", "), args...)
	}
	var rows [][]any
	for _, c := range m.countries {
		rows = append(rows, []any{c[0], c[1]})
	}
	if err := ins("countries", 2, rows); err != nil {
		return err
	}
	rows = nil
	for _, c := range m.chains {
		rows = append(rows, []any{c.ID, c.Name})
	}
	if err := ins("chains", 2, rows); err != nil {
		return err
	}
	rows = nil
	for _, h := range m.hotels {
		rows = append(rows, []any{h.ID, h.Chain, h.Name, h.Country})
	}
	if err := ins("hotels", 4, rows); err != nil {
		return err
	}
	rows = nil
	for _, r := range m.rooms {
		rows = append(rows, []any{r.ID, r.Hotel, r.Number, r.Rate})
	}
	if err := ins("rooms", 4, rows); err != nil {
		return err
	}
	rows = nil
	for _, g := range m.guests {
		rows = append(rows, []any{g.ID, g.Chain, g.Name, g.Email})
	}
	if err := ins("guests", 4, rows); err != nil {
		return err
	}
	rows = nil
	for _, b := range m.bookings {
		var guest any
		if b.Guest != 0 {
			guest = b.Guest
		}
		rows = append(rows, []any{b.ID, b.Room, guest, b.CheckIn, b.Nights, b.Status})
	}
	if err := ins("bookings", 6, rows); err != nil {
		return err
	}
	rows = nil
	for _, p := range m.payments {
		rows = append(rows, []any{p.ID, p.Booking, p.Amount, p.Method})
	}
	return ins("payments", 4, rows)
}

// pgHotel is a hotel database on PostgreSQL with handles for the
// PostgreSQL-only tests.
type pgHotel struct {
	*hotelDB
	admin     *pgxpool.Pool // superuser, search_path set to the test schema
	owner     *pgxpool.Pool // the tables' owner
	app       *pgxpool.Pool // the application role (the guarded pool)
	appRole   string
	ownerRole string
	schema    string
	adminCfg  *pgxpool.Config
	appCfg    *pgxpool.Config
	key       postgres.Key // the scope-signing key ApplyRLS installed
}

// pgConfigFor derives, from the admin configuration, the configuration of
// role user whose search_path is the test schema alone.
func pgConfigFor(admin *pgxpool.Config, user, password, schema string) *pgxpool.Config {
	cfg := admin.Copy()
	cfg.ConnConfig.User = user
	cfg.ConnConfig.Password = password
	cfg.ConnConfig.RuntimeParams["search_path"] = schema
	cfg.MinConns = 0
	return cfg
}

func pgConnect(t testing.TB, cfg *pgxpool.Config) *pgxpool.Pool {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Ping(ctx); err != nil {
		p.Close()
		t.Fatalf("connect as %s: %v", cfg.ConnConfig.User, err)
	}
	return p
}

// newPostgresHotel provisions a schema, roles, tables, data and row-level
// security in the admin DSN's database, and guards a pool connected as the
// application role. opts go to NewPostgres.
func newPostgresHotel(t testing.TB, dsn string, m *model, opts ...guardedsql.Options) *pgHotel {
	t.Helper()
	h := provisionPostgres(t, dsn, m)
	ctx := context.Background()
	sch := h.sch
	if err := postgres.ApplyRLS(ctx, h.owner, sch, postgres.Options{Key: h.key}); err != nil {
		t.Fatal(err)
	}
	h.app = pgConnect(t, h.appCfg)
	o := options(opts)
	po, _ := o.Engine.(postgres.Options)
	po.Key = h.key
	o.Engine = po
	db, err := postgres.New(ctx, h.app, sch, o)
	if err != nil {
		t.Fatal(err)
	}
	h.db = db
	return h
}

// provisionPostgres creates the roles, the schema, the seeded tables and
// the unguarded handle; no row-level security yet and no guarded DB.
func provisionPostgres(t testing.TB, dsn string, m *model) *pgHotel {
	t.Helper()
	ctx := context.Background()
	adminCfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		t.Fatalf("%s: %v", envPostgres, err)
	}
	root := pgConnect(t, adminCfg)
	defer root.Close()
	id := uniqueSuffix(t)
	key, err := postgres.NewKey("k" + id)
	if err != nil {
		t.Fatal(err)
	}
	h := &pgHotel{schema: "tm_test_" + id, ownerRole: "tm_owner_" + id, appRole: "tm_app_" + id, adminCfg: adminCfg, key: key}
	ownerPW, appPW := uniqueSuffix(t), uniqueSuffix(t)
	for _, s := range []string{
		`CREATE ROLE ` + h.ownerRole + ` LOGIN NOSUPERUSER NOBYPASSRLS PASSWORD '` + ownerPW + `'`,
		`CREATE ROLE ` + h.appRole + ` LOGIN NOSUPERUSER NOBYPASSRLS PASSWORD '` + appPW + `'`,
		`CREATE SCHEMA ` + h.schema + ` AUTHORIZATION ` + h.ownerRole,
		`GRANT USAGE ON SCHEMA ` + h.schema + ` TO ` + h.appRole,
	} {
		if _, err := root.Exec(ctx, s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
	t.Cleanup(func() {
		for _, p := range []*pgxpool.Pool{h.app, h.owner, h.admin} {
			if p != nil {
				p.Close()
			}
		}
		root, err := pgxpool.NewWithConfig(context.Background(), adminCfg)
		if err != nil {
			cleanupError(t, "cleanup: connect: %v", err)
			return
		}
		defer root.Close()
		endSessions(root, h.appRole, h.ownerRole)
		for _, s := range []string{
			`DROP SCHEMA IF EXISTS ` + h.schema + ` CASCADE`,
			`DROP ROLE IF EXISTS ` + h.appRole,
			`DROP ROLE IF EXISTS ` + h.ownerRole,
		} {
			if _, err := root.Exec(context.Background(), s); err != nil {
				cleanupError(t, "cleanup: %s: %v", s, err)
			}
		}
	})
	h.admin = pgConnect(t, pgConfigFor(adminCfg, adminCfg.ConnConfig.User, adminCfg.ConnConfig.Password, h.schema))
	h.owner = pgConnect(t, pgConfigFor(adminCfg, h.ownerRole, ownerPW, h.schema))
	for _, s := range ddlHotel("postgres") {
		if _, err := h.owner.Exec(ctx, s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
	err = m.loadRows(func(q string, args ...any) error {
		q, err := sq.Dollar.ReplacePlaceholders(q)
		if err == nil {
			_, err = h.owner.Exec(ctx, q, args...)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	stmts := []string{
		`GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA ` + h.schema + ` TO ` + h.appRole,
		`GRANT USAGE ON ALL SEQUENCES IN SCHEMA ` + h.schema + ` TO ` + h.appRole,
	}
	for _, tb := range []string{"hotels", "rooms", "guests", "bookings", "payments"} {
		stmts = append(stmts, `SELECT setval(pg_get_serial_sequence('`+tb+`', 'id'), (SELECT coalesce(max(id), 0) + 1000 FROM `+tb+`))`)
	}
	for _, s := range stmts {
		if _, err := h.owner.Exec(ctx, s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
	rec := &recorder{}
	h.appCfg = pgConfigFor(adminCfg, h.appRole, appPW, h.schema)
	h.appCfg.ConnConfig.Tracer = pgRecorder{rec}
	raw := sql.OpenDB(recConnector{inner: rebindConnector{stdlib.GetPoolConnector(h.admin)}, rec: rec})
	t.Cleanup(func() { raw.Close() })
	h.hotelDB = &hotelDB{m: m, sch: builder.MustSchema(hotelDef), raw: raw, rec: rec}
	return h
}

// newMySQLHotel provisions a database and an application user, creates and
// seeds the tables as the admin, and guards a connection as the user.
func newMySQLHotel(t testing.TB, dsn string, m *model, opts ...guardedsql.Options) *hotelDB {
	t.Helper()
	ctx := context.Background()
	adminCfg, err := gmysql.Config(dsn)
	if err != nil {
		t.Fatalf("%s: %v", envMySQL, err)
	}
	rootConn, err := mysql.NewConnector(adminCfg)
	if err != nil {
		t.Fatal(err)
	}
	root := sql.OpenDB(rootConn)
	defer root.Close()
	id := uniqueSuffix(t)
	dbName, user, pw := "tm_test_"+id, "tm_app_"+id, uniqueSuffix(t)
	for _, s := range []string{
		`CREATE DATABASE ` + dbName + ` CHARACTER SET utf8mb4`,
		`CREATE USER '` + user + `'@'%' IDENTIFIED BY '` + pw + `'`,
		`GRANT SELECT, INSERT, UPDATE, DELETE ON ` + dbName + `.* TO '` + user + `'@'%'`,
	} {
		if _, err := root.ExecContext(ctx, s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
	t.Cleanup(func() {
		root := sql.OpenDB(rootConn)
		defer root.Close()
		for _, s := range []string{`DROP DATABASE IF EXISTS ` + dbName, `DROP USER IF EXISTS '` + user + `'@'%'`} {
			if _, err := root.ExecContext(context.Background(), s); err != nil {
				cleanupError(t, "cleanup: %s: %v", s, err)
			}
		}
	})
	rec := &recorder{}
	acfg := adminCfg.Clone()
	acfg.DBName = dbName
	aconn, err := mysql.NewConnector(acfg)
	if err != nil {
		t.Fatal(err)
	}
	raw := sql.OpenDB(recConnector{inner: aconn, rec: rec})
	t.Cleanup(func() { raw.Close() })
	for _, s := range ddlHotel("mysql") {
		if _, err := raw.ExecContext(ctx, s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
	if err := m.loadRows(func(q string, args ...any) error { _, err := raw.ExecContext(ctx, q, args...); return err }); err != nil {
		t.Fatal(err)
	}
	ucfg := adminCfg.Clone()
	ucfg.User, ucfg.Passwd, ucfg.DBName = user, pw, dbName
	uconn, err := mysql.NewConnector(ucfg)
	if err != nil {
		t.Fatal(err)
	}
	app := sql.OpenDB(recConnector{inner: uconn, rec: rec})
	t.Cleanup(func() { app.Close() })
	sch := builder.MustSchema(hotelDef)
	db, err := gmysql.New(ctx, app, sch, options(opts))
	if err != nil {
		t.Fatal(err)
	}
	rec.reset()
	return &hotelDB{m: m, sch: sch, db: db, raw: raw, rec: rec}
}

// pgRecorder records every statement pgx sends on the guarded pool,
// batches included: evidence below guardedsql of what reached the server.
type pgRecorder struct{ rec *recorder }

func (r pgRecorder) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	r.rec.add(d.SQL)
	return ctx
}

func (pgRecorder) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

func (pgRecorder) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	return ctx
}

func (r pgRecorder) TraceBatchQuery(_ context.Context, _ *pgx.Conn, d pgx.TraceBatchQueryData) {
	r.rec.add(d.SQL)
}

func (pgRecorder) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}

// rebindConnector lets '?' placeholders reach PostgreSQL as $1, $2, ...
// for the unguarded test handle.
type rebindConnector struct{ inner driver.Connector }

func (c rebindConnector) Connect(ctx context.Context) (driver.Conn, error) {
	conn, err := c.inner.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &rebindConn{conn}, nil
}

func (c rebindConnector) Driver() driver.Driver { return c.inner.Driver() }

type rebindConn struct{ conn driver.Conn }

func rebind(q string) string {
	out, err := sq.Dollar.ReplacePlaceholders(q)
	if err != nil {
		panic(err)
	}
	return out
}

func (c *rebindConn) Prepare(q string) (driver.Stmt, error) { return c.conn.Prepare(rebind(q)) }

func (c *rebindConn) PrepareContext(ctx context.Context, q string) (driver.Stmt, error) {
	return c.conn.(driver.ConnPrepareContext).PrepareContext(ctx, rebind(q))
}

func (c *rebindConn) Close() error { return c.conn.Close() }

func (c *rebindConn) Begin() (driver.Tx, error) {
	//lint:ignore SA1019 driver.Conn requires Begin; database/sql calls BeginTx
	return c.conn.Begin()
}

func (c *rebindConn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	return c.conn.(driver.ConnBeginTx).BeginTx(ctx, opts)
}

func (c *rebindConn) QueryContext(ctx context.Context, q string, args []driver.NamedValue) (driver.Rows, error) {
	return c.conn.(driver.QueryerContext).QueryContext(ctx, rebind(q), args)
}

func (c *rebindConn) ExecContext(ctx context.Context, q string, args []driver.NamedValue) (driver.Result, error) {
	return c.conn.(driver.ExecerContext).ExecContext(ctx, rebind(q), args)
}

// TestEngineHarness is a quick self-test of the harness: the provisioned
// database holds the model and the guard confines a chain grant.
func TestEngineHarness(t *testing.T) {
	forEachEngine(t, func(t *testing.T, e engine) {
		h := e.newHotel(t)
		if n := count(t, h.raw, "bookings"); n != len(h.m.bookings) {
			t.Fatalf("raw sees %d bookings, model has %d", n, len(h.m.bookings))
		}
		ctx := grantCtx(chainG("acme"))
		b := h.sch.Table("bookings")
		got := sorted(ids[int64](t, ctx, h.db, builder.Must(builder.Select(b.Col("id")).From(b).Build())))
		want := sortedKeys[int64](h.m.visible([]scope.Grant{chainG("acme")}).bookings)
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("got %v, want %v", got, want)
		}
	})
}

// TestIntrospectLive reads the hotel catalog back from information_schema
// on each live engine, as the application role: the introspected schema
// guards like the declared one (on PostgreSQL it even passes the start-up
// check against the policies generated from the declared schema, so both
// graphs render the same policies).
func TestIntrospectLive(t *testing.T) {
	forEachEngine(t, func(t *testing.T, e engine) {
		if e.env == "" {
			t.Skip("SQLite introspection: TestIntrospectSQLite")
		}
		ctx := context.Background()
		var (
			sch *builder.Schema
			db  *guardedsql.DB
			h   *hotelDB
			err error
		)
		switch e.name {
		case "postgres":
			ph := newPostgresHotel(t, e.dsn(t), seedModel(3, 3, 4, 2))
			h = ph.hotelDB
			if sch, err = postgres.Introspect(ctx, ph.app, hotelTenancy); err != nil {
				t.Fatal(err)
			}
			db, err = postgres.New(ctx, ph.app, sch, guardedsql.Options{Engine: postgres.Options{Key: ph.key}})
		case "mysql":
			h = e.newHotel(t)
			if sch, err = gmysql.Introspect(ctx, h.raw, hotelTenancy); err != nil {
				t.Fatal(err)
			}
			db, err = gmysql.New(ctx, h.raw, sch, guardedsql.Options{})
		}
		if err != nil {
			t.Fatal(err)
		}
		if got, want := sch.String(), h.sch.String(); got != want {
			t.Fatalf("introspected scope paths differ:\n%s\nwant\n%s", got, want)
		}
		g := []scope.Grant{chainG("7")}
		p := sch.Table("payments")
		got := sorted(ids[int64](t, grantCtx(g...), db, builder.Must(builder.Select(p.Col("id")).From(p).Build())))
		if want := sortedKeys[int64](h.m.visible(g).payments); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("payments: got %v, want %v", got, want)
		}
	})
}
