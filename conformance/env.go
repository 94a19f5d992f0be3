package conformance

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// Environment variables read by FromEnv.
const (
	// EnvDSN names the target(s): one DSN, or several separated by
	// whitespace (URL forms only then). Unset or empty: embedded SQLite.
	EnvDSN = "TENANTMCP_DSN"
	// EnvSchemaGraph names a JSON schema graph file (see ReadGraph) to run
	// on instead of the hotel schema, seeded with SyntheticSeed.
	EnvSchemaGraph = "TENANTMCP_SCHEMA_GRAPH"
	// EnvRepetitions is the number of repetitions (default 1).
	EnvRepetitions = "TENANTMCP_CONFORMANCE_REPS"
	// EnvSeed fixes the order seed (default: from the clock, printed).
	EnvSeed = "TENANTMCP_CONFORMANCE_SEED"
	// EnvMutate names a table whose tenant predicate the guard drops for
	// the whole of every Run (through a fault hook that works in test
	// binaries built with -tags tenantmcp_faults only; on PostgreSQL the
	// table's row-level security is disabled too), to watch the suite
	// fail. Run honours it in any such test binary, a user's module
	// included, and fails without the tag; Mutate is the same check with
	// assertions, table by table.
	EnvMutate = "TENANTMCP_CONFORMANCE_MUTATE"
	// EnvShared acknowledges tables as shared for a run on a graph file
	// (Target.Shared, which property 58 exempts): "table=reason" items
	// separated by ";" ("labels=task labels every org picks from").
	EnvShared = "TENANTMCP_CONFORMANCE_SHARED"
	// EnvUnchecked acknowledges foreign keys declared Unchecked for a run
	// on a graph file (Target.Unchecked, which property 9 accepts):
	// "table.column=reason" items separated by ";".
	EnvUnchecked = "TENANTMCP_CONFORMANCE_UNCHECKED"
	// EnvSummary names a file the summary table is also written to (go
	// test shows a passing package's output only with -v).
	EnvSummary = "TENANTMCP_CONFORMANCE_SUMMARY"
)

// Env is the suite's configuration from the environment.
type Env struct {
	DSNs        []string // empty: the embedded SQLite default
	GraphFile   string
	Repetitions int
	OrderSeed   uint64
	Mutate      string
	SummaryFile string
	Shared      map[string]string // from EnvShared
	Unchecked   map[string]string // from EnvUnchecked
}

// FromEnv reads the environment variables above.
func FromEnv() (Env, error) {
	e := Env{
		DSNs:        strings.Fields(os.Getenv(EnvDSN)),
		GraphFile:   os.Getenv(EnvSchemaGraph),
		Repetitions: 1,
		Mutate:      os.Getenv(EnvMutate),
		SummaryFile: os.Getenv(EnvSummary),
	}
	for _, d := range e.DSNs {
		if _, err := engineOf(d); err != nil {
			return Env{}, fmt.Errorf("%s: %w", EnvDSN, err)
		}
	}
	var err error
	if e.Shared, err = reasons(EnvShared, "table"); err != nil {
		return Env{}, err
	}
	if e.Unchecked, err = reasons(EnvUnchecked, "table.column"); err != nil {
		return Env{}, err
	}
	if v := os.Getenv(EnvRepetitions); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return Env{}, fmt.Errorf("%s=%q: want a positive integer", EnvRepetitions, v)
		}
		e.Repetitions = n
	}
	if v := os.Getenv(EnvSeed); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return Env{}, fmt.Errorf("%s=%q: want an unsigned integer", EnvSeed, v)
		}
		e.OrderSeed = n
	}
	return e, nil
}

// reasons reads the variable name as "key=reason" items separated by
// ";" (nil when unset); what names the key's form in the error.
func reasons(name, what string) (map[string]string, error) {
	v := strings.TrimSpace(os.Getenv(name))
	if v == "" {
		return nil, nil
	}
	m := map[string]string{}
	for _, item := range strings.Split(v, ";") {
		key, why, ok := strings.Cut(item, "=")
		key, why = strings.TrimSpace(key), strings.TrimSpace(why)
		if !ok || key == "" || why == "" {
			return nil, fmt.Errorf("%s: item %q is not %s=reason", name, item, what)
		}
		m[key] = why
	}
	return m, nil
}

// EngineOf names the engine a DSN selects ("" is the embedded SQLite).
func EngineOf(dsn string) (Engine, error) { return engineOf(dsn) }
