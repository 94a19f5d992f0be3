package pgtaint

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tenantmcp/tenantmcp/flow"
	"github.com/tenantmcp/tenantmcp/internal/guardfault"
)

// DefaultTable is the table of the taints when Options.Table is empty.
const DefaultTable = "tenantmcp_taint"

// ErrConfig is wrapped by the errors New, Install and Grant return for
// options they refuse, a table or function that is missing or unusable,
// and a role that could write the taint table directly.
var ErrConfig = errors.New("pgtaint: invalid configuration")

// Options configures a Store.
type Options struct {
	// Table is the table name, optionally schema-qualified ("app.taint"):
	// lower-case letters, digits and '_', at most 56 of them (the
	// functions are named after it with a suffix). An unqualified name is
	// in schema "public". Default DefaultTable.
	Table string
}

var identRE = regexp.MustCompile(`^([a-z_][a-z0-9_]{0,55}\.)?[a-z_][a-z0-9_]{0,55}$`)

// names are the schema, table and function names of a Store, each
// quoted for SQL, and the unquoted "schema.table" for to_regclass.
type names struct {
	schema, table, regclass  string
	load, lock, put, sweep   string
	loadSig, lockSig, putSig string
	sweepSig                 string
	schemaRaw, tableRaw      string
}

// names resolves o.
func (o Options) names() (names, error) {
	name := o.Table
	if name == "" {
		name = DefaultTable
	}
	if !identRE.MatchString(name) {
		return names{}, fmt.Errorf("%w: table name %q: lower-case letters, digits and '_' (at most 56), optionally schema.table", ErrConfig, name)
	}
	schema, table := "public", name
	if i := strings.IndexByte(name, '.'); i >= 0 {
		schema, table = name[:i], name[i+1:]
	}
	q := func(n string) string { return pgx.Identifier{schema, n}.Sanitize() }
	n := names{
		schema: pgx.Identifier{schema}.Sanitize(), table: q(table), regclass: schema + "." + table,
		load: q(table + "_load"), lock: q(table + "_lock"), put: q(table + "_put"), sweep: q(table + "_sweep"),
		schemaRaw: schema, tableRaw: table,
	}
	n.loadSig = n.load + "(text, text, timestamptz, interval)"
	n.lockSig = n.lock + "(text, text, timestamptz, interval)"
	n.putSig = n.put + "(text, text, timestamptz, interval, jsonb)"
	n.sweepSig = n.sweep + "(timestamptz, interval)"
	return n, nil
}

// searchPath is the search_path every function of the store is pinned
// to: nothing the caller can create (its own schemas, pg_temp ahead of
// pg_catalog) is looked up inside them.
const searchPath = "pg_catalog, pg_temp"

// function is one SECURITY DEFINER function of the store: its quoted
// signature, what it returns, and its body (compared with the installed
// one by New).
type function struct {
	sig, returns, body string
}

