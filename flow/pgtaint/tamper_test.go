package pgtaint_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/tenantmcp/tenantmcp/flow"
	"github.com/tenantmcp/tenantmcp/flow/pgtaint"
	"github.com/tenantmcp/tenantmcp/redact"
)

// TestAppRoleCannotEraseTaint: a subject reads guest data; then raw SQL
// as the application role (the role the server connects as) tries every
// way to erase or lower that taint: DELETE, UPDATE, TRUNCATE, INSERT on
// the table are refused (insufficient privilege), and the store's own
// functions called with hostile arguments (an empty taint, a "now" far
// in the future, a zero retain) leave it as it was. The subject's send to
// an outsider stays denied.
func TestAppRoleCannotEraseTaint(t *testing.T) {
	db := liveDB(t)
	ctx := context.Background()
	clk := &clock{now: time.Now().Add(-time.Minute)}
	r := newReplica(t, db.app, clk)
	r.readGuests(t, "ann-reader", "read-1")
	if den := r.send("ann-reader", "x@evil.example"); den == nil || den.Rule != flow.RuleCategory {
		t.Fatalf("tainted send before any tampering: %v, want %s", den, flow.RuleCategory)
	}
	raw := pool(t, db.app) // the application role's own connection
	tbl := pgtaint.DefaultTable
	for _, stmt := range []string{
		`DELETE FROM ` + tbl,
		`DELETE FROM ` + tbl + ` WHERE subject = 'ann-reader'`,
		`UPDATE ` + tbl + ` SET taint = '{}'`,
		`UPDATE ` + tbl + ` SET touched = '2000-01-01'`,
		`TRUNCATE ` + tbl,
		`INSERT INTO ` + tbl + ` (subject, session, taint, touched) VALUES ('x', '', '{}', now())`,
		`ALTER TABLE ` + tbl + ` RENAME TO gone`,
		`DROP TABLE ` + tbl,
		`CREATE TRIGGER t BEFORE UPDATE ON ` + tbl + ` FOR EACH ROW EXECUTE FUNCTION suppress_redundant_updates_trigger()`,
	} {
		_, err := raw.Exec(ctx, stmt)
		var pe *pgconn.PgError
		if !errors.As(err, &pe) || (pe.Code != "42501" && pe.Code != "42809") {
			t.Errorf("as the application role, %q: %v, want permission denied (42501)", stmt, err)
		}
	}
	fn := func(name string) string { return pgtaint.DefaultTable + "_" + name }
	far := time.Now().Add(100 * 365 * 24 * time.Hour)
	for _, call := range []struct {
		sql  string
		args []any
	}{
		// Write back an empty taint (the put function checks it only grows).
		{`SELECT ` + fn("put") + `($1, '', now(), '1 hour', '{}')`, []any{"ann-reader"}},
		{`SELECT ` + fn("put") + `($1, '', now(), '1 hour', '{"level":"secret"}')`, []any{"ann-reader"}},
		{`SELECT ` + fn("put") + `($1, '', now(), '1 hour', '[]')`, []any{"ann-reader"}},
		// Lock with a far future "now" and no retain: the reset it would
		// trigger reads the database's clock and the row's retain.
		{`SELECT * FROM ` + fn("lock") + `($1, '', $2, '0')`, []any{"ann-reader", far}},
		// Sweep with a far future "now" and no retain.
		{`SELECT ` + fn("sweep") + `($1, '0')`, []any{far}},
		{`SELECT ` + fn("sweep") + `(now(), '-100 years')`, nil},
	} {
		// Each in a transaction of its own, committed if it succeeds.
		tx, err := raw.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		_, err = tx.Exec(ctx, call.sql, call.args...)
		if err == nil {
			err = tx.Commit(ctx)
		} else {
			_ = tx.Rollback(ctx)
		}
		t.Logf("%s: %v", call.sql, err)
	}
	if den := r.send("ann-reader", "x@evil.example"); den == nil || den.Rule != flow.RuleCategory {
		t.Fatalf("tainted send after the application role's tampering: %v, want %s (the taint was erased)", den, flow.RuleCategory)
	}
	got, err := r.c.Taint(ctx, r.c.KeyOf(flow.CallInfo{Subject: "ann-reader"}))
	if err != nil || got.Level != flow.Confidential || len(got.Categories) == 0 {
		t.Fatalf("taint after tampering: %+v, %v", got, err)
	}
}

