package conformance

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tenantmcp/tenantmcp/builder"
	"github.com/tenantmcp/tenantmcp/guardedsql"
	"github.com/tenantmcp/tenantmcp/guardedsql/postgres"
	"github.com/tenantmcp/tenantmcp/scope"
)

// pgSetting is the transaction-local setting the PostgreSQL policies read,
// as documented by postgres.New.
const pgSetting = "tenantmcp.scope"

const pgOnly = "PostgreSQL only: the other engines have no row-level security or session context; their isolation rests on the guard's predicates, which the other properties test"

// scopeDoc writes the typed scope document the policies read
// ({"chain":["acme"],"hotel":[12]}) from grants, following its documented
// format rather than the guard's encoder.
func (r *runner) scopeDoc(grants []scope.Grant) string {
	gs := r.g.grantSet(grants)
	m := map[string][]any{}
	for _, l := range r.g.levels {
		for _, id := range sortedKeys(gs[l.Name]) {
			m[l.Name] = append(m[l.Name], r.levelValue(l.Name, id))
		}
	}
	b, _ := json.Marshal(m)
	return string(b)
}

// pgKeys reads the keys of table on a raw connection.
func (r *runner) pgKeys(ctx context.Context, q interface {
	Query(context.Context, string, ...any) (pgx.Rows, error)
}, table string) (map[string]bool, error) {
	t := r.g.tables[table]
	cols := make([]string, len(t.pk))
	for i, c := range t.pk {
		cols[i] = Postgres.quote(c)
	}
	rows, err := q.Query(ctx, "SELECT "+strings.Join(cols, ", ")+" FROM "+Postgres.quote(table))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]bool{}
	for rows.Next() {
		vals, err := rows.Values()
		if err != nil {
			return nil, err
		}
		parts := make([]string, len(vals))
		for i, v := range vals {
			parts[i] = canon(v)
		}
		out[tuple(parts...)] = true
	}
	return out, rows.Err()
}

