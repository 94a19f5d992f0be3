package main

import (
	"context"
	"os"
	"runtime/pprof"
	"testing"
	"time"
)

func TestScratchLatency(t *testing.T) {
	ctx := context.Background()
	h, err := newHotelSQLite(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer h.close()
	kind := os.Getenv("KIND")
	var hello childHello
	var stop func()
	if kind == "hotel" {
		hello, stop, err = serveHotel(ctx, childSpec{Kind: "hotel", Engine: "sqlite", DSN: h.guardedDSN()})
	} else {
		hello, stop, err = serveBare(ctx, childSpec{Kind: "bare", Engine: "sqlite", DSN: h.rawDSN()})
	}
	if err != nil {
		t.Fatal(err)
	}
	_ = stop
	c, err := newMCPClient(ctx, newHTTPClient(), hello.URL, hello.Token)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		if err := c.listBookings(ctx, i, true); err != nil {
			t.Fatal(err)
		}
	}
	f, _ := os.Create("/tmp/cpu-" + kind + ".prof")
	pprof.StartCPUProfile(f)
	start := time.Now()
	n := 300
	for i := range n {
		if err := c.listBookings(ctx, i, false); err != nil {
			t.Fatal(err)
		}
	}
	pprof.StopCPUProfile()
	t.Logf("%s: %v per call", kind, time.Since(start)/time.Duration(n))
}
