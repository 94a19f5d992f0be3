package pgstore_test

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"testing"
	"time"

	"github.com/tenantmcp/tenantmcp/server/internal/ratetest"
	"github.com/tenantmcp/tenantmcp/server/pgstore"
)

func newRates(t *testing.T, db *sql.DB) *pgstore.Rates {
	t.Helper()
	r, err := pgstore.NewRates(db, pgstore.Options{Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestRatesSharedBucket: two stores (two replicas, each with its own
// pool) on one database take from the same bucket, the checks
// redisstore's rates pass (ratetest.SharedBucket); the table holds the
// key's digest, never the key.
func TestRatesSharedBucket(t *testing.T) {
	db1, db2 := Open(t), Open(t)
	// Keep the warm-up's connections: the burst must not wait for new ones.
	db1.SetMaxIdleConns(16)
	db2.SetMaxIdleConns(16)
	a, b := newRates(t, db1), newRates(t, db2)
	var n [8]byte
	_, _ = rand.Read(n[:])
	key := "t\x00chain:acme-" + hex.EncodeToString(n[:])
	ratetest.SharedBucket(t, a, b, key)
	ctx := context.Background()
	sum := sha256.Sum256([]byte(key))
	var rows int
	if err := db1.QueryRowContext(ctx, `SELECT count(*) FROM `+pgstore.RatesTable+` WHERE key = $1`, sum[:]).Scan(&rows); err != nil || rows != 1 {
		t.Fatalf("rows under the key's digest: %d, %v; want 1", rows, err)
	}
	if err := db1.QueryRowContext(ctx, `SELECT count(*) FROM `+pgstore.RatesTable+` WHERE position(convert_to('acme', 'UTF8') IN key) > 0`).Scan(&rows); err != nil || rows != 0 {
		t.Fatalf("rows naming the tenant: %d, %v", rows, err)
	}
	if err := a.Ping(ctx); err != nil {
		t.Fatalf("Ping: %v", err)
	}
	if err := pgstore.NewReplays(db1).Ping(ctx); err != nil {
		t.Fatalf("Replays.Ping: %v", err)
	}
}

// TestRatesUnreachable: a database that does not answer fails closed with
// ErrStore, quickly, in Take and Ping; bad options and a bad rate are
// refused.
func TestRatesUnreachable(t *testing.T) {
	db, err := sql.Open("pgx", "postgres://nobody:pw@127.0.0.1:1/none?sslmode=disable&connect_timeout=1")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	r, err := pgstore.NewRates(db, pgstore.Options{Timeout: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	start := time.Now()
	if _, err := r.Take(ctx, "k", 1, 1); !errors.Is(err, pgstore.ErrStore) {
		t.Errorf("Take: %v, want ErrStore", err)
	}
	if err := r.Ping(ctx); !errors.Is(err, pgstore.ErrStore) {
		t.Errorf("Ping: %v, want ErrStore", err)
	}
	if err := pgstore.NewReplays(db).Ping(ctx); !errors.Is(err, pgstore.ErrStore) {
		t.Errorf("Replays.Ping: %v, want ErrStore", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("took %s", d)
	}
	if _, err := r.Take(ctx, "k", 0, 1); !errors.Is(err, pgstore.ErrStore) {
		t.Errorf("rate 0: %v", err)
	}
	if s, err := pgstore.NewRates(nil, pgstore.Options{}); !errors.Is(err, pgstore.ErrConfig) || s != nil {
		t.Errorf("NewRates(nil) = %v, %v", s, err)
	}
	if s, err := pgstore.NewRates(db, pgstore.Options{Timeout: -1}); !errors.Is(err, pgstore.ErrConfig) || s != nil {
		t.Errorf("negative timeout = %v, %v", s, err)
	}
}