// functions returns the functions of the store of n. Every body names the
// table schema-qualified, uses only pg_catalog, and is the only way the
// application role reaches the table:
//
//   - load reads a live taint and marks it used (the touch only moves
//     forward), folding into the subject's taint past MaxKeysPerSubject;
//   - lock creates or locks the row a join writes (folding the same way)
//     and returns its taint, emptied if it is idle past retain;
//   - put writes a taint back, and refuses one that is not a superset of
//     the stored taint: a taint only grows, whatever the caller passes;
//   - sweep deletes the rows idle past retain.
//
// Whatever the caller passes, nothing shrinks a live taint: the decisions
// that drop one (lock's reset and sweep) read the database's own clock
// (the caller's "now" only counts when it is earlier) and the longest
// retain any join of the row has asked for (column retain, which only
// grows), so a caller cannot age a taint out with a future "now" or a
// short retain.
func (n names) functions() []function {
	max := fmt.Sprint(flow.MaxKeysPerSubject)
	live := `touched >= p_now - GREATEST(retain, p_retain)`
	over := `(SELECT count(*) FROM (SELECT 1 FROM ` + n.table + ` WHERE subject = p_subject AND session <> '' AND touched >= p_now - p_retain LIMIT ` + max + `) s) >= ` + max
	return []function{
		{sig: n.load + "(p_subject text, p_session text, p_now timestamptz, p_retain interval)", returns: "jsonb", body: `
DECLARE
	r jsonb;
BEGIN
	UPDATE ` + n.table + ` SET touched = GREATEST(touched, p_now)
	WHERE subject = p_subject AND session = p_session AND ` + live + ` RETURNING taint INTO r;
	IF FOUND OR p_session = '' THEN
		RETURN r;
	END IF;
	IF NOT ` + over + ` THEN
		RETURN NULL;
	END IF;
	UPDATE ` + n.table + ` SET touched = GREATEST(touched, p_now)
	WHERE subject = p_subject AND session = '' AND ` + live + ` RETURNING taint INTO r;
	RETURN r;
END`},
		{sig: n.lock + "(p_subject text, p_session text, p_now timestamptz, p_retain interval)", returns: "TABLE (o_session text, o_taint jsonb)", body: `
DECLARE
	v_session text := p_session;
	v_taint jsonb;
	v_touched timestamptz;
	v_retain interval;
BEGIN
	IF v_session <> '' AND NOT EXISTS (SELECT 1 FROM ` + n.table + ` x WHERE x.subject = p_subject AND x.session = v_session AND x.` + live + `) AND ` + over + ` THEN
		v_session := '';
	END IF;
	INSERT INTO ` + n.table + ` AS x (subject, session, taint, touched, retain) VALUES (p_subject, v_session, '{}', p_now, p_retain)
	ON CONFLICT (subject, session) DO UPDATE SET touched = x.touched
	RETURNING x.taint, x.touched, x.retain INTO v_taint, v_touched, v_retain;
	IF v_touched < LEAST(p_now, clock_timestamp()) - GREATEST(v_retain, p_retain) THEN
		UPDATE ` + n.table + ` x SET taint = '{}', retain = p_retain WHERE x.subject = p_subject AND x.session = v_session;
		v_taint := '{}';
	END IF;
	RETURN QUERY SELECT v_session, v_taint;
END`},
		{sig: n.put + "(p_subject text, p_session text, p_now timestamptz, p_retain interval, p_taint jsonb)", returns: "void", body: `
BEGIN
	IF p_taint IS NULL OR jsonb_typeof(p_taint) <> 'object' THEN
		RAISE EXCEPTION 'tenantmcp taint: not a taint' USING ERRCODE = '22023';
	END IF;
	UPDATE ` + n.table + ` x SET taint = p_taint, touched = GREATEST(x.touched, p_now), retain = GREATEST(x.retain, p_retain)
	WHERE x.subject = p_subject AND x.session = p_session
	AND COALESCE(array_position(ARRAY['public', 'internal', 'confidential', 'secret'], p_taint->>'level'), 0)
		>= COALESCE(array_position(ARRAY['public', 'internal', 'confidential', 'secret'], x.taint->>'level'), 0)
	AND COALESCE(x.taint->'categories', '[]') <@ COALESCE(p_taint->'categories', '[]')
	AND COALESCE(x.taint->'from', '[]') <@ COALESCE(p_taint->'from', '[]')
	AND (p_taint->'owners_unknown' = 'true'
		OR (COALESCE(x.taint->'owners_unknown', 'false') = 'false' AND COALESCE(x.taint->'owners', '[]') <@ COALESCE(p_taint->'owners', '[]')));
	IF NOT FOUND THEN
		RAISE EXCEPTION 'tenantmcp taint: a taint only grows (no row, or the new taint drops part of it)' USING ERRCODE = '22023';
	END IF;
END`},
		{sig: n.sweep + "(p_now timestamptz, p_retain interval)", returns: "void", body: `
BEGIN
	DELETE FROM ` + n.table + ` WHERE touched < LEAST(p_now, clock_timestamp()) - GREATEST(retain, p_retain);
END`},
	}
}

// InstallSQL returns the statements that create the table of o (if it does
// not exist; a table of an earlier version gains its retain column) and
// its functions (replacing those of an earlier version), for a migration
// tool. Run them as the role that is to own both: not the application's.
// The table is then reachable by no one else; give the application role
// EXECUTE on the functions with GrantSQL.
func InstallSQL(o Options) ([]string, error) {
	n, err := o.names()
	if err != nil {
		return nil, err
	}
	ix := pgx.Identifier{n.tableRaw + "_touched"}.Sanitize()
	stmts := []string{
		`CREATE TABLE IF NOT EXISTS ` + n.table + ` (
	subject text NOT NULL,
	session text NOT NULL DEFAULT '',
	taint   jsonb NOT NULL,
	touched timestamptz NOT NULL,
	retain  interval NOT NULL DEFAULT '0',
	PRIMARY KEY (subject, session)
)`,
		`ALTER TABLE ` + n.table + ` ADD COLUMN IF NOT EXISTS retain interval NOT NULL DEFAULT '0'`,
		`CREATE INDEX IF NOT EXISTS ` + ix + ` ON ` + n.table + ` (touched)`,
		`REVOKE ALL ON ` + n.table + ` FROM PUBLIC`,
	}
	for _, f := range n.functions() {
		stmts = append(stmts,
			`CREATE OR REPLACE FUNCTION `+f.sig+` RETURNS `+f.returns+`
LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = `+searchPath+`
AS $tenantmcp$`+f.body+`$tenantmcp$`,
			// A new function is executable by PUBLIC: only GrantSQL's role may.
			`REVOKE ALL ON FUNCTION `+sigTypes(f.sig)+` FROM PUBLIC`)
	}
	return stmts, nil
}