// P15: on a pool of ONE connection, guarded calls of different tenants
// interleave (reads, refused writes, rolled-back transactions, cancelled
// calls): each read returns exactly its own tenant's rows, and between
// calls the pooled connection carries no scope (the setting is empty and
// raw reads on it return no rows).
func propPooledContext(p *pt, r *runner) {
	pool, err := r.sc.appPool(p.ctx, 1)
	if err != nil {
		p.Fatalf("pool of one connection: %v", err)
	}
	defer pool.Close()
	db, err := postgres.New(p.ctx, pool, r.sch, guardedsql.Options{Engine: postgres.Options{Key: r.sc.rlsKey}})
	if err != nil {
		p.Fatalf("guard on a one-connection pool: %v", err)
	}
	defer db.Close()
	pids := map[uint32]bool{}
	checks := 0
	checkIdle := func(after string) {
		c, err := pool.Acquire(p.ctx)
		if err != nil {
			p.Errorf("acquire after %s: %v", after, err)
			return
		}
		defer c.Release()
		var setting *string
		var pid uint32
		if err := c.QueryRow(p.ctx, `SELECT current_setting($1, true), pg_backend_pid()`, pgSetting).Scan(&setting, &pid); err != nil {
			p.Errorf("reading the setting after %s: %v", after, err)
			return
		}
		pids[pid] = true
		checks++
		if setting != nil && *setting != "" {
			p.Errorf("after %s the pooled connection still carries scope %q", after, *setting)
		}
		for _, name := range r.g.bound {
			got, err := r.pgKeys(p.ctx, c, name)
			if err != nil {
				p.Errorf("raw read of %s after %s: %v", name, after, err)
			} else if len(got) != 0 {
				p.Errorf("after %s a raw read of %s on the pooled connection returns %d rows; want none", after, name, len(got))
			}
		}
	}
	rounds := 3 * len(r.tenants)
	for i := range rounds {
		tn := r.tenants[i%len(r.tenants)]
		ctx := r.scoped(p.ctx, tn)
		name := r.g.bound[p.rng.IntN(len(r.g.bound))]
		t := r.g.tables[name]
		x := r.ref(name, "x")
		q := p.q(builder.Select(keyCols(x, t)...).From(x).Build())
		r.touch(q)
		rows, err := db.Query(ctx, q)
		if err != nil {
			p.Errorf("%s as %s: %v", name, tn, err)
			continue
		}
		got := map[string]bool{}
		for rows.Next() {
			vals := make([]any, len(t.pk))
			ptrs := make([]any, len(t.pk))
			for j := range vals {
				ptrs[j] = &vals[j]
			}
			if err := rows.Scan(ptrs...); err != nil {
				p.Errorf("scan: %v", err)
				break
			}
			parts := make([]string, len(vals))
			for j, v := range vals {
				parts[j] = canon(v)
			}
			got[tuple(parts...)] = true
		}
		if err := rows.Close(); err != nil {
			p.Errorf("closing rows: %v", err)
		}
		if d := diff(got, r.or.visible(name, tn.Grants)); d != "" {
			p.Errorf("call %d, %s as %s right after %s: %s", i, name, tn, r.tenants[(i+len(r.tenants)-1)%len(r.tenants)].Name, d)
		}
		checkIdle(fmt.Sprintf("a read as %s", tn.Name))
		switch i % 3 {
		case 0: // a write the guard refuses, rolled back after it ran
			if foreign := r.or.foreign(name, tn.Grants); len(foreign) > 0 && r.mutable[name] != "" {
				k := foreign[p.rng.IntN(len(foreign))]
				if v, ok := r.otherValue(name, r.mutable[name], r.raw.byKey[name][k]); ok {
					tb := r.sch.Table(name)
					_, err := db.Exec(ctx, p.u(builder.UpdateTable(tb).Set(r.mutable[name], v).Where(pkIs(tb, t, r.or.row(name, k))).ExpectOne().Build()))
					if !errors.Is(err, guardedsql.ErrNotFound) {
						p.Errorf("foreign ExpectOne update as %s: %v", tn, err)
					}
					checkIdle("a refused write as " + tn.Name)
				}
			}
		case 1: // a transaction that fails and rolls back
			_ = db.Tx(ctx, func(tx *guardedsql.Tx) error {
				_, err := tx.Query(ctx, q)
				if err == nil {
					return errRollback
				}
				return err
			})
			checkIdle("a rolled-back transaction as " + tn.Name)
		case 2: // a call cancelled before it starts
			cctx, cancel := context.WithCancel(ctx)
			cancel()
			if _, err := db.Query(cctx, q); err == nil {
				p.Errorf("a cancelled query succeeded")
			}
			checkIdle("a cancelled call as " + tn.Name)
		}
	}
	if len(pids) == 0 || len(pids) >= checks {
		p.Errorf("%d backend pids in %d inspections: the pool did not reuse its connection, so reuse was not tested", len(pids), checks)
	}
	p.Logf("%d interleaved guarded calls over %d tenants on a one-connection pool; %d inspections of the idle connection saw %d backend pid(s) (a new one only after a cancelled call); no scope outlived its call", rounds, len(r.tenants), checks, len(pids))
}

