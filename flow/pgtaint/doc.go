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
// # Table
//
// One table (default "tenantmcp_taint"), created by its administrator with
// Install (or with the DDL statements [InstallSQL] returns) and granted to
// the application role with [Grant]:
//
//	subject text, session text, taint jsonb, touched timestamptz,
//	PRIMARY KEY (subject, session)
//
// It has no tenant column and no row-level security: it is keyed by the
// verified subject, the server reads only the row of the call's own
// subject, and tools cannot name it (the sealed builder knows only the
// schema's tables). On a distributed PostgreSQL (Citus) distribute it by
// subject, which every statement here filters on.
//
// # Consistency
//
// [Store.Join] locks the row (INSERT … ON CONFLICT DO UPDATE … RETURNING),
// merges with [flow.Taint.Join] and writes it back in the same transaction,
// so concurrent joins of one key from any number of replicas are never
// lost. JoinTx does the same inside a transaction the caller owns, for an
// application that writes its own record of the call in that transaction.
// Every error wraps [flow.ErrTaintStore], on which the checker fails closed:
// a sink call is denied and a result is withheld. Errors carry no DSN,
// subject or taint content.
package pgtaint
