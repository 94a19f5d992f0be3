package conformance

import (
	"os"
	"path/filepath"
	"slices"
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
	runSyntheticGraph(t, "projects.json")
}

// TestSyntheticCompositeGraph runs the property table on a Citus-style
// ad-analytics graph (companies → campaigns → ads → clicks) whose keys are
// tenant-prefixed, (company_id, id), with ids repeating in every tenant,
// composite foreign keys (company_id, campaign_id) → campaigns(company_id,
// id), and per-tenant unique constraints UNIQUE(company_id, name) that the
// controls of properties 9 and 10 must respect. It has one level (11, 12
// and 21 skip) and no single-column key for property 38's unique-oracle
// fixture to copy (38 skips, saying so), nor a key shared by tenants that
// an upsert could conflict on (47 skips).
func TestSyntheticCompositeGraph(t *testing.T) {
	runSyntheticGraph(t, "adanalytics.json", 11, 12, 21, 38, 47)
}

// runSyntheticGraph runs the table on a graph in testdata with synthetic
// data, and requires every property to pass but those that cannot run on
// SQLite without tools and those listed in mustSkip (for a graph of one
// level, the hierarchy properties).
func runSyntheticGraph(t *testing.T, file string, mustSkip ...int) {
	env, err := FromEnv()
	if err != nil {
		t.Fatal(err)
	}
	if env.Mutate != "" {
		t.Skipf("%s is set", EnvMutate)
	}
	def, err := ReadGraph(filepath.Join("testdata", file))
	if err != nil {
		t.Fatal(err)
	}
	rep := Run(t, Target{Name: file, Graph: def, Repetitions: 1, OrderSeed: env.OrderSeed})
	reportsMu.Lock()
	reports = append(reports, rep)
	reportsMu.Unlock()
	for _, p := range rep.Results {
		switch {
		case p.ID >= 15 && p.ID <= 17, p.ID == 19, p.ID == 20, p.ID == 22, p.ID == 35, p.ID == 37, p.ID == 48, p.ID == 51:
			if p.Skip == 0 {
				t.Errorf("P%d ran; want skipped (SQLite, no tools)", p.ID)
			}
		case slices.Contains(mustSkip, p.ID):
			if p.Skip == 0 {
				t.Errorf("P%d ran; want skipped on this graph", p.ID)
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
