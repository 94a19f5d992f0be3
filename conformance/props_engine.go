package conformance

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tenantmcp/tenantmcp/builder"
	"github.com/tenantmcp/tenantmcp/guardedsql"
	"github.com/tenantmcp/tenantmcp/guardedsql/postgres"
	"github.com/tenantmcp/tenantmcp/internal/logbuf"
)

// signedScope returns doc signed for tx with the scratch database's key,
// as the guarded DB signs it.
func (r *runner) signedScope(p *pt, tx pgx.Tx, doc string) string {
	var nonce string
	if err := tx.QueryRow(p.ctx, postgres.ScopeNonceSQL).Scan(&nonce); err != nil {
		p.Fatalf("transaction nonce: %v", err)
	}
	v, err := postgres.SignScope(r.sc.rlsKey, nonce, doc, postgres.Options{})
	if err != nil {
		p.Fatalf("signing the scope: %v", err)
	}
	return v
}

// setSignedScope sets, in tx, doc signed for tx.
func (r *runner) setSignedScope(p *pt, tx pgx.Tx, doc string) {
	if _, err := tx.Exec(p.ctx, `SELECT set_config($1, $2, true)`, pgSetting, r.signedScope(p, tx, doc)); err != nil {
		p.Fatalf("set_config: %v", err)
	}
}

// P35: raw SQL as the application role cannot give itself a scope. It
// sets the scope setting itself, unsigned (transaction-local and
// session-level), with a made-up MAC, and with a correctly signed value
// replayed from another transaction (of another connection, and an
// earlier one of its own): every tenant-bound table shows no row. The
// control, the value signed for the very transaction, shows the oracle's
// rows.
func propSignedContext(p *pt, r *runner) {
	conn, err := pgx.Connect(p.ctx, r.sc.guardedDSN)
	if err != nil {
		p.Fatalf("connecting as the app role: %v", err)
	}
	defer conn.Close(p.ctx)
	other, err := pgx.Connect(p.ctx, r.sc.guardedDSN)
	if err != nil {
		p.Fatalf("connecting as the app role: %v", err)
	}
	defer other.Close(p.ctx)
	none := func(q interface {
		Query(context.Context, string, ...any) (pgx.Rows, error)
	}, what string) {
		for _, name := range r.g.bound {
			got, err := r.pgKeys(p.ctx, q, name)
			if err != nil {
				p.Errorf("%s: SELECT from %s: %v (want zero rows, not an error)", what, name, err)
			} else if len(got) != 0 {
				p.Errorf("%s: SELECT from %s as the app role returned %d rows; want none", what, name, len(got))
			}
		}
	}
	for _, tn := range r.tenants[:min(2, len(r.tenants))] {
		doc := r.scopeDoc(tn.Grants)
		// The control, and a value to replay.
		tx, err := conn.Begin(p.ctx)
		if err != nil {
			p.Fatalf("begin: %v", err)
		}
		signed := r.signedScope(p, tx, doc)
		if _, err := tx.Exec(p.ctx, `SELECT set_config($1, $2, true)`, pgSetting, signed); err != nil {
			p.Fatalf("set_config: %v", err)
		}
		for _, name := range r.g.bound {
			got, err := r.pgKeys(p.ctx, tx, name)
			if err != nil {
				p.Errorf("control: %s as %s: %v", name, tn, err)
			} else if d := diff(got, r.or.visible(name, tn.Grants)); d != "" {
				p.Errorf("control: %s as %s with the context signed for its transaction: %s", name, tn, d)
			}
		}
		// Replayed on another connection while the signed transaction is
		// still open.
		otx, err := other.Begin(p.ctx)
		if err != nil {
			p.Fatalf("begin: %v", err)
		}
		if _, err := otx.Exec(p.ctx, `SELECT set_config($1, $2, true)`, pgSetting, signed); err != nil {
			p.Fatalf("set_config: %v", err)
		}
		none(otx, "signed value replayed on another connection as "+tn.String())
		_ = otx.Rollback(p.ctx)
		_ = tx.Rollback(p.ctx)

		r.exchangeReplays(p, conn, other, tn, doc, none)

		for _, c := range []struct {
			what, value string
			local       bool
		}{
			{"unsigned document", doc, true},
			{"unsigned document, session level", doc, false},
			{"signed value replayed in a later transaction", signed, true},
			{"signed value replayed at session level", signed, false},
			{"made-up MAC", "v1." + r.sc.rlsKey.ID + "." + strings.Repeat("ab", 32) + "." + doc, true},
		} {
			tx, err := conn.Begin(p.ctx)
			if err != nil {
				p.Fatalf("begin: %v", err)
			}
			if _, err := tx.Exec(p.ctx, `SELECT set_config($1, $2, $3)`, pgSetting, c.value, c.local); err != nil {
				p.Fatalf("set_config: %v", err)
			}
			none(tx, c.what+" as "+tn.String())
			_ = tx.Rollback(p.ctx)
			if !c.local { // the session-level value outlives the transaction
				none(conn, c.what+" as "+tn.String()+", next statement")
				if _, err := conn.Exec(p.ctx, `SELECT set_config($1, '', false)`, pgSetting); err != nil {
					p.Fatalf("reset: %v", err)
				}
			}
		}
	}
}