// P16: raw SQL as the app role, bypassing the guard: without the scope
// setting every tenant-bound table returns zero rows; with a tenant's
// scope set in a transaction it returns exactly that tenant's rows, cannot
// update another tenant's rows or insert under another tenant's parent,
// set a level column of its own row to an id its scope does not reach
// (rawLevelColumns) or point a key up the hierarchy at a row it does not
// see (rawUpKeys); and after COMMIT the connection has no scope again.
func propRLSRaw(p *pt, r *runner) {
	conn, err := pgx.Connect(p.ctx, r.sc.guardedDSN)
	if err != nil {
		p.Fatalf("connecting as the app role: %v", err)
	}
	defer conn.Close(p.ctx)
	for _, name := range r.g.bound {
		got, err := r.pgKeys(p.ctx, conn, name)
		if err != nil {
			p.Errorf("raw SELECT from %s with no scope: %v (want zero rows, not an error)", name, err)
		} else if len(got) != 0 {
			p.Errorf("raw SELECT from %s as the app role with no scope returned %d rows; want none", name, len(got))
		}
	}
	for _, tn := range r.tenants {
		tx, err := conn.Begin(p.ctx)
		if err != nil {
			p.Fatalf("begin: %v", err)
		}
		r.setSignedScope(p, tx, r.scopeDoc(tn.Grants))
		for _, name := range r.g.bound {
			got, err := r.pgKeys(p.ctx, tx, name)
			if err != nil {
				p.Errorf("raw SELECT from %s as %s: %v", name, tn, err)
			} else if d := diff(got, r.or.visible(name, tn.Grants)); d != "" {
				p.Errorf("raw SELECT from %s as %s under RLS: %s", name, tn, d)
			}
		}
		// Writes, in a savepoint each: RLS must refuse them by itself.
		for _, name := range r.g.bound {
			t := r.g.tables[name]
			col := r.mutable[name]
			foreign := r.or.foreign(name, tn.Grants)
			if col == "" || len(foreign) == 0 {
				continue
			}
			k := foreign[p.rng.IntN(len(foreign))]
			v, ok := r.otherValue(name, col, r.raw.byKey[name][k])
			if !ok {
				continue
			}
			where, args := pgWhere(t.pk, r.or.row(name, k), 2)
			tag, err := tx.Exec(p.ctx, "UPDATE "+Postgres.quote(name)+" SET "+Postgres.quote(col)+" = $1 WHERE "+where, append([]any{v}, args...)...)
			if err != nil {
				p.Errorf("raw UPDATE of foreign %s as %s: %v (want 0 rows)", name, tn, err)
				break
			}
			if tag.RowsAffected() != 0 {
				p.Errorf("raw UPDATE of foreign %s %s as %s under RLS: %d rows", name, k, tn, tag.RowsAffected())
			}
		}
		for _, name := range r.g.bound {
			t := r.g.tables[name]
			if t.parent == nil {
				continue
			}
			own := sortedKeys(r.or.visible(name, tn.Grants))
			fp := r.or.foreign(t.parent.to, tn.Grants)
			if len(own) == 0 || len(fp) == 0 {
				continue
			}
			row := r.fresh(t, r.raw.byKey[name][own[0]])
			prow := r.or.row(t.parent.to, fp[p.rng.IntN(len(fp))])
			for i, c := range t.parent.cols {
				row[c] = prow[t.parent.ref[i]]
			}
			cols := make([]string, len(t.cols))
			phs := make([]string, len(t.cols))
			vals := make([]any, len(t.cols))
			for i, c := range t.cols {
				cols[i], phs[i], vals[i] = Postgres.quote(c), fmt.Sprintf("$%d", i+1), row[c]
			}
			what := fmt.Sprintf("raw INSERT into %s under a foreign %s as %s", name, t.parent.to, tn)
			r.rawAttempt(p, tx, what, "INSERT INTO "+Postgres.quote(name)+" ("+strings.Join(cols, ", ")+") VALUES ("+strings.Join(phs, ", ")+")", vals...)
		}
		r.rawLevelColumns(p, tx, tn)
		r.rawUpKeys(p, tx, tn)
		if err := tx.Rollback(p.ctx); err != nil {
			p.Fatalf("rollback: %v", err)
		}
	}
	// A committed transaction leaves no scope behind.
	tn := r.tenants[0]
	tx, err := conn.Begin(p.ctx)
	if err != nil {
		p.Fatalf("begin: %v", err)
	}
	r.setSignedScope(p, tx, r.scopeDoc(tn.Grants))
	if err := tx.Commit(p.ctx); err != nil {
		p.Fatalf("commit: %v", err)
	}
	var setting *string
	if err := conn.QueryRow(p.ctx, `SELECT current_setting($1, true)`, pgSetting).Scan(&setting); err != nil {
		p.Fatalf("current_setting: %v", err)
	}
	if setting != nil && *setting != "" {
		p.Errorf("after COMMIT the connection still carries scope %q", *setting)
	}
	for _, name := range r.g.bound {
		if got, err := r.pgKeys(p.ctx, conn, name); err != nil || len(got) != 0 {
			p.Errorf("raw SELECT from %s after the scoped transaction committed: %d rows, %v; want none", name, len(got), err)
		}
	}
}

