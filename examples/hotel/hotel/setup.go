package hotel

import (
	"context"
	"database/sql"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tenantmcp/tenantmcp/flow/pgtaint"
	"github.com/tenantmcp/tenantmcp/guardedsql"
	"github.com/tenantmcp/tenantmcp/guardedsql/postgres"
	"github.com/tenantmcp/tenantmcp/internal/devserver"
)

// SetupDemo is the example's migration for a live database:
// devserver.SetupDemo of Demo(d), connected as an administrator or the
// schema owner (adminDSN), which also installs the flow taint table on
// PostgreSQL and grants appRole its rights. It destroys the hotel tables
// of that database: point it only at a database made for the demo.
func SetupDemo(ctx context.Context, adminDSN, appRole string, key postgres.Key, d *Data) error {
	demo := Demo(d)
	demo.AdminDSN, demo.AppRole, demo.Key = adminDSN, appRole, key
	return devserver.SetupDemo(ctx, demo)
}

// Demo describes the migration of SetupDemo loading d, for the database
// and role the caller fills in.
func Demo(d *Data) devserver.Demo {
	return withIdempotency(devserver.Demo{ // idempotency.go
		Schema: Schema,
		// The idempotency keys go with the data they answered for.
		Drop: []string{"payments", "bookings", "guests", "rooms", "hotels", "chains", "countries", guardedsql.IdempotencyTable},
		Create: func(ctx context.Context, db *sql.DB, engine string) error {
			if err := Create(ctx, db, Engine(engine), d); err != nil {
				return err
			}
			return installIdempotency(ctx, db, Engine(engine)) // idempotency.go
		},
		// The flow taints of every replica (kept across demo resets: a
		// reset must not launder what a subject has read).
		Postgres: func(ctx context.Context, pool *pgxpool.Pool, appRole string) error {
			if err := pgtaint.Install(ctx, pool, pgtaint.Options{}); err != nil {
				return err
			}
			return pgtaint.Grant(ctx, pool, pgtaint.Options{}, appRole)
		},
	})
}
