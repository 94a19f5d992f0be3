package guardedsql_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/tenantmcp/tenantmcp/builder"
	"github.com/tenantmcp/tenantmcp/guardedsql"
	"github.com/tenantmcp/tenantmcp/guardedsql/postgres"
	"github.com/tenantmcp/tenantmcp/guardedsql/sqlite"
	"github.com/tenantmcp/tenantmcp/internal/guardfault"
	"github.com/tenantmcp/tenantmcp/scope"
)

type observed struct {
	mu sync.Mutex
	st []guardedsql.Statement
}

func (o *observed) fn(_ context.Context, s guardedsql.Statement) {
	o.mu.Lock()
	o.st = append(o.st, s)
	o.mu.Unlock()
}

func (o *observed) kinds() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	var k []string
	for _, s := range o.st {
		k = append(k, s.Kind)
	}
	return k
}

func TestNoScopeSendsNothing(t *testing.T) {
	forEachEngine(t, func(t *testing.T, e engine) {
		obs := &observed{}
		h := e.newHotelSized(t, 3, 3, 4, 2, guardedsql.Options{Observer: obs.fn})
		b := h.sch.Table("bookings").As("b")
		q := builder.Must(builder.Select(b.Col("id")).From(b).Build())
		bk := h.sch.Table("bookings")
		up := builder.Must(builder.UpdateTable(bk).Set("status", "x").Where(bk.Col("id").Eq(1)).Build())
		ins := builder.Must(builder.InsertInto(bk).Columns("room_id", "check_in", "nights", "status").Values(1, "2025-01-01", 1, "x").Build())
		del := builder.Must(builder.DeleteFrom(bk).Where(bk.Col("id").Eq(1)).Build())

		for name, ctx := range map[string]context.Context{
			"background": context.Background(),
			"zero scope": scopeCtxZero(),
		} {
			t.Run(name, func(t *testing.T) {
				h.rec.reset()
				var calls []error
				_, err := h.db.Query(ctx, q)
				calls = append(calls, err)
				var id int64
				calls = append(calls, h.db.QueryRow(ctx, q).Scan(&id))
				for _, m := range []builder.Mutation{ins, up, del} {
					_, err := h.db.Exec(ctx, m)
					calls = append(calls, err)
				}
				ran := false
				calls = append(calls, h.db.Tx(ctx, func(*guardedsql.Tx) error { ran = true; return nil }))
				_, _, err = h.db.Render(ctx, q)
				calls = append(calls, err)
				_, err = guardedsql.All(ctx, h.db, q, guardedsql.Scalar[int64])
				calls = append(calls, err)
				for i, err := range calls {
					if !errors.Is(err, guardedsql.ErrNoScope) {
						t.Errorf("call %d: err = %v, want ErrNoScope", i, err)
					}
				}
				if ran {
					t.Error("Tx ran its function without a scope")
				}
				if got := obs.kinds(); len(got) != 0 {
					t.Errorf("observer saw %v", got)
				}
				if got := h.rec.statements(); len(got) != 0 {
					t.Errorf("the driver received %v", got)
				}
			})
		}
		// The same calls with a scope do reach the driver and the observer:
		// the recorder and observer are live.
		ctx := grantCtx(chainG("acme"))
		if _, err := guardedsql.All(ctx, h.db, q, guardedsql.Scalar[int64]); err != nil {
			t.Fatal(err)
		}
		if len(h.rec.statements()) == 0 || !slices.Contains(obs.kinds(), "select") {
			t.Fatalf("recorder %v, observer %v", h.rec.statements(), obs.kinds())
		}
		// Every statement the driver received carries the scope parameter
		// (PostgreSQL: the query carries the typed id arrays, and the
		// transaction around it sets the scope for the policies).
		marker := map[string]string{"sqlite": "json_each(?)", "mysql": "BETWEEN CONVERT(? USING", "postgres": "= ANY ($"}[e.name]
		session := false
		for _, s := range h.rec.statements() {
			switch {
			case e.name == "postgres" && (s == "BEGIN" || s == "COMMIT" || s == postgres.ScopeNonceSQL):
			case e.name == "postgres" && (strings.Contains(s, "pg_catalog.") && !strings.Contains(s, "bookings") ||
				s == "ROLLBACK" || s == `SELECT "tenantmcp_scope_doc"() IS NOT NULL`):
				// The row-level security check of a new pooled
				// connection: catalog reads, no tenant table.
			case e.name == "postgres" && strings.Contains(s, "set_config($1, $2, true)"):
				session = true
			case !strings.Contains(s, marker):
				t.Errorf("statement without the scope parameter: %s", s)
			}
		}
		if e.name == "postgres" && !session {
			t.Errorf("no transaction-local scope setting among %q", h.rec.statements())
		}
	})
}