// TestNewRefusesUnsafeRole: New refuses (ErrConfig, naming the fix) a role
// that could write the taint table directly, that owns it, that may
// CREATE in its schema, and functions that are missing, not SECURITY
// DEFINER, owned by the application role or altered; each fixed, New
// accepts again.
func TestNewRefusesUnsafeRole(t *testing.T) {
	db := liveDB(t)
	ctx := context.Background()
	owner := pool(t, db.owner)
	app := pool(t, db.app)
	tbl, role := pgtaint.DefaultTable, db.role
	fnSig := tbl + "_put(text, text, timestamptz, interval, jsonb)"
	exec := func(stmts ...string) {
		t.Helper()
		for _, s := range stmts {
			if _, err := owner.Exec(ctx, s); err != nil {
				t.Fatalf("%s: %v", s, err)
			}
		}
	}
	if _, err := pgtaint.New(ctx, app, pgtaint.Options{}); err != nil {
		t.Fatalf("New after Install and Grant: %v", err)
	}
	t.Cleanup(func() { _, _ = owner.Exec(context.Background(), `DROP ROLE IF EXISTS `+role+`_w`) })
	for _, tc := range []struct {
		name        string
		break_, fix []string
		want        string
		reinstall   bool
	}{
		{name: "old grant: DML on the table", break_: []string{`GRANT SELECT, INSERT, UPDATE, DELETE ON ` + tbl + ` TO ` + role},
			fix: []string{`REVOKE ALL ON ` + tbl + ` FROM ` + role}, want: "write table"},
		{name: "DELETE only", break_: []string{`GRANT DELETE ON ` + tbl + ` TO ` + role},
			fix: []string{`REVOKE ALL ON ` + tbl + ` FROM ` + role}, want: "write table"},
		{name: "TRUNCATE through PUBLIC", break_: []string{`GRANT TRUNCATE ON ` + tbl + ` TO PUBLIC`},
			fix: []string{`REVOKE ALL ON ` + tbl + ` FROM PUBLIC`}, want: "write table"},
		{name: "column UPDATE", break_: []string{`GRANT UPDATE (taint) ON ` + tbl + ` TO ` + role},
			fix: []string{`REVOKE ALL ON ` + tbl + ` FROM ` + role}, want: "write table"},
		{name: "TRIGGER", break_: []string{`GRANT TRIGGER ON ` + tbl + ` TO ` + role},
			fix: []string{`REVOKE ALL ON ` + tbl + ` FROM ` + role}, want: "write table"},
		{name: "DELETE through a NOINHERIT membership", break_: []string{`CREATE ROLE ` + role + `_w NOLOGIN`, `GRANT DELETE ON ` + tbl + ` TO ` + role + `_w`,
			`GRANT ` + role + `_w TO ` + role, `ALTER ROLE ` + role + ` NOINHERIT`},
			fix: []string{`ALTER ROLE ` + role + ` INHERIT`, `REVOKE ALL ON ` + tbl + ` FROM ` + role + `_w`, `DROP ROLE ` + role + `_w`}, want: "write table"},
		{name: "member of the owner", break_: []string{`GRANT postgres TO ` + role},
			fix: []string{`REVOKE postgres FROM ` + role}, want: "owns table"},
		{name: "CREATE on the schema", break_: []string{`GRANT CREATE ON SCHEMA public TO ` + role},
			fix: []string{`REVOKE CREATE ON SCHEMA public FROM ` + role}, want: "schema"},
		{name: "function missing", break_: []string{`DROP FUNCTION ` + fnSig}, reinstall: true, want: "missing"},
		{name: "function owned by the application role", break_: []string{`ALTER FUNCTION ` + fnSig + ` OWNER TO ` + role},
			fix: []string{`ALTER FUNCTION ` + fnSig + ` OWNER TO postgres`, `GRANT EXECUTE ON FUNCTION ` + fnSig + ` TO ` + role}, want: "owned by the table's owner"},
		{name: "function not SECURITY DEFINER", break_: []string{`ALTER FUNCTION ` + fnSig + ` SECURITY INVOKER`},
			fix: []string{`ALTER FUNCTION ` + fnSig + ` SECURITY DEFINER`}, want: "SECURITY DEFINER"},
		{name: "search_path not pinned", break_: []string{`ALTER FUNCTION ` + fnSig + ` RESET search_path`},
			fix: []string{`ALTER FUNCTION ` + fnSig + ` SET search_path = pg_catalog, pg_temp`}, want: "differs"},
		{name: "function body altered", break_: []string{`CREATE OR REPLACE FUNCTION ` + tbl + `_put(p_subject text, p_session text, p_now timestamptz, p_retain interval, p_taint jsonb) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$ BEGIN UPDATE public.` + tbl + ` SET taint = p_taint WHERE subject = p_subject AND session = p_session; END $$`},
			reinstall: true, want: "differs"},
		{name: "no EXECUTE", break_: []string{`REVOKE EXECUTE ON FUNCTION ` + fnSig + ` FROM ` + role},
			fix: []string{`GRANT EXECUTE ON FUNCTION ` + fnSig + ` TO ` + role}, want: "EXECUTE"},
		{name: "table missing", break_: []string{`ALTER TABLE ` + tbl + ` RENAME TO ` + tbl + `_moved`},
			fix: []string{`ALTER TABLE ` + tbl + `_moved RENAME TO ` + tbl}, want: "missing"},
	} {
		exec(tc.break_...)
		_, err := pgtaint.New(ctx, app, pgtaint.Options{})
		if !errors.Is(err, pgtaint.ErrConfig) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: New = %v, want ErrConfig mentioning %q", tc.name, err, tc.want)
		}
		exec(tc.fix...)
		if tc.reinstall {
			if err := pgtaint.Install(ctx, owner, pgtaint.Options{}); err != nil {
				t.Fatal(err)
			}
			if err := pgtaint.Grant(ctx, owner, pgtaint.Options{}, role); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := pgtaint.New(ctx, app, pgtaint.Options{}); err != nil {
			t.Fatalf("%s, fixed: New = %v", tc.name, err)
		}
	}
	// The owner itself (here a superuser) is refused as the store's role.
	if _, err := pgtaint.New(ctx, owner, pgtaint.Options{}); !errors.Is(err, pgtaint.ErrConfig) {
		t.Errorf("New connected as the table's owner: %v, want ErrConfig", err)
	}
	// Grant refuses to make the owner the application role.
	if err := pgtaint.Grant(ctx, owner, pgtaint.Options{}, "postgres"); !errors.Is(err, pgtaint.ErrConfig) {
		t.Errorf("Grant to the owner: %v, want ErrConfig", err)
	}
}

