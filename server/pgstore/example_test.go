package pgstore_test

import (
	"database/sql"

	"github.com/tenantmcp/tenantmcp/server"
	"github.com/tenantmcp/tenantmcp/server/pgstore"
)

// Replicas share the signing keys and one replay store, so a consent
// accepted on one is spent for all.
func ExampleNewReplays() {
	var db *sql.DB // sql.Open("pgx", dsn): the application's database
	var key []byte // 32 bytes or more, the same on every replica
	_ = server.Options{
		// Verifier, DB, …
		Input: server.InputOptions{Keys: [][]byte{key}, Replays: pgstore.NewReplays(db)},
	}
}

// Without a Redis, replicas share their rate limits in PostgreSQL.
func ExampleNewRates() {
	var db *sql.DB // sql.Open("pgx", dsn): the application's database
	rates, err := pgstore.NewRates(db, pgstore.Options{})
	if err != nil {
		panic(err)
	}
	_ = server.Options{
		// Verifier, DB, …
		Limits: server.Limits{PerTenant: server.Limit{Rate: 50, Burst: 100}, Rates: rates},
	}
}
