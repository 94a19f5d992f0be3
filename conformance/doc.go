// Package conformance proves tenant isolation on a live schema: it seeds
// several tenants with overlapping ids and shared natural data into a
// scratch database, opens it through guardedsql as an unprivileged
// application role, and runs a table of security properties, each a
// subtest with a primary criterion on the rows returned and on side
// effects. Expected results are computed in Go from the seed data by the
// suite's own reading of the schema graph, never from the guard's output,
// and that reading is itself checked against ownership derived from the
// live catalog (property 58), so a wrong declaration cannot pass.
//
// It is the suite a tool author runs before shipping, and the one this
// module's CI runs on SQLite, PostgreSQL and MariaDB.
//
// # Running it
//
//	go test ./conformance
//
// runs the table once on the hotel example's schema (examples/hotel) in an
// embedded SQLite database, and says so. Environment variables choose
// other targets:
//
//	TENANTMCP_DSN                 one DSN, or several separated by spaces:
//	                              sqlite:…, postgres://user@host:port/db?…, mysql://user@tcp(host:port)/db
//	TENANTMCP_SCHEMA_GRAPH        a JSON schema graph (ReadGraph) to run on instead of the hotel
//	                              schema, with synthetic data (SyntheticSeed)
//	TENANTMCP_CONFORMANCE_SHARED  for a graph file's run, tables every tenant may read
//	                              (Target.Shared): "table=reason" items separated by ";"
//	TENANTMCP_CONFORMANCE_UNCHECKED for a graph file's run, foreign keys declared Unchecked that
//	                              a tenant's row may point across tenants through (Target.Unchecked):
//	                              "table.column=reason" items separated by ";"
//	TENANTMCP_CONFORMANCE_REPS    repetitions, each in a new random order (default 1)
//	TENANTMCP_CONFORMANCE_SEED    the order seed (default from the clock; always printed)
//	TENANTMCP_CONFORMANCE_SUMMARY also write the summary table to this file
//	TENANTMCP_CONFORMANCE_MUTATE  break this table for every Run of the test binary (the guard
//	                              drops its tenant predicate; PostgreSQL: its RLS too), in any
//	                              module's tests built with -tags tenantmcp_faults: watch the
//	                              suite fail (see Mutate)
//
// For example, the CI run:
//
//	TENANTMCP_DSN='sqlite: postgres://postgres@127.0.0.1:5432/test?sslmode=disable mysql://root@tcp(127.0.0.1:3306)/test' \
//	TENANTMCP_CONFORMANCE_REPS=5 go test -tags tenantmcp_faults -count=1 -v ./conformance
//
// (the tag compiles in the fault hook of the mutation check, below).
//
// After the tests, a summary table (property × engine → passed/run, with
// the reasons for skips and the first failure messages) is printed to
// standard output. go test shows a passing package's output only with -v
// (or when run in the package directory); TENANTMCP_CONFORMANCE_SUMMARY
// keeps it in a file either way.
//
// # What is created, and where
//
// The suite never reads or writes the database a DSN names beyond
// connecting to it, and never touches existing rows. It creates, and drops
// at the end:
//
//   - SQLite: a new database file in a new temporary directory (a
//     sqlite: DSN selects the engine only).
//   - PostgreSQL: a database tm_conf_<random>, owned by the DSN's role,
//     which must be a superuser (or BYPASSRLS with CREATEDB and
//     CREATEROLE) since it seeds the tables and reads them whole; a login
//     role tm_conf_app_<random>, NOSUPERUSER NOBYPASSRLS, with DML rights
//     only, as which the guard connects; row-level security is installed
//     as the owner with guardedsql/postgres.ApplyRLS. Property 17 briefly creates a
//     BYPASSRLS role as well, and tampers with (then re-applies) the
//     policies of the scratch database.
//   - MySQL/MariaDB: a database tm_conf_<random> and a user
//     tm_conf_app_<random>@'%' with DML rights on it only, as which the
//     guard connects.
//
// After every property the whole scratch database is compared with the
// seed (the owner's view, hashed table by table); a property that left a
// change behind fails, and the database is re-created before the next one.
//
// # Properties
//
// Tenants are the [Target]'s (the hotel run uses three chains, two sibling
// hotels of one chain, and a scope uniting a chain with a hotel of another
// chain), or derived from the data. "Oracle" below means the rows the
// tenant may see according to the seed data.
//
//	 1 Scoped read: for every tenant and tenant-bound table, the keys read equal the oracle's.
//	 2 Cross-tenant id in WHERE: another tenant's key, foreign-key value or level id finds
//	   nothing (QueryRow: ErrNotFound); an IN list of foreign keys and one own key returns it alone.
//	 3 Joins: inner and left joins along every foreign key, joins along whole scope paths
//	   (payments → bookings → rooms → hotels) and self-joins on values shared across tenants
//	   (guest names) return exactly the oracle's pairs; a left join shows a foreign parent as NULL.
//	 4 Subqueries: IN, correlated EXISTS and NOT IN over parent/child pairs equal the oracle;
//	   an IN subquery aimed at foreign parents returns nothing.
//	 5 Aggregates: COUNT(*), COUNT(DISTINCT parent), GROUP BY parent with HAVING, MIN/MAX of
//	   integer keys and SUM of an integer column equal values computed from the tenant's rows.
//	 6 Pagination: ORDER BY key LIMIT/OFFSET pages partition the tenant's rows (in key order for
//	   integer keys); ORDER BY key DESC LIMIT 1 is the tenant's largest key.
//	 7 UPDATE of foreign rows: 0 rows affected, ExpectOne ErrNotFound, only the own row of a mixed
//	   key list changes (rolled back), an own row cannot move under a foreign parent or level id.
//	 8 DELETE of foreign rows: 0 rows affected and no error (a constraint error would mean the
//	   engine tried), ExpectOne ErrNotFound, only the own row of a mixed key list (rolled back).
//	 9 INSERT under a foreign parent (or referencing any foreign tenant row, from a root's foreign
//	   keys too): refused by the guard in the same words as the same INSERT naming a key no row
//	   has, no row created, a two-row insert with one such row creates neither; the same row under
//	   own parents is accepted (control, rolled back). Also fails on every foreign key declared
//	   Unchecked into a tenant-bound table that lets a tenant reference another's row, unless the
//	   run acknowledges it (Target.Unchecked), and on every column the live catalog takes for a
//	   level column (named like one) that the graph leaves undeclared and the guard lets a tenant
//	   fill with another tenant's id (writes rolled back).
//	10 INSERT of a root row whose level ids are not granted: refused, no row; accepted under a
//	   scope that grants its ids (control, rolled back).
//	11 Hierarchy: an upper-level grant reads the oracle's rows, which include exactly the union of
//	   what its children's grants read; a lower-level grant reads only its own subtree.
//	12 Siblings: two lower-level ids under one upper id read none of each other's rows and cannot
//	   update or delete them.
//	13 Missing scope: no scope, or the zero Scope, gives ErrNoScope for Query, QueryRow, Exec and
//	   Tx, and the statement observer (guardedsql.Options.Observer) sees zero statements; a grant at an
//	   undeclared level reads nothing.
//	14 Concurrency: 8 goroutines × 40 operations over random tenants and tables: every read equals
//	   the oracle, every foreign update is ErrNotFound; zero foreign rows.
//	15 Pooled context (PostgreSQL): on a one-connection pool, interleaved calls of different
//	   tenants (reads, refused writes, rolled-back transactions, cancelled calls) each see their
//	   own rows, and between calls the connection carries no scope (empty setting, raw reads empty).
//	16 RLS for raw SQL (PostgreSQL): as the app role without the guard, no scope reads zero rows;
//	   a tenant's scope, signed for the transaction with the scratch key (postgres.SignScope),
//	   set in a transaction reads exactly the oracle's rows and cannot update
//	   foreign rows or insert under foreign parents; after COMMIT the scope is gone.
//	17 Start-up check (PostgreSQL): guardedsql/postgres.CheckRLS passes for the app role and refuses, with
//	   the specific error, a superuser, a BYPASSRLS role, a dropped policy, unforced and disabled
//	   row-level security, an extra permissive policy and a function the policies call whose body
//	   was replaced (one admitting everything); postgres.New opens nothing then.
//	18 Coverage: every tenant-bound table was queried by some property of the repetition and
//	   holds rows of at least two tenants. It runs last in every repetition.
//	19 Tool inputs (needs Target.Tools): the tools register on a real server.Server, no listed
//	   input schema names a tenant key, and tenant-keyed inputs are refused with a
//	   *server.TenantInputError while a tenant-free control registers.
//	20 PII canaries (needs Target.Tools): calling the tools through the real server over HTTP with
//	   real signed tokens, as every tenant and caller role, no output or log contains a canary of
//	   another tenant or of a category the roles may not see; at least one allowed canary appears.
//	21 Path-consistent grants: for adjacent levels, a lower id granted within its own upper id
//	   (the group path .../upper/u/lower/l) reads the oracle's rows; granted within another upper
//	   id, or two such grants with swapped ancestors, it reads no row of any table, and cannot
//	   update or delete its subtree (ErrNotFound).
//	22 Per-grant reveal (needs Target.Tools): a token binding a revealing role to tenant A's grant
//	   (role-suffixed group), with tenant B granted without a role and the same role in the
//	   token-wide roles claim, shows none of B's canaries; controls: A alone with the role, and A
//	   and B both with it, show their canaries.
//	25 Nullable composite FK: on a fixture of its own (tables g25_*, created and dropped by the
//	   property), a level column covered by a composite tenant foreign key with a NULL part cannot
//	   move a row into, or plant one in, another tenant by UPDATE or INSERT (chain writer, hotel
//	   writer; PostgreSQL: guard and RLS WITH CHECK); an own row with the NULL part is accepted.
//	26 Path keys: a foreign key into a tenant-bound table onto a non-unique column is refused by
//	   builder.NewSchema (ErrFKTarget) and, when the graph claims a unique key the database
//	   lacks, by Open (guardedsql.ErrPathKey).
//	27 Catalog drift: guardedsql.CheckCatalog finds the target's graph and catalog in agreement
//	   (no error, no unlisted tenant-looking table, nothing missing); a table wrongly declared
//	   global (it references a tenant-bound table, names one without a foreign key, plainly, behind
//	   a prefix or as a polymorphic _type/_id pair, or is the tenants' own table) is refused at Open
//	   with ErrGlobalDrift, and a level column the foreign keys show to hold another table's ids
//	   (a project id declared a company column, a second company column), or a column holding the
//	   company's keys left undeclared beside the Parent (a task's company_id), with ErrLevelColumn; if
//	   either were not, the property reports the other tenant's rows it reads.
//	28 Collation: a level column with a case-insensitive collation (SQLite NOCASE, a PostgreSQL
//	   nondeterministic ICU collation) is refused at Open (ErrCollation); on MySQL/MariaDB, where
//	   it is accepted, a grant for "ACME" reads none of tenant "acme"'s rows.
//	29 Typed values: a value that cannot be of its column's kind is refused at Build
//	   (builder.ErrType); an integer 7 for a text key never matches "7eleven" (MySQL's coercion),
//	   plants no row under another tenant's key "7", and draws no error quoting a stored key.
//	35 Signed context (PostgreSQL): raw SQL as the app role that sets the scope itself (unsigned,
//	   at session level, with a made-up MAC, or a signed value replayed from another transaction
//	   or connection) reads zero rows of every table; the value signed for its own transaction
//	   reads exactly the oracle's rows.
//	36 Engine errors: deleting an own row that own child rows reference makes the engine refuse;
//	   tool code gets guardedsql.ErrReferenced as an *EngineError, with no engine text and no
//	   value of the row.
//	37 Policy drift (PostgreSQL): on an RLS-only DB re-checking every 150 ms, the owner replaces a
//	   policy by USING (true); one interval later every call fails with ErrRLSUnsafe naming the
//	   table, a log record says so, and after re-applying the policies the DB serves again.
//	38 Unique oracle: a child table's single-column primary key (shared by all tenants) is listed
//	   by DB.UniqueOracles, and an insert under an own parent that reuses another tenant's key
//	   fails with ErrConflict carrying none of that row's values.
//	42 Union branches: for every tenant-bound table read under two aliases, UNION ALL returns each
//	   own key exactly twice and nothing else, UNION and INTERSECT the oracle's keys, EXCEPT
//	   nothing (INTERSECT and EXCEPT skipped on a server that lacks them).
//	43 CTE bodies: a table read only through a CTE, through a CTE read by a second CTE, and
//	   through a derived table returns exactly the oracle's keys.
//	44 Window partitions: for every table with a single integer key, ROW_NUMBER and a running SUM
//	   ordered by key, COUNT(*) OVER (), RANK and COUNT(*) partitioned by the scope-parent column,
//	   and a scalar subquery counting the table equal the oracle over the tenant's rows: a foreign
//	   row would shift a row number, a rank, a running sum or a count.
//	45 Ambiguous matches: with two root grants A and B and, per tenant-bound table, one
//	   predicate naming a row of each (what an id shared by two companies names on composite
//	   keys), QueryRow fails with guardedsql.ErrAmbiguous and scans nothing, ExpectOne UPDATE and
//	   DELETE fail with it and change neither row (also inside Tx, which carries on); as A
//	   alone QueryRow reads A's row and the update affects one row.
//	46 Narrowing never widens: every tenant (and a union of two root grants), narrowed with
//	   scope.Scope.Narrow to each of its grants, reads exactly the oracle's rows of that grant
//	   on every table; narrowed to any other grant of the seed (another tenant, an ancestor, a
//	   made-up id) it gets scope.ErrNotGranted and a zero scope, with which nothing is sent.
//	47 Upsert on a foreign conflict: on the same kind of table, an upsert under an own parent whose
//	   key is another tenant's row's fails with ErrNotFound, the very error of an upsert under a
//	   foreign parent, and changes nothing; DO NOTHING on that key affects 0 rows, as on an own
//	   key; the upsert of an own key (rolled back) updates the row and returns its new value.
//	48 No abandoned call or busy pool stops other tenants (PostgreSQL): with the row-level
//	   security re-check due, a call whose context is already cancelled fails on its own and
//	   another tenant's next call reads exactly its rows; on a pool of two connections held by
//	   four workers' transactions back to back for eight re-check intervals, no statement is
//	   refused and each reads exactly its tenant's rows (the check runs on its own goroutine
//	   and finds a connection between them); no failed or expired check is logged.
//	58 Catalog oracle: for every table of the graph, global ones included, and every tenant,
//	   a guarded SELECT of all its columns and its COUNT(*) include no row that the live
//	   catalog attributes to other tenants only, MIN and MAX of every integer and text column
//	   are values a row not given to other tenants holds, and the graph's own reading of
//	   what the tenant sees holds no such row either; property 20 takes a canary's owner
//	   from both readings. Ownership comes from the catalog and the rows alone, never from
//	   the declared graph: a row owns the (level, id) pairs of its level columns; a row that
//	   references owning rows through enforced foreign keys owns their pairs too, transitively
//	   (a row with several paths belongs to every tenant one of them leads to); a row owning
//	   nothing that owning rows reference owns their pairs (owned by reference: an address
//	   belongs to the stores whose customers point at it; so does a country), and a row that
//	   still owns nothing (nothing owning references it) owns the pairs of the rows it references
//	   (a huddle whose recipient a realm's rows point at is the realm's, even declared global). A row's own level column decides its id
//	   of that level: a path does not add another (a message whose realm_id says realm 1 is
//	   realm 1's alone, whoever its sender). Which catalog
//	   columns carry a level: Target.LevelColumns, or by default every level column the graph
//	   declares plus every column of the database named like one that is not the whole
//	   primary key of its table (every store_id carries "store"); foreign keys carry it on
//	   regardless of the graph, and so do a global table's columns named like references with
//	   no foreign key and its polymorphic references (item_type/item_id, followed row by row to
//	   the table each type value names). A table the run acknowledges as shared (Target.Shared, with a
//	   reason: the run's option, not the schema's) is exempt; the summary prints each
//	   acknowledgement. A tenant table declared global, with a GlobalReason or not, fails.
//	59 No vacuous pass (runs last): every tool call a property makes is recorded per caller
//	   (tenant × role set); a caller whose calls mostly failed (HTTP 403 or 429, a closed
//	   session, a tool or internal error) fails the property itself with "vacuous: N of M
//	   calls as WHO failed", and P59 re-checks the repetition and that property 20 made
//	   successful calls as every tenant with every caller role set. A session the server
//	   closes after a refused call is reopened for the next call.
//	60 Typed seeds: in every primary or declared unique key of a tenant-bound table, a column
//	   whose catalog type is a timestamp, date, decimal or UUID gets fresh values of that type
//	   from the write controls (2037 timestamps and dates, decimals above the table's largest,
//	   UUIDs), and every tenant's copy of an own row is accepted (rolled back). SyntheticSeed
//	   types generated values by TableDef.Types the same way.
//	61 Mutation check on your schema: Mutate (below).
//	51 A migration's lock neither hangs calls nor lets them through unverified (PostgreSQL): while
//	   another connection holds ACCESS EXCLUSIVE on a tenant-bound table in an open transaction
//	   and the re-check is due, calls (of another table) fail within 3s with the retryable
//	   unavailable error (guardedsql.IsUnavailable) and none is served, and within six calls
//	   over 1.2s one of the refusals says the check waited too long for a lock; once the lock
//	   is released the same call reads exactly its rows again.
//
// Properties 15–17, 35 and 37 are skipped on SQLite and MySQL/MariaDB, which have no
// row-level security: their isolation rests on the guard's predicates,
// which the other properties test. 19, 20 and 22 are skipped for targets
// without tools.
//
// # Your own schema
//
// Run is the entry point: give it your schema graph, a Seed function that
// creates your tables in the scratch database and inserts rows for at
// least three tenants (returning them as a [Dataset]), and optionally your
// tools. See ExampleRun. A graph alone can be checked with synthetic data
// ([SyntheticSeed]) or, without Go, with TENANTMCP_SCHEMA_GRAPH.
//
// Tenant-prefixed composite keys work as they are: a primary key
// (company_id, id) with ids repeating in every company, and composite
// foreign keys (company_id, campaign_id) → campaigns(company_id, id).
// Declare your unique constraints in the graph ([builder.TableDef.Unique]),
// per-tenant ones such as UNIQUE(company_id, email) included: the write
// properties' controls (9 and 10) insert a copy of an own row, and give the
// copy new values in the primary-key and unique-key columns that no
// foreign key or level fixes; an undeclared unique key makes the control
// fail with the database's constraint error. Such columns are also never
// chosen as the column the write properties assign ([Target.Mutable]).
//
// examples/usermodule in this repository is a module of its own, built
// against this one with a replace directive as a user's application is:
// an ad-analytics schema (companies → campaigns → ads → clicks, keys
// (company_id, id), per-company unique names and e-mails) whose tests run
// Run with their own seed and tools, [Run] with [SyntheticSeed], and the tools
// over HTTP with tokens from claims/claimstest, importing public packages
// only. TestUserModule runs its go test ./... from this package's tests
// (skipped with -short).
//
// # Mutation check
//
// A suite that cannot fail proves nothing. Mutate runs the check on your
// target from your own module's tests:
//
//	func TestMutation(t *testing.T) {
//		conformance.Mutate(t, myTarget(), conformance.MutateOptions{})
//	}
//
// It runs every property with nothing broken (all must pass), then breaks
// each tenant-bound table in turn — the guard drops its tenant predicate
// through a fault hook that works in test binaries only, and on PostgreSQL
// the owner disables its row-level security, which alone would still
// confine the app role — runs every property again, and fails unless
// properties 1 and 58 ([MustCatch]) catch every table; the matrix of which
// properties caught what is logged and returned. TENANTMCP_CONFORMANCE_MUTATE
// does the same to every Run of a test binary, yours included, for one
// table and without assertions: the run is expected to fail.
// examples/usermodule's TestMutation is an example.
//
// The fault hook is compiled only with the build tag tenantmcp_faults, so
// that no program built without it (yours included) contains a fault
// check or links package testing. Run the mutation check with the tag:
//
//	go test -tags tenantmcp_faults -run TestMutation ./...
//
// Without it Mutate skips its test with that reason and that command, and
// a Run with TENANTMCP_CONFORMANCE_MUTATE set fails saying so.
//
// The suite's own fixes of issue 25 are load-bearing, and
// TestSuiteFixesAreLoadBearing shows it on a store-franchise fixture
// (stores as tenants; customers, staff and inventory carry the store; a
// rental references a copy, a customer and a clerk; a payment the rental,
// the customer and the clerk; addresses referenced from customers, staff
// and stores; films global): with property 58 switched off, payment
// declared global with a GlobalReason passes; with the vacuous-pass rule
// off, a customer column left untagged passes behind a role-gated first
// call that closes the clerk's session; with typed seeds off, property 60
// and on PostgreSQL and MySQL/MariaDB property 9's control fail on the
// timestamp, date, decimal and UUID unique keys. TestFranchiseMistakes
// asserts each mistake fails the run naming the table and the column, and
// TestFranchiseClerkPathRefusedAtOpen that omitting the clerk path of
// rentals and payments is refused at Open.
//
// This module's tests include, with the tag,
// TestMutationIsCaught, which makes the guard drop the tenant predicate
// of one table at a time (internal/guardfault, a test-only hook) and
// asserts that the properties fail; TENANTMCP_CONFORMANCE_MUTATE=<table>
// shows the same on a whole run. It also removes, one at a time, the check
// of grants along the whole group path (P21 catches it), the binding of
// roles per grant (P22), and each check that closes a modelling gap
// (guardfault.Disable: nullable composite keys, path keys, the catalog
// comparison, collations, typed values; properties 25–29), the guard of
// statements holding a window function or a scalar subquery (P44), the ambiguity
// check of one-row statements (P45) and the check that a narrowing names
// one of the scope's own grants (P46). Removing the
// collation check changes nothing on MySQL/MariaDB (the guard compares text
// level ids as binary strings there), so P28 is not required to fail on it.
// It also returns engine errors untranslated, and on PostgreSQL disables a
// table's row-level security, replaces the verifying function of the
// signed context by one that ignores the signature, and switches the
// re-check off; a DB that refuses to serve because its re-check noticed
// the fault counts as failing closed, not as a leak.
// Summary, on SQLite, PostgreSQL and MariaDB alike:
//
//	fault removed                                    caught by
//	guard predicate of one table (PostgreSQL: + RLS)  1 2 5 6 7 8 58 (9)
//	grants checked along the whole path (ancestors)  21
//	roles bound per grant (roles)                    22
//	nullable composite keys (nullable_fk)            25
//	path keys onto unique keys (path_key)            26
//	graph against the live catalog (catalog)         27
//	byte-exact collations (collation)                28 (not MySQL/MariaDB: nothing to catch)
//	values typed by their column (typed)             29
//	ambiguous matches fail (ambiguous)               45
//	narrowing only to own grants (narrow_check)      46
//	guard of windowed statements (windows)           44 (not PostgreSQL: RLS still confines)
//	engine errors untranslated (raw-errors)          36 38
//	guard of later set branches (set_branch)         42 (not PostgreSQL: RLS still confines)
//	guard of CTE bodies (cte_body)                   43 (not PostgreSQL: RLS still confines)
//	conflict row of an upsert in scope (upsert-conflict) 47 (not PostgreSQL: RLS still filters)
//	PostgreSQL: a table's row-level security off     16 17 35 37
//	PostgreSQL: verifying function ignores the MAC   17 35
//	PostgreSQL: re-check off (no-recheck)            37
//	PostgreSQL: re-check run by the calls, busy pool fails closed (recheck_off_caller) 48
//	undeclared FKs between tenant tables (undeclared_fk) 54
//	global tables read-only (global_read_only)       55
//	shared unique keys refused (shared_unique)       56
//	global tables named like references (global_named_ref, global_polymorphic) 27
//	the tenants' own table declared global, by key or by name (global_root) 27
//	level columns anchored by foreign keys (level_anchor) 27
//	claims need the row to exist (by_ref_exists)     52
//	PostgreSQL: WITH CHECK tests the parent beside level columns (level_parent_check) 16 (TestLevelParentCheckCaught: the hotel has no such table)
//	PostgreSQL: WITH CHECK tests each level column on its own (level_column_check) 16
//	PostgreSQL: WITH CHECK tests keys up the hierarchy (up_key_check) 16 (TestUpKeyCheckCaught: the hotel has none)
//	PostgreSQL: WITH CHECK wants a visible row for a composite key's tuple (composite_level_check) 16 (TestCompositeLevelCheckCaught: the hotel has none)
//	PostgreSQL: WITH CHECK tests keys into the table itself (self_key_check) 16 (TestSelfKeyCheckCaught: the hotel has none)
//	triggers and rules refused (triggers)            57
//	foreign-key actions refused (fk_actions)         57
//	acknowledged actions only on the deciding key (fk_action_ack) 57
//	PostgreSQL: search_path pinned (search_path)     57
//	PostgreSQL: re-check's lock wait unbounded (check_lock_bound) 51
//	encoded scope cached by its levels alone (scope_cache_key) 1 and every read property
//	SQLite: rendered text cached without the grant shape (render_cache_key) 1 (only SQLite's renders are cached)
package conformance
