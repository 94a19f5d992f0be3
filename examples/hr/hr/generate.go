package hr

// The typed table accessors (tables_gen.go) are generated from the live
// SQLite schema that DDL(SQLite) creates; TestTablesGenCurrent fails when
// they are stale.
//
//go:generate rm -f tables_gen.db
//go:generate go run ../cmd/hrschema -o tables_gen.db
//go:generate go run ../../../cmd/tenantmcp-gen -dsn sqlite:tables_gen.db -out tables_gen.go
//go:generate rm tables_gen.db
