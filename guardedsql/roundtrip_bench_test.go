package guardedsql_test

import (
	"context"
	"testing"
	"time"

	"github.com/tenantmcp/tenantmcp/builder"
)

// BenchmarkRoundTripRead is a guarded one-row read on a warm PostgreSQL
// pool, one client, against the same read hand-written with pgx as a role
// without row-level security (hand): what the signed scope, the policies
// and the guard add to one call.
func BenchmarkRoundTripRead(b *testing.B) {
	h := newPostgresHotel(b, enginePostgres.dsn(b), seedModel(2, 2, 2, 2))
	ctx := context.Background()
	var id int64
	if err := h.admin.QueryRow(ctx, `SELECT min(id) FROM guests WHERE chain_id = 'acme'`).Scan(&id); err != nil {
		b.Fatal(err)
	}
	gu := h.sch.Table("guests")
	q := builder.Must(builder.Select(gu.Col("name")).From(gu).Where(gu.Col("id").Eq(id)).Build())
	as := grantCtx(chainG("acme"))
	var want string
	if err := h.admin.QueryRow(ctx, `SELECT name FROM guests WHERE id = $1 AND chain_id = $2`, id, "acme").Scan(&want); err != nil || want == "" {
		b.Fatalf("hand: %q %v", want, err)
	}
	// Alternating, so that both see the same load (the machine is
	// shared): the ratio is the figure to quote.
	b.Run("alternating", func(b *testing.B) {
		var hand, guarded time.Duration
		for b.Loop() {
			var name string
			t0 := time.Now()
			if err := h.admin.QueryRow(ctx, `SELECT name FROM guests WHERE id = $1 AND chain_id = $2`, id, "acme").Scan(&name); err != nil || name != want {
				b.Fatalf("hand: %q %v", name, err)
			}
			t1 := time.Now()
			if err := h.db.QueryRow(as, q).Scan(&name); err != nil || name != want {
				b.Fatalf("guarded: %q %v", name, err)
			}
			hand, guarded = hand+t1.Sub(t0), guarded+time.Since(t1)
		}
		b.ReportMetric(float64(hand.Nanoseconds())/float64(b.N), "hand-ns/op")
		b.ReportMetric(float64(guarded.Nanoseconds())/float64(b.N), "guarded-ns/op")
		b.ReportMetric(float64(guarded)/float64(hand), "guarded/hand")
	})
	b.Run("hand", func(b *testing.B) {
		for b.Loop() {
			var name string
			if err := h.admin.QueryRow(ctx, `SELECT name FROM guests WHERE id = $1 AND chain_id = $2`, id, "acme").Scan(&name); err != nil || name != want {
				b.Fatalf("hand: %q %v", name, err)
			}
		}
	})
	b.Run("guarded", func(b *testing.B) {
		for b.Loop() {
			var name string
			if err := h.db.QueryRow(as, q).Scan(&name); err != nil || name != want {
				b.Fatalf("guarded: %q %v", name, err)
			}
		}
	})
}
