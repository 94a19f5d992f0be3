// Command hrschema creates the HR tables, empty, in a new SQLite database
// file: the live schema command tenantmcp-gen reads to generate the
// example's typed table accessors (examples/hr/hr/tables_gen.go). It
// refuses to overwrite an existing file.
//
//	go run ./examples/hr/cmd/hrschema -o hr.db
package main

import (
	"context"
	"database/sql"
	"errors"
	"flag"
	"fmt"
	"os"

	"github.com/tenantmcp/tenantmcp/examples/hr/hr"
)

func main() {
	out := flag.String("o", "", "SQLite database file to create")
	flag.Parse()
	if err := run(*out); err != nil {
		fmt.Fprintln(os.Stderr, "hrschema:", err)
		os.Exit(1)
	}
}

func run(path string) error {
	if path == "" {
		return errors.New("-o is required")
	}
	if _, err := os.Stat(path); err == nil {
		return fmt.Errorf("%s exists", path)
	}
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=foreign_keys(1)")
	if err != nil {
		return err
	}
	defer db.Close()
	return hr.Create(context.Background(), db, hr.SQLite, &hr.Data{})
}