func scopeCtxZero() context.Context {
	return scopeZeroContext(context.Background())
}

func TestObserverKinds(t *testing.T) {
	obs := &observed{}
	h := newHotelSized(t, 3, 3, 4, 2, guardedsql.Options{Observer: obs.fn})
	ctx := grantCtx(chainG("acme"))
	rm := h.sch.Table("rooms")
	ins := builder.Must(builder.InsertInto(rm).Columns("hotel_id", "number", "rate").
		Values(hotelOfChain(h, "acme"), "1", 1).Values(hotelOfChain(h, "acme"), "2", 1).Build())
	if _, err := h.db.Exec(ctx, ins); err != nil {
		t.Fatal(err)
	}
	r := h.sch.Table("rooms").As("r")
	if _, err := guardedsql.All(ctx, h.db, builder.Must(builder.Select(r.Col("id")).From(r).Build()), guardedsql.Scalar[int64]); err != nil {
		t.Fatal(err)
	}
	want := []string{"begin", "insert", "insert", "commit", "select"}
	if got := obs.kinds(); !slices.Equal(got, want) {
		t.Fatalf("kinds %v, want %v", got, want)
	}
	for _, s := range obs.st {
		if s.Kind == "select" && (len(s.Args) == 0 || s.Args[0] != `{"chain":["acme"]}`) {
			t.Fatalf("scope parameter %v", s.Args)
		}
	}
}

func TestSealedValuesOnly(t *testing.T) {
	h := newHotel(t)
	ctx := grantCtx(chainG("acme"))
	if _, err := h.db.Query(ctx, builder.Query{}); !errors.Is(err, guardedsql.ErrInvalid) {
		t.Errorf("zero Query: %v", err)
	}
	for _, m := range []builder.Mutation{builder.Insert{}, builder.Update{}, builder.Delete{}, nil, (*builder.Insert)(nil)} {
		if _, err := h.db.Exec(ctx, m); !errors.Is(err, guardedsql.ErrInvalid) {
			t.Errorf("zero %T: %v", m, err)
		}
	}
	// A statement built on another schema, where bookings is declared
	// global, is refused rather than run without a predicate.
	def := hotelDef
	def.Tables = slices.Clone(hotelDef.Tables)
	for i := range def.Tables {
		if def.Tables[i].Name == "payments" {
			def.Tables[i] = builder.TableDef{Name: "payments", Columns: def.Tables[i].Columns, PrimaryKey: []string{"id"}, Global: true}
		}
	}
	other := builder.MustSchema(def)
	p := other.Table("payments")
	q := builder.Must(builder.Select(p.Col("id")).From(p).Build())
	if _, err := h.db.Query(ctx, q); !errors.Is(err, guardedsql.ErrInvalid) {
		t.Errorf("foreign schema: %v", err)
	}
	// A correlated subquery cannot run on its own.
	ho := h.sch.Table("hotels").As("h")
	r := h.sch.Table("rooms").As("r")
	corr := builder.Must(builder.Select(r.Col("id")).From(r).Where(r.Col("hotel_id").EqCol(ho.Col("id"))).Build())
	if _, err := h.db.Query(ctx, corr); !errors.Is(err, guardedsql.ErrInvalid) {
		t.Errorf("correlated: %v", err)
	}
}

