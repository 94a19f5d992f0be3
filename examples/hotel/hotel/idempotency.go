package hotel

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tenantmcp/tenantmcp/guardedsql"
	"github.com/tenantmcp/tenantmcp/internal/devserver"
)

// Idempotency keys (issue 29 §2): the server records a call's key in the
// tool's own write transaction, in guardedsql.IdempotencyTable, so a
// client may retry create_booking, book_free_room or cancel_booking with
// the same key (_meta "io.tenantmcp/idempotency-key" or the
// Idempotency-Key header) and never book twice. The migration creates the
// table next to the hotel's; New enables the keys when it is there (and
// logs that they are disabled when it is not).

// installIdempotency creates the idempotency table as the schema owner:
// the migration (Demo) and the embedded SQLite database run it after
// Create, which stays the hotel's own tables (tables_gen.go is generated
// from them).
func installIdempotency(ctx context.Context, db *sql.DB, engine Engine) error {
	ddl, err := guardedsql.IdempotencyDDL(string(engine), "")
	if err != nil {
		return err
	}
	for _, q := range ddl {
		if _, err := db.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("hotel: idempotency table: %w", err)
		}
	}
	return nil
}

// withIdempotency adds to a PostgreSQL migration the application role's
// grant on the idempotency table (the table itself comes with Create).
func withIdempotency(d devserver.Demo) devserver.Demo {
	next := d.Postgres
	d.Postgres = func(ctx context.Context, pool *pgxpool.Pool, appRole string) error {
		if next != nil {
			if err := next(ctx, pool, appRole); err != nil {
				return err
			}
		}
		ddl, err := guardedsql.IdempotencyDDL(string(Postgres), appRole)
		if err != nil {
			return err
		}
		for _, q := range ddl {
			if _, err := pool.Exec(ctx, q); err != nil {
				return fmt.Errorf("hotel: idempotency table: %w", err)
			}
		}
		return nil
	}
	return d
}