// rawLevelColumns is P16's test of each level column on its own: in tx,
// under tn's signed scope, an own row's level column (not its identity)
// set to an id of that level that no visible row of the table holds and
// tn was not granted (another tenant's chain for a hotel's manager,
// another workspace's project for a workspace) must be refused by
// row-level security, though a foreign key covers the column and the row
// stays in scope by another one. The value comes from another tenant's
// row, and the other columns of every composite key covering the column
// take that row's values with it ((org_id, workspace_id) moved together):
// changed alone, the database's foreign key would refuse the tuple after
// the policy had admitted it, and the attempt would prove nothing.
func (r *runner) rawLevelColumns(p *pt, tx pgx.Tx, tn Tenant) {
	granted := func(level, id string) bool {
		return slices.ContainsFunc(tn.Grants, func(g scope.Grant) bool { return g.Level == level && g.ID == id })
	}
	for _, name := range r.g.bound {
		t := r.g.tables[name]
		own := sortedKeys(r.or.visible(name, tn.Grants))
		foreign := r.or.foreign(name, tn.Grants)
		if len(own) == 0 || len(foreign) == 0 {
			continue
		}
		for _, lc := range t.levelCols {
			if len(t.pk) == 1 && t.pk[0] == lc.col {
				continue // the row's identity: the guard's and the policy's rule exempt it
			}
			held := map[string]bool{}
			for _, k := range own {
				held[fmt.Sprint(r.or.row(name, k)[lc.col])] = true
			}
			var from Row
			for _, k := range foreign {
				if x := r.or.row(name, k)[lc.col]; x != nil && !held[fmt.Sprint(x)] && !granted(lc.level, fmt.Sprint(x)) {
					from = r.or.row(name, k)
					break
				}
			}
			if from == nil {
				continue
			}
			cols := []string{lc.col}
			for _, f := range r.g.tenantFKs(t) {
				if len(f.cols) > 1 && slices.Contains(f.cols, lc.col) {
					for _, c := range f.cols {
						if !slices.Contains(cols, c) && !slices.Contains(t.pk, c) {
							cols = append(cols, c)
						}
					}
				}
			}
			set := make([]string, len(cols))
			args := make([]any, len(cols))
			for i, c := range cols {
				set[i] = fmt.Sprintf("%s = $%d", Postgres.quote(c), i+1)
				args[i] = from[c]
			}
			k := own[0]
			where, wargs := pgWhere(t.pk, r.or.row(name, k), len(cols)+1)
			what := fmt.Sprintf("raw UPDATE of own %s %s as %s setting %v to another tenant's %v (level %s)", name, k, tn, cols, args, lc.level)
			r.rawAttempt(p, tx, what, "UPDATE "+Postgres.quote(name)+" SET "+strings.Join(set, ", ")+" WHERE "+where, append(args, wargs...)...)
		}
	}
}

// rawAttempt runs one of P16's raw writes, which row-level security must
// refuse, in a savepoint of tx, and judges it: refused (SQLSTATE 42501, or
// no row changed), accepted (a row changed), or refused by an integrity
// constraint (SQLSTATE class 23), which PostgreSQL checks only after the
// row has passed WITH CHECK (ExecWithCheckOptions runs before
// ExecConstraints, the unique indexes and the foreign-key triggers), so
// the policy accepted it too and another tenant's key, or its existence,
// is what stopped it. Any other error (a type, a cast) proves nothing and
// is logged.
func (r *runner) rawAttempt(p *pt, tx pgx.Tx, what, q string, args ...any) {
	if _, err := tx.Exec(p.ctx, "SAVEPOINT tm_conf"); err != nil {
		p.Fatalf("savepoint: %v", err)
	}
	tag, err := tx.Exec(p.ctx, q, args...)
	var pe *pgconn.PgError
	switch {
	case err == nil && tag.RowsAffected() != 0:
		p.Errorf("%s: row-level security accepted it, and that tenant now reads the row", what)
	case err == nil, errors.As(err, &pe) && pe.Code == "42501":
		p.Logf("%s: refused", what)
	case pe != nil && strings.HasPrefix(pe.Code, "23"):
		p.Errorf("%s: row-level security accepted it; only the constraint %s refused it afterwards (SQLSTATE %s), which tells the other tenant's keys from missing ones", what, pe.ConstraintName, pe.Code)
	default:
		p.Logf("%s: failed for another reason (proves nothing): %v", what, err)
	}
	if _, err := tx.Exec(p.ctx, "ROLLBACK TO SAVEPOINT tm_conf"); err != nil {
		p.Fatalf("rollback to savepoint: %v", err)
	}
}

// reach returns the levels table t reaches: its level columns' and, along
// its scope parent, its parent's.
func (g *graph) reach(t *tinfo) map[string]bool {
	out := map[string]bool{}
	for seen := map[string]bool{}; t != nil && !seen[t.name]; {
		seen[t.name] = true
		for _, lc := range t.levelCols {
			out[lc.level] = true
		}
		if t.parent == nil {
			break
		}
		t = g.tables[t.parent.to]
	}
	return out
}