func TestIntrospectSQLite(t *testing.T) {
	h := newHotel(t)
	ctx := context.Background()
	sch, err := sqlite.Introspect(ctx, h.raw, hotelTenancy)
	if err != nil {
		t.Fatal(err)
	}
	// Same scope paths as the hand-declared schema.
	for _, n := range h.sch.TableNames() {
		if got, want := sch.ScopePath(n), h.sch.ScopePath(n); got != want {
			t.Errorf("%s: introspected %q, declared %q", n, got, want)
		}
	}
	if !slices.Equal(sch.TableNames(), h.sch.TableNames()) {
		t.Fatalf("tables %v vs %v", sch.TableNames(), h.sch.TableNames())
	}
	db, err := sqlite.New(context.Background(), h.raw, sch, guardedsql.Options{})
	if err != nil {
		t.Fatal(err)
	}
	g := []scope.Grant{hotelG(5)}
	p := sch.Table("payments").As("p")
	got := sorted(ids[int64](t, grantCtx(g...), db, builder.Must(builder.Select(p.Col("id")).From(p).Build())))
	if want := sortedKeys[int64](h.m.visible(g).payments); !slices.Equal(got, want) || len(want) == 0 {
		t.Fatalf("got %v, want %v", got, want)
	}

	// Without the Parents hint, bookings has two tenant foreign keys and
	// the schema is refused at start-up.
	ten := hotelTenancy
	ten.Parents = nil
	if _, err := sqlite.Introspect(ctx, h.raw, ten); !errors.Is(err, builder.ErrSchema) || !strings.Contains(err.Error(), "ambiguous") {
		t.Fatalf("ambiguous parent: %v", err)
	}
	// Forgetting to mark countries global leaves it tenant-bound with no
	// path: refused.
	ten = hotelTenancy
	ten.Global = nil
	if _, err := sqlite.Introspect(ctx, h.raw, ten); !errors.Is(err, builder.ErrSchema) {
		t.Fatalf("unmarked global: %v", err)
	}
	// A level column whose SQL type contradicts the level is refused.
	ten = hotelTenancy
	ten.Levels = []builder.Level{{Name: "chain", Key: builder.IntKey}, {Name: "hotel", Key: builder.IntKey}}
	if _, err := sqlite.Introspect(ctx, h.raw, ten); !errors.Is(err, builder.ErrSchema) {
		t.Fatalf("type mismatch: %v", err)
	}
}

