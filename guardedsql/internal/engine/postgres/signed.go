package postgres

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"regexp"
	"strconv"

	"github.com/tenantmcp/tenantmcp/guardedsql/internal/engine"
	"github.com/tenantmcp/tenantmcp/internal/guardfault"
)

// The signed scope context.
//
// The setting "<ns>.scope" is writable by any role (set_config is not a
// privilege), so the policies never trust it as written. The server writes
//
//	v1.<key id>.<hex HMAC-SHA256>.<scope document>
//
// and the policies read the document only through the function
// "<ns>_scope_doc()", which returns it when the MAC verifies and NULL (no
// rows) otherwise. The MAC is computed over
//
//	"tenantmcp-scope-v1" \n <ns> \n <nonce> \n <document>
//
// where the nonce is NonceSQL's value: the backend's process id and the
// start time of the current transaction (transaction_timestamp(), in
// microseconds). The application role cannot choose either, so a signed
// value copied from another transaction, another connection, or an
// earlier transaction of the same connection does not verify. Who signs:
// with the pgx driver, "<ns>_scope_set" does, server-side, after it has
// verified the client's exchange value (see "The exchange" below: one
// round trip per statement); where the driver cannot batch, the client
// reads the nonce from the transaction it is about to use (a round trip
// of its own) and signs for exactly that transaction. The key is in the table
// "<ns>_scope_keys", on which the application role has no privilege and
// which has row-level security enabled with no policy (a stray GRANT still
// reads and writes nothing); only the function, SECURITY DEFINER and owned
// by the tables' owner (a role the application role must not be a member
// of; Check refuses otherwise), reads it, with its search_path pinned to
// pg_catalog, pg_temp. The function is STABLE, never IMMUTABLE: it reads a
// setting and a table, and must not be folded into a cached plan. It is
// called from uncorrelated sublinks, so PostgreSQL evaluates it once per
// statement (InitPlan), never per row, and PARALLEL RESTRICTED, so it runs
// in the backend whose pid was signed, never in a parallel worker.
//
// Keys are identified by id; every key in the table verifies, the server
// signs with the one it was configured with. Rotation without downtime:
// add the new key, move the servers to it, remove the old one.

// NonceSQL returns the per-transaction value the MAC binds: the backend
// pid and the transaction's start time in microseconds since the epoch.
// The verifying function evaluates the same expression.
const NonceSQL = `SELECT ` + nonceExpr

// nonceExpr names every function, operator and type it uses by schema:
// the verifying function evaluates it (see scopeFuncBody).
const nonceExpr = `pg_catalog.pg_backend_pid()::pg_catalog.text OPERATOR(pg_catalog.||) ':' OPERATOR(pg_catalog.||) ` +
	`(pg_catalog.extract('epoch', pg_catalog.transaction_timestamp()) OPERATOR(pg_catalog.*) 1000000)::pg_catalog.int8::pg_catalog.text`

// macLabel starts every signed message, versioning the format.
const macLabel = "tenantmcp-scope-v1"

// Key is a scope-signing key: an id (letters, digits, '_' and '-', at
// most 64 bytes) and a secret of 32 to 64 bytes.
type Key struct {
	ID     string
	Secret []byte
}

var keyIDPattern = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// ErrBadKey reports a key whose id or secret has the wrong shape.
var ErrBadKey = errors.New("guardedsql: RLS signing key must have an id of 1-64 letters, digits, '_' or '-' and a secret of 32-64 bytes")

// Validate checks the key's shape.
func (k Key) Validate() error {
	if !keyIDPattern.MatchString(k.ID) || len(k.Secret) < 32 || len(k.Secret) > 64 {
		return ErrBadKey
	}
	return nil
}

// pads returns the HMAC-SHA256 inner and outer padded keys: the key table
// stores these, so the function computes HMAC with the built-in sha256
// alone (no extension, nothing resolved through a search_path).
func (k Key) pads() (inner, outer []byte) {
	inner = make([]byte, sha256.BlockSize)
	outer = make([]byte, sha256.BlockSize)
	copy(inner, k.Secret)
	copy(outer, k.Secret)
	for i := range inner {
		inner[i] ^= 0x36
		outer[i] ^= 0x5c
	}
	return inner, outer
}