// rawUpKeys is P16's test of the checked foreign keys up the hierarchy (a
// project's task and its org-level assignee: the referenced table does not
// reach every level the row's does) and into the table itself (a
// document's parent document): in tx, under tn's signed scope, an
// own row's key set to a row tn does not see must be refused by row-level
// security (SQLSTATE 42501) or change no row; accepted, raw SQL points the
// row at another tenant's row and tells its key from a missing one.
func (r *runner) rawUpKeys(p *pt, tx pgx.Tx, tn Tenant) {
	for _, name := range r.g.bound {
		t := r.g.tables[name]
		own := sortedKeys(r.or.visible(name, tn.Grants))
		if len(own) == 0 || t.byRef {
			continue
		}
		from := r.g.reach(t)
		for _, f := range r.g.tenantFKs(t) {
			to := r.g.tables[f.to]
			if to.byRef || f == t.parent {
				continue
			}
			up := f.to == name // a key into the table itself: tested alike
			for l := range from {
				up = up || !r.g.reach(to)[l]
			}
			if !up || f.to != name && slices.ContainsFunc(f.cols, func(c string) bool {
				return slices.ContainsFunc(t.levelCols, func(lc levelCol) bool { return lc.col == c })
			}) {
				continue
			}
			// Not the key the row holds already: keeping it is allowed.
			k := own[0]
			holds := Key(r.or.row(name, k), f.cols)
			targets := slices.DeleteFunc(r.or.foreign(f.to, tn.Grants), func(x string) bool { return Key(r.or.row(f.to, x), f.ref) == holds })
			if len(targets) == 0 {
				continue
			}
			trow := r.or.row(f.to, targets[0])
			set := make([]string, len(f.cols))
			args := make([]any, len(f.cols))
			for i, c := range f.cols {
				set[i] = fmt.Sprintf("%s = $%d", Postgres.quote(c), i+1)
				args[i] = trow[f.ref[i]]
			}
			where, wargs := pgWhere(t.pk, r.or.row(name, k), len(f.cols)+1)
			what := fmt.Sprintf("raw UPDATE of own %s %s as %s pointing %v at %s %s, a row its scope does not see (up the hierarchy or in the table itself)", name, k, tn, f.cols, f.to, targets[0])
			r.rawAttempt(p, tx, what, "UPDATE "+Postgres.quote(name)+" SET "+strings.Join(set, ", ")+" WHERE "+where, append(args, wargs...)...)
		}
	}
}

func pgWhere(cols []string, row Row, first int) (string, []any) {
	parts := make([]string, len(cols))
	args := make([]any, len(cols))
	for i, c := range cols {
		parts[i] = fmt.Sprintf("%s = $%d", Postgres.quote(c), first+i)
		args[i] = row[c]
	}
	return strings.Join(parts, " AND "), args
}

