package hr

import (
	"context"
	"database/sql"
	"slices"

	"github.com/tenantmcp/tenantmcp/guardedsql/postgres"
	"github.com/tenantmcp/tenantmcp/internal/devserver"
)

// SetupDemo is the example's migration for a live database:
// devserver.SetupDemo of Demo(d), connected as an administrator or the
// schema owner (adminDSN). It destroys the HR tables of that database:
// point it only at a database made for the demo.
func SetupDemo(ctx context.Context, adminDSN, appRole string, key postgres.Key, d *Data) error {
	demo := Demo(d)
	demo.AdminDSN, demo.AppRole, demo.Key = adminDSN, appRole, key
	return devserver.SetupDemo(ctx, demo)
}

// Demo describes the migration of SetupDemo loading d, for the database
// and role the caller fills in.
func Demo(d *Data) devserver.Demo {
	drop := slices.Clone(Tables) // in reverse: no table dropped while another references it
	slices.Reverse(drop)
	return devserver.Demo{Schema: Schema, Drop: drop,
		Create: func(ctx context.Context, db *sql.DB, engine string) error { return Create(ctx, db, Engine(engine), d) }}
}