// Signed returns the setting value that makes doc verify in the
// transaction whose NonceSQL value is nonce.
func (d Dialect) Signed(k Key, nonce, doc string) string {
	m := hmac.New(sha256.New, k.Secret)
	m.Write([]byte(macLabel + "\n" + d.ns() + "\n" + nonce + "\n" + doc))
	return "v1." + k.ID + "." + hex.EncodeToString(m.Sum(nil)) + "." + doc
}

// KeyTable is the name of the key table.
func (d Dialect) KeyTable() string { return d.ns() + "_scope_keys" }

// ScopeFunc is the name of the verifying function.
func (d Dialect) ScopeFunc() string { return d.ns() + "_scope_doc" }

// scopeDoc is the SQL expression, used by every policy, that yields the
// verified scope document (jsonb) or NULL. Policies obtain the scope only
// through it.
func (d Dialect) scopeDoc() string { return d.Quote(d.ScopeFunc()) + "()" }

// scopeFuncBody is the body of the verifying function (PL/pgSQL, whose
// cached plan makes a call cost tens of microseconds); schema is the
// quoted schema of the key table. The setting is parsed with string
// functions, not a regular expression (a bounded-repetition pattern cost
// a third of a millisecond per call to compile), and anything malformed
// yields NULL, never an error. The MAC comparison hashes both sides once
// more, so its timing says nothing about how many bytes matched.
//
// Invariant: nothing in the body is resolved through the caller's
// search_path: every function, operator and type is named with its schema
// (pg_catalog; operators as OPERATOR(pg_catalog.…), since an unqualified
// operator or type name is looked up along search_path, where the
// application role can put a schema of its own before pg_catalog by
// naming pg_catalog later, and pg_temp comes first for types and
// relations), and the key table with its own. The function's SET
// search_path clause pins the path as well; the body does not rely on it
// (TestPostgresScopeFuncSearchPath runs it under a hostile path).
func (d Dialect) scopeFuncBody(schema string) string {
	return `
DECLARE
  v pg_catalog.text := pg_catalog.current_setting(` + literal(d.Setting()) + `, true);
  kid pg_catalog.text;
  mac pg_catalog.text;
  doc pg_catalog.text;
  ip pg_catalog.bytea;
  op pg_catalog.bytea;
BEGIN
  IF v IS NULL OR pg_catalog.left(v, 3) OPERATOR(pg_catalog.<>) 'v1.' THEN
    RETURN NULL;
  END IF;
  kid := pg_catalog.split_part(v, '.', 2);
  mac := pg_catalog.split_part(v, '.', 3);
  IF pg_catalog.length(mac) OPERATOR(pg_catalog.<>) 64 OR pg_catalog.ltrim(mac, '0123456789abcdef') OPERATOR(pg_catalog.<>) '' THEN
    RETURN NULL;
  END IF;
  doc := pg_catalog.substr(v, 6 OPERATOR(pg_catalog.+) pg_catalog.length(kid) OPERATOR(pg_catalog.+) 64);
  IF pg_catalog.left(doc, 1) OPERATOR(pg_catalog.<>) '{' THEN
    RETURN NULL;
  END IF;
  SELECT k.inner_pad, k.outer_pad INTO ip, op FROM ` + schema + `.` + d.Quote(d.KeyTable()) + ` AS k WHERE k.id OPERATOR(pg_catalog.=) kid;
  IF NOT FOUND THEN
    RETURN NULL;
  END IF;
  IF pg_catalog.sha256(pg_catalog.decode(mac, 'hex')) OPERATOR(pg_catalog.=) pg_catalog.sha256(pg_catalog.sha256(op OPERATOR(pg_catalog.||)
       pg_catalog.sha256(ip OPERATOR(pg_catalog.||) pg_catalog.convert_to(` + literal(macLabel+"\n"+d.ns()+"\n") + ` OPERATOR(pg_catalog.||) ` + nonceExpr + `
         OPERATOR(pg_catalog.||) E'\n' OPERATOR(pg_catalog.||) doc, 'UTF8')))) THEN
    RETURN doc::pg_catalog.jsonb;
  END IF;
  RETURN NULL;
END
`
}

