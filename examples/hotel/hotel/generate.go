package hotel

// The typed table accessors (tables_gen.go) are generated, as
// cmd/tenantmcp-gen does from a live database, from a fresh SQLite database
// that DDL(SQLite) creates; TestTablesGenCurrent fails when they are stale
// and rewrites them with -update.
//
//go:generate go test -run ^TestTablesGenCurrent$ . -args -update
