// Package builder builds sealed, typed SQL statements over a declared
// schema graph, for package guardedsql to run under a tenant scope.
//
// # Schema graph
//
// A Schema declares tables, columns, primary and foreign keys, and how
// every tenant-bound table reaches the scope levels of package scope:
// through its own level columns (hotels.chain_id carries the "chain"
// level, hotels.id the "hotel" level) and/or a parent foreign key
// (rooms.hotel_id -> hotels, bookings.room_id -> rooms, payments.booking_id
// -> bookings), followed transitively to any depth. Global tables hold
// shared reference data and carry no scope. NewSchema resolves the paths at
// start-up and refuses a tenant-bound table with no path to a level, a
// cycle, an unknown name, a level column whose declared SQL type
// disagrees with the level's key type, or a foreign key into a
// tenant-bound table whose referenced columns are neither the primary key
// nor a unique key (TableDef.Unique; ErrFKTarget): otherwise a tenant could
// create a row with another tenant's key value and reach the other
// tenant's rows through it. A table declared Global that looks
// tenant-bound needs a GlobalReason (guardedsql checks this, with the rest
// of the graph, against the live catalog at start-up). The schema can be
// declared in Go (SchemaDef) or introspected from the database's catalog
// (keys, unique keys, types) and completed with a Tenancy (see
// guardedsql.IntrospectSQLite).
//
// # Statements
//
// Tables come only from the schema (sch.Table("bookings").As("b")), columns
// only from table references (b.Col("check_in")), predicates only from
// typed constructors (Eq, In, Between, Like, IsNull, And/Or/Not, InQuery,
// Exists). No method takes SQL text or a raw table name, and every value is
// a bind parameter; Build validates names against the schema and refuses
// anything it cannot account for.
//
// Values are typed by their column: where the schema knows a column's kind
// (a level column, a declared integer or character type in Types, or the
// column a foreign key references), a value compared with, assigned to or
// inserted into it is converted to that kind ("12" for an integer column
// becomes 12, 7 for a text column becomes "7") or refused at Build with an
// error naming the column (ErrType): the engine is never left to convert a
// column's values to compare them.
//
// Build issues sealed values: Query (SELECT with joins, subqueries, group
// by, order, limit/offset), Insert, Update and Delete. Their fields are
// unexported, the zero values are invalid, and only this package can make
// them. Each knows every table reference it contains, subqueries and joins
// included (Tables). SQL text is produced only by guardedsql, which adds
// the tenant predicates while rendering, through
// github.com/Masterminds/squirrel; quoting and placeholders follow the
// database dialect.
//
// # Writes
//
// InsertBuilder.Values may be called repeatedly: a multi-row insert, all
// rows or none. InsertBuilder.Select takes the rows from a guarded Query
// (INSERT ... SELECT), each checked like a row given to Values.
// Returning(cols...) on InsertBuilder, UpdateBuilder and DeleteBuilder makes
// the statement return the listed columns of the rows it wrote (read with
// guardedsql's DB.ExecReturning; Returns reports the list), which is how a
// caller learns a composite or generated key. OnConflict(cols...) turns an
// insert into an upsert: DoNothing, or DoUpdate(cols...) setting the listed
// columns to the values the insert proposed. Build refuses a Returning
// column the table does not have, a conflict target that is not exactly
// the primary key or a declared unique key, a DoUpdate of a level column
// or a tenant foreign key (an upsert never moves a row between tenants),
// and a Select whose column count differs from Columns.
//
// Builders (SelectBuilder and friends) are immutable values: each method
// returns a modified copy, so a base query can be shared and extended.
// Errors travel with the values and surface at Build.
package builder
