package conformance

import (
	"fmt"
	"os"
	"sync"
	"testing"
	"time"
)

var (
	reportsMu sync.Mutex
	reports   []*Report
)

// TestMain prints the summary table after the tests, so that it shows in
// plain `go test` output (in package-list mode go test shows a passing
// package's output only with -v; set TENANTMCP_CONFORMANCE_SUMMARY=file to
// keep it either way).
func TestMain(m *testing.M) {
	code := m.Run()
	reportsMu.Lock()
	defer reportsMu.Unlock()
	if len(reports) > 0 {
		_ = WriteTable(os.Stdout, reports...)
		if path := os.Getenv(EnvSummary); path != "" {
			f, err := os.Create(path)
			if err == nil {
				_ = WriteTable(f, reports...)
				err = f.Close()
			}
			if err != nil {
				fmt.Fprintf(os.Stderr, "writing %s: %v\n", path, err)
			}
		}
	}
	os.Exit(code)
}

// TestConformance runs the property table on every target of
// TENANTMCP_DSN (the embedded SQLite hotel schema when unset), on the
// hotel schema or on the graph of TENANTMCP_SCHEMA_GRAPH.
func TestConformance(t *testing.T) {
	env, err := FromEnv()
	if err != nil {
		t.Fatal(err)
	}
	dsns := env.DSNs
	if len(dsns) == 0 {
		dsns = []string{""}
		t.Log("no " + EnvDSN + ": running against the embedded SQLite hotel schema")
	}
	seed := env.OrderSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	for _, dsn := range dsns {
		e, _ := EngineOf(dsn)
		var tg Target
		if env.GraphFile != "" {
			def, err := ReadGraph(env.GraphFile)
			if err != nil {
				t.Fatal(err)
			}
			tg = Target{Name: env.GraphFile, DSN: dsn, Graph: def, Seed: SyntheticSeed(def, 1), Shared: env.Shared, Unchecked: env.Unchecked}
		} else {
			tg = hotelTarget(dsn, seed)
		}
		tg.Repetitions, tg.OrderSeed = env.Repetitions, seed
		t.Run(string(e), func(t *testing.T) {
			rep := Run(t, tg)
			reportsMu.Lock()
			reports = append(reports, rep)
			reportsMu.Unlock()
		})
	}
}