// sigTypes turns "f(p_a text, p_b jsonb)" into "f(text, jsonb)".
func sigTypes(sig string) string {
	open := strings.IndexByte(sig, '(')
	var types []string
	for _, p := range strings.Split(strings.TrimSuffix(sig[open+1:], ")"), ",") {
		f := strings.Fields(p)
		types = append(types, f[len(f)-1])
	}
	return sig[:open] + "(" + strings.Join(types, ", ") + ")"
}

// GrantSQL returns the statements that let role (the application's) use
// the store of o, and nothing more: USAGE on the schema and EXECUTE on the
// four functions; any privilege the role held on the table itself (an
// earlier version granted SELECT, INSERT, UPDATE, DELETE) is revoked.
func GrantSQL(o Options, role string) ([]string, error) {
	n, err := o.names()
	if err != nil {
		return nil, err
	}
	if role == "" {
		return nil, fmt.Errorf("%w: empty role", ErrConfig)
	}
	r := pgx.Identifier{role}.Sanitize()
	stmts := []string{
		`REVOKE ALL ON ` + n.table + ` FROM ` + r,
		`GRANT USAGE ON SCHEMA ` + n.schema + ` TO ` + r,
	}
	for _, sig := range []string{n.loadSig, n.lockSig, n.putSig, n.sweepSig} {
		stmts = append(stmts, `GRANT EXECUTE ON FUNCTION `+sig+` TO `+r)
	}
	if guardfault.Off(guardfault.TaintFunctionsOnly) {
		stmts = append(stmts, `GRANT SELECT, INSERT, UPDATE, DELETE ON `+n.table+` TO `+r)
	}
	return stmts, nil
}

// Install creates the table of o and its functions in the database db is
// connected to, as the role that is to own them (a migration or admin
// role, never the application's: see New).
func Install(ctx context.Context, db *pgxpool.Pool, o Options) error {
	stmts, err := InstallSQL(o)
	if err != nil {
		return err
	}
	return run(ctx, db, "install", stmts)
}

// Grant gives role (the application's) EXECUTE on the functions of the
// store of o and nothing on its table (GrantSQL). Run it as the table's
// owner after Install. It refuses (ErrConfig) a role that owns the table,
// or is a member of its owner: such a role could rewrite the taints
// whatever it is granted, and New would refuse it.
func Grant(ctx context.Context, db *pgxpool.Pool, o Options, role string) error {
	stmts, err := GrantSQL(o, role)
	if err != nil {
		return err
	}
	n, _ := o.names()
	var owns bool
	if err := db.QueryRow(ctx, `SELECT pg_has_role($1, c.relowner, 'MEMBER') FROM pg_class c WHERE c.oid = to_regclass($2)`, role, n.regclass).Scan(&owns); err != nil {
		return fmt.Errorf("%w: table %s is missing (run Install first) or role %q unknown: %w", ErrConfig, n.regclass, role, err)
	}
	if owns {
		return fmt.Errorf("%w: role %q owns table %s (or is a member of its owner): install it as another role", ErrConfig, role, n.regclass)
	}
	return run(ctx, db, "grant", stmts)
}

func run(ctx context.Context, db *pgxpool.Pool, what string, stmts []string) error {
	return pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
		for _, s := range stmts {
			if _, err := tx.Exec(ctx, s); err != nil {
				return fmt.Errorf("pgtaint: %s: %w", what, err)
			}
		}
		return nil
	})
}

// Store is a flow.Store in a PostgreSQL table that the application role
// reaches only through SECURITY DEFINER functions. It is safe for
// concurrent use; it does not close the pool.
type Store struct {
	pool *pgxpool.Pool
	n    names
	// lastSweep is the unix nanoseconds of the last delete of idle rows
	// by this process.
	lastSweep atomic.Int64
}