// exchangeReplays is P35 for the one-round-trip exchange (the scope_set
// statement of [postgres.ScopeExchange]): a value signed for conn's next
// counter sets the oracle's rows once (the control), and is refused when
// sent again on conn after its transaction rolled back, or on other (with
// other's own counter opened): the statement fails and every
// tenant-bound table shows no row.
func (r *runner) exchangeReplays(p *pt, conn, other *pgx.Conn, tn Tenant, doc string, none func(q interface {
	Query(context.Context, string, ...any) (pgx.Rows, error)
}, what string)) {
	open, set, err := postgres.ScopeExchange(postgres.Options{})
	if err != nil {
		p.Fatalf("exchange statements: %v", err)
	}
	var ctr int64
	if err := conn.QueryRow(p.ctx, open).Scan(&ctr); err != nil {
		p.Fatalf("opening the exchange counter as the app role: %v", err)
	}
	v, err := postgres.SignExchange(r.sc.rlsKey, conn.PgConn().PID(), ctr, doc, postgres.Options{})
	if err != nil {
		p.Fatalf("signing an exchange value: %v", err)
	}
	tx, err := conn.Begin(p.ctx)
	if err != nil {
		p.Fatalf("begin: %v", err)
	}
	if _, err := tx.Exec(p.ctx, set, v); err != nil {
		p.Fatalf("control: the exchange value signed for this backend's next counter: %v", err)
	}
	for _, name := range r.g.bound {
		got, err := r.pgKeys(p.ctx, tx, name)
		if err != nil {
			p.Errorf("exchange control: %s as %s: %v", name, tn, err)
		} else if d := diff(got, r.or.visible(name, tn.Grants)); d != "" {
			p.Errorf("exchange control: %s as %s: %s", name, tn, d)
		}
	}
	_ = tx.Rollback(p.ctx)
	if err := other.QueryRow(p.ctx, open).Scan(new(int64)); err != nil {
		p.Fatalf("opening the other connection's counter: %v", err)
	}
	for _, c := range []struct {
		what string
		on   *pgx.Conn
	}{{"exchange value replayed after its transaction rolled back", conn}, {"exchange value replayed on another connection", other}} {
		tx, err := c.on.Begin(p.ctx)
		if err != nil {
			p.Fatalf("begin: %v", err)
		}
		if _, err := tx.Exec(p.ctx, set, v); err == nil {
			p.Errorf("%s as %s: accepted", c.what, tn)
			none(tx, c.what+" as "+tn.String())
		} else if strings.Contains(err.Error(), v) || strings.Contains(err.Error(), doc) {
			p.Errorf("%s: the error echoes the value: %v", c.what, err)
		}
		_ = tx.Rollback(p.ctx)
		none(c.on, c.what+" as "+tn.String()+", next statement")
	}
}

