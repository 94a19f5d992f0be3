//go:build tenantmcp_faults

package conformance

import (
	"strings"
	"testing"

	"github.com/tenantmcp/tenantmcp/builder"
	"github.com/tenantmcp/tenantmcp/internal/guardfault"
)

// TestLevelParentCheckCaught: a table with a level column of its own and
// a scope parent that does not carry it (chat's attachments: realm_id, and
// Parent owner_id). A row is in scope by its realm_id, so row-level
// security's USING never looks at the owner; WITH CHECK must, or raw SQL
// as the application role files a realm's attachment under another realm's
// user. With that check removed from the generated policies
// (guardfault.LevelParentCheck) property 16 must fail on exactly that
// insert; with it, property 16 passes on the same declaration.
func TestLevelParentCheckCaught(t *testing.T) {
	def := chatEdit("attachments", func(td *builder.TableDef) { td.Parent = "owner_id" })
	forEachDSN(t, func(t *testing.T, dsn string) {
		if e, _ := EngineOf(dsn); e != Postgres {
			t.Skipf("%s: only PostgreSQL's row-level security confines raw SQL (property 16 runs there alone); the guard's own parent check is TestChatCorrect's", e)
		}
		for _, faulty := range []bool{false, true} {
			name := "fixed"
			if faulty {
				name = string(guardfault.LevelParentCheck) + "_off"
			}
			t.Run(name, func(t *testing.T) {
				if faulty {
					defer guardfault.Disable(guardfault.LevelParentCheck)()
				}
				out, err := runSome(t, chatTarget(dsn, def), 16)
				if err != nil {
					t.Fatalf("setup: %v", err)
				}
				o := out[16]
				if o.skip != "" {
					t.Fatalf("P16 skipped: %s", o.skip)
				}
				const want = "raw INSERT into attachments under a foreign users"
				all := strings.Join(o.msgs, "\n")
				switch {
				case faulty && (!o.failed || !strings.Contains(all, want)):
					t.Fatalf("fault %s: P16 failed=%v %q; want a failure containing %q", guardfault.LevelParentCheck, o.failed, o.msgs, want)
				case !faulty && o.failed:
					t.Fatalf("P16 failed on the correct policies: %q", o.msgs)
				}
				if faulty {
					t.Logf("caught: %s", o.msgs[0])
				}
			})
		}
	})
}