// P17: the start-up check (postgres.CheckRLS, run by postgres.New)
// passes for the app role with the policies in force, and refuses, with
// the specific error, a superuser connection, a BYPASSRLS role, a table
// whose policy was dropped, a table whose row-level security is not
// forced, an extra permissive policy, a function the policies call whose
// body was replaced (alteredPolicyFuncs), and a relation the app role can
// read that reaches a table's rows around its policies (a view owned by
// the superuser, a materialized view, an inheritance child or partition);
// postgres.New opens no DB then.
func propStartupCheck(p *pt, r *runner) {
	ctx := p.ctx
	defer r.awaitServing(p)
	check := func(pool *pgxpool.Pool, want error, what string) {
		err := postgres.CheckRLS(ctx, pool, r.sch, postgres.Options{})
		switch {
		case want == nil && err != nil:
			p.Errorf("%s: CheckRLS = %v, want nil", what, err)
		case want != nil && (!errors.Is(err, want) || !errors.Is(err, postgres.ErrRLSUnsafe)):
			p.Errorf("%s: CheckRLS = %v, want %v (and ErrRLSUnsafe)", what, err, want)
		}
		if want != nil {
			if db, err := postgres.New(ctx, pool, r.sch, guardedsql.Options{Engine: postgres.Options{Key: r.sc.rlsKey}}); err == nil {
				db.Close()
				p.Errorf("%s: postgres.New opened a DB; want it refused", what)
			}
		}
	}
	app, err := r.sc.appPool(ctx, 2)
	if err != nil {
		p.Fatalf("app pool: %v", err)
	}
	defer app.Close()
	check(app, nil, "app role, policies in force")

	owner, err := r.sc.pgPool(ctx, r.sc.ownerDSN, 2)
	if err != nil {
		p.Fatalf("owner pool: %v", err)
	}
	defer owner.Close()
	check(owner, postgres.ErrRLSSuperuser, "superuser (the scratch database's owner)")

	// A BYPASSRLS role.
	role, pw := "tm_conf_bypass_"+randomSuffix(), randomSuffix()
	admin, err := pgx.Connect(ctx, r.sc.adminDSN)
	if err != nil {
		p.Fatalf("admin connection: %v", err)
	}
	defer admin.Close(ctx)
	if _, err := admin.Exec(ctx, `CREATE ROLE `+role+` LOGIN PASSWORD '`+pw+`' NOSUPERUSER BYPASSRLS`); err != nil {
		p.Fatalf("creating a BYPASSRLS role: %v", err)
	}
	defer func() {
		if _, err := owner.Exec(context.Background(), `REVOKE ALL ON ALL TABLES IN SCHEMA public FROM `+role); err != nil {
			p.Errorf("revoking: %v", err)
		}
		if _, err := owner.Exec(context.Background(), `REVOKE ALL ON SCHEMA public FROM `+role); err != nil {
			p.Errorf("revoking: %v", err)
		}
		if _, err := owner.Exec(context.Background(), `REVOKE ALL ON DATABASE `+r.sc.dbName+` FROM `+role); err != nil {
			p.Errorf("revoking: %v", err)
		}
		if _, err := admin.Exec(context.Background(), `DROP ROLE `+role); err != nil {
			p.Errorf("dropping the BYPASSRLS role: %v", err)
		}
	}()
	for _, q := range []string{
		`GRANT CONNECT ON DATABASE ` + r.sc.dbName + ` TO ` + role,
		`GRANT USAGE ON SCHEMA public TO ` + role,
		`GRANT SELECT ON ALL TABLES IN SCHEMA public TO ` + role,
	} {
		if _, err := owner.Exec(ctx, q); err != nil {
			p.Fatalf("%s: %v", q, err)
		}
	}
	bypass, err := r.sc.pgPool(ctx, r.sc.dsnAs(role, pw), 1)
	if err != nil {
		p.Fatalf("bypass pool: %v", err)
	}
	check(bypass, postgres.ErrRLSBypassRLS, "a BYPASSRLS role")
	bypass.Close()

	// Tampered policies: each change is undone by re-applying the DDL.
	name := r.g.bound[p.rng.IntN(len(r.g.bound))]
	reapply := func() {
		if err := postgres.ApplyRLS(context.Background(), owner, r.sch, postgres.Options{Key: r.sc.rlsKey}); err != nil {
			p.Fatalf("re-applying row-level security: %v", err)
		}
	}
	// The policy the library installed on the table, as the catalog names it.
	var policy string
	if err := owner.QueryRow(ctx, `SELECT polname FROM pg_policy WHERE polrelid = $1::regclass ORDER BY polname LIMIT 1`, Postgres.quote(name)).Scan(&policy); err != nil {
		p.Fatalf("finding the policy on %s: %v", name, err)
	}
	tamper := []struct {
		what, sql string
		want      error
		undo      string
	}{
		{"policy dropped on " + name, `DROP POLICY ` + Postgres.quote(policy) + ` ON ` + Postgres.quote(name), postgres.ErrRLSPolicyMissing, ""},
		{"row-level security not forced on " + name, `ALTER TABLE ` + Postgres.quote(name) + ` NO FORCE ROW LEVEL SECURITY`, postgres.ErrRLSUnsafe, ""},
		{"row-level security disabled on " + name, `ALTER TABLE ` + Postgres.quote(name) + ` DISABLE ROW LEVEL SECURITY`, postgres.ErrRLSNotEnabled, ""},
		{"an extra permissive policy on " + name, `CREATE POLICY tm_conf_open ON ` + Postgres.quote(name) + ` AS PERMISSIVE FOR SELECT TO PUBLIC USING (true)`, postgres.ErrRLSPolicyUnexpected, `DROP POLICY IF EXISTS tm_conf_open ON ` + Postgres.quote(name)},
	}
	for _, tc := range tamper {
		if _, err := owner.Exec(ctx, tc.sql); err != nil {
			p.Errorf("%s: %v", tc.what, err)
			continue
		}
		check(app, tc.want, tc.what)
		if tc.undo != "" {
			if _, err := owner.Exec(context.Background(), tc.undo); err != nil {
				p.Fatalf("undoing %s: %v", tc.what, err)
			}
		}
		reapply()
		check(app, nil, "after undoing "+tc.what)
	}
	r.alteredPolicyFuncs(p, owner, app, check, reapply)
	r.aroundPolicies(p, owner, app, name, check)
}

