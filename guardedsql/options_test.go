package guardedsql_test

import (
	"context"
	"database/sql"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tenantmcp/tenantmcp/builder"
	"github.com/tenantmcp/tenantmcp/guardedsql"
	gmysql "github.com/tenantmcp/tenantmcp/guardedsql/mysql"
	"github.com/tenantmcp/tenantmcp/guardedsql/postgres"
	gsqlite "github.com/tenantmcp/tenantmcp/guardedsql/sqlite"
	"github.com/tenantmcp/tenantmcp/scope"
)

// hotelFile writes the hotel model to a new SQLite file and returns its
// path and the model.
func hotelFile(t *testing.T) (string, *model) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "hotel.db")
	raw, err := sql.Open("sqlite", "file:"+path+"?_pragma=foreign_keys(1)")
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	m := seedModel(2, 2, 2, 2)
	if err := m.load(context.Background(), raw); err != nil {
		t.Fatal(err)
	}
	return path, m
}

// checkBookings: the guarded db shows the grants exactly the bookings the
// model says they see (two tenants, so a DB that ignored the scope fails).
func checkBookings(t *testing.T, db *guardedsql.DB, sch *builder.Schema, m *model) {
	t.Helper()
	b := sch.Table("bookings").As("b")
	q := builder.Must(builder.Select(b.Col("id")).From(b).Build())
	for _, g := range [][]scope.Grant{{chainG("acme")}, {chainG("globex")}} {
		got := sorted(ids[int64](t, grantCtx(g...), db, q))
		want := sortedKeys[int64](m.visible(g).bookings)
		if len(want) == 0 || !slices.Equal(got, want) {
			t.Fatalf("%v: bookings %v, want %v", g, got, want)
		}
	}
}

// TestZeroOptions: the zero Options opens and guards a database through
// every SQLite constructor; on PostgreSQL it is refused for want of a key
// (the one required field), before the pool is touched.
func TestZeroOptions(t *testing.T) {
	ctx := context.Background()
	path, m := hotelFile(t)
	sch := builder.MustSchema(hotelDef)
	db, err := guardedsql.Open(ctx, "sqlite:"+path, sch, guardedsql.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	checkBookings(t, db, sch, m)

	raw, err := sql.Open("sqlite", "file:"+path+"?_pragma=foreign_keys(1)")
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	for name, newDB := range map[string]func(context.Context, *sql.DB, *builder.Schema, guardedsql.Options) (*guardedsql.DB, error){
		"NewSQLite": gsqlite.New, "sqlite.New": gsqlite.New,
	} {
		db, err := newDB(ctx, raw, sch, guardedsql.Options{})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		checkBookings(t, db, sch, m)
	}
	if _, err := postgres.New(ctx, nil, sch, guardedsql.Options{}); !errors.Is(err, postgres.ErrRLSNoKey) {
		t.Fatalf("postgres.New with the zero Options: %v, want ErrRLSNoKey", err)
	}
}

// TestOptionsInvalid: a negative duration or size, a malformed key or
// namespace is refused by every constructor with an error matching
// ErrInvalid that names the field and never the key's secret, before
// anything is opened or sent (Open creates no file; the nil pools and
// connections of the New functions are never touched).
func TestOptionsInvalid(t *testing.T) {
	ctx := context.Background()
	sch := builder.MustSchema(hotelDef)
	key, err := postgres.NewKey("k1")
	if err != nil {
		t.Fatal(err)
	}
	secret := strings.TrimPrefix(key.Text(), "k1:")
	badKey := key
	badKey.ID = "not an id!"
	cases := map[string]guardedsql.Options{
		"Options.PoolWait":                   {PoolWait: -time.Second},
		"Options.StatementTimeout":           {StatementTimeout: -1},
		"Options.LockTimeout":                {LockTimeout: -time.Millisecond},
		"Options.MaxConns":                   {MaxConns: -1},
		"postgres.Options.Recheck":           {Engine: postgres.Options{Recheck: -time.Minute, Key: key}},
		"postgres.Options.Key":               {Engine: postgres.Options{Key: badKey}},
		"postgres.Options.Namespace":         {Engine: postgres.Options{Namespace: "Not-An-Identifier", Key: key}},
		"postgres options to another engine": {Engine: postgres.Options{Key: key}},
	}
	dir := t.TempDir()
	for field, opts := range cases {
		path := filepath.Join(dir, "never.db")
		calls := map[string]func() error{
			"Open": func() error { _, err := guardedsql.Open(ctx, "sqlite:"+path, sch, opts); return err },
			"sqlite.New": func() error {
				_, err := gsqlite.New(ctx, nil, sch, opts)
				return err
			},
			"mysql.New":    func() error { _, err := gmysql.New(ctx, nil, sch, opts); return err },
			"postgres.New": func() error { _, err := postgres.New(ctx, nil, sch, opts); return err },
			"Open(postgres://)": func() error {
				_, err := guardedsql.Open(ctx, "postgres://nobody@127.0.0.1:1/never", sch, opts)
				return err
			},
		}
		for name, call := range calls {
			if field == "postgres options to another engine" && name == "postgres.New" {
				continue // valid: New would use its nil pool
			}
			err := call()
			want := field
			switch {
			case field == "postgres options to another engine" && strings.Contains(name, "postgres"):
				if err == nil || errors.Is(err, guardedsql.ErrInvalid) {
					t.Errorf("%s with valid postgres.Options: err = %v, want a connection error", name, err)
				}
				continue
			case field == "postgres options to another engine":
				want = "holds postgres options"
			case strings.HasPrefix(field, "postgres.") && !strings.Contains(name, "postgres"):
				want = "holds postgres options" // another engine refuses them whole
			}
			if !errors.Is(err, guardedsql.ErrInvalid) || !strings.Contains(err.Error(), want) {
				t.Errorf("%s with a bad %s: err = %v, want ErrInvalid naming %q", name, field, err, want)
				continue
			}
			if strings.Contains(err.Error(), secret) || strings.Contains(err.Error(), hex.EncodeToString([]byte(secret))) {
				t.Errorf("%s: the error carries the key's secret: %v", name, err)
			}
		}
		if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("Open with a bad %s created the database file (stat: %v)", field, err)
		}
	}
}

