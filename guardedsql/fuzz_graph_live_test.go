package guardedsql_test

// The graph read differential (fuzz_graph_test.go) on PostgreSQL and
// MariaDB/MySQL: the shared database and every scope's filtered copy are
// scratch databases on the same engine (so collations and types agree),
// the copy without foreign keys and guarded with every table global. It
// skips, with a message, when the engine's DSN is unset.

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/tenantmcp/tenantmcp/builder"
	"github.com/tenantmcp/tenantmcp/guardedsql"
)

// liveDDL is the graph's DDL for engine, with foreign keys or without.
func (g *ggraph) liveDDL(engine string, fks bool) []string {
	integer, text := "BIGINT", "TEXT"
	if engine == "mysql" {
		// A binary collation: tenant keys compare byte for byte.
		text = "VARCHAR(64) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin"
	}
	var out []string
	for _, t := range g.tables {
		var parts []string
		for _, c := range t.cols {
			s := c.name + " " + integer
			if c.text {
				s = c.name + " " + text
			}
			if c.name == "id" {
				s += " PRIMARY KEY"
			} else if c.notNull {
				s += " NOT NULL"
			}
			parts = append(parts, s)
		}
		if fks {
			for _, fk := range t.fks {
				parts = append(parts, "FOREIGN KEY ("+fk.col+") REFERENCES "+fk.to+"(id)")
			}
		}
		out = append(out, "CREATE TABLE "+t.name+" ("+strings.Join(parts, ", ")+")")
	}
	return out
}

func loadLive(t testing.TB, s *scratch, g *ggraph, st gstate) {
	t.Helper()
	for _, tb := range g.tables {
		var cols []string
		for _, c := range tb.cols {
			cols = append(cols, c.name)
		}
		ph := strings.TrimSuffix(strings.Repeat("?, ", len(cols)), ", ")
		for _, row := range st[tb.name] {
			s.mustExec(t, "INSERT INTO "+tb.name+" ("+strings.Join(cols, ", ")+") VALUES ("+ph+")", row...)
		}
	}
}

func TestGraphDifferentialLive(t *testing.T) {
	for _, e := range []engine{enginePostgres, engineMySQL} {
		t.Run(e.name, func(t *testing.T) {
			e.dsn(t)
			// A PostgreSQL scratch database (roles, schema, row-level
			// security) takes seconds: a few graphs, each with a copy
			// per scope.
			graphs := 4
			if testing.Short() {
				graphs = 1
			}
			reads, nonEmpty := 0, 0
			for seed := uint64(5000); seed < uint64(5000+graphs); seed++ {
				r := rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15))
				g := genGraph(r)
				g.seed = seed
				st := genData(r, g)
				scopes := genScopes(r, g, st)
				sch, err := builder.NewSchema(g.def(false))
				if err != nil {
					t.Fatal(err)
				}
				// The copies' schema: every table global, and, for
				// PostgreSQL's row-level security set-up (which needs a
				// tenant table to install its key) and because every
				// level must be carried by a column, one empty table per
				// level ("anchor<i>", its key the level) that no
				// statement reads.
				cdef := g.def(true)
				var anchorDDL []string
				for i, l := range g.levels {
					typ, ddl := "BIGINT", "BIGINT"
					if l.Key == builder.TextKey {
						typ, ddl = "TEXT", "TEXT"
						if e.name == "mysql" {
							ddl = "VARCHAR(64) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin"
						}
					}
					name := fmt.Sprintf("anchor%d", i)
					cdef.Tables = append(cdef.Tables, builder.TableDef{Name: name, Columns: []string{"id"}, PrimaryKey: []string{"id"},
						Types: map[string]string{"id": typ}, Levels: map[string]string{"id": l.Name}})
					anchorDDL = append(anchorDDL, "CREATE TABLE "+name+" (id "+ddl+" PRIMARY KEY)")
				}
				gsch, err := builder.NewSchema(cdef)
				if err != nil {
					t.Fatal(err)
				}
				s := newScratch(t, e, g.liveDDL(e.name, true))
				loadLive(t, s, g, st)
				db, err := s.open(sch, guardedsql.Options{Logger: quiet})
				if err != nil {
					t.Fatalf("%v\n%s", err, g)
				}
				vals := columnValues(g, st)
				buf := make([]byte, 48)
				for si, grants := range scopes {
					cs := newScratch(t, e, append(g.liveDDL(e.name, false), anchorDDL...))
					loadLive(t, cs, g, st.filter(g.visibleRows(st, grants)))
					cdb, err := cs.open(gsch, guardedsql.Options{Logger: quiet})
					if err != nil {
						t.Fatalf("copy: %v\n%s", err, g)
					}
					ctx := grantCtx(grants...)
					for k := 0; k < 12; k++ {
						for i := range buf {
							buf[i] = byte(r.Uint32())
						}
						q, err := genGraphQuery(buf, g, sch, vals)
						if err != nil {
							continue
						}
						fq, err := genGraphQuery(buf, g, gsch, vals)
						if err != nil {
							t.Fatalf("the generator is not deterministic: %v", err)
						}
						got, gerr := resultSet(ctx, db, q)
						want, werr := resultSet(ctx, cdb, fq)
						text, args, _ := db.Render(ctx, q)
						if (gerr != nil) != (werr != nil) || fmt.Sprint(got) != fmt.Sprint(want) {
							t.Fatalf("%sscope %d %v: guarded (err %v) %v\nfiltered copy (err %v) %v\n%s\n%v", g, si, grants, gerr, got, werr, want, text, args)
						}
						reads++
						if len(got) > 0 {
							nonEmpty++
						}
					}
				}
			}
			t.Logf("%s: %d graphs, %d reads compared, %d non-empty", e.name, graphs, reads, nonEmpty)
			if nonEmpty < graphs*3 {
				t.Fatalf("vacuous: %d non-empty reads", nonEmpty)
			}
		})
	}
}