var (
	_ flow.Store                               = (*Store)(nil)
	_ interface{ Ping(context.Context) error } = (*Store)(nil) // server.Pinger
)

// New returns a Store on pool, connected as the application role. It
// refuses to start (ErrConfig, naming the fix) unless:
//
//   - the table exists, and the role has no privilege on it that writes
//     or could write it (INSERT, UPDATE, DELETE, TRUNCATE, TRIGGER, on the
//     table or any column), does not own it or belong to its owner (so it
//     cannot grant itself those), and may not CREATE in its schema nor own
//     it (so it cannot drop the table and put its own in its place);
//   - the four functions exist with the signatures, bodies and pinned
//     search_path of this version, are SECURITY DEFINER, owned by the
//     table's owner, and executable by the role.
//
// The application role then cannot DELETE, UPDATE or TRUNCATE a taint
// away: the functions let it read a taint and make it grow, nothing else.
// A replica misconfigured in any of these ways refuses to start instead of
// running with taints its own SQL could erase.
func New(ctx context.Context, pool *pgxpool.Pool, o Options) (*Store, error) {
	n, err := o.names()
	if err != nil {
		return nil, err
	}
	var (
		exists, write, owns, schemaCreate, schemaOwns bool
	)
	// Privileges are checked for every role the connecting role is a
	// member of, not only those it inherits: a NOINHERIT membership is
	// one SET ROLE away.
	err = pool.QueryRow(ctx, `SELECT c.oid IS NOT NULL,
	COALESCE(EXISTS (SELECT 1 FROM pg_roles r WHERE pg_has_role(r.oid, 'MEMBER')
		AND (has_table_privilege(r.oid, c.oid, 'INSERT, UPDATE, DELETE, TRUNCATE, TRIGGER')
			OR has_any_column_privilege(r.oid, c.oid, 'INSERT, UPDATE'))), false),
	COALESCE(pg_has_role(c.relowner, 'MEMBER'), false),
	EXISTS (SELECT 1 FROM pg_roles r WHERE pg_has_role(r.oid, 'MEMBER') AND has_schema_privilege(r.oid, n.oid, 'CREATE')),
	pg_has_role(n.nspowner, 'MEMBER')
FROM pg_namespace n LEFT JOIN pg_class c ON c.oid = to_regclass($1)
WHERE n.nspname = $2`, n.regclass, n.schemaRaw).Scan(&exists, &write, &owns, &schemaCreate, &schemaOwns)
	switch {
	case errors.Is(err, pgx.ErrNoRows) || (err == nil && !exists):
		return nil, fmt.Errorf("%w: table %s is missing: create it with pgtaint.Install as another role, then pgtaint.Grant", ErrConfig, n.regclass)
	case err != nil:
		return nil, fmt.Errorf("%w: table %s is unreadable (%w): create it with pgtaint.Install, then pgtaint.Grant", ErrConfig, n.regclass, err)
	case owns:
		return nil, fmt.Errorf("%w: the role owns table %s or is a member of its owner (or a superuser), so it could erase taints: connect as an application role that does not, and run pgtaint.Install as the owner", ErrConfig, n.regclass)
	case write && !guardfault.Off(guardfault.TaintFunctionsOnly):
		return nil, fmt.Errorf("%w: the role may write table %s directly (INSERT, UPDATE, DELETE, TRUNCATE or TRIGGER): revoke them (pgtaint.Grant does) and let it reach the table through the functions only", ErrConfig, n.regclass)
	case schemaCreate || schemaOwns:
		return nil, fmt.Errorf("%w: the role owns schema %s or may CREATE in it, so it could drop and replace table %s: revoke CREATE on the schema from it (or put the table in a schema it cannot change)", ErrConfig, n.schemaRaw, n.regclass)
	}
	for _, f := range n.functions() {
		if err := checkFunction(ctx, pool, n, f); err != nil {
			return nil, err
		}
	}
	return &Store{pool: pool, n: n}, nil
}