// TestRLSOptions: the administration functions read the namespace (and
// ApplyRLS and CheckRLS the key) of postgres.Options; a bad one is
// refused, naming the field, before the owner or pool (nil here) is used,
// and the namespace given is the one their output uses.
func TestRLSOptions(t *testing.T) {
	ctx := context.Background()
	sch := builder.MustSchema(hotelDef)
	key, err := postgres.NewKey("k1")
	if err != nil {
		t.Fatal(err)
	}
	badKey := key
	badKey.ID = ""
	badNS := postgres.Options{Namespace: "bad namespace"}
	calls := map[string]error{
		"RLSDDL":    func() error { _, err := postgres.RLSDDL(sch, badNS); return err }(),
		"SignScope": func() error { _, err := postgres.SignScope(key, "n", "{}", badNS); return err }(),
		"AddKey":    postgres.AddKey(ctx, nil, key, badNS),
		"RemoveKey": postgres.RemoveKey(ctx, nil, "k1", badNS),
	}
	for name, err := range calls {
		if !errors.Is(err, guardedsql.ErrInvalid) || !strings.Contains(err.Error(), "postgres.Options.Namespace") {
			t.Errorf("%s: err = %v, want ErrInvalid naming postgres.Options.Namespace", name, err)
		}
	}
	for name, opts := range map[string]postgres.Options{
		"postgres.Options.Namespace": {Namespace: "Bad", Key: key},
		"postgres.Options.Key":       {Key: badKey},
	} {
		for fn, err := range map[string]error{
			"ApplyRLS": postgres.ApplyRLS(ctx, nil, sch, opts),
			"CheckRLS": postgres.CheckRLS(ctx, nil, sch, opts),
		} {
			if !errors.Is(err, guardedsql.ErrInvalid) || !strings.Contains(err.Error(), name) {
				t.Errorf("%s with a bad %s: err = %v", fn, name, err)
			}
		}
	}
	// The namespace reaches the DDL and the signature.
	def, err := postgres.RLSDDL(sch, postgres.Options{})
	if err != nil {
		t.Fatal(err)
	}
	app, err := postgres.RLSDDL(sch, postgres.Options{Namespace: "app_a"})
	if err != nil {
		t.Fatal(err)
	}
	if all := strings.Join(app, "\n"); !strings.Contains(all, "app_a.scope") || strings.Contains(all, "tenantmcp.scope") || strings.Contains(all, "tenantmcp_scope") ||
		!strings.Contains(strings.Join(def, "\n"), "tenantmcp.scope") {
		t.Fatalf("RLSDDL ignores the namespace:\n%s", all)
	}
	s1, err := postgres.SignScope(key, "n", "{}", postgres.Options{})
	if err != nil {
		t.Fatal(err)
	}
	s2, err := postgres.SignScope(key, "n", "{}", postgres.Options{Namespace: "app_a"})
	if err != nil {
		t.Fatal(err)
	}
	if s1 == s2 {
		t.Fatal("SignScope signs the same value for two namespaces")
	}
}