// engineTextFragments are engine phrasings that come with values or that
// only the engine's own text carries.
var engineTextFragments = []string{"Duplicate entry", "constraint failed", "Key (", "violates", "Cannot delete", "SQLSTATE", "Error 1"}

// checkEngineError requires err to be a typed engine error of kind that
// carries neither engine text nor any value of the rows given.
func checkEngineError(p *pt, err error, kind error, what string, rows ...Row) {
	var ee *guardedsql.EngineError
	if !errors.Is(err, kind) || !errors.As(err, &ee) {
		p.Errorf("%s: err = %v; want %v as a guardedsql.EngineError", what, err, kind)
		return
	}
	text := err.Error()
	for _, s := range engineTextFragments {
		if strings.Contains(text, s) {
			p.Errorf("%s: engine text %q reached tool code: %v", what, s, err)
		}
	}
	for _, row := range rows {
		for col, v := range row {
			if s := fmt.Sprint(v); len(s) >= 4 && strings.Contains(text, s) {
				p.Errorf("%s: the value of %s (%q) reached tool code: %v", what, col, s, err)
			}
		}
	}
}

// P36: no engine error text reaches tool code. Deleting an own row that
// own child rows still reference makes the engine refuse (a foreign-key
// violation); tool code gets ErrReferenced naming schema identifiers
// only, never the engine's message.
func propEngineErrors(p *pt, r *runner) {
	tried := 0
	for _, tn := range r.tenants {
		ctx := r.scoped(p.ctx, tn)
		for _, name := range r.g.bound {
			t := r.g.tables[name]
			if t.parent == nil || len(t.parent.cols) != 1 || len(r.g.tables[t.parent.to].pk) != 1 || r.g.tables[t.parent.to].pk[0] != t.parent.ref[0] {
				continue
			}
			own := sortedKeys(r.or.visible(name, tn.Grants))
			if len(own) == 0 {
				continue
			}
			// Under ON DELETE CASCADE or SET NULL the delete is legal
			// and succeeds: only a blocking reference makes the engine
			// refuse it.
			if action, ok := r.deleteAction(t.parent); !ok {
				p.Logf("%s: its reference to %s is ON DELETE %s, so deleting a referenced row is legal; not used here", name, t.parent.to, action)
				continue
			}
			row := r.or.row(name, own[0])
			parent := r.g.tables[t.parent.to]
			pt := r.sch.Table(parent.name)
			del := builder.Must(builder.DeleteFrom(pt).Where(pt.Col(parent.pk[0]).Eq(row[t.parent.cols[0]])).Build())
			_, err := r.exec(ctx, r.db, del)
			tried++
			checkEngineError(p, err, guardedsql.ErrReferenced, fmt.Sprintf("DELETE of %s %v (still referenced by %s) as %s", parent.name, row[t.parent.cols[0]], name, tn), row)
			break
		}
	}
	if tried == 0 {
		p.Skipf("no tenant-bound table with a single-column scope parent whose deletes it blocks")
	}
}

// deleteAction returns the live catalog's ON DELETE action of f and
// whether it blocks the delete of a referenced row (NO ACTION, RESTRICT).
func (r *runner) deleteAction(f *fkey) (string, bool) {
	lt := r.cat.tables[strings.ToLower(f.from)]
	if lt == nil {
		return "unknown", false
	}
	for _, lf := range lt.fks {
		if lf.to != strings.ToLower(f.to) || len(lf.cols) != len(f.cols) {
			continue
		}
		same := true
		for i, c := range f.cols {
			same = same && lf.cols[i] == strings.ToLower(c)
		}
		if same {
			return strings.ToUpper(lf.onDelete), lf.blocksDelete()
		}
	}
	return "unknown", false
}