// signedDDL returns the statements, run before the policies, that create
// the key table and the verifying function in the current schema.
func (d Dialect) signedDDL() []string {
	kt := d.Quote(d.KeyTable())
	return []string{
		`CREATE TABLE IF NOT EXISTS ` + kt + ` (
  id text PRIMARY KEY CHECK (id ~ '^[A-Za-z0-9_-]{1,64}$'),
  inner_pad bytea NOT NULL CHECK (pg_catalog.length(inner_pad) = 64),
  outer_pad bytea NOT NULL CHECK (pg_catalog.length(outer_pad) = 64),
  added timestamptz NOT NULL DEFAULT pg_catalog.now()
)`,
		`REVOKE ALL ON ` + kt + ` FROM PUBLIC`,
		`ALTER TABLE ` + kt + ` ENABLE ROW LEVEL SECURITY`,
		`ALTER TABLE ` + kt + ` NO FORCE ROW LEVEL SECURITY`,
		// The body names the key table by schema: the schema is only
		// known where the DDL runs.
		`DO $tm$
BEGIN
  EXECUTE pg_catalog.format($f$CREATE OR REPLACE FUNCTION %I() RETURNS jsonb
LANGUAGE plpgsql STABLE SECURITY DEFINER PARALLEL RESTRICTED
SET search_path = pg_catalog, pg_temp
AS %L$f$, ` + literal(d.ScopeFunc()) + `, pg_catalog.replace(` + literal(d.scopeFuncBody("@SCHEMA@")) + `, '@SCHEMA@', pg_catalog.quote_ident(pg_catalog.current_schema())));
END
$tm$`,
		`REVOKE ALL ON FUNCTION ` + d.Quote(d.ScopeFunc()) + `() FROM PUBLIC`,
		`GRANT EXECUTE ON FUNCTION ` + d.Quote(d.ScopeFunc()) + `() TO PUBLIC`,
		d.createFunc(d.OpenFunc(), "", "int8", d.openFuncBody()),
		`REVOKE ALL ON FUNCTION ` + d.Quote(d.OpenFunc()) + `() FROM PUBLIC`,
		`GRANT EXECUTE ON FUNCTION ` + d.Quote(d.OpenFunc()) + `() TO PUBLIC`,
		d.createFunc(d.ExchangeFunc(), "v text", "void", d.exchangeFuncBody("@SCHEMA@")),
		`REVOKE ALL ON FUNCTION ` + d.Quote(d.ExchangeFunc()) + `(text) FROM PUBLIC`,
		`GRANT EXECUTE ON FUNCTION ` + d.Quote(d.ExchangeFunc()) + `(text) TO PUBLIC`,
	}
}

// createFunc creates (or replaces) a VOLATILE SECURITY DEFINER function of
// the exchange in the current schema, whose name replaces @SCHEMA@ in
// body, with its search_path pinned.
func (d Dialect) createFunc(name, params, returns, body string) string {
	return `DO $tm$
BEGIN
  EXECUTE pg_catalog.format($f$CREATE OR REPLACE FUNCTION %I(` + params + `) RETURNS ` + returns + `
LANGUAGE plpgsql VOLATILE SECURITY DEFINER PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS %L$f$, ` + literal(name) + `, pg_catalog.replace(` + literal(body) + `, '@SCHEMA@', pg_catalog.quote_ident(pg_catalog.current_schema())));
END
$tm$`
}

// AddKeySQL upserts a key ($1 id, $2 inner pad, $3 outer pad).
func (d Dialect) AddKeySQL() string {
	return `INSERT INTO ` + d.Quote(d.KeyTable()) + ` (id, inner_pad, outer_pad) VALUES ($1, $2, $3)
ON CONFLICT (id) DO UPDATE SET inner_pad = EXCLUDED.inner_pad, outer_pad = EXCLUDED.outer_pad, added = pg_catalog.now()`
}

// AddKeyArgs returns the arguments of AddKeySQL for k.
func (k Key) AddKeyArgs() []any {
	in, out := k.pads()
	return []any{k.ID, in, out}
}

// RemoveKeySQL deletes a key by id ($1).
func (d Dialect) RemoveKeySQL() string {
	return `DELETE FROM ` + d.Quote(d.KeyTable()) + ` WHERE id = $1`
}