// checkFunction verifies one function of the store as the application
// role sees it.
func checkFunction(ctx context.Context, pool *pgxpool.Pool, n names, f function) error {
	sig := sigTypes(f.sig)
	var (
		found, definer, ownerOK, exec, mine bool
		body                                string
		config                              []string
	)
	err := pool.QueryRow(ctx, `SELECT true, p.prosecdef, p.proowner = c.relowner, has_function_privilege(p.oid, 'EXECUTE'),
	pg_has_role(p.proowner, 'MEMBER'), p.prosrc, COALESCE(p.proconfig, '{}')
FROM pg_proc p, pg_class c WHERE p.oid = to_regprocedure($1) AND c.oid = to_regclass($2)`, strings.ReplaceAll(sig, `"`, ""), n.regclass).
		Scan(&found, &definer, &ownerOK, &exec, &mine, &body, &config)
	fix := "run pgtaint.Install as the table's owner, then pgtaint.Grant"
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return fmt.Errorf("%w: function %s is missing: %s", ErrConfig, sig, fix)
	case err != nil:
		return fmt.Errorf("%w: function %s is unreadable (%w): %s", ErrConfig, sig, err, fix)
	case !definer || !ownerOK || mine:
		return fmt.Errorf("%w: function %s must be SECURITY DEFINER and owned by the table's owner, not by the application role: %s", ErrConfig, sig, fix)
	case body != f.body || !slices.Contains(config, "search_path="+searchPath):
		return fmt.Errorf("%w: function %s differs from this version (altered, or an older install): %s", ErrConfig, sig, fix)
	case !exec:
		return fmt.Errorf("%w: the role may not EXECUTE function %s: run pgtaint.Grant", ErrConfig, sig)
	}
	return nil
}

// Ping reports whether the store can answer: it runs the load function
// on a key no call has (the empty subject), which reads nothing and
// writes nothing, so a dropped function or a lost privilege shows too.
// Its error wraps flow.ErrTaintStore.
func (s *Store) Ping(ctx context.Context) error {
	var raw []byte
	if err := s.pool.QueryRow(ctx, `SELECT `+s.n.load+`('', '', now(), '0')`).Scan(&raw); err != nil {
		return storeErr("ping", err)
	}
	return nil
}

func storeErr(op string, err error) error {
	return fmt.Errorf("%w: pgtaint: %s: %w", flow.ErrTaintStore, op, err)
}

// Load implements flow.Store: it reads the live taint of k (of the
// subject, past flow.MaxKeysPerSubject live sessions) and marks it used,
// in one call of the load function.
func (s *Store) Load(ctx context.Context, k flow.Key, now time.Time, retain time.Duration) (flow.Taint, error) {
	t, _, err := s.load(ctx, k, now, retain)
	return t, err
}

// load is Load, reporting whether a live taint was found.
func (s *Store) load(ctx context.Context, k flow.Key, now time.Time, retain time.Duration) (flow.Taint, bool, error) {
	var raw []byte
	if err := s.pool.QueryRow(ctx, `SELECT `+s.n.load+`($1, $2, $3, $4)`, k.Subject, k.Session, now, retain).Scan(&raw); err != nil {
		return flow.Taint{}, false, storeErr("load", err)
	}
	if raw == nil {
		return flow.Taint{}, false, nil
	}
	t, err := decode(raw)
	if err != nil {
		return flow.Taint{}, false, storeErr("load", err)
	}
	return t, true, nil
}

// decode reads a stored taint. A taint that is not a JSON object of the
// taint's fields is an error, never an empty taint: an altered row fails
// closed.
func decode(raw []byte) (flow.Taint, error) {
	var t flow.Taint
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if len(raw) == 0 || raw[0] != '{' || dec.Decode(&t) != nil {
		return flow.Taint{}, errors.New("stored taint does not decode")
	}
	for _, l := range append([]flow.Level{t.Level}, levels(t.From)...) {
		if l != "" && !l.Valid() {
			return flow.Taint{}, errors.New("stored taint has an unknown level")
		}
	}
	return t, nil
}

func levels(from []flow.TaintOrigin) []flow.Level {
	var ls []flow.Level
	for _, o := range from {
		ls = append(ls, o.Level)
	}
	return ls
}

// Join implements flow.Store: what JoinTx does, in a transaction of its
// own, which has committed when Join returns nil.
//
// A join that adds nothing (a session calling the same tools again) takes
// one statement, which marks the row used. One that adds takes that
// statement and two round trips: BEGIN with the lock function, then the
// put function with COMMIT.
func (s *Store) Join(ctx context.Context, k flow.Key, now time.Time, retain time.Duration, add flow.Taint) error {
	if held, err := s.holds(ctx, k, now, retain, add); err != nil {
		return err
	} else if !held {
		if err := s.join(ctx, k, now, retain, add); err != nil {
			return storeErr("join", err)
		}
	}
	s.sweep(ctx, now, retain)
	return nil
}