// P38: a unique key shared by all tenants (here a single-column primary
// key of a child table, which does not include the tenant path column) is
// reported at open (DB.UniqueOracles), and trying it, an insert under an
// own parent that reuses another tenant's key, fails with ErrConflict
// carrying no value of the other tenant's row.
func propUniqueOracle(p *pt, r *runner) {
	oracles := r.db.UniqueOracles()
	tried := 0
	for _, tn := range r.tenants[:min(2, len(r.tenants))] {
		ctx := r.scoped(p.ctx, tn)
		for _, name := range r.g.bound {
			t := r.g.tables[name]
			if t.parent == nil || len(t.pk) != 1 || t.pk[0] == t.parent.cols[0] {
				continue
			}
			reported := false
			for _, o := range oracles {
				if o.Table == name && strings.Join(o.Columns, ",") == t.pk[0] {
					reported = true
				}
			}
			if !reported {
				p.Errorf("%s: primary key (%s) lacks the tenant path column but DB.UniqueOracles does not list it: %+v", name, t.pk[0], oracles)
			}
			own := sortedKeys(r.or.visible(name, tn.Grants))
			foreign := r.or.foreign(name, tn.Grants)
			if len(own) == 0 || len(foreign) == 0 {
				continue
			}
			template, ok := r.readableRefs(p, t, r.raw.byKey[name][own[0]], tn)
			if !ok {
				continue
			}
			frow := r.or.row(name, foreign[0])
			bad := r.fresh(t, template)
			bad[t.pk[0]] = frow[t.pk[0]]
			_, err := r.exec(ctx, r.db, r.insertOf(p, t, bad))
			tried++
			other := Row{}
			for c, v := range frow {
				if c != t.pk[0] { // the key is the caller's own input
					other[c] = v
				}
			}
			checkEngineError(p, err, guardedsql.ErrConflict, fmt.Sprintf("INSERT into %s reusing a foreign key as %s", name, tn), other)
			break
		}
	}
	if tried == 0 {
		p.Skipf("no tenant-bound child table with a single-column primary key")
	}
}