// exchanger is implemented by this package's Tx: the scope travels as
// an exchange value (ExchangeSQL) signed for the connection's next
// counter, in the batch of the transaction's first statement.
type exchanger interface {
	DeferExchange(open string, sign func(pid uint32, counter int64) (sql string, args []any))
}

// session sets the signed scope document for the transaction of tx.
func (d Dialect) session(ctx context.Context, tx engine.Querier, doc string) error {
	if d.Key == nil {
		return fmt.Errorf("%w: no scope-signing key configured", ErrRLSUnsafe)
	}
	k := *d.Key
	if t, ok := driverTx[exchanger](tx); ok {
		t.DeferExchange(d.OpenSQL(), func(pid uint32, counter int64) (string, []any) {
			return d.ExchangeSQL(), []any{d.SignedExchange(k, pid, counter, doc)}
		})
		return nil
	}
	// A driver that cannot batch: read the nonce, then sign for it (two
	// round trips).
	nonce, err := queryNonce(ctx, tx)
	if err != nil {
		return err
	}
	_, err = tx.Exec(ctx, SessionSQL, d.Setting(), d.Signed(k, nonce, doc))
	return err
}

func queryNonce(ctx context.Context, q engine.Querier) (string, error) {
	var nonce string
	err := each(ctx, q, NonceSQL, nil, func(r engine.Rows) error { return r.Scan(&nonce) })
	if err == nil && nonce == "" {
		err = errors.New("postgres: no transaction nonce")
	}
	return nonce, err
}

// checkKeySQL tells whether the signed context verifies in a transaction:
// the function returns the document for a correctly signed value.
func (d Dialect) checkKeySQL() string {
	return `SELECT ` + d.scopeDoc() + ` IS NOT NULL`
}

// deferrer is implemented by this package's Tx: statements whose results
// are not needed are sent together with the next statement, in one round
// trip.
type deferrer interface {
	Defer(sql string, args ...any)
}

// driverTx returns the first transaction in tx's wrapping chain (through
// UnwrapTx, which guardedsql's error layer offers) that implements T: what
// a dialect queues on the driver's transaction, its errors still come
// back through the wrappers with the next statement.
func driverTx[T any](tx engine.Querier) (T, bool) {
	for q := tx; q != nil; {
		if t, ok := q.(T); ok {
			return t, true
		}
		u, ok := q.(interface{ UnwrapTx() engine.Tx })
		if !ok {
			break
		}
		q = u.UnwrapTx()
	}
	var zero T
	return zero, false
}

// The exchange: one round trip per guarded statement.
//
// The nonce above must be read from the server before the Go side can
// sign for it, which costs a round trip of its own. The exchange removes
// it: every backend the driver uses holds a counter, a TEMP SEQUENCE
// "<ns>_scope_ctr" in its own pg_temp, created by "<ns>_scope_open()"
// (SECURITY DEFINER, owned by the key table's owner: the application role
// has no privilege on the sequence, so it can neither nextval, setval nor
// read it) and started at a random 60-bit value drawn from
// gen_random_uuid() (random() is not used: the application role can
// setseed it). The driver remembers, per backend pid, the counter's next
// value, and sends as the first statement of the transaction
//
//	SELECT "<ns>_scope_set"('v2.<key id>.<counter>.<hex HMAC-SHA256>.<document>')
//
// with the MAC, by any key of the key table, over
//
//	"tenantmcp-scope-v2" \n <ns> \n <pid>:<counter> \n <document>
//
// "<ns>_scope_set" (SECURITY DEFINER, VOLATILE) verifies the MAC for its
// own backend pid, takes nextval of the session's counter and requires it
// to equal the signed counter (a key id not in the table sets no scope:
// no rows, as with the nonce), then sets the transaction-local setting to
// the v1 value signed, server-side with the same key, for the
// transaction's nonce, so "<ns>_scope_doc()" and the policies are those of
// the two-round-trip protocol, unchanged. A failure raises ErrCodeNoCounter
// (the session has no counter: a new backend, DISCARD TEMP; call
// "<ns>_scope_open()") or ErrCodeNotVerified (anything else), and never
// echoes the value.
//
// Invariant: an exchange value verifies at most once, in one transaction
// of the one backend it was signed for. The MAC binds the pid; the
// sequence is not transactional, so the counter a value consumed stays
// consumed after ROLLBACK; only the owner can reset the sequence, and a
// sequence dropped by DISCARD TEMP and created again starts at a fresh
// random value (reaching an old counter again takes about 2^60 calls).

