package postgres

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/tenantmcp/tenantmcp/guardedsql"
	pgdialect "github.com/tenantmcp/tenantmcp/guardedsql/internal/engine/postgres"
	"github.com/tenantmcp/tenantmcp/guardedsql/internal/engine/postgres/pgxdriver"
)

// Key is a PostgreSQL scope-signing key: an id (1-64 letters, digits,
// '_' or '-') and a secret of 32-64 bytes.
//
// The row-level security policies read the scope only through a verifying
// function that checks an HMAC-SHA256 of the scope document bound to the
// transaction (the backend's pid and the transaction's start time), so
// raw SQL as the application role cannot grant itself a scope by setting
// "tenantmcp.scope", nor replay a value signed for another transaction.
// The DB hands the scope to the server in the batch of the statement, as
// an exchange value signed with the same key for the backend's pid and
// the next value of a per-backend counter the application role cannot
// touch ("<namespace>_scope_set"), which verifies once.
// The server holds the key (Options.Key); the database holds it in a table
// only the tables' owner can read (AddKey). Keep it as secret as the
// owner's password.
//
// Rotation without downtime: AddKey the new key (every installed key
// verifies), restart or redeploy the servers with the new key in
// Options.Key, then RemoveKey the old id.
//
// The secret is never printed: String, GoString and LogValue show the id.
// The zero Key is "no key".
type Key struct {
	ID     string
	secret []byte
}

// NewKey returns a key with the given id and a fresh random 32-byte
// secret.
func NewKey(id string) (Key, error) {
	secret := make([]byte, 32)
	if _, err := rand.Read(secret); err != nil {
		return Key{}, err
	}
	return MakeKey(id, secret)
}

// MakeKey returns the key with the given id and secret (32-64 bytes),
// as loaded from the application's secret store.
func MakeKey(id string, secret []byte) (Key, error) {
	k := Key{ID: id, secret: append([]byte(nil), secret...)}
	if err := k.dialect().Validate(); err != nil {
		return Key{}, fmt.Errorf("%w: %w", guardedsql.ErrInvalid, err)
	}
	return k, nil
}

// ParseKey parses the text form "<id>:<hex secret>" (see Text).
func ParseKey(s string) (Key, error) {
	id, hx, ok := strings.Cut(s, ":")
	secret, err := hex.DecodeString(hx)
	if !ok || err != nil {
		return Key{}, fmt.Errorf("%w: an RLS key is written <id>:<hex secret>", guardedsql.ErrInvalid)
	}
	return MakeKey(id, secret)
}

// Text returns the key with its secret, "<id>:<hex secret>", for storing
// in a secret store. It is the only method that reveals the secret.
func (k Key) Text() string { return k.ID + ":" + hex.EncodeToString(k.secret) }

// String shows the key's id only.
func (k Key) String() string { return "RLSKey(" + k.ID + ")" }

// GoString shows the key's id only.
func (k Key) GoString() string { return k.String() }

// LogValue shows the key's id only.
func (k Key) LogValue() slog.Value { return slog.StringValue(k.String()) }

// isZero reports the zero Key, which Options and KeyOptions read as
// "no key". Any other value is validated where it is used.
func (k Key) isZero() bool { return k.ID == "" && k.secret == nil }

// ErrRLSNoKey: [New] or guardedsql.Open without Options.Key. The policies
// admit only a signed scope, so an unsigned DB would see nothing. It
// matches ErrRLSUnsafe.
var ErrRLSNoKey = fmt.Errorf("%w: no scope-signing key (set postgres.Options.Key)", ErrRLSUnsafe)

// AddKey installs k in the key table of the signed scope context, on
// owner connected as the tables' owner, after [ApplyRLS] (or [RLSDDL])
// has created it. Re-adding an id replaces its secret. opts.Namespace is
// the one given to RLSDDL.
func AddKey(ctx context.Context, owner TxBeginner, k Key, opts Options) error {
	d, err := opts.dialect()
	if err != nil {
		return err
	}
	pk := k.dialect()
	if err := pk.Validate(); err != nil {
		return fmt.Errorf("%w: %w", guardedsql.ErrInvalid, err)
	}
	return inOwnerTx(ctx, owner, func(exec func(string, ...any) error) error {
		return exec(d.AddKeySQL(), pk.AddKeyArgs()...)
	})
}