// P37: policy drift is caught while serving. On an RLS-only DB (no guard
// predicates: the policies are the only read boundary) re-checking every
// 150 ms, the owner replaces a table's policy by USING (true); within the
// interval every call fails closed with ErrRLSUnsafe naming the table,
// with no foreign row, and the failure is logged; once the policies are
// re-applied the DB serves the oracle's rows again.
func propPolicyDrift(p *pt, r *runner) {
	const interval = 150 * time.Millisecond
	logs := &logbuf.Buffer{}
	db, closeDB, err := r.sc.openGuarded(p.ctx, r.sch, guardedsql.Options{
		Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelWarn})),
		Engine: postgres.Options{RLSOnly: true, Recheck: interval},
	})
	if err != nil {
		p.Fatalf("opening an RLS-only DB: %v", err)
	}
	defer closeDB()
	name := r.g.bound[p.rng.IntN(len(r.g.bound))]
	tn := r.tenants[0]
	ctx := r.scoped(p.ctx, tn)
	x := r.ref(name, "x")
	cols := r.g.tables[name].pk
	q := builder.Must(builder.Select(keyCols(x, r.g.tables[name])...).From(x).Build())
	read := func() (map[string]bool, error) { return keysThrough(ctx, db, q, len(cols)) }
	want := r.or.visible(name, tn.Grants)
	if got, err := read(); err != nil || diff(got, want) != "" {
		p.Fatalf("control: %s as %s before the drift: %v %s", name, tn, err, diff(got, want))
	}
	if _, err := r.sc.owner.Exec(`ALTER POLICY tenantmcp_scope ON ` + Postgres.quote(name) + ` USING (true)`); err != nil {
		p.Fatalf("altering the policy on %s: %v", name, err)
	}
	restored := false
	defer func() {
		if !restored {
			_ = prepareEngine(context.Background(), r.sc, r.sch)
		}
	}()
	time.Sleep(interval + 50*time.Millisecond)
	for range 3 {
		got, err := read()
		switch {
		case err == nil:
			p.Errorf("%s as %s: served %d rows (%d foreign) one interval after the policy was altered; want ErrRLSUnsafe", name, tn, len(got), len(got)-len(want))
		case !errors.Is(err, postgres.ErrRLSUnsafe) || !strings.Contains(err.Error(), `"`+name+`"`):
			p.Errorf("%s as %s after the drift: %v; want ErrRLSUnsafe naming the table", name, tn, err)
		}
	}
	if !strings.Contains(logs.String(), "row-level security check failed") {
		p.Errorf("the drift left no log record")
	}
	if err := prepareEngine(p.ctx, r.sc, r.sch); err != nil {
		p.Fatalf("re-applying row-level security: %v", err)
	}
	restored = true
	// Served again once a check has passed: the next one runs at most an
	// interval after the last failing one, on a loaded machine later.
	deadline := time.Now().Add(5 * time.Second)
	for {
		got, err := read()
		if err == nil {
			if d := diff(got, want); d != "" {
				p.Errorf("%s as %s after re-applying: %s", name, tn, d)
			}
			break
		}
		if !errors.Is(err, postgres.ErrRLSUnsafe) || time.Now().After(deadline) {
			p.Errorf("%s as %s after re-applying: %v", name, tn, err)
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	// The drift was in the shared database: the run's own DB may have
	// checked during it (a periodic or a new connection's check) and
	// refuse until its next check passes. Wait for it here, so that the
	// properties after this one test the target, not this drift.
	deadline = time.Now().Add(30 * time.Second)
	for {
		_, err := keysThrough(ctx, r.db, q, len(cols))
		if err == nil {
			return
		}
		if !errors.Is(err, postgres.ErrRLSUnsafe) {
			p.Errorf("the run's DB after re-applying: %v", err)
			return
		}
		if time.Now().After(deadline) {
			p.Errorf("the run's DB still refuses 30 s after re-applying: %v", err)
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// keysThrough runs q, whose first n columns are a key, through db and
// returns the set of keys it read.
func keysThrough(ctx context.Context, db guardedsql.Querier, q builder.Query, n int) (map[string]bool, error) {
	rs, err := db.Query(ctx, q)
	if err != nil {
		return nil, err
	}
	keys, err := guardedsql.CollectRows(rs, func(rs *guardedsql.Rows) (string, error) {
		vals := make([]any, n)
		ptrs := make([]any, n)
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rs.Scan(ptrs...); err != nil {
			return "", err
		}
		parts := make([]string, len(vals))
		for i, v := range vals {
			parts[i] = canon(v)
		}
		return tuple(parts...), nil
	})
	out := map[string]bool{}
	for _, k := range keys {
		out[k] = true
	}
	return out, err
}

// P48: no call's fate stops the other tenants. The periodic row-level
// security check runs on its own, never on a call: a call whose context is
// already cancelled fails alone, and another tenant reads exactly its rows
// right after; and while transactions hold every connection of a small
// pool back to back, the check comes due again and again without any of
// their statements being refused, each reading exactly its tenant's rows.
// Nothing is logged as a failed or expired check.
func propAbandonedRecheck(p *pt, r *runner) {
	if len(r.tenants) < 2 {
		p.Skipf("the target has fewer than two tenants")
	}
	const interval = 400 * time.Millisecond // half of it bounds the check on a loaded machine
	logs := &logbuf.Buffer{}
	pool, err := r.sc.appPool(p.ctx, 2)
	if err != nil {
		p.Fatalf("opening a pool of two connections: %v", err)
	}
	defer pool.Close()
	db, err := postgres.New(p.ctx, pool, r.sch, guardedsql.Options{
		Logger:   slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelWarn})),
		PoolWait: 2 * time.Second,
		Engine:   postgres.Options{Key: r.sc.rlsKey, Recheck: interval},
	})
	if err != nil {
		p.Fatalf("opening a DB with a %v re-check: %v", interval, err)
	}
	defer db.Close()
	name := r.g.bound[p.rng.IntN(len(r.g.bound))]
	t := r.g.tables[name]
	x := r.ref(name, "x")
	q := builder.Must(builder.Select(keyCols(x, t)...).From(x).Build())
	a, b := r.tenants[0], r.tenants[1]
	ts := []Tenant{a, b}
	want := []map[string]bool{r.or.visible(name, a.Grants), r.or.visible(name, b.Grants)}
	if got, err := keysThrough(r.scoped(p.ctx, b), db, q, len(t.pk)); err != nil || diff(got, want[1]) != "" {
		p.Fatalf("control: %s as %s: %v %s", name, b, err, diff(got, want[1]))
	}
	for _, round := range []string{"first", "second"} {
		time.Sleep(interval / 2) // the re-check is due
		gone, cancel := context.WithCancel(r.scoped(p.ctx, a))
		cancel()
		if _, err := db.Query(gone, q); err == nil {
			p.Errorf("%s round: a call whose context was cancelled was served", round)
		} else if errors.Is(err, postgres.ErrRLSUnsafe) {
			p.Errorf("%s round: the abandoned call as %s reported the policies unsafe: %v", round, a, err)
		}
		if got, err := keysThrough(r.scoped(p.ctx, b), db, q, len(t.pk)); err != nil {
			p.Errorf("%s round: %s as %s right after %s's abandoned call: %v; want its rows", round, name, b, a, err)
		} else if d := diff(got, want[1]); d != "" {
			p.Errorf("%s round: %s as %s after %s's abandoned call: %s", round, name, b, a, d)
		}
	}

	// Four workers, two per tenant, on two connections: a transaction
	// always waits for one, for eight intervals.
	var (
		mu          sync.Mutex
		fails       []string
		txs, busies int
		stop        atomic.Bool
		wg          sync.WaitGroup
	)
	for i := range 4 {
		who, own := ts[i%2], want[i%2]
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stop.Load() {
				ctx := r.scoped(p.ctx, who)
				err := db.Tx(ctx, func(tx *guardedsql.Tx) error {
					for range 3 {
						got, err := keysThrough(ctx, tx, q, len(t.pk))
						if err != nil {
							return err
						}
						if d := diff(got, own); d != "" {
							return fmt.Errorf("%s as %s: %s", name, who, d)
						}
						time.Sleep(time.Millisecond) // hold the connection a little
					}
					return nil
				})
				// The pool's own wait bound (ErrBusy, a loaded machine) is
				// this load's, not the check's: the old design's refusal
				// matches ErrRLSUnsafe, which ErrBusy alone does not.
				busy := errors.Is(err, guardedsql.ErrBusy) && !errors.Is(err, postgres.ErrRLSUnsafe)
				mu.Lock()
				switch {
				case busy:
					busies++
				case err != nil:
					fails = append(fails, err.Error())
				default:
					txs++
				}
				mu.Unlock()
				if err != nil && !busy {
					return
				}
			}
		}()
	}
	time.Sleep(8 * interval)
	stop.Store(true)
	wg.Wait()
	for _, f := range fails {
		p.Errorf("a transaction on the saturated pool failed (the re-check must not cost any call): %s", f)
	}
	if txs < 20 || busies > txs {
		p.Errorf("only %d transactions ran on the saturated pool in %s (%d waited out the pool wait): the load did not cover the check", txs, 8*interval, busies)
	}
	if out := logs.String(); strings.Contains(out, "row-level security check failed") || strings.Contains(out, "verdict expired") {
		p.Errorf("an abandoned call or a busy pool was logged as a failed row-level security check")
	}
}