// alteredPolicyFuncs is P17's part on the functions the policies call
// besides the verifying function (keep and sees functions, SECURITY
// INVOKER; counting functions of tables owned by reference, SECURITY
// DEFINER), found through the catalog's record of what the policies
// depend on: for one of each kind the schema has, its body replaced by
// the owner (CREATE OR REPLACE, as a migration would) with one that admits
// everything must be refused with ErrRLSPolicyMissing, and accepted again
// once RLSDDL is re-applied.
func (r *runner) alteredPolicyFuncs(p *pt, owner, app *pgxpool.Pool, check func(*pgxpool.Pool, error, string), reapply func()) {
	ctx := p.ctx
	rows, err := owner.Query(ctx, `SELECT DISTINCT ON (f.prosecdef) f.oid::regprocedure::text, f.prosecdef, pg_catalog.pg_get_functiondef(f.oid), f.prorettype::regtype::text
FROM pg_catalog.pg_depend d JOIN pg_catalog.pg_proc f ON f.oid = d.refobjid
WHERE d.classid = 'pg_catalog.pg_policy'::regclass AND d.refclassid = 'pg_catalog.pg_proc'::regclass
  AND f.pronargs > 0 -- the verifying function takes none: checkSigned's
ORDER BY f.prosecdef, pg_catalog.md5(f.oid::text || $1)`, strconv.FormatUint(p.rng.Uint64(), 10))
	if err != nil {
		p.Fatalf("listing the functions the policies call: %v", err)
	}
	type fn struct {
		sig, def, ret string
		definer       bool
	}
	var fns []fn
	for rows.Next() {
		var f fn
		if err := rows.Scan(&f.sig, &f.definer, &f.def, &f.ret); err != nil {
			p.Fatalf("listing the functions the policies call: %v", err)
		}
		fns = append(fns, f)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		p.Fatalf("listing the functions the policies call: %v", err)
	}
	if len(fns) == 0 {
		p.Logf("the policies call no function besides the verifying one: nothing to alter")
		return
	}
	for _, f := range fns {
		admit := "true" // a keep or sees function: any value is kept or seen
		if f.ret != "boolean" {
			admit = "0" // a counting function: no other tenant references the row
		}
		const bodyOpen, bodyClose = "AS $function$", "$function$"
		i, j := strings.Index(f.def, bodyOpen), strings.LastIndex(f.def, bodyClose)
		if i < 0 || j <= i+len(bodyOpen) {
			p.Fatalf("%s: unexpected definition %q", f.sig, f.def)
		}
		what := fmt.Sprintf("%s (SECURITY DEFINER %v) replaced by one returning %s", f.sig, f.definer, admit)
		if _, err := owner.Exec(ctx, f.def[:i+len(bodyOpen)]+"\nBEGIN\n  RETURN "+admit+";\nEND\n"+f.def[j:]); err != nil {
			p.Errorf("%s: %v", what, err)
			continue
		}
		check(app, postgres.ErrRLSPolicyMissing, what)
		reapply()
		check(app, nil, "after re-applying over "+what)
	}
}