// Errors the exchange functions raise (SQLSTATE; class "TM" is this
// library's).
const (
	// ErrCodeNoCounter: the session has no usable counter (a new backend,
	// DISCARD TEMP or ALL, or an object of that name in pg_temp that is
	// not the owner's sequence). The driver calls OpenSQL and retries
	// once.
	ErrCodeNoCounter = "TMS01"
	// ErrCodeNotVerified: the exchange value is malformed, signed with an
	// unknown key, for another backend, or for a counter other than the
	// session's next one (replayed).
	ErrCodeNotVerified = "TMS02"
)

// exchangeLabel starts every signed exchange message.
const exchangeLabel = "tenantmcp-scope-v2"

// OpenFunc and ExchangeFunc are the names of the counter-opening and the
// exchanging functions; CounterSeq is the name of the session's counter.
func (d Dialect) OpenFunc() string     { return d.ns() + "_scope_open" }
func (d Dialect) ExchangeFunc() string { return d.ns() + "_scope_set" }
func (d Dialect) CounterSeq() string   { return d.ns() + "_scope_ctr" }

// OpenSQL returns the session counter's next value, creating the counter
// if the session has none.
func (d Dialect) OpenSQL() string { return `SELECT ` + d.Quote(d.OpenFunc()) + `()` }

// ExchangeSQL sets the scope from the exchange value $1 (SignedExchange)
// and, in the same statement, the transaction's time zone (see
// SessionSQL).
func (d Dialect) ExchangeSQL() string {
	return `SELECT ` + d.Quote(d.ExchangeFunc()) + `($1), pg_catalog.set_config('TimeZone', 'UTC', true)`
}

// SignedExchange returns the exchange value that sets doc as the scope of
// the transaction it begins on backend pid whose counter's next value is
// counter.
func (d Dialect) SignedExchange(k Key, pid uint32, counter int64, doc string) string {
	c := strconv.FormatInt(counter, 10)
	m := hmac.New(sha256.New, k.Secret)
	m.Write([]byte(exchangeLabel + "\n" + d.ns() + "\n" + strconv.FormatUint(uint64(pid), 10) + ":" + c + "\n" + doc))
	return "v2." + k.ID + "." + c + "." + hex.EncodeToString(m.Sum(nil)) + "." + doc
}

// counterLookup selects, into seq, the session's counter when it is the
// owner's sequence that nobody else holds a privilege on (current_user is
// the owner inside the SECURITY DEFINER functions).
func (d Dialect) counterLookup(into string) string {
	return `SELECT c.oid` + into + ` FROM pg_catalog.pg_class AS c
    WHERE c.relnamespace = pg_catalog.pg_my_temp_schema() AND c.relname = ` + literal(d.CounterSeq())
}

// counterUsable is the condition, over c of counterLookup, that the
// relation is the owner's sequence and nobody else holds a privilege on
// it.
const counterUsable = `c.relkind = 'S' AND pg_catalog.pg_get_userbyid(c.relowner) = current_user
      AND NOT EXISTS (SELECT 1 FROM pg_catalog.aclexplode(c.relacl) AS a WHERE a.grantee <> c.relowner)`

func raise(code, msg string) string {
	return `RAISE EXCEPTION USING ERRCODE = ` + literal(code) + `, MESSAGE = ` + literal(msg) + `;`
}

