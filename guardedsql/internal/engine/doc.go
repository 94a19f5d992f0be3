// Package engine is the seam between guardedsql and a database engine,
// engine-neutral itself: guardedsql, the guard and every engine import it,
// it imports no engine. Adding an engine means implementing Dialect (SQL
// spelling and scope expansion, in guardedsql/internal/engine/<engine>)
// and providing a Pool (execution), and a public package that registers a
// guardedsql.Engine (guardedsql.Register) whose Open hands a Conn to
// guardedsql.OpenConn; the builder and the guard are untouched. Checks
// guardedsql runs on every engine at start-up read the catalog through the
// optional interfaces CatalogChecker, UniqueLister and TriggerLister.
//
// # Design summary
//
// Statements reach the database only as package builder's sealed values.
// guardedsql takes the scope from the context (none: ErrNoScope, nothing
// sent), encodes it with EncodeScope, and hands the statement to the guard
// (guardedsql/internal/guard), which renders SQL (SELECTs directly, writes
// through squirrel) and, for every tenant-bound table reference (FROM,
// JOIN, subqueries, mutation targets), adds a predicate that follows the
// schema graph's foreign-key path to the tables carrying the scope levels:
//
//	"b"."room_id" IN (SELECT "_tm1"."id" FROM "rooms" AS "_tm1"
//	    JOIN "hotels" AS "_tm2" ON "_tm2"."id" = "_tm1"."hotel_id"
//	    WHERE (<InScope("_tm1"."hotel_id", hotel)> OR <InScope("_tm2"."chain_id", chain)>))
//
// (or the equivalent correlated EXISTS when PathStyle says so). Only the
// levels the scope actually holds grants at are tested, so the text
// depends on the scope's set of levels but never on its ids. For
// references that must match (FROM, inner joins) the guard prefers two
// equivalent shapes that planners handle better, whatever the dialect: no
// predicate at all when the statement already inner-joins the reference to
// its guarded scope parent on the foreign key, else the primary-key path as
// inner joins with the level test in WHERE - the shape an expert writes:
//
//	FROM "bookings" AS "b" JOIN "rooms" AS "_tm1" ON "_tm1"."id" = "b"."room_id"
//	    JOIN "hotels" AS "_tm2" ON "_tm2"."id" = "_tm1"."hotel_id"
//	WHERE (...) AND (<InScope("_tm2"."chain_id", chain)>)
//
// A dialect only supplies the leaf test (InScope) and the document's
// transport (Prelude or Session); the shapes are dialect-independent.
//
// The scope travels as ONE bound parameter, the typed scope document built
// by EncodeScope: a JSON object from level name to an array of ids, e.g.
// {"chain":["acme"],"hotel":[12,17]}. Ids are typed per the level's
// KeyKind (JSON numbers for IntKey, strings for TextKey); a grant id that is
// not a canonical value of its kind is dropped, so it matches nothing and is
// never coerced (MySQL's JSON_TABLE would silently turn "12abc" into 12).
// Levels unknown to the schema are ignored. Session also receives the
// scope itself; PostgreSQL's sets this typed document (not the raw
// scope.Scope.GrantJSON) as its transaction-local setting, so that the
// row-level security policies read ids already validated per key type and
// cast them without error.
//
// How the document is expanded is the dialect's business:
//
//   - Prelude returns text placed before every top-level statement and
//     carrying the parameter. SQLite uses a CTE:
//     WITH "_tm_scope"("lvl","id") AS (SELECT l.key, i.value FROM json_each(?) l, json_each(l.value) i)
//     and InScope renders x IN (SELECT "id" FROM "_tm_scope" WHERE "lvl" = 'hotel').
//   - A dialect that cannot prefix every statement kind with WITH (MariaDB
//     before 11 cannot for UPDATE/DELETE) returns a zero Prelude and makes
//     InScope carry the parameter itself, e.g.
//     EXISTS (SELECT 1 FROM JSON_TABLE(?, '$.hotel[*]' COLUMNS (id BIGINT PATH '$')) s WHERE s.id = x)
//     with the document as its argument; it is then bound once per use.
//     (MySQL's dialect tests a level holding exactly one id as a
//     one-value range of that typed id, x BETWEEN ? AND ?, which MariaDB
//     plans as an index lookup without the semi-join's duplicate weedout;
//     the text then depends on one-vs-several, still never on the ids.)
//   - A dialect may bind the granted ids itself: PostgreSQL's InScope
//     renders x = ANY (?::bigint[]) (or text[]) with the level's ids as
//     one typed array parameter, while its Session puts the document in
//     the transaction-local setting '<ns>.scope' for the row-level
//     security policies. The guard's predicates and the policies thus
//     share no mechanism.
//
// Level names and SQL identifiers that appear in the text are validated
// schema constants (ASCII identifiers), never request data.
//
// # Execution
//
// Pool, Tx and Rows are the minimal execution surface guardedsql needs.
// StdPool adapts *sql.DB (SQLite, MySQL); postgres/pgxdriver.NewPool adapts a
// pgxpool.Pool. SQL handed to a Pool is final: placeholders already in the
// dialect's format. When NeedsTx is true every guarded statement runs in
// its own transaction that first calls Session; rows returned from such a
// transaction commit it when closed.
//
// Optional interfaces let an engine do better than the common ground:
// ReadEnforcer (the engine enforces the read predicates itself: PostgreSQL
// RLS-only), Returner (insert ids through RETURNING), SingleBeginner (one
// statement and its session setup in one round trip).
//
// # Introspection
//
// Introspect reads tables, columns, primary keys and foreign keys from the
// catalog (SQLite: sqlite_schema and the table_info / foreign_key_list
// pragmas; PostgreSQL and MySQL: InformationSchema in this package).
// Tenancy (which columns carry levels, which tables are global) cannot be
// introspected; builder.Tenancy supplies it.
package engine
