// Package sqlite is the SQLite dialect of guardedsql, for the pure-Go
// driver modernc.org/sqlite (driver name "sqlite").
//
// The scope document is bound once per statement in a CTE prefixed to
// every statement kind (SQLite accepts WITH before SELECT, INSERT, UPDATE
// and DELETE):
//
//	WITH "_tm_scope"("lvl", "id") AS (
//	    SELECT "l"."key", "i"."value" FROM json_each(?) AS "l", json_each("l"."value") AS "i")
//
// json_each yields JSON numbers as SQLite INTEGERs and JSON strings as TEXT,
// so an integer level compares integer to integer: SQLite's affinity rules
// never get to turn '12.0' or ' 12' into 12. Foreign-key paths use the
// uncorrelated IN form, which SQLite evaluates once per statement into an
// ephemeral index and can use to drive an index on the foreign-key column.
//
// A grant confined to ancestors is a tuple of the document's shape key
// ("chain/hotel"); the CTE yields it as one row whose "id" is the JSON
// array, and the test is a row-value IN over json_extract of its elements:
//
//	("h"."chain_id", "h"."id") IN (SELECT json_extract("id", '$[0]'),
//	    json_extract("id", '$[1]') FROM "_tm_scope" WHERE "lvl" = 'chain/hotel')
//
// The document is bound as TEXT: SQLite 3.45+ would read a BLOB as JSONB.
package sqlite