// openFuncBody is the body of OpenFunc: it creates the session's counter
// if there is none, refuses an object of its name that is not the owner's
// sequence, and returns the value the next nextval will take (consuming
// one, so any exchange value signed before is void).
func (d Dialect) openFuncBody() string {
	noCounter := raise(ErrCodeNoCounter, "tenantmcp scope: pg_temp holds an object named "+d.CounterSeq()+" that is not the session counter (DISCARD TEMP)")
	return `
DECLARE
  seq oid;
  ok boolean;
  u text;
BEGIN
  ` + d.counterLookup(", "+counterUsable+" INTO seq, ok") + `;
  IF NOT FOUND THEN
    u := pg_catalog.replace(pg_catalog.gen_random_uuid()::text, '-', '');
    EXECUTE 'CREATE TEMP SEQUENCE ' || pg_catalog.quote_ident(` + literal(d.CounterSeq()) + `) ||
      ' MINVALUE 0 NO CYCLE START WITH ' ||
      (('x' || pg_catalog.substr(u, 1, 12) || pg_catalog.substr(u, 14, 3))::bit(60)::int8)::text;
    ` + d.counterLookup(", "+counterUsable+" INTO seq, ok") + `;
  END IF;
  IF NOT ok THEN
    ` + noCounter + `
  END IF;
  RETURN pg_catalog.nextval(seq) + 1;
END
`
}

// exchangeFuncBody is the body of ExchangeFunc; schema is the quoted
// schema of the key table. It checks the MAC before it consumes the
// counter (a forged value consumes nothing), and compares the MACs by
// hashing both sides once more, as scopeFuncBody does. A key id that is
// not in the table (a key removed while a server still signs with it)
// sets no scope, so the statement sees no rows, as RemoveKey documents;
// the counter is consumed all the same, so the driver's count stays
// right.
func (d Dialect) exchangeFuncBody(schema string) string {
	bad := raise(ErrCodeNotVerified, "tenantmcp scope: the exchange value does not verify")
	compare := `
  IF pg_catalog.nextval(seq)::text <> ctr THEN
    ` + bad + `
  END IF;`
	if guardfault.Off(guardfault.ExchangeCounter) {
		compare = `
  PERFORM pg_catalog.nextval(seq);`
	}
	return `
DECLARE
  kid text := pg_catalog.split_part(v, '.', 2);
  ctr text := pg_catalog.split_part(v, '.', 3);
  mac text := pg_catalog.split_part(v, '.', 4);
  doc text := pg_catalog.substr(v, 7 + pg_catalog.length(kid) + pg_catalog.length(ctr) + 64);
  ip bytea;
  op bytea;
  seq oid;
BEGIN
  IF v IS NULL OR pg_catalog.left(v, 3) <> 'v2.' OR pg_catalog.length(ctr) NOT BETWEEN 1 AND 19
     OR pg_catalog.ltrim(ctr, '0123456789') <> '' OR pg_catalog.length(mac) <> 64
     OR pg_catalog.ltrim(mac, '0123456789abcdef') <> '' OR pg_catalog.left(doc, 1) <> '{' THEN
    ` + bad + `
  END IF;
  ` + d.counterLookup(" INTO seq") + ` AND ` + counterUsable + `;
  IF NOT FOUND THEN
    ` + raise(ErrCodeNoCounter, "tenantmcp scope: this session has no scope counter (call "+d.OpenFunc()+"())") + `
  END IF;
  SELECT k.inner_pad, k.outer_pad INTO ip, op FROM ` + schema + `.` + d.Quote(d.KeyTable()) + ` AS k WHERE k.id = kid;
  IF NOT FOUND THEN
    PERFORM pg_catalog.nextval(seq);
    RETURN;
  END IF;
  IF pg_catalog.sha256(pg_catalog.decode(mac, 'hex')) <> pg_catalog.sha256(pg_catalog.sha256(op ||
       pg_catalog.sha256(ip || pg_catalog.convert_to(` + literal(exchangeLabel+"\n"+d.ns()+"\n") + ` ||
       pg_catalog.pg_backend_pid()::text || ':' || ctr || E'\n' || doc, 'UTF8')))) THEN
    ` + bad + `
  END IF;` + compare + `
  PERFORM pg_catalog.set_config(` + literal(d.Setting()) + `, 'v1.' || kid || '.' || pg_catalog.encode(pg_catalog.sha256(op ||
    pg_catalog.sha256(ip || pg_catalog.convert_to(` + literal(macLabel+"\n"+d.ns()+"\n") + ` || ` + nonceExpr + ` || E'\n' || doc, 'UTF8'))), 'hex') ||
    '.' || doc, true);
END
`
}
