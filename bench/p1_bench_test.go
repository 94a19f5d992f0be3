package main

import (
	"context"
	"testing"
)

// BenchmarkGuardPath runs P1's arms as Go benchmarks, so that they can be
// profiled (go test ./bench -run '^$' -bench GuardPath -cpuprofile cpu.out).
// The figures the README quotes come from go run ./bench, which runs the arms
// side by side; these sub-benchmarks are for pprof, not for ratios.
func BenchmarkGuardPath(b *testing.B) {
	ctx := context.Background()
	h, err := newHotelSQLite(ctx)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(h.close)
	gp, err := newGuardPath(ctx, h)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(gp.close)
	if err := gp.check(ctx); err != nil {
		b.Fatal(err)
	}
	arms := []struct {
		name string
		run  func(i int) error
	}{
		{"hand-written", func(i int) error { _, _, err := gp.baseline(ctx, i); return err }},
		{"guard-path", func(i int) error { _, _, err := gp.candidate(ctx, i, true); return err }},
		{"guard-path-minus-verify", func(i int) error { _, _, err := gp.candidate(ctx, i, false); return err }},
	}
	for _, a := range arms {
		b.Run(a.name, func(b *testing.B) {
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				if err := a.run(i); err != nil {
					b.Fatal(err)
				}
				i++
			}
		})
	}
}