// TestAlteredOrMissingTaintFailsClosed: a row the application role could
// not have written (altered by the owner, or by anyone past the functions)
// and a table or function gone at run time make the checker fail closed:
// the sink call is denied with RuleTaintStore and Record fails with
// flow.ErrTaintStore; Ping reports it.
func TestAlteredOrMissingTaintFailsClosed(t *testing.T) {
	db := liveDB(t)
	ctx := context.Background()
	owner := pool(t, db.owner)
	r := newReplica(t, db.app, &clock{now: time.Now().Add(-time.Minute)})
	_, st := openStore(t, db.app)
	if err := st.Ping(ctx); err != nil {
		t.Fatalf("Ping: %v", err)
	}
	r.readGuests(t, "ann-reader", "read-1")
	for _, bad := range []string{`'{"lvl": "secret"}'`, `'[]'`, `'"x"'`, `'{"level": "top"}'`} {
		if _, err := owner.Exec(ctx, `UPDATE `+pgtaint.DefaultTable+` SET taint = `+bad+` WHERE subject = 'ann-reader'`); err != nil {
			t.Fatal(err)
		}
		if den := r.send("ann-reader", "x@evil.example"); den == nil || den.Rule != flow.RuleTaintStore {
			t.Errorf("send with the stored taint altered to %s: %v, want %s", bad, den, flow.RuleTaintStore)
		}
	}
	if _, err := owner.Exec(ctx, `DROP FUNCTION `+pgtaint.DefaultTable+`_load(text, text, timestamptz, interval)`); err != nil {
		t.Fatal(err)
	}
	if den := r.send("someone-clean", "desk@staff.example"); den == nil || den.Rule != flow.RuleTaintStore {
		t.Errorf("send with the load function dropped: %v, want %s", den, flow.RuleTaintStore)
	}
	if err := st.Ping(ctx); !errors.Is(err, flow.ErrTaintStore) {
		t.Errorf("Ping with the load function dropped: %v, want ErrTaintStore", err)
	}
	if _, err := owner.Exec(ctx, `DROP TABLE `+pgtaint.DefaultTable+` CASCADE`); err != nil {
		t.Fatal(err)
	}
	call, den := r.read.Begin(ctx, flow.CallInfo{Subject: "ann-reader", Args: []byte(`{}`)})
	if den != nil {
		t.Fatal(den)
	}
	if err := call.Record(ctx, guestsOut{}, redact.Report{}); !errors.Is(err, flow.ErrTaintStore) {
		t.Errorf("Record with the table dropped: %v, want ErrTaintStore", err)
	}
}
