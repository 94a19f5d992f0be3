// Package guardedsql runs package builder's sealed statements against a
// database, confining every statement to the tenant scope carried by the
// request context.
//
// [DB.Query], [DB.QueryRow], [DB.Exec] and [DB.Tx] accept only builder values; a
// SQL string does not compile. Before anything is sent, the scope is taken
// from the context ([scope.FromContext]); without one the call fails with
// [ErrNoScope] and the database sees nothing. Then, for every tenant-bound
// table reference of the statement (FROM, JOIN, subqueries, mutation
// targets), the guard adds a predicate proving that the row lies under one
// of the scope's grants, following the schema graph's foreign keys to the
// columns that carry the scope levels. With a chain grant a booking is
// visible when its room's hotel belongs to the chain; with a hotel grant
// when its room belongs to the hotel. Global tables get no predicate.
//
// A grant confined to ancestors ([scope.Grant.Within]: "hotel acme-paris
// within chain initech", what the group /tenants/initech/hotels/acme-paris
// grants) admits a row only when every level it names holds the grant's id
// at the row's anchors at once: the guard tests the tuple (chain, hotel) of
// the row against the tuples granted, never each level on its own, so a
// path whose ancestors disagree with the data grants nothing, and two such
// grants with swapped ancestors do not combine into a third. On a table
// that does not reach every level the grant names (chains, for a hotel
// grant) it admits nothing.
//
// The grants are bound as one JSON parameter (the typed scope document:
// {"chain":["acme"],"hotel":[12]}, and for grants within ancestors one
// array of tuples per shape: {"chain/hotel":[["initech",12]]}) that the
// engine expands (SQLite: json_each), never spliced into SQL text. Grant ids are converted to the
// key type of their level first; an id that is not valid for it (a hotel
// id "12abc" where hotel ids are integers) matches nothing.
//
// Writes are guarded as well. UPDATE and DELETE touch only rows in scope.
// An INSERT, and an UPDATE that assigns a scope column, is checked in the
// same statement: every referenced tenant row (the parent, and any other
// foreign key to a tenant-bound table) must be in scope, level columns must
// hold granted ids, and a root row (no parent) must itself be in scope.
// Global tables are read-only ([ErrReadOnly]).
//
// # Tables owned by reference, and rows with several paths to a tenant
//
// A table declared builder.TableDef.OwnedByReference (addresses, referenced
// from customers, staff and stores) has no tenant column: its rows belong to
// the tenants of the rows that reference them, through every declared
// foreign key of a tenant-bound table into it (builder.ForeignKey.Unchecked
// ones excluded). On every engine, and in the PostgreSQL policies:
//
//   - a row is visible iff some referencing row is in the caller's scope;
//     an unreferenced row is visible to no one. Joins, subqueries,
//     aggregates and redaction treat it like any other table;
//   - UPDATE and DELETE need the row visible and every referencing row in
//     the caller's scope: a row two tenants reference is readable by both
//     and writable by neither (an ExpectOne write fails with
//     [ErrSharedRow], which matches ErrNotFound; a plain one skips it);
//   - INSERT creates an unreferenced row, visible to no one until a row in
//     scope references it (no RETURNING on PostgreSQL, whose row-level
//     security will not return it: insert the key; no upsert on any
//     engine, which builder refuses);
//   - a tenant row may be made to reference (INSERT, UPDATE, upsert,
//     INSERT ... SELECT) only a row that is unreferenced or already visible
//     to the writer; otherwise the write fails with ErrNotFound, from the
//     guard's own check and word for word as it does for a key no row has
//     (not from the database's foreign key, whose error would tell the two
//     apart). Two
//     transactions claiming the same unreferenced row: on PostgreSQL the
//     check takes an advisory lock on the row's key, so the second waits
//     and (READ COMMITTED) is refused; SQLite has one writer; on
//     MariaDB/MySQL the check's read of the referencing table is the only
//     serialisation (locking under REPEATABLE READ, not under READ
//     COMMITTED), so there the race is open: see Limits.
//
// A tenant-bound table with several foreign keys into tenant-bound tables
// (a rental: its customer, its clerk) reaches its tenant through its scope
// parent (builder.TableDef.Parent), which alone decides visibility; every
// other such key is a consistency path, checked on every write (INSERT,
// UPDATE, upsert, INSERT ... SELECT: the referenced row must be in the
// writer's scope) unless declared Unchecked with a reason. Under a scope
// of several grants a row's checks must hold under one of them: a holder
// of two stores cannot join store A's customer with store B's clerk (each
// alone is in its scope), by INSERT, by pointing a store A rental at store
// B's clerk, or by moving it to store B's customer while it keeps store
// A's clerk; a row of the tenants' own table (a new store) is exempt. An existing row
// whose paths lead to different tenants (store A's customer, store B's
// clerk) is visible by its parent path only (to store A, with its
// payments; a row of a table with level columns of its own, by them, its
// parent then being a path like the others), and writable by no one: an UPDATE or DELETE of it, or of a
// row whose own consistency path leads outside the scope, needs every
// consistency path it leaves unchanged to reach a row in scope too, so an
// ExpectOne write fails with ErrSharedRow and neither store completes the
// rental silently. A key into the table itself is not tested this way (a
// MySQL UPDATE cannot read its own table), nor one into a table that does
// not reach every level the row's table reaches (a project task's
// organisation-level assignee): a grant of such a level that sees the row
// never sees the referenced row, so that key is checked only when written
// (on PostgreSQL the policies admit it when it names a row the writer sees
// or stays what the row holds).
//
// Derived tables, CTE bodies and every branch of a set operation are
// guarded like subqueries: each schema table reference in them gets its
// predicate, and the statement is refused (ErrInternal) unless every one
// of its references was guarded. On SQLite the scope's WITH and the
// query's own CTEs are merged into one WITH clause. INTERSECT and EXCEPT
// on a MySQL server older than 8.0.31 fail with ErrSetOpUnsupported.
//
// A query built with ForUpdate or ForShare runs only inside DB.Tx
// (ErrLockOutsideTx otherwise: the lock would end with the statement).
// PostgreSQL locks the rows of the query's own FROM and inner-joined
// tables (FOR UPDATE OF), not the parent rows the guard joins to test the
// scope, which would serialise every writer of a tenant on its root row;
// MariaDB/MySQL lock the rows they read, so there a locking read first
// reads the keys of its rows in scope without locking and then locks
// exactly those (see "Locks across tenants" below).
// SQLite has no row locks and needs none: the transactions of a DB opened
// by Open begin IMMEDIATE on its one writer connection, so a second
// read-modify-write waits for the first to commit (a pool passed to
// guardedsql/sqlite.New should set _txlock=immediate for the same effect).
//
// Expressions (builder's arithmetic, CASE, casts, functions, JSON paths,
// window functions, scalar subqueries) are rendered in each engine's
// spelling, values always bound; a subquery inside one is guarded like any
// other, and a window function therefore ranks, numbers and sums only rows
// in scope. An UPDATE's SET expression (builder.UpdateBuilder.SetExpr)
// reads only the target's own row and never assigns a scope column. A
// function the schema registers for other engines fails with
// ErrUnsupported, naming the engine and the function.
//
// A row of another tenant behaves exactly like a row that does not exist:
// it is never returned, a QueryRow finds nothing ([ErrNotFound], which also
// matches sql.ErrNoRows), an ExpectOne update or delete aimed at it fails
// with ErrNotFound and changes nothing, and an insert under a parent of
// another tenant fails with ErrNotFound.
//
// Ambiguity is visible: a statement meant for one row that matches several
// rows in scope fails with ErrAmbiguous rather than picking one. An
// ExpectOne update or delete then changes nothing (it runs in a
// transaction, or a savepoint inside Tx, that is rolled back), and
// QueryRow's Row.Scan, One and CollectOne read no value. This is what a
// caller holding several grants meets on composite keys, where ids repeat
// across tenants ("campaign 2" of companies 1 and 4); package server turns
// it into a client-visible tool error and lets a Narrowable tool's caller
// narrow the call to one grant. The check does not depend on the number of
// grants, so a tool that picks "the first row" fails in its own tests
// rather than only for callers with several grants; a tool that wants the
// first of several says so with OrderBy and Limit(1).
//
// A lower level may sit below a table that carries only the upper one
// (organization → project → environment, with levels organization and
// environment): an environment grant does not see the project. Reads
// under a scope that unites an organization with another's environment
// still return that environment's rows (the guard joins such a hop
// outer). Two limits remain, both refusing rather than leaking: on
// PostgreSQL, a grant confined to its ancestors (environment 7 within
// organization 2) reads nothing below such a table, because the policy
// that tests the tuple reads the project under row-level security (Open
// logs the tables concerned as a warning); and a
// lower level's column that no foreign key ties to its level's table
// (Kill Bill's account_record_id) cannot be written under any grant,
// since nothing shows which tenant an account belongs to: add the foreign
// key.
//
// # RETURNING, upserts, INSERT ... SELECT
//
// DB.ExecReturning (and Tx.ExecReturning) runs a write built with Returning
// and returns the rows it wrote, held in memory after the write committed:
// only rows in scope are ever written, so only they come back. Upserts
// (builder's OnConflict) and INSERT ... SELECT run through Exec or
// ExecReturning. How each engine does it, always in one transaction:
//
//	                 SQLite             PostgreSQL                 MariaDB 10.5+            MySQL 8
//	INSERT RETURNING native             native                     native                   row read back by key
//	UPDATE RETURNING native             native                     keys locked (FOR UPDATE), UPDATE confined to
//	                                                               them, rows read back by key
//	DELETE RETURNING native             native                     native                   rows read and locked,
//	                                                                                        then deleted by key
//	upsert           ON CONFLICT DO     ON CONFLICT DO NOTHING,    ON DUPLICATE KEY UPDATE with a no-op (inserts,
//	                 UPDATE ... WHERE   then a guarded UPDATE      or locks the conflicting row unchanged), then
//	                 <row in scope>                                the row tested against the scope: UPDATE or
//	                                                               ErrNotFound
//	INSERT...SELECT  guarded SELECT, then its rows inserted as literal rows with their per-row checks
//
// An upsert whose conflict lands on another tenant's row changes nothing
// and fails with ErrNotFound, the very error (and text) of an upsert whose
// parent row is not in scope: the caller cannot tell the two apart. DO
// NOTHING affects no row on a conflict, with the caller's row or another
// tenant's alike (the existence of a key shared by all tenants is the
// unique-key oracle of DB.UniqueOracles). On PostgreSQL a single ON
// CONFLICT DO UPDATE cannot be used: with forced row-level security it
// raises an error for a conflicting row the policy hides before evaluating
// its WHERE. On the MySQL fallbacks, UPDATE ... RETURNING refuses to change
// the primary key (ErrRefused), and an INSERT ... RETURNING needs the key
// among the inserted columns or a one-column key with an insert id.
//
// INSERT ... SELECT fails whole (ErrNotFound or ErrOutOfScope) if one
// produced row fails its checks, and a produced value that is not of its
// column's kind is ErrRefused. Its rows pass through the process: it is
// meant for the rows a tool copies, not bulk loads.
//
// # Engines
//
// Package guardedsql links no database driver and no SQL dialect. Each
// engine is a package of its own that links its driver and, imported (a
// blank import is enough), registers itself for its DSN schemes with
// [Register], as database/sql drivers do: guardedsql/sqlite ("sqlite:",
// "file:"), guardedsql/postgres ("postgres://", "postgresql://") and
// guardedsql/mysql ("mysql://"). [Open], [Introspect] and
// [IntrospectCatalog] dispatch on the scheme; a program links only the
// engines it imports, and a DSN of an engine it does not import fails with
// [ErrNoEngine], which names the package to import. Each engine package
// owns everything that is its engine's alone: its New for a pool the
// caller opened, its Introspect, its own options (set in
// [Options].Engine, see [EngineOptions]) and, for PostgreSQL, the
// row-level security that backs the guard (the DDL, the scope-signing key,
// the start-up check and re-check, their errors and the owner's
// administration functions).
//
//	import "github.com/tenantmcp/tenantmcp/guardedsql/postgres"
//	db, err := guardedsql.Open(ctx, "postgres://app@db/prod", sch, guardedsql.Options{Engine: postgres.Options{Key: key}})
//
// What guardedsql runs at start-up on every engine — the catalog check
// ([CheckCatalog]: foreign keys enforced, triggers, unique keys shared
// across tenants) — reads the catalog through typed interfaces the
// engines' dialects implement.
//
// Each engine package's documentation says how it opens and serves its
// engine: SQLite's one writer beside query-only readers, PostgreSQL's
// signed row-level security and its start-up check, MySQL's JSON_TABLE.
// On every engine, [DB.Check] runs the engine's start-up check again, with
// a reachability probe, for readiness checks, and [IsUnavailable] tells an
// unreachable database (worth a retry) from every other failure.
//
// Limits: Options.PoolWait bounds the wait for a pooled connection (then
// [ErrBusy], retryable, nothing sent); Options.StatementTimeout and
// LockTimeout bound each statement in the database, set in the same
// transaction as the scope so that they never outlive it (PostgreSQL
// transaction-local settings, MariaDB SET STATEMENT, a context deadline on
// SQLite); [IsTimeout] recognises the error they raise. Options.MaxConns sizes
// the pool [Open] creates. On PostgreSQL a tenant-fair queue sits in front
// of the pool (Options.PoolFIFO turns it off): each root tenant of a
// statement's scope is charged the connection time it holds; the next free
// connection goes to the waiter whose tenant costs least, and an outlier
// over its equal share of Options.PoolShare (by default half the pool) —
// a tenant whose time per hold is over four times the other active
// tenants' median, or whose use (a hold of t charged t + t²/250ms) is over
// twice theirs — waits before its next statement, at most five seconds
// (it is slowed down, never refused), so a tenant running heavy reports
// back to back is held to its share, a tenant using what the others
// typically use is never held, and a tenant alone runs free.
//
// The engine seam is documented in internal/engine.
//
// For tests, Options.Observer sees every statement before it is sent, and
// [DB.Render] shows the guarded SQL for a statement without running it.
//
// # Locks across tenants
//
// A lock is never an oracle or a lever across tenants: a guarded statement
// never waits for, nor takes, a lock on a row outside the caller's scope,
// and another tenant's row, locked or not, answers like a missing one
// (issue 26). PostgreSQL tests its row-level security before it locks a
// row. InnoDB (MariaDB, MySQL) locks a row when it reads it, before the
// statement's WHERE is tested, so on MySQL/MariaDB:
//
//   - transactions begin READ COMMITTED when the caller asks no level
//     (package mysql's GuardedIsolation, the one place this default is
//     chosen): plain reads, the guard's subqueries and INSERT ... SELECT
//     sources are then consistent reads, which neither lock nor wait, and
//     a scan releases the rows it did not keep;
//   - every write runs in such a transaction, and an UPDATE, DELETE or
//     locking read first reads the primary keys of its rows in scope
//     without locking, then writes or locks exactly those keys with the
//     guard still in the statement (a table without a primary key runs the
//     one statement; under READ COMMITTED InnoDB still skips a locked row
//     of an UPDATE whose committed version does not match);
//   - an upsert first reads the conflicting row without locking, and
//     answers a row outside the scope as a miss without inserting;
//   - a lock wait timeout is answered as a miss only when the non-locking
//     re-read finds the row gone from the scope.
//
// On PostgreSQL a write referencing a row owned by reference takes a
// claim lock on it only when no row in the caller's scope references it
// yet (a claim two tenants could race for); keeping a reference the caller
// already holds, to a row shared with other tenants, takes none.
//
// Left open: on PostgreSQL an upsert whose conflicting row another tenant
// has updated and not yet committed waits for that transaction (the
// engine must know whether the conflict stands, and row-level security
// hides the row from any read that could tell first). SQLite locks the
// whole database for a write transaction: every tenant's writes wait
// alike, so a lock there names no row, but one tenant's open write
// transaction does delay all the others' writes.
//
// The caller's conditions never raise an engine error that depends on
// another tenant's values: a condition that could (arithmetic that may
// overflow, a CAST, a function) is evaluated only under CASE WHEN <tenant
// test> THEN <condition> END, an order every engine respects; plain
// comparisons stay indexable conjuncts; and a comparison of two
// expressions of different kinds, which the engine would make by
// converting stored values, is refused ([ErrConversion]).
//
// # Configuration
//
// Every constructor ([Open] and the engine packages' New) takes an
// [Options] by value. The zero Options is a working default (PostgreSQL
// needs the Key of its postgres.Options in Options.Engine); the zero value
// of each field is its documented default, a nil hook is no hook, and a
// nil Logger is slog.Default(). A negative duration or size is refused
// with an error matching [ErrInvalid] that names the field, and so are an
// engine's invalid options, or options of another engine. The rule for the whole
// module is in docs/design.md ("Configuration").
//
// # Engine errors
//
// An engine's error text can quote values of any row a statement touched,
// another tenant's included (MariaDB's "Truncated incorrect DOUBLE value:
// '<a value>'", a unique violation's key). No such text reaches tool
// code: every error the engine raises becomes an *[EngineError] matching
// [ErrConflict] (unique key), [ErrReferenced] (a foreign key blocks a delete
// or update), [ErrInvalidValue] (type, range, CHECK, NOT NULL), [ErrNotFound]
// (a referenced row does not exist, like a row of another tenant) or
// [ErrEngine], naming the table, constraint and columns as the schema
// declares them and the engine's code, never a value. The engine's text
// goes to the operational log only (Options.Logger), with quoted literals
// removed and the rest passed through package redact. Errors built from a
// DSN never carry its password ([RedactDSN], [RedactDSNError]).
//
// # Transactions: isolation and retries
//
// [DB.Tx] runs a function in one transaction at the engine's default
// isolation; [DB.TxWith] takes [TxOptions]: an [IsolationLevel]
// ([ReadCommitted], [RepeatableRead], [Serializable]; see IsolationLevel
// for what each means per engine: on SQLite every transaction is
// serializable whatever is asked) and a bounded retry. A transaction that
// loses a race with a concurrent one fails with an error matching
// [ErrRetryable] ([IsRetryable]): a serialization failure, a deadlock, a
// lock wait that timed out, SQLite's busy database, on every engine, with
// the engine's code and none of its text (a deadlock's detail names other
// sessions' locks). With TxOptions.MaxRetries, TxWith rolls such an
// attempt back and runs the function again, after a jittered exponential
// backoff from TxOptions.RetryBackoff, at most that many more times; any
// other error, or the end of the context, stops it. Every attempt runs
// under the scope of the same context, so a retry can never change the
// tenant. The function must be safe to run again: only what it did in the
// database is rolled back.
//
// Read-then-write patterns ("find a free unit, book it") are correct at
// Serializable with retries and not at the default level: measured with 8
// concurrent clients taking 60 free units (TestTakeFreeUnit, 4 runs),
// PostgreSQL's READ COMMITTED made 121–161 double allocations;
// Serializable with retries none, after 93–135 retries; MariaDB none
// after 120–153; SQLite none, without a retry. A retryable error that outlives the retries
// reaches an MCP client of package server as a retryable tool error, never
// as an internal error.
//
// On PostgreSQL the row-level security re-check waits at most
// postgres.CheckLockTimeout (500ms) for a lock: while a migration holds a
// table, calls fail fast with an error matching [ErrUnavailable] (the
// server's retryable "unavailable" answer) instead of waiting behind it,
// and nothing is served on the unverified verdict until a check passes.
//
// # Writes of a call, and idempotency keys
//
// [WithCallWrites] puts a [CallWrites] in a context: every write
// transaction committed under it (a single Exec or ExecReturning, a Tx
// that wrote) is counted, so the caller (package server, once per tool
// call) knows a write stands when it cannot deliver the result. With an
// [IdempotencyClaim] the first such transaction also inserts the claim's
// row into [IdempotencyTable] just before its COMMIT: the key is recorded
// if and only if the write is, and a call whose key is already recorded
// has its write rolled back with [ErrIdempotencyKeyTaken]. A claiming
// single write runs in an explicit transaction. [IdempotencyDDL] creates
// the table (SQLite, PostgreSQL, MariaDB/MySQL); [DB.LookupIdempotency],
// [DB.StoreIdempotencyResult] and [DB.PruneIdempotency] are the only
// statements on it, fixed SQL with no tenant column.
//
// # What is checked, and what is trusted
//
// The guard's predicates are only as right as its picture of the schema
// and the engine. What that picture assumes is checked where it can be:
//
//   - At NewSchema (package builder): every tenant-bound table has an
//     acyclic path to a level; level columns' declared types agree with
//     their level's key type; every foreign key into a tenant-bound table
//     references the primary key or a declared unique key
//     (builder.ErrFKTarget), so following it finds at most one row.
//   - At Build (package builder): every bound value compared with,
//     assigned to or inserted into a column whose kind is known (a level
//     column, a declared integer or character type, or the column a
//     foreign key references) is converted to that kind or refused
//     (builder.ErrType, naming the column): the engine never converts
//     stored keys to compare them (MySQL: '7eleven' = 7), and never fails
//     quoting one. The guard's own parent checks bind the referenced key's
//     kind as well.
//   - At every write: a level column is checked on its own unless a tenant
//     foreign key that includes it is fully non-NULL in the written row
//     (a composite key with a NULL part is not checked by the engine,
//     MATCH SIMPLE); on PostgreSQL the policies' WITH CHECK tests every
//     level column on its own (it cannot tell which columns an UPDATE
//     assigned, so it also admits the value the row already holds).
//     Every foreign key into a tenant-bound table that is not Unchecked is
//     checked on every write kind, the parent and the consistency paths
//     alike, and an UPDATE or DELETE also needs the consistency paths it
//     leaves unchanged in scope (those into tables that reach every level
//     the row's table reaches); a key into a table owned by reference
//     may point only at a row unreferenced or visible to the writer, and
//     such a row is changed only by the tenant that alone references it.
//     On PostgreSQL the policies enforce the same (WITH CHECK, and
//     restrictive UPDATE/DELETE policies on tables owned by reference),
//     counting other tenants' references through a SECURITY DEFINER
//     function that Check verifies is installed.
//   - At Open and every engine package's New, on every engine, the
//     graph is compared with the live catalog as the connected role sees
//     it (CheckCatalog, errors matching ErrCatalog): a global table with a
//     foreign key into a tenant-bound table, a level-named column, a column
//     named like a reference to a tenant-bound table with no foreign key on
//     it ("inbox_id", "project_id" for sentry_project), a polymorphic
//     reference ("taggable_type", "taggable_id"; "type", "type_id";
//     Django's "content_type_id", "object_id"), or a level column of
//     another table pointing at it
//     is refused unless TableDef.GlobalReason explains it (ErrGlobalDrift);
//     a trigger, rule or foreign-key action (CASCADE, SET NULL, SET
//     DEFAULT) that writes a table written for tenants is refused unless
//     TableDef.Triggers acknowledges it (ErrTrigger); a level column that a
//     foreign key of the database maps onto a column carrying no key of
//     that level, or a second column of one level that no foreign key
//     anchors, is refused (ErrLevelColumn), and so is a checked foreign
//     key besides the Parent whose column is named like a level and holds
//     that level's keys while the table reaches the level through its
//     Parent, undeclared (Taiga's tasks.project_id beside Parent
//     user_story_id: declare it in Levels);
//     every foreign key of the graph into a tenant-bound table must be a
//     constraint of the database, and the connection must enforce foreign
//     keys (ErrFKNotEnforced: SQLite PRAGMA foreign_keys, MySQL
//     foreign_key_checks, PostgreSQL session_replication_role); those keys
//     must reference a primary or unique key of the database (ErrPathKey);
//     a column whose kind the graph knows (integer or text) must have a
//     type of that kind (ErrTypeDrift); a table that exists must have every
//     level column and foreign-key column its tenant predicates read
//     (ErrScopeColumnMissing: a misspelt tenant column);
//     level columns and the columns of those keys must compare byte for
//     byte (ErrCollation: SQLite COLLATE NOCASE or RTRIM, a PostgreSQL
//     nondeterministic collation; on MySQL/MariaDB text level ids are
//     matched a second time as binary strings, so a case-insensitive
//     collation is harmless there). Tables the graph leaves out that look
//     tenant-bound, and graph tables or columns the database lacks, are
//     reported (CatalogReport, and a warning to Options.Logger), not refused.
//   - At every statement: every table reference of every statement kind
//     carries the predicate; grants within ancestors hold along the whole
//     path, in the guard and in the PostgreSQL policies alike (a grant
//     naming a level the schema lacks, or an id invalid for its level,
//     reaches nothing).
//   - On PostgreSQL, CheckRLS checks the installed row-level security and
//     the signed context's function and key table, and that the role can
//     use no partition, view, materialized view or SECURITY DEFINER
//     function that reaches a tenant-bound table around the policies
//     (postgres.ErrRLSBypassPath), at start-up, on every new pooled
//     connection and every 30 seconds (postgres.Options.Recheck).
//
// Still trusted, not checked:
//
//   - The catalog at start-up stays true: a migration that runs while the
//     DB is open (dropping a constraint, changing a collation) is not
//     noticed until the next Open or CheckCatalog.
//   - Which tables are tenant-bound and which columns carry which level:
//     at Open the catalog check catches a global table that references a
//     tenant table or has a level-named or reference-named column, not one
//     that holds tenant data under other names (a polymorphic reference). The conformance suite does not trust the
//     declaration either: its property 58 attributes every row to tenants
//     from the live catalog alone (level columns and every enforced
//     foreign key, both ways) and fails the run on any row, count or value
//     a tenant reads that belongs to others only, a table declared global
//     with a reason included, unless the run (not the schema) acknowledges
//     the table as shared. Run it on your schema before shipping.
//   - Columns of unknown kind (no level, no declared type, no typed
//     referenced column) get their values as given; introspected graphs
//     carry every column's type. A type the catalog reports in words the
//     check does not classify (neither integer nor character) is not
//     compared.
//   - PostgreSQL foreign-key triggers disabled per table (ALTER TABLE ...
//     DISABLE TRIGGER ALL) and NOT VALID constraints with old violating
//     rows; MySQL tables whose engine ignores foreign keys show up as a
//     missing constraint and are refused.
//   - The data's own hierarchy. A grant within ancestors is tested at the
//     nearest column carrying each level; where a table repeats a level in
//     a column of its own that disagrees with its parent's, that column is
//     what is tested.
//
// And by design:
//
//   - A grant within ancestors does not make its levels' ids grantable on
//     their own: writing a level column that no foreign key covers (a root
//     row, or moving a row to another tenant id) needs a plain grant of
//     that id, and is refused (ErrNotFound/ErrOutOfScope) otherwise.
//   - Under PostgreSQL row-level security the policies enumerate the shapes
//     of grants within ancestors over the first postgres.MaxShapeLevels (6)
//     levels a table reaches; a grant naming a level beyond them admits
//     nothing there.
//   - Rows whose foreign keys dangle (possible only with enforcement off
//     before the DB was opened) may be treated differently by equivalent
//     predicate shapes; such a row is only ever matched through the level
//     ids its own columns name, never by another tenant's grant.
//   - A unique key shared by all tenants (one that does not include a
//     column that decides the row's tenant: a level column, or, on a
//     table without them, its Parent; a key through another checked
//     foreign key collides with the rows of other tenants that reference
//     the same row) reveals that a value exists elsewhere:
//     the insert fails with ErrConflict, on every engine. Open refuses
//     such a key (ErrSharedUnique) unless TableDef.SharedUnique
//     acknowledges it with what it reveals, and builder refuses upserts
//     whose conflict target is one. Primary keys are reported, not
//     refused (DB.UniqueOracles, and the log): make them per tenant, or
//     let the database generate the values.
//   - Open also refuses a foreign key of the database between tenant
//     tables that the graph does not declare (ErrUndeclaredFK), and a
//     trigger or (PostgreSQL) rule on a table of the graph that
//     TableDef.Triggers does not acknowledge (ErrTrigger): both move or
//     reference rows without the guard's predicates. MySQL lists a trigger
//     only to a role with the TRIGGER privilege on its table, so open as
//     a role that sees them. On PostgreSQL every guarded transaction pins
//     search_path (the connection's schemas, pg_temp last), so a temporary
//     table created by raw SQL on a pooled connection never shadows a
//     graph table.
//   - Global tables are read-only through the guard (ErrReadOnly) and
//     AppGrantDDL grants them SELECT only, unless TableDef.GlobalWritable
//     says why every tenant may write one.
//   - Columns an INSERT omits are not checked: a database DEFAULT that
//     points at another tenant's row would not be caught.
//   - A row of a table owned by reference that nothing references any more
//     (its last referencing row pointed elsewhere or deleted) can be
//     claimed by any tenant that knows its key, and then read: delete such
//     rows when they stop being referenced. A claim of a row that other
//     tenants reference fails exactly as a claim of a missing row does (the
//     same error, from the guard's check, before the database's foreign
//     key), so it reveals only that the key is not claimable, never by
//     whom or what.
//   - On MariaDB/MySQL under READ COMMITTED two tenants claiming the same
//     unreferenced row at the same instant can both succeed (the row is
//     then shared: readable by both, writable by neither).
//   - A consistency path into the row's own table (a self-reference) is
//     checked when written, not re-tested when other columns change.
//   - Under a scope of several grants the guard wants a written row's
//     checks to hold under one grant (internal/guard/pairing.go); on
//     PostgreSQL the policies, the second layer, test each reference
//     against the whole scope, so raw SQL as the application role under
//     such a scope can still join two of its tenants' rows. INSERT ...
//     SELECT checks each selected row against the whole scope.
package guardedsql
