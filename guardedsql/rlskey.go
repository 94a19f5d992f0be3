package guardedsql

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"github.com/tenantmcp/tenantmcp/guardedsql/internal/engine/postgres"
	"github.com/tenantmcp/tenantmcp/guardedsql/internal/driver"
)

// RLSKey is a PostgreSQL scope-signing key: an id (1-64 letters, digits,
// '_' or '-') and a secret of 32-64 bytes.
//
// The row-level security policies read the scope only through a verifying
// function that checks an HMAC-SHA256 of the scope document bound to the
// transaction (the backend's pid and the transaction's start time), so
// raw SQL as the application role cannot grant itself a scope by setting
// "tenantmcp.scope", nor replay a value signed for another transaction.
// The server holds the key (Options.RLSKey); the database holds it in a table
// only the tables' owner can read (AddRLSKey). Keep it as secret as the
// owner's password.
//
// Rotation without downtime: AddRLSKey the new key (every installed key
// verifies), restart or redeploy the servers with the new key in
// Options.RLSKey, then RemoveRLSKey the old id.
//
// The secret is never printed: String, GoString and LogValue show the id.
// The zero RLSKey is "no key".
type RLSKey struct {
	ID     string
	secret []byte
}

// NewRLSKey returns a key with the given id and a fresh random 32-byte
// secret.
func NewRLSKey(id string) (RLSKey, error) {
	secret := make([]byte, 32)
	if _, err := rand.Read(secret); err != nil {
		return RLSKey{}, err
	}
	return MakeRLSKey(id, secret)
}

// MakeRLSKey returns the key with the given id and secret (32-64 bytes),
// as loaded from the application's secret store.
func MakeRLSKey(id string, secret []byte) (RLSKey, error) {
	k := RLSKey{ID: id, secret: append([]byte(nil), secret...)}
	if err := (postgres.Key{ID: k.ID, Secret: k.secret}).Validate(); err != nil {
		return RLSKey{}, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	return k, nil
}

// ParseRLSKey parses the text form "<id>:<hex secret>" (see Text).
func ParseRLSKey(s string) (RLSKey, error) {
	id, hx, ok := strings.Cut(s, ":")
	secret, err := hex.DecodeString(hx)
	if !ok || err != nil {
		return RLSKey{}, fmt.Errorf("%w: an RLS key is written <id>:<hex secret>", ErrInvalid)
	}
	return MakeRLSKey(id, secret)
}

// Text returns the key with its secret, "<id>:<hex secret>", for storing
// in a secret store. It is the only method that reveals the secret.
func (k RLSKey) Text() string { return k.ID + ":" + hex.EncodeToString(k.secret) }

// String shows the key's id only.
func (k RLSKey) String() string { return "RLSKey(" + k.ID + ")" }

// GoString shows the key's id only.
func (k RLSKey) GoString() string { return k.String() }

// LogValue shows the key's id only.
func (k RLSKey) LogValue() slog.Value { return slog.StringValue(k.String()) }

// isZero reports the zero RLSKey, which Options and RLSKeyOptions read as
// "no key". Any other value is validated where it is used.
func (k RLSKey) isZero() bool { return k.ID == "" && k.secret == nil }

// ErrRLSNoKey: postgres.New or Open without Options.RLSKey. The policies
// admit only a signed scope, so an unsigned DB would see nothing. It
// matches ErrRLSUnsafe.
var ErrRLSNoKey = fmt.Errorf("%w: no scope-signing key (set guardedsql.Options.RLSKey)", ErrRLSUnsafe)

// addRLSKey installs k in the key table (package guardedsql/postgres:
// AddRLSKey).
func addRLSKey(ctx context.Context, owner driver.Begin, k RLSKey, opts RLSOptions) error {
	d, err := opts.dialect()
	if err != nil {
		return err
	}
	pk := postgres.Key{ID: k.ID, Secret: k.secret}
	if err := pk.Validate(); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	return inOwnerTx(ctx, owner, func(exec func(string, ...any) error) error {
		return exec(d.AddKeySQL(), pk.AddKeyArgs()...)
	})
}

// removeRLSKey deletes the key with the given id from the key table
// (package guardedsql/postgres: RemoveRLSKey).
func removeRLSKey(ctx context.Context, owner driver.Begin, id string, opts RLSOptions) error {
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
func inOwnerTx(ctx context.Context, owner driver.Begin, fn func(exec func(string, ...any) error) error) error {
	tx, err := owner(ctx)
	if err != nil {
		return err
	}
	err = fn(func(q string, args ...any) error {
		_, err := tx.Exec(ctx, q, args...)
		return err
	})
	if err != nil {
		return errors.Join(fmt.Errorf("guardedsql: RLS key: %w", err), tx.Rollback(ctx))
	}
	return tx.Commit(ctx)
}

// ScopeNonceSQL is the query whose single text value, read inside a
// PostgreSQL transaction, is the nonce that transaction's scope setting
// must be signed for (the backend pid and the transaction's start time).
const ScopeNonceSQL = postgres.NonceSQL

// SignScope returns the value of the scope setting ("<namespace>.scope")
// that makes the policies admit doc, a scope document of the form the
// guard writes ({"chain":["acme"]}), in the one transaction whose
// ScopeNonceSQL value is nonce. It is what the DB does before every
// statement; tools that run raw SQL as the application role on purpose
// (migrations, audits, the conformance suite) use it with the same key.
// opts.Namespace is the one given to RLSDDL.
func SignScope(k RLSKey, nonce, doc string, opts RLSOptions) (string, error) {
	d, err := opts.dialect()
	if err != nil {
		return "", err
	}
	pk := postgres.Key{ID: k.ID, Secret: k.secret}
	if err := pk.Validate(); err != nil {
		return "", fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	return d.Signed(pk, nonce, doc), nil
}
