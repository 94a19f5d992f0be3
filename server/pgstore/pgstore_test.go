package pgstore_test

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"os"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib"

	"github.com/tenantmcp/tenantmcp/server/internal/replaytest"
	"github.com/tenantmcp/tenantmcp/server/pgstore"
)

const envPostgres = "TENANTMCP_TEST_POSTGRES_DSN"

// Open returns the test database, or skips.
func Open(t *testing.T) *sql.DB {
	t.Helper()
	dsn := os.Getenv(envPostgres)
	if dsn == "" {
		t.Skipf("set %s to run (e.g. postgres://postgres@127.0.0.1:5432/test?sslmode=disable)", envPostgres)
	}
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// TestSpendOnce: two stores on one database (two replicas) spending the
// same nonce concurrently: exactly one succeeds, every other is
// ErrReplayed; expired rows are pruned.
func TestSpendOnce(t *testing.T) {
	db := Open(t)
	a, b := pgstore.NewReplays(db), pgstore.NewReplays(db)
	ctx := context.Background()
	var n [8]byte
	_, _ = rand.Read(n[:])
	nonce := "test-" + hex.EncodeToString(n[:])
	replaytest.SpendOnce(t, a, b, nonce)
	// An expired row goes at the next prune (a fresh store prunes first).
	old := nonce + "-old"
	if err := a.Spend(ctx, old, time.Now().Add(-time.Second)); err != nil {
		t.Fatal(err)
	}
	if err := pgstore.NewReplays(db).Spend(ctx, nonce+"-x", time.Now().Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	var left int
	if err := db.QueryRow(`SELECT count(*) FROM `+pgstore.Table+` WHERE nonce = $1`, old).Scan(&left); err != nil || left != 0 {
		t.Fatalf("expired row kept: %d %v", left, err)
	}
}
