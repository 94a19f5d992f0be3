package guardedsql

import (
	"database/sql"
	"errors"

	"github.com/tenantmcp/tenantmcp/guardedsql/internal/engine"
	"github.com/tenantmcp/tenantmcp/guardedsql/internal/guard"
)

// Errors. All are matchable with errors.Is; the guard wraps them with the
// table or statement concerned.
var (
	// ErrNoScope: the context carries no tenant scope. Nothing was sent to
	// the database.
	ErrNoScope = errors.New("guardedsql: no tenant scope in context")

	// ErrEngineUnsafe: the engine's own tenant isolation — PostgreSQL's
	// row-level security — is not verified to be in force, so guarded
	// statements fail closed and DB.Check fails with it. Every
	// guardedsql/postgres.ErrRLSUnsafe error matches it.
	ErrEngineUnsafe = engine.ErrUnsafe

	// ErrNotFound: the row does not exist in the scope. A row that exists
	// but belongs to another tenant is reported exactly the same way. It is
	// returned by Row.Scan when no row matched (that error also matches
	// sql.ErrNoRows), by ExpectOne updates and deletes that matched
	// nothing, and by inserts whose parent row is not in scope.
	ErrNotFound = guard.ErrNotFound

	// ErrAmbiguous: a statement meant for one row matched more than one
	// in scope, so the caller's call was ambiguous: an ExpectOne update or
	// delete (which then changed nothing: it ran in a transaction, or a
	// savepoint inside Tx, that was rolled back), a QueryRow (whose
	// Row.Scan then reads no value), One or CollectOne. With composite keys
	// ids repeat across tenants, so a caller with several grants meets it
	// when a tool looks a row up by the id part alone; the call is narrowed
	// to one grant with the server's Tool.Narrowable selector, or the tool
	// names the row completely. Its message carries no value, count or
	// tenant.
	ErrAmbiguous = errAmbiguous

	// ErrTooManyRows is ErrAmbiguous, under its older name.
	//
	// Deprecated: use ErrAmbiguous.
	ErrTooManyRows = errAmbiguous

	// ErrOutOfScope: an insert into a table with no scope parent (a root
	// such as chains) whose level columns match no grant.
	ErrOutOfScope = guard.ErrOutOfScope

	// ErrReadOnly: a mutation of a global table. Shared reference data is
	// not any tenant's to change.
	ErrReadOnly = guard.ErrReadOnly

	// ErrRefused: a mutation the guard cannot check, such as an insert that
	// omits its scope-parent column or sets only part of a composite
	// foreign key to a tenant-bound table.
	ErrRefused = guard.ErrRefused

	// ErrInvalid: a zero (unbuilt) statement, a statement built on another
	// Schema, or a correlated subquery run on its own.
	ErrInvalid = guard.ErrInvalid

	// ErrScopeMismatch: a statement inside Tx ran with a context whose
	// scope differs from the one the transaction began with.
	ErrScopeMismatch = errors.New("guardedsql: context scope differs from the transaction's")

	// ErrInternal: the guard could not account for every table reference
	// of a statement. It indicates a bug; nothing was sent.
	ErrInternal = guard.ErrInternal

	// ErrUnsupported: the statement uses something the database engine
	// does not have, such as a function the schema registers for other
	// engines only. The error names the engine and the feature; nothing
	// was sent.
	ErrUnsupported = guard.ErrUnsupported

	// ErrConversion (with ErrRefused): the statement compares two
	// expressions of different kinds (a text column with an integer
	// column), which the engine would compare by converting one of them,
	// so that its answer, or whether it fails, would depend on the stored
	// values (issue 26 §2). Compare values of one kind, or Cast one side.
	// Nothing was sent.
	ErrConversion = guard.ErrConversion
)

// noRow is what Row.Scan returns when no row in scope matched.
type noRow struct{}

func (noRow) Error() string { return "guardedsql: not found: no row in scope" }

func (noRow) Is(target error) bool { return target == ErrNotFound || target == sql.ErrNoRows }
