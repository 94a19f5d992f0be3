// Package pgtaint keeps the taints of a flow.Checker in the application's
// PostgreSQL database, so that N replicas of a tenantmcp server behind a
// load balancer share them and a restart keeps them.
//
// A subject that reads guest data through one replica and calls a sink
// through another is judged with the same taint: every successful result's
// label is joined into one row per taint key (subject, and session under
// the "session" taint scope) in one transaction that commits before the
// server releases the result, and every sink call reads that row before
// its handler runs. A taint not used for the policy's taint.retain is
// dropped whole, as by the in-memory store.
//
// # Table and functions
//
// One table (default "tenantmcp_taint", in schema "public" unless
// qualified) and four functions named after it (_load, _lock, _put,
// _sweep), created by a role other than the application's with Install
// (or with the statements [InstallSQL] returns):
//
//	subject text, session text, taint jsonb, touched timestamptz,
//	retain interval, PRIMARY KEY (subject, session)
//
// The application role gets EXECUTE on the functions and nothing on the
// table ([Grant], or [GrantSQL]). The functions are SECURITY DEFINER,
// owned by the table's owner, with search_path pinned to pg_catalog,
// pg_temp; they let the caller read a taint and make it grow, nothing
// else: _put refuses a taint that is not a superset of the stored one
// (level, categories, origins, owners), and the only ways a taint is
// dropped — idle past retain, in _lock and _sweep — read the database's
// clock (a caller's "now" counts only when earlier) and the longest retain
// any join of the row asked for. So raw SQL run as the application role (a
// tool's injection, a compromised replica) cannot DELETE, UPDATE or
// TRUNCATE a subject's taint away and then send what it read to an
// outsider: the same threat model that made the row-level security scope
// context signed.
//
// [New] verifies this at start-up, as the role it connects as, and refuses
// to start (ErrConfig, naming the fix) if the role could write the table
// directly (INSERT, UPDATE, DELETE, TRUNCATE or TRIGGER on it or a column,
// through PUBLIC or a role it belongs to), owns it or belongs to its owner,
// owns its schema or may CREATE in it (and so could drop and replace the
// table), or if a function is missing, altered (its body or search_path
// differs from this version's), not SECURITY DEFINER, not owned by the
// table's owner, or not executable. A stored taint that does not decode
// (altered by someone with the owner's rights), and a table or function
// gone at run time, are errors: the checker fails closed.
//
// What the design does not cover: the table's owner (and a superuser) can
// still change anything — keep that role out of the application's
// configuration; and a row deleted by the owner reads as "never tainted"
// (there is no tamper-evident chain over the rows).
//
// It has no tenant column and no row-level security: it is keyed by the
// verified subject, the server reads only the row of the call's own
// subject, and tools cannot name it (the sealed builder knows only the
// schema's tables). On a distributed PostgreSQL (Citus) distribute it by
// subject, which every statement here filters on.
//
// Upgrading from an earlier version (which granted the application role
// SELECT, INSERT, UPDATE, DELETE on the table): run Install and Grant
// again as the owner; Install adds the retain column and the functions,
// Grant revokes the table privileges. Until then New refuses to start.
//
// # Consistency
//
// [Store.Join] locks the row (the _lock function's INSERT … ON CONFLICT DO
// UPDATE), merges with [flow.Taint.Join] and writes it back (_put) in the
// same transaction, so concurrent joins of one key from any number of
// replicas are never lost. JoinTx does the same inside a transaction the caller owns, for an
// application that writes its own record of the call in that transaction.
// Every error wraps [flow.ErrTaintStore], on which the checker fails closed:
// a sink call is denied and a result is withheld. Errors carry no DSN,
// subject or taint content. [Store.Ping] (the server's readiness check)
// calls the load function, so a dropped function or a lost grant shows
// there too.
//
// # Cost
//
// A sink call's check is one statement (the load function). The checker
// joins a result only when it adds to the taint, or re-exposes it more
// than flow's touch slack (at most 250 ms) after this replica last wrote
// or read it (see [flow.Call.Record]): a subject calling the same tools
// again sends a few statements per second, not one per call. A join the
// taint already holds is one statement (the load function marks the row
// used); one that grows it is that statement and two round trips (BEGIN
// with _lock, then _put with COMMIT).
//
// Without PostgreSQL (MariaDB, SQLite), replicas can share taints on Redis
// with server/redisstore.NewTaints, with the same semantics but without
// this protection against the application's own credentials.
package pgtaint