// aroundPolicies is P17's part on relations around the policies: each of
// a view owned by the superuser, a materialized view and a child of table
// name, granted to the app role, and a SECURITY DEFINER function of the
// superuser reading it, is refused with ErrRLSBypassPath;
// the view and the materialized view are first shown to read the table's
// rows as the app role with no scope (so the refusal is of a real path),
// and the view made security_invoker is accepted and reads none.
func (r *runner) aroundPolicies(p *pt, owner, app *pgxpool.Pool, name string, check func(*pgxpool.Pool, error, string)) {
	ctx := p.ctx
	total := len(r.raw.byKey[name])
	rel := Postgres.quote(name)
	var partitioned bool
	if err := owner.QueryRow(ctx, `SELECT relkind = 'p' FROM pg_class WHERE oid = $1::regclass`, rel).Scan(&partitioned); err != nil {
		p.Fatalf("reading %s's kind: %v", name, err)
	}
	child := `CREATE TABLE tm_conf_around () INHERITS (` + rel + `)`
	if partitioned {
		child = `CREATE TABLE tm_conf_around PARTITION OF ` + rel + ` DEFAULT`
	}
	// count reads the relation as the app role with no scope.
	count := func(what string) int {
		var n int
		if err := app.QueryRow(ctx, `SELECT count(*) FROM tm_conf_around`).Scan(&n); err != nil {
			p.Errorf("%s: reading it as the app role: %v", what, err)
			return -1
		}
		return n
	}
	for _, c := range []struct {
		what, create, drop string
		leaks              bool // the app role reads the table's rows through it
	}{
		{"a view of " + name + " owned by the superuser", `CREATE VIEW tm_conf_around AS SELECT * FROM ` + rel, `DROP VIEW tm_conf_around`, true},
		{"a materialized view of " + name, `CREATE MATERIALIZED VIEW tm_conf_around AS SELECT * FROM ` + rel, `DROP MATERIALIZED VIEW tm_conf_around`, true},
		{"a child table of " + name, child, `DROP TABLE tm_conf_around`, false},
	} {
		if _, err := owner.Exec(ctx, c.create); err != nil {
			if c.create == child && partitioned {
				p.Logf("%s not created (a partitioned table with a default partition?): %v", c.what, err)
				continue
			}
			p.Errorf("%s: %v", c.what, err)
			continue
		}
		if _, err := owner.Exec(ctx, `GRANT SELECT ON tm_conf_around TO `+r.sc.appRole); err != nil {
			p.Fatalf("granting %s: %v", c.what, err)
		}
		if c.leaks {
			if n := count(c.what); n != total || total == 0 {
				p.Errorf("control: %s reads %d rows as the app role with no scope, want all %d (the path the check must refuse is not real)", c.what, n, total)
			}
		}
		check(app, postgres.ErrRLSBypassPath, c.what+" granted to the app role")
		if c.leaks && strings.HasPrefix(c.create, "CREATE VIEW") {
			if _, err := owner.Exec(ctx, `ALTER VIEW tm_conf_around SET (security_invoker = true)`); err != nil {
				p.Fatalf("making the view security_invoker: %v", err)
			}
			check(app, nil, c.what+", security_invoker")
			if n := count(c.what + ", security_invoker"); n != 0 {
				p.Errorf("%s, security_invoker: the app role with no scope reads %d rows through it, want none", c.what, n)
			}
		}
		if _, err := owner.Exec(context.Background(), c.drop); err != nil {
			p.Fatalf("dropping %s: %v", c.what, err)
		}
	}
	// A SECURITY DEFINER function of the superuser, which PUBLIC may
	// execute, reading the table.
	what := "a SECURITY DEFINER function of the superuser counting " + name
	if _, err := owner.Exec(ctx, `CREATE FUNCTION tm_conf_around_f() RETURNS bigint LANGUAGE sql SECURITY DEFINER AS $$ SELECT count(*) FROM `+rel+` $$`); err != nil {
		p.Fatalf("%s: %v", what, err)
	}
	var n int
	if err := app.QueryRow(ctx, `SELECT tm_conf_around_f()`).Scan(&n); err != nil || n != total || total == 0 {
		p.Errorf("control: %s counts %d rows as the app role with no scope (%v), want all %d", what, n, err, total)
	}
	check(app, postgres.ErrRLSBypassPath, what+", executable by the app role")
	if _, err := owner.Exec(context.Background(), `DROP FUNCTION tm_conf_around_f()`); err != nil {
		p.Fatalf("dropping %s: %v", what, err)
	}
	check(app, nil, "after dropping the relations and the function around the policies")
}

// awaitServing waits until the shared guarded DB serves again after P17,
// which tampers with the database's row-level security and restores it:
// the DB's re-check may have run in between and then refuses every
// statement until its next run (within a second), which failed whichever
// property came next. Still refusing after ten seconds fails P17.
func (r *runner) awaitServing(p *pt) {
	tb := r.sch.Table(r.g.bound[0])
	q := builder.Must(builder.Select(builder.CountAll()).From(tb).Build())
	ctx := r.scoped(p.ctx, r.tenants[0])
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, err := guardedsql.One(ctx, r.db, q, guardedsql.Scalar[int64])
		switch {
		case err == nil:
			return
		case !errors.Is(err, postgres.ErrRLSUnsafe) || time.Now().After(deadline):
			p.Errorf("after the policies were restored, the shared guarded DB still refuses: %v", err)
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
}