func TestOpenDSN(t *testing.T) {
	ctx := context.Background()
	path := t.TempDir() + "/x.db"
	sch := builder.MustSchema(hotelDef)
	db, err := guardedsql.Open(ctx, "sqlite:"+path, sch, guardedsql.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	// The file exists but has no tables: a query fails at the database,
	// not in the guard.
	c := sch.Table("chains")
	if _, err := db.Query(grantCtx(chainG("acme")), builder.Must(builder.Select(c.Col("id")).From(c).Build())); err == nil || errors.Is(err, guardedsql.ErrInvalid) {
		t.Fatalf("err = %v", err)
	}
	if _, err := guardedsql.Open(ctx, "oracle://x", sch, guardedsql.Options{}); err == nil || !strings.Contains(err.Error(), "unsupported DSN scheme") {
		t.Fatalf("unknown scheme: %v", err)
	}
	_, err = guardedsql.Open(ctx, "host=127.0.0.1 user=app password=S3cretPW dbname=hotel", sch, guardedsql.Options{})
	if !errors.Is(err, guardedsql.ErrNoEngine) || !strings.Contains(err.Error(), "keyword=value DSN") || strings.Contains(err.Error(), "S3cret") {
		t.Fatalf("keyword/value DSN: %v", err)
	}
	if _, err := guardedsql.Introspect(ctx, "sqlite:"+path, builder.Tenancy{}); err != nil {
		t.Fatalf("introspect empty db: %v", err)
	}
}

// TestFaultHookIsDetected is the mutation check: with the predicate of one
// table dropped, the same oracle comparison the isolation tests use sees
// foreign rows. It proves those tests can fail.
func TestFaultHookIsDetected(t *testing.T) {
	if !guardfault.Enabled {
		t.Skip("mutation control: " + guardfault.NotBuilt)
	}
	forEachEngine(t, func(t *testing.T, e engine) {
		h := e.newHotel(t)
		g := []scope.Grant{chainG("acme")}
		ctx := grantCtx(g...)
		// On PostgreSQL the row-level security policies are a second,
		// independent boundary: the same fault leaks nothing there.
		rls := e.name == "postgres"
		for _, table := range []string{"hotels", "rooms", "bookings", "payments", "guests"} {
			tr := h.sch.Table(table)
			q := builder.Must(builder.Select(tr.Col("id")).From(tr).Build())
			restore := guardfault.DropPredicate(table)
			got := ids[int64](t, ctx, h.db, q)
			restore()
			v := h.m.visible(g)
			want := map[string]map[any]bool{"hotels": v.hotels, "rooms": v.rooms, "bookings": v.bookings, "payments": v.payments, "guests": v.guests}[table]
			leaked := 0
			for _, id := range got {
				if !want[id] {
					leaked++
				}
			}
			switch {
			case !rls && leaked == 0:
				t.Errorf("%s: dropping the predicate leaked nothing; the oracle cannot fail", table)
			case rls && (leaked != 0 || len(got) != len(want)):
				t.Errorf("%s: with the guard predicate dropped, row-level security let %d foreign rows through (%d rows, want %d)", table, leaked, len(got), len(want))
			}
			// Restored: no leak.
			for _, id := range ids[int64](t, ctx, h.db, q) {
				if !want[id] {
					t.Fatalf("%s: leak after restore", table)
				}
			}
		}
		// Dropping the parent's predicate also disables the parent check of
		// an insert: a write leak the mutation tests would catch. On
		// PostgreSQL the check's read of the parent is itself filtered by
		// the parent's policy (and WITH CHECK would refuse the row anyway).
		restore := guardfault.DropPredicate("hotels")
		defer restore()
		rm := h.sch.Table("rooms")
		ins := builder.Must(builder.InsertInto(rm).Columns("hotel_id", "number", "rate").Values(hotelOfChain(h, "globex"), "X", 1).Build())
		_, err := h.db.Exec(ctx, ins)
		switch {
		case !rls && err != nil:
			t.Fatalf("with the fault, the foreign-parent insert should pass (and be caught by the suite): %v", err)
		case rls && !errors.Is(err, guardedsql.ErrNotFound) && (err == nil || !strings.Contains(err.Error(), "row-level security")):
			t.Fatalf("with the fault, row-level security should refuse the foreign-parent insert: %v", err)
		}
	})
}

var scopeZeroContext = guardedsql.ScopeZeroContextForTest

func TestConcurrentScopes(t *testing.T) {
	forEachEngine(t, func(t *testing.T, e engine) {
		h := e.sharedHotel(t)
		p := h.sch.Table("payments").As("p")
		b := h.sch.Table("bookings").As("b")
		q := builder.Must(builder.Select(p.Col("id")).From(p).Join(b, b.Col("id").EqCol(p.Col("booking_id"))).Build())
		scopes := isolationScopes[:7]
		var wg sync.WaitGroup
		errs := make(chan error, 8)
		for w := 0; w < 8; w++ {
			wg.Add(1)
			go func(w int) {
				defer wg.Done()
				for i := 0; i < 40; i++ {
					sc := scopes[(w+i)%len(scopes)]
					got, err := guardedsql.All(grantCtx(sc.grants...), h.db, q, guardedsql.Scalar[int64])
					if err != nil {
						errs <- err
						return
					}
					want := h.m.visible(sc.grants).payments
					if len(got) != len(want) {
						errs <- fmt.Errorf("%s: %d rows, want %d", sc.name, len(got), len(want))
						return
					}
					for _, id := range got {
						if !want[id] {
							errs <- fmt.Errorf("%s: foreign payment %d", sc.name, id)
							return
						}
					}
				}
			}(w)
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
	})
}

// TestLogger: Options.LogStatements logs every statement to
// Options.Logger at debug level, without argument values; without it the
// same Logger receives no statement.
func TestLogger(t *testing.T) {
	for _, on := range []bool{true, false} {
		var buf strings.Builder
		logger := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
		h := newHotelSized(t, 2, 1, 1, 1, guardedsql.Options{Logger: logger, LogStatements: on})
		g := h.sch.Table("guests").As("g")
		q := builder.Must(builder.Select(g.Col("id")).From(g).Where(g.Col("email").Eq("secret@example.com")).Build())
		if _, err := guardedsql.All(grantCtx(chainG("acme")), h.db, q, guardedsql.Scalar[int64]); err != nil {
			t.Fatal(err)
		}
		out := buf.String()
		if strings.Contains(out, "secret@example.com") || strings.Contains(out, `"acme"`) {
			t.Fatalf("LogStatements=%v: a value reached the log: %s", on, out)
		}
		if logged := strings.Contains(out, "kind=select") && strings.Contains(out, "args=2"); logged != on {
			t.Fatalf("LogStatements=%v: statement logged = %v: %s", on, logged, out)
		}
	}
}
