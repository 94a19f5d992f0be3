package conformance

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSyntheticGraph runs the property table on a second graph, read from
// JSON and seeded by SyntheticSeed, with integer tenant keys, tenants
// derived from the data, a global table, and foreign keys to tenant-bound
// tables that are not scope parents: the suite works on a graph it was not
// written for. It uses the embedded SQLite database (the engines are the
// hotel run's business).
func TestSyntheticGraph(t *testing.T) {
	env, err := FromEnv()
	if err != nil {
		t.Fatal(err)
	}
	if env.Mutate != "" {
		t.Skipf("%s is set", EnvMutate)
	}
	def, err := ReadGraph(filepath.Join("testdata", "projects.json"))
	if err != nil {
		t.Fatal(err)
	}
	rep := Run(t, Target{Name: "projects.json", Graph: def, Repetitions: 1, OrderSeed: env.OrderSeed})
	reportsMu.Lock()
	reports = append(reports, rep)
	reportsMu.Unlock()
	for _, p := range rep.Results {
		switch {
		case p.ID >= 15 && p.ID <= 17, p.ID == 19, p.ID == 20, p.ID == 22:
			if p.Skip == 0 {
				t.Errorf("P%d ran; want skipped (SQLite, no tools)", p.ID)
			}
		case p.Pass == 0:
			t.Errorf("P%d did not pass on the synthetic graph (skip: %q)", p.ID, p.SkipReason)
		}
	}
}

func TestReadGraphRefusesBadFiles(t *testing.T) {
	dir := t.TempDir()
	for name, doc := range map[string]string{
		"unknown field": `{"levels":[{"name":"org","key":"int"}],"tables":[],"extra":1}`,
		"bad key":       `{"levels":[{"name":"org","key":"uuid"}],"tables":[]}`,
		"no path":       `{"levels":[{"name":"org","key":"int"}],"tables":[{"name":"t","columns":["id"],"primaryKey":["id"]}]}`,
	} {
		path := filepath.Join(dir, strings.ReplaceAll(name, " ", "_")+".json")
		if err := os.WriteFile(path, []byte(doc), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := ReadGraph(path); err == nil {
			t.Errorf("%s: ReadGraph accepted %s", name, doc)
		}
	}
}