// RemoveKey deletes the key with the given id from the key table;
// contexts signed with it no longer verify (their statements see no rows).
// opts.Namespace is the one given to RLSDDL.
func RemoveKey(ctx context.Context, owner TxBeginner, id string, opts Options) error {
	d, err := opts.dialect()
	if err != nil {
		return err
	}
	return inOwnerTx(ctx, owner, func(exec func(string, ...any) error) error {
		return exec(d.RemoveKeySQL(), id)
	})
}

// inOwnerTx runs fn in one transaction on owner. Statement errors are
// reported without their arguments (a key's secret).
func inOwnerTx(ctx context.Context, owner TxBeginner, fn func(exec func(string, ...any) error) error) error {
	tx, err := pgxdriver.BeginOn(owner)(ctx)
	if err != nil {
		return err
	}
	err = fn(func(q string, args ...any) error {
		_, err := tx.Exec(ctx, q, args...)
		return err
	})
	if pe := (*pgconn.PgError)(nil); errors.As(err, &pe) && pe.Code == "42P01" {
		// The key table is created by ApplyRLS (RLSDDL).
		return errors.Join(fmt.Errorf("guardedsql: RLS key: the key table does not exist in this schema: run ApplyRLS first (it installs the key table and takes Options.Key): %w", err), tx.Rollback(ctx))
	}
	if err != nil {
		return errors.Join(fmt.Errorf("guardedsql: RLS key: %w", err), tx.Rollback(ctx))
	}
	return tx.Commit(ctx)
}

// ScopeNonceSQL is the query whose single text value, read inside a
// PostgreSQL transaction, is the nonce that transaction's scope setting
// must be signed for (the backend pid and the transaction's start time).
const ScopeNonceSQL = pgdialect.NonceSQL

// SignScope returns the value of the scope setting ("<namespace>.scope")
// that makes the policies admit doc, a scope document of the form the
// guard writes ({"chain":["acme"]}), in the one transaction whose
// ScopeNonceSQL value is nonce. It is what the DB does before every
// statement; tools that run raw SQL as the application role on purpose
// (migrations, audits, the conformance suite) use it with the same key.
// opts.Namespace is the one given to RLSDDL.
func SignScope(k Key, nonce, doc string, opts Options) (string, error) {
	d, pk, err := signing(k, opts)
	if err != nil {
		return "", err
	}
	return d.Signed(pk, nonce, doc), nil
}

// dialect is k in the dialect's form.
func (k Key) dialect() pgdialect.Key { return pgdialect.Key{ID: k.ID, Secret: k.secret} }

// signing returns opts' dialect and k in its form, refusing a key of the
// wrong shape: what SignScope and SignExchange share.
func signing(k Key, opts Options) (pgdialect.Dialect, pgdialect.Key, error) {
	d, err := opts.dialect()
	if err != nil {
		return d, pgdialect.Key{}, err
	}
	pk := k.dialect()
	if err := pk.Validate(); err != nil {
		return d, pk, fmt.Errorf("%w: %w", guardedsql.ErrInvalid, err)
	}
	return d, pk, nil
}

// ScopeExchange returns the statements of the one-round-trip protocol the
// DB uses on pgx (see [SignExchange]) for opts.Namespace: open returns,
// as an int8, the next value of the session's exchange counter (creating
// it), and set, given an exchange value as $1, sets the scope for the
// transaction it runs in.
func ScopeExchange(opts Options) (open, set string, err error) {
	d, err := opts.dialect()
	if err != nil {
		return "", "", err
	}
	return d.OpenSQL(), d.ExchangeSQL(), nil
}

// SignExchange returns the exchange value that, run through ScopeExchange's
// set statement as the first statement of a transaction on the backend
// whose pid is pid, sets doc as that transaction's scope, once: counter
// must be the session counter's next value (ScopeExchange's open), and a
// value verifies only for that backend and that counter value.
func SignExchange(k Key, pid uint32, counter int64, doc string, opts Options) (string, error) {
	d, pk, err := signing(k, opts)
	if err != nil {
		return "", err
	}
	return d.SignedExchange(pk, pid, counter, doc), nil
}
