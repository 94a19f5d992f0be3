// Package guardedsql runs package builder's sealed statements against a
// database, confining every statement to the tenant scope carried by the
// request context.
//
// DB.Query, DB.QueryRow, DB.Exec and DB.Tx accept only builder values; a
// SQL string does not compile. Before anything is sent, the scope is taken
// from the context (scope.FromContext); without one the call fails with
// ErrNoScope and the database sees nothing. Then, for every tenant-bound
// table reference of the statement (FROM, JOIN, subqueries, mutation
// targets), the guard adds a predicate proving that the row lies under one
// of the scope's grants, following the schema graph's foreign keys to the
// columns that carry the scope levels. With a chain grant a booking is
// visible when its room's hotel belongs to the chain; with a hotel grant
// when its room belongs to the hotel. Global tables get no predicate.
//
// The grants are bound as one JSON parameter (the typed scope document:
// {"chain":["acme"],"hotel":[12]}) that the engine expands (SQLite:
// json_each), never spliced into SQL text. Grant ids are converted to the
// key type of their level first; an id that is not valid for it (a hotel
// id "12abc" where hotel ids are integers) matches nothing.
//
// Writes are guarded as well. UPDATE and DELETE touch only rows in scope.
// An INSERT, and an UPDATE that assigns a scope column, is checked in the
// same statement: every referenced tenant row (the parent, and any other
// foreign key to a tenant-bound table) must be in scope, level columns must
// hold granted ids, and a root row (no parent) must itself be in scope.
// Global tables are read-only (ErrReadOnly).
//
// A row of another tenant behaves exactly like a row that does not exist:
// it is never returned, a QueryRow finds nothing (ErrNotFound, which also
// matches sql.ErrNoRows), an ExpectOne update or delete aimed at it fails
// with ErrNotFound and changes nothing, and an insert under a parent of
// another tenant fails with ErrNotFound.
//
// # Engines
//
// SQLite (modernc.org/sqlite, pure Go) is the embedded default: Open
// ("sqlite:/path/file.db") or NewSQLite for a *sql.DB you opened; the
// document is expanded with json_each.
//
// PostgreSQL (github.com/jackc/pgx/v5): Open("postgres://...") or
// NewPostgres for a pgxpool.Pool. Row-level security is a second,
// independent boundary: RLSDDL generates, from the schema graph, ENABLE and
// FORCE ROW LEVEL SECURITY and one policy per tenant-bound table that
// follows the foreign-key path like the guard does, and ApplyRLS installs
// them as the tables' owner. Every guarded statement runs in a transaction
// that first sets the scope document as the transaction-local setting
// "tenantmcp.scope" (never a session-level SET: a pooled connection never
// carries one request's scope into the next), pipelined with the statement:
// one network round trip for a single statement. With no setting the
// policies admit no rows. The start-up check (CheckRLS, run by NewPostgres
// and Open) refuses a superuser, a BYPASSRLS role, an owner of tables that
// are not FORCE'd, and tables whose row-level security or policies are
// missing, altered or outdated, each with its own error (ErrRLSSuperuser and
// friends, all matching ErrRLSUnsafe). The guard's own predicates, which
// bind the granted ids as typed array parameters and never read the setting,
// are added as well unless WithRLSOnly is given.
//
// MySQL and MariaDB (github.com/go-sql-driver/mysql): Open("mysql://...",
// see MySQLConfig) or NewMySQL. There is no row-level security, so the
// guard's predicates are the boundary; the document is bound as a
// parameter and expanded with JSON_TABLE where the foreign-key path meets
// the level columns (MariaDB 10.6+, MySQL 8.0.4+).
//
// Limits: WithPoolWait bounds the wait for a pooled connection (then
// ErrBusy, retryable, nothing sent); WithStatementTimeout and
// WithLockTimeout bound each statement in the database, set in the same
// transaction as the scope so that they never outlive it (PostgreSQL
// transaction-local settings, MariaDB SET STATEMENT, a context deadline on
// SQLite); IsTimeout recognises the error they raise. WithMaxConns sizes
// the pool Open creates.
//
// The dialect seam is documented in internal/dialect.
//
// For tests, WithObserver sees every statement before it is sent, and
// DB.Render shows the guarded SQL for a statement without running it.
//
// # Limits
//
//   - Rows whose foreign keys dangle (possible only with foreign-key
//     enforcement off) may be treated differently by equivalent predicate
//     shapes; such a row is only ever matched through the level ids its own
//     columns name, never by another tenant's grant. Enable foreign keys.
//   - A unique constraint shared by all tenants can reveal that a value
//     exists elsewhere (the insert fails with a constraint error). Make
//     such constraints per tenant (include the tenant column).
//   - Columns an INSERT omits are not checked: a database DEFAULT that
//     points at another tenant's row would not be caught.
//   - Declared primary keys are trusted: the guard joins along scope paths
//     that reference them, so a non-unique "primary key" duplicates rows
//     (it cannot widen the scope).
package guardedsql