// propMigrationLock (P51): while a migration holds ACCESS EXCLUSIVE on a
// tenant-bound table in an open transaction, a due row-level security
// re-check cannot read the policies. It must neither wait (every call
// would hang behind it until its deadline) nor let calls through on the
// unverified verdict (the migration may be changing a policy): calls,
// even of another table, fail within a bound with the retryable
// unavailable error, and are served again once the lock is released.
func propMigrationLock(p *pt, r *runner) {
	const interval = 150 * time.Millisecond
	db, closeDB, err := r.sc.openGuarded(p.ctx, r.sch, guardedsql.Options{
		Logger: slog.New(slog.DiscardHandler),
		Engine: postgres.Options{Recheck: interval},
	})
	if err != nil {
		p.Fatalf("opening a DB with a %v re-check: %v", interval, err)
	}
	defer closeDB()
	locked := r.g.bound[p.rng.IntN(len(r.g.bound))]
	name := locked
	for _, n := range r.g.bound {
		if n != locked {
			name = n // read another table: only the check can block on the lock
			break
		}
	}
	t := r.g.tables[name]
	x := r.ref(name, "x")
	q := builder.Must(builder.Select(keyCols(x, t)...).From(x).Build())
	a := r.tenants[0]
	want := r.or.visible(name, a.Grants)
	if got, err := keysThrough(r.scoped(p.ctx, a), db, q, len(t.pk)); err != nil || diff(got, want) != "" {
		p.Fatalf("control: %s as %s: %v %s", name, a, err, diff(got, want))
	}
	migration, err := r.sc.owner.BeginTx(p.ctx, nil)
	if err != nil {
		p.Fatalf("migration: %v", err)
	}
	defer migration.Rollback()
	if _, err := migration.ExecContext(p.ctx, `LOCK TABLE `+Postgres.quote(locked)+` IN ACCESS EXCLUSIVE MODE`); err != nil {
		p.Fatalf("migration: lock %s: %v", locked, err)
	}
	const bound = 3 * time.Second
	named := 0
	for i := range 6 {
		time.Sleep(interval + 50*time.Millisecond) // the re-check is due
		ctx, cancel := context.WithTimeout(r.scoped(p.ctx, a), 3*bound)
		start := time.Now()
		got, err := keysThrough(ctx, db, q, len(t.pk))
		d := time.Since(start)
		cancel()
		switch {
		case err == nil:
			p.Errorf("call %d: %s served (%d rows) while %s was locked and the policies unverified", i, name, len(got), locked)
		case d > bound:
			p.Errorf("call %d: waited %s for the migration's lock on %s (bound %s): %v", i, d.Round(time.Millisecond), locked, bound, err)
		case !guardedsql.IsUnavailable(err):
			p.Errorf("call %d: %v, want the retryable unavailable error", i, err)
		case strings.Contains(err.Error(), "waited too long for a lock"):
			named++
		}
	}
	// The check's own lock bound (postgres.CheckLockTimeout) makes it
	// give up on the lock and say so; without it the calls still fail
	// fast (they never wait long for the check), but nobody learns why.
	if named == 0 {
		p.Errorf("in 6 calls over %s of the migration's lock, no refusal said the check waited for a lock", 6*(interval+50*time.Millisecond))
	}
	if err := migration.Rollback(); err != nil {
		p.Fatalf("migration: rollback: %v", err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		got, err := keysThrough(r.scoped(p.ctx, a), db, q, len(t.pk))
		if err == nil {
			if d := diff(got, want); d != "" {
				p.Errorf("after the migration: %s as %s: %s", name, a, d)
			}
			return
		}
		if time.Now().After(deadline) {
			p.Errorf("not served again 5s after the migration ended: %v", err)
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}