// TestPostgresRLSNamespace: row-level security installed under a
// namespace of its own (postgres.Options.Namespace) serves a DB opened
// with the same namespace, tenant by tenant; a DB or a check using
// the default namespace finds no policies of its own and fails closed.
func TestPostgresRLSNamespace(t *testing.T) {
	h := provisionPostgres(t, enginePostgres.dsn(t), seedModel(2, 2, 2, 2))
	ctx := context.Background()
	const ns = "tm_a_ns"
	if err := postgres.ApplyRLS(ctx, h.owner, h.sch, postgres.Options{Namespace: ns, Key: h.key}); err != nil {
		t.Fatal(err)
	}
	h.app = pgConnect(t, h.appCfg)
	if err := postgres.CheckRLS(ctx, h.app, h.sch, postgres.Options{Namespace: ns, Key: h.key}); err != nil {
		t.Fatalf("CheckRLS in the namespace: %v", err)
	}
	if err := postgres.CheckRLS(ctx, h.app, h.sch, postgres.Options{Key: h.key}); !errors.Is(err, postgres.ErrRLSUnsafe) {
		t.Fatalf("CheckRLS in the default namespace: %v, want ErrRLSUnsafe", err)
	}
	if _, err := postgres.New(ctx, h.app, h.sch, guardedsql.Options{Engine: postgres.Options{Key: h.key}}); !errors.Is(err, postgres.ErrRLSUnsafe) {
		t.Fatalf("New in the default namespace: %v, want ErrRLSUnsafe", err)
	}
	for _, rlsOnly := range []bool{false, true} {
		db, err := postgres.New(ctx, h.app, h.sch, guardedsql.Options{Engine: postgres.Options{Key: h.key, Namespace: ns, RLSOnly: rlsOnly}})
		if err != nil {
			t.Fatal(err)
		}
		checkBookings(t, db, h.sch, h.m)
	}
}

// TestMySQLMaxConns: Options.MaxConns sizes the pool Open creates. With
// one connection held by a transaction, a second statement waits
// Options.PoolWait and fails with ErrBusy; with two it runs.
func TestMySQLMaxConns(t *testing.T) {
	ctx := context.Background()
	cfg, raw := scratchMySQLDB(t, engineMySQL, "tm_a_maxconns_")
	for _, s := range ddlHotel("mysql") {
		if _, err := raw.ExecContext(ctx, s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
	m := seedModel(2, 1, 1, 1)
	if err := m.loadRows(func(q string, args ...any) error { _, err := raw.ExecContext(ctx, q, args...); return err }); err != nil {
		t.Fatal(err)
	}
	sch := builder.MustSchema(hotelDef)
	b := sch.Table("bookings").As("b")
	q := builder.Must(builder.Select(b.Col("id")).From(b).Build())
	acme := grantCtx(chainG("acme"))
	for _, tc := range []struct {
		maxConns int
		busy     bool
	}{{1, true}, {2, false}} {
		db, err := guardedsql.Open(ctx, "mysql://"+cfg.FormatDSN(), sch, guardedsql.Options{MaxConns: tc.maxConns, PoolWait: 300 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		err = db.Tx(acme, func(tx *guardedsql.Tx) error {
			if _, err := guardedsql.All(acme, tx, q, guardedsql.Scalar[int64]); err != nil {
				return err
			}
			_, err := guardedsql.All(acme, db, q, guardedsql.Scalar[int64])
			return err
		})
		db.Close()
		if busy := errors.Is(err, guardedsql.ErrBusy); busy != tc.busy || (!busy && err != nil) {
			t.Fatalf("MaxConns %d: second statement beside a transaction: %v", tc.maxConns, err)
		}
	}
}