// join is JoinTx in a transaction of its own, sent as two batches. A
// batch stops at its first error, so COMMIT runs only after the put
// function succeeded; a connection an error leaves inside the transaction
// is destroyed by Release (pgxpool never pools one), which rolls it back.
func (s *Store) join(ctx context.Context, k flow.Key, now time.Time, retain time.Duration, add flow.Taint) error {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return err
	}
	defer conn.Release()
	// The lock function's upsert takes the row lock: concurrent joins of
	// k from any replica serialise here, so none is lost.
	var session string
	var raw []byte
	b := &pgx.Batch{}
	b.Queue("BEGIN")
	b.Queue(`SELECT o_session, o_taint FROM `+s.n.lock+`($1, $2, $3, $4)`, k.Subject, k.Session, now, retain).
		QueryRow(func(r pgx.Row) error { return r.Scan(&session, &raw) })
	if err := conn.SendBatch(ctx, b).Close(); err != nil {
		return err
	}
	enc, err := merge(raw, add)
	if err != nil {
		return err
	}
	b = &pgx.Batch{}
	b.Queue(`SELECT `+s.n.put+`($1, $2, $3, $4, $5)`, k.Subject, session, now, retain, enc)
	b.Queue("COMMIT")
	return conn.SendBatch(ctx, b).Close()
}

// merge joins add into the stored taint raw (flow.Taint.Join) and encodes
// the result for the put function.
func merge(raw []byte, add flow.Taint) ([]byte, error) {
	t, err := decode(raw)
	if err != nil {
		return nil, err
	}
	t.Join(add)
	return json.Marshal(t)
}

// holds reports whether the live taint stored under k already holds add
// (joining it would change nothing), marking the row used as a join does.
//
// Invariant: it answers true only from the row as stored and committed,
// read and touched by one statement; a stored taint is only ever joined
// into, or dropped whole once idle past retain, which the touch just
// postponed, so what it held stays held and the join it skips is durable.
// Anything else (no live row yet, a taint that would grow) is left to the
// transaction, which decides under the row lock. The load may read the
// subject's taint for a session past flow.MaxKeysPerSubject: the join
// would fold into that same taint.
func (s *Store) holds(ctx context.Context, k flow.Key, now time.Time, retain time.Duration, add flow.Taint) (bool, error) {
	stored, found, err := s.load(ctx, k, now, retain)
	if err != nil || !found {
		return false, err
	}
	before, err := json.Marshal(stored)
	if err != nil {
		return false, storeErr("join", err)
	}
	stored.Join(add)
	after, err := json.Marshal(stored)
	if err != nil {
		return false, storeErr("join", err)
	}
	return bytes.Equal(before, after), nil
}

// JoinTx merges add into the taint under k inside tx: the lock function
// creates or locks the row (folding a session past
// flow.MaxKeysPerSubject into the subject's), the merge is flow.Taint.Join,
// and the put function writes it back, refusing anything that is not a
// superset of what is stored. The join is durable when tx commits; the
// caller must not release the result before that.
func (s *Store) JoinTx(ctx context.Context, tx pgx.Tx, k flow.Key, now time.Time, retain time.Duration, add flow.Taint) error {
	// The lock function's upsert takes the row lock: concurrent joins of
	// k from any replica serialise here, so none is lost.
	var session string
	var raw []byte
	if err := tx.QueryRow(ctx, `SELECT o_session, o_taint FROM `+s.n.lock+`($1, $2, $3, $4)`, k.Subject, k.Session, now, retain).Scan(&session, &raw); err != nil {
		return storeErr("join", err)
	}
	enc, err := merge(raw, add)
	if err != nil {
		return storeErr("join", err)
	}
	if _, err := tx.Exec(ctx, `SELECT `+s.n.put+`($1, $2, $3, $4, $5)`, k.Subject, session, now, retain, enc); err != nil {
		return storeErr("join", err)
	}
	return nil
}

// sweep deletes the rows idle past retain, at most every retain/8 per
// process. It is housekeeping: Load and Join already ignore such rows, so
// an error is dropped.
func (s *Store) sweep(ctx context.Context, now time.Time, retain time.Duration) {
	last := s.lastSweep.Load()
	if now.UnixNano()-last < int64(retain/8) || !s.lastSweep.CompareAndSwap(last, now.UnixNano()) {
		return
	}
	_, _ = s.pool.Exec(ctx, `SELECT `+s.n.sweep+`($1, $2)`, now, retain)
}
