// Package builder builds sealed, typed SQL statements over a declared
// schema graph, for package guardedsql to run under a tenant scope.
//
// # Schema graph
//
// A [Schema] declares tables, columns, primary and foreign keys, and how
// every tenant-bound table reaches the scope levels of package scope:
// through its own level columns (hotels.chain_id carries the "chain"
// level, hotels.id the "hotel" level) and/or a parent foreign key
// (rooms.hotel_id -> hotels, bookings.room_id -> rooms, payments.booking_id
// -> bookings), followed transitively to any depth. Global tables hold
// shared reference data and carry no scope. [NewSchema] resolves the paths at
// start-up and refuses a tenant-bound table with no path to a level, a
// cycle, an unknown name, a level column whose declared SQL type
// disagrees with the level's key type, or a foreign key into a
// tenant-bound table whose referenced columns are neither the primary key
// nor a unique key ([TableDef.Unique]; [ErrFKTarget]): otherwise a tenant could
// create a row with another tenant's key value and reach the other
// tenant's rows through it. A table declared Global that looks
// tenant-bound needs a GlobalReason (guardedsql checks this, with the rest
// of the graph, against the live catalog at start-up). The schema can be
// declared in Go ([SchemaDef]) or introspected from the database's catalog
// (keys, unique keys, types) and completed with a [Tenancy] (see
// sqlite.Introspect). Level names follow [scope.ValidLevel].
//
// # Statements
//
// Tables come only from the schema (sch.Table("bookings").As("b")), columns
// only from table references (b.Col("check_in")), predicates only from
// typed constructors (Eq, In, Between, Like, IsNull, And/Or/Not, InQuery,
// Exists). No method takes SQL text or a raw table name, and every value is
// a bind parameter; Build validates names against the schema and refuses
// anything it cannot account for. Command tenantmcp-gen generates typed
// accessors from a live catalog (b.CheckIn() for b.Col("check_in")), so
// that a misspelt column is a compile error rather than a Build error.
//
// Values are typed by their column: where the schema knows a column's kind
// (a level column, a declared integer or character type in Types, or the
// column a foreign key references), a value compared with, assigned to or
// inserted into it is converted to that kind ("12" for an integer column
// becomes 12, 7 for a text column becomes "7") or refused at Build with an
// error naming the column ([ErrType]): the engine is never left to convert a
// column's values to compare them.
//
// Build issues sealed values: Query (SELECT with joins, subqueries, group
// by, order, limit/offset), [Insert], [Update] and [Delete]. Their fields are
// unexported, the zero values are invalid, and only this package can make
// them. Each knows every table reference it contains, subqueries and joins
// included (Tables). SQL text is produced only by guardedsql, which adds
// the tenant predicates while rendering, through
// github.com/Masterminds/squirrel; quoting and placeholders follow the
// database dialect.
//
// # Read structure
//
// Beyond one SELECT, a Query can hold (compound.go):
//
//   - derived tables: [Derived](q, "d") is a TableRef over q's result,
//     whose columns are q's result names (d.Col("total") is checked);
//   - non-recursive common table expressions: [With]("name", q) read
//     through [CTE.Ref] or [CTE.As], declared on the outermost query with
//     [SelectBuilder.With]; a CTE's body reads only the CTEs before it, so
//     no RECURSIVE is ever needed (or offered), and a CTE may not take a
//     schema table's name;
//   - set operations: [Union], [UnionAll], [Intersect], [Except] and their
//     chaining methods give a [SetBuilder]; the branches must have as many
//     result columns as the first (checked at Build), ORDER BY ([SetBuilder.Asc],
//     [SetBuilder.Desc]), LIMIT and OFFSET apply to the whole, and
//     INTERSECT is not mixed with other operators (engines disagree on its
//     precedence);
//   - row locks: [SelectBuilder.ForUpdate] and [SelectBuilder.ForShare],
//     refused with DISTINCT, GROUP BY, HAVING or aggregates, and refused by
//     guardedsql outside a transaction;
//   - keyset pagination: [Keyset] pages in the order of its keys after a
//     [Cursor], an opaque encoding of the last row's key values. The
//     condition is expanded as k1 > v1 OR (k1 = v1 AND k2 > v2) ..., which
//     every engine runs whatever the keys' directions.
//
// Every table reference inside a derived table, CTE body or set branch is
// one of the statement's Tables, and guardedsql guards each of them as it
// guards a subquery's; a derived table or CTE reference itself is no
// schema table and carries no predicate of its own. A cursor is a
// position, not a permission: it carries values only, and a cursor forged
// from another tenant's row moves the page within the caller's own rows.
//
// # Expressions
//
// Beyond columns and aggregates, an Expr can be a bound value (Val),
// arithmetic (Expr.Add, Sub, Mul, Div with a number or a numeric Expr),
// Case().When(p, then).Else(v), Coalesce, NullIf, a Cast to a declared
// type (AsText, AsInteger, AsReal, AsDate), a built-in function (Lower,
// Upper, Length, Abs, Round, Extract, DateTrunc) or one registered in the
// schema (SchemaDef.Functions, called with Schema.Func), a JSON path read
// (JSONText, JSONNumber: keys are identifiers, spelled literally and
// checked twice), a window function (RowNumber, Rank, DenseRank, or an
// aggregate's Over, with Window().PartitionBy(...).OrderBy(...)) and a
// scalar subquery (ScalarQuery). They are usable in the select list,
// WHERE and HAVING comparisons, GROUP BY and ORDER BY; window functions
// only in the select list and ORDER BY. Expressions are typed where the
// schema says (Expr.Kind): arithmetic on a text column, a CASE mixing text
// and numbers, a function argument of the wrong kind are refused at Build
// (ErrType), as are an unknown function (ErrUnknownFunc) and a JSON key
// that is not an identifier. Each engine gets its own spelling from the
// guard (CAST(x AS CHAR) on MariaDB, CAST(x AS text) on PostgreSQL...); a
// registered function missing on the engine fails at render, naming both.
// Every table referenced inside an expression (a scalar subquery, an
// EXISTS in a CASE) is a reference of the statement, listed by Tables and
// confined by the guard like any other.
//
// UpdateBuilder.SetExpr assigns an expression over the target's own
// columns, computed by the engine: SET hits = hits + ? loses no increment
// under concurrency. It is refused on scope columns (ErrScopeColumn),
// whose new values the guard must check as bound values.
//
// # Time
//
// Time expressions are typed and portable across SQLite, PostgreSQL and
// MariaDB/MySQL, and work in UTC everywhere: Now (the statement's start,
// to the second) and Today; a time plus or minus an Interval (Expr.Add,
// Expr.Sub with Days, Hours, Minutes, Seconds or Months — a month's end is
// clamped, January 31 plus a month is February 28); DiffDays (calendar
// days between the UTC dates) and DiffSeconds (whole seconds, truncated);
// TruncDay and TruncMonth. They are usable wherever an expression is (the
// select list, WHERE, ORDER BY, UpdateBuilder.SetExpr); an INSERT's values
// stay bound values (pass a time.Time).
// Their operands are time Exprs (a column whose
// declared type is a date or time, or undeclared), time.Time values (sent
// in UTC) or ISO-8601 strings (parsed at Build). An interval added to a
// text or numeric column, or a difference of one, is refused at Build
// with ErrNotTime; an interval counted by anything but an integer with
// ErrType. Declare a date column's type in TableDef.Types where the engine
// stores it as text (SQLite), so Build can check it. "UTC everywhere":
// guardedsql sets the session time zone of every guarded statement on
// PostgreSQL and of the MariaDB/MySQL connections it opens to UTC, a time
// without a zone (DATE, DATETIME, SQLite text) is read as UTC, and
// guardedsql.Rows.Scan reads every date and time into a *time.Time (or
// **time.Time, *sql.NullTime) in UTC on every engine. On SQLite a
// time.Time is sent as "YYYY-MM-DD HH:MM:SS[.fraction]" UTC text (the form
// SQLite's date functions write), so stored, compared and computed times
// order as text as they do as times. Store dates and times in that same
// form (a date as "YYYY-MM-DD 00:00:00"): a date stored as bare
// "YYYY-MM-DD" is still read as a time.Time, but never equals a bound
// time.Time, so a date key read back and bound again would match nothing.
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
// Builders ([SelectBuilder] and friends) are immutable values: each method
// returns a modified copy, so a base query can be shared and extended.
// Errors travel with the values and surface at Build.
package builder
