// Package hotel is the example application of tenantmcp: a hotel-chain MCP
// tool server, kept as a package so that its tests, the conformance suite
// and the bench can run the real thing in process.
//
//   - schema.go: the schema graph (chains → hotels → rooms → bookings →
//     payments, guests at a hotel, countries as global data) and its DDL for
//     SQLite, PostgreSQL and MySQL/MariaDB;
//   - seed.go: deterministic demo data whose chains share names, e-mails,
//     phone numbers and room numbers and interleave ids, so tests can compute
//     every expected row in Go;
//   - tools.go: the tools (search_availability, list_bookings, get_booking,
//     create_booking, cancel_booking, find_guest, revenue_report), written
//     only with package builder and a guardedsql.DB, PII tagged for redact,
//     no tenant in any input; cancel_booking and revenue_report require the
//     manager role (server.Require), so the front desk neither sees nor
//     calls them;
//   - surface.go: the resources hotel://hotels, hotel://bookings/{id} and
//     hotel://rooms/{kind}, the guest_briefing prompt, and completions of
//     room kinds and guest names, on the same path as the tools;
//   - sinks.go: send_confirmation_email and post_webhook, which only record
//     to an in-memory outbox, judged by the flow policy flow-policy.json
//     (a declassification needs the user's consent, asked through MCP
//     elicitation);
//   - app.go: New wires database, verifier (a real identity provider, or
//     the loopback development issuer), redaction policy, flow checker and
//     tools into a server.Server, with the deployment's limits and
//     timeouts (Limits: pool size and wait, call/statement/lock timeouts,
//     per-tenant and per-subject concurrency and rates, HTTP timeouts,
//     sessions, JWKS refresh), each a flag of the command; on PostgreSQL
//     the flow taints live in the database (package flow/pgtaint), so
//     replicas share them;
//   - setup.go: SetupDemo, the migration for a live PostgreSQL (with
//     row-level security, an application role and the taint table) or
//     MariaDB database;
//   - load_test.go: the noisy-tenant load/fault test on PostgreSQL.
//
// The command in the parent directory (go run ./examples/hotel) runs it.
package hotel
