package guardedsql_test

import (
	"context"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/tenantmcp/tenantmcp/builder"
	"github.com/tenantmcp/tenantmcp/guardedsql"
	sqlengine "github.com/tenantmcp/tenantmcp/guardedsql/internal/engine"
	"github.com/tenantmcp/tenantmcp/guardedsql/internal/engine/sqlite"
	"github.com/tenantmcp/tenantmcp/internal/sqlast"
	"github.com/tenantmcp/tenantmcp/scope"
	"github.com/tenantmcp/tenantmcp/scope/scopetest"
)

// sessionDialect is SQLite pretending to need per-statement session state,
// as PostgreSQL does: it exercises guardedsql's transaction-per-statement
// path that the PostgreSQL dialect will use.
type sessionDialect struct {
	sqlite.Dialect
	sessions atomic.Int64
}

func (*sessionDialect) NeedsTx() bool { return true }

func (d *sessionDialect) Session(ctx context.Context, tx sqlengine.Querier, s scope.Scope, doc string) error {
	d.sessions.Add(1)
	rows, err := tx.Query(ctx, `SELECT ? AS session_scope`, string(s.GrantJSON()))
	if err != nil {
		return err
	}
	return rows.Close()
}

func TestDialectVariants(t *testing.T) {
	h := newHotel(t)
	sess := &sessionDialect{}
	variants := map[string]sqlengine.Dialect{
		"exists paths":   sqlite.Dialect{Style: sqlengine.PathExists},
		"session per tx": sess,
	}
	for name, d := range variants {
		t.Run(name, func(t *testing.T) {
			db, err := guardedsql.NewPredicatesOnlyForTest(sqlengine.StdPool(h.raw, false), d, h.sch, guardedsql.Options{})
			if err != nil {
				t.Fatal(err)
			}
			for _, sc := range isolationScopes {
				ctx := grantCtx(sc.grants...)
				want := h.m.visible(sc.grants)
				for table, w := range map[string]map[any]bool{"rooms": want.rooms, "bookings": want.bookings, "payments": want.payments, "guests": want.guests} {
					tr := h.sch.Table(table)
					got := sorted(ids[int64](t, ctx, db, builder.Must(builder.Select(tr.Col("id")).From(tr).Build())))
					if exp := sortedKeys[int64](w); !slices.Equal(got, exp) {
						t.Errorf("%s %s: got %v, want %v", sc.name, table, got, exp)
					}
				}
			}
			ctx := grantCtx(chainG("acme"))
			rm := h.sch.Table("rooms")
			up := builder.Must(builder.UpdateTable(rm).Set("rate", 1).Where(rm.Col("id").Eq(roomOf(h, "globex"))).ExpectOne().Build())
			if _, err := db.Exec(ctx, up); err == nil {
				t.Fatal("cross-tenant update passed")
			}
			pt := h.sch.Table("payments")
			sql, _, err := db.Render(ctx, builder.Must(builder.Select(pt.Col("id")).From(pt).Build()))
			if err != nil {
				t.Fatal(err)
			}
			if name == "exists paths" && !strings.Contains(sql, "EXISTS (SELECT 1 FROM") {
				t.Fatalf("not the EXISTS shape: %s", sql)
			}
		})
	}
	if sess.sessions.Load() == 0 {
		t.Fatal("Session never called")
	}
	// Every statement of the session dialect ran inside a transaction
	// that began with the session call.
	h.rec.reset()
	db, _ := guardedsql.NewForTest(sqlengine.StdPool(h.raw, false), sess, h.sch, guardedsql.Options{})
	r := h.sch.Table("rooms").As("r")
	if _, err := guardedsql.All(grantCtx(hotelG(2)), db, builder.Must(builder.Select(r.Col("id")).From(r).Build()), guardedsql.Scalar[int64]); err != nil {
		t.Fatal(err)
	}
	got := h.rec.statements()
	if len(got) != 3 || got[0] != "BEGIN" || !strings.Contains(got[1], "session_scope") || !strings.Contains(got[2], "SELECT \"r\".\"id\"") {
		t.Fatalf("statements %q", got)
	}
}

func TestEncodeScope(t *testing.T) {
	sch := builder.MustSchema(hotelDef)
	levels := levelsOf(t, sch)
	for _, tc := range []struct {
		grants []scope.Grant
		doc    string
		active int
	}{
		{[]scope.Grant{chainG("acme")}, `{"chain":["acme"]}`, 1},
		{[]scope.Grant{hotelG(12), hotelG(3), chainG("7")}, `{"chain":["7"],"hotel":[3,12]}`, 2},
		{[]scope.Grant{{Level: "hotel", ID: "07"}, {Level: "hotel", ID: "7.0"}, {Level: "hotel", ID: " 7"}, {Level: "hotel", ID: "+7"}, {Level: "hotel", ID: "-0"}, {Level: "hotel", ID: "9223372036854775808"}, {Level: "hotel", ID: "1e3"}}, `{}`, 0},
		{[]scope.Grant{{Level: "hotel", ID: "-5"}, {Level: "hotel", ID: "9223372036854775807"}}, `{"hotel":[-5,9223372036854775807]}`, 1},
		{[]scope.Grant{chainG(`a"b\c<`), {Level: "region", ID: "eu"}}, `{"chain":["a\"b\\c\u003c"]}`, 1},
	} {
		sc := scopeOf(tc.grants)
		got := sqlengine.EncodeScope(levels, sc)
		if got.Doc != tc.doc || len(got.Active) != tc.active {
			t.Errorf("%v: got %s %d, want %s %d", tc.grants, got.Doc, len(got.Active), tc.doc, tc.active)
		}
	}
}

func levelsOf(t *testing.T, sch *builder.Schema) []*sqlast.Level {
	return guardedsql.SchemaLevelsForTest(sch)
}

func scopeOf(g []scope.Grant) scope.Scope { return scopetest.New("t", g) }
