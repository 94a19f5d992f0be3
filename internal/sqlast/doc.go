// Package sqlast holds the data shared by package builder and package
// guardedsql: the resolved schema graph (tables, levels, foreign keys and
// each tenant-bound table's transitive path to the scope levels) and the
// abstract syntax of the sealed statements builder issues.
//
// It is module-internal on purpose. Package builder is the only code that
// constructs these values, and it hands them out wrapped in sealed types
// with unexported fields; package guardedsql reads them back through
// Unseal, which builder installs at init. Nothing here renders SQL: that is
// guardedsql's job, so that every byte of SQL text sent to a database
// passes through the code that appends the tenant predicates.
package sqlast
