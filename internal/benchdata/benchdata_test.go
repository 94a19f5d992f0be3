package benchdata

import (
	"context"
	"strings"
	"testing"

	"github.com/tenantmcp/tenantmcp/builder"
)

func TestDefaultSize(t *testing.T) {
	if Default.Bookings() < 1_000_000 || Default.Chains < 1000 {
		t.Fatalf("default dataset too small: %s", Default)
	}
	if _, err := builder.NewSchema(SchemaDef()); err != nil {
		t.Fatal(err)
	}
	if ChainID(42) != "c0042" {
		t.Fatal(ChainID(42))
	}
}

func TestStatements(t *testing.T) {
	for _, stmts := range [][]string{postgresStmts(Default), mysqlStmts(Default)} {
		all := strings.Join(stmts, "\n")
		for _, table := range Tables {
			if !strings.Contains(all, "CREATE TABLE "+table+" ") {
				t.Errorf("no table %s", table)
			}
		}
		// Generated server-side, indexes after the load.
		if !strings.Contains(all, "generate_series(1, 1000000)") && !strings.Contains(all, "bench_nums WHERE n <= 1000000") {
			t.Error("bookings are not generated server-side")
		}
		if strings.Index(all, "INSERT INTO bookings") > strings.Index(all, "bookings_room") {
			t.Error("index created before the load")
		}
	}
}

func TestEnsureRefusesBadSizes(t *testing.T) {
	for _, s := range []Size{{}, {Chains: 1, HotelsPerChain: 1, RoomsPerHotel: 1, BookingsPerRoom: 10_000_000, GuestsPerChain: 1}} {
		if _, err := Ensure(context.Background(), nil, Postgres, s, nil); err == nil {
			t.Errorf("%+v accepted", s)
		}
	}
}
