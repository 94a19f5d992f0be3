package conformance

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tenantmcp/tenantmcp/builder"
	"github.com/tenantmcp/tenantmcp/guardedsql"
	"github.com/tenantmcp/tenantmcp/internal/mint"
	"github.com/tenantmcp/tenantmcp/scope"
	"github.com/tenantmcp/tenantmcp/scope/scopetest"
)

// Run checks target with the property table: it creates a scratch
// database on the target's engine, seeds it with target.Seed, opens it
// through guardedsql, and runs every property as a subtest
// ("rep1/P07_update_foreign"), target.Repetitions times in a random
// order, dropping the scratch database at the end. A property that does
// not apply to the engine is skipped with the reason. It returns the
// tally of results, for WriteTable.
//
// Run must be called from a test; it does not call t.Parallel, and neither
// may its caller while the fault hook of this module is in use. With
// TENANTMCP_CONFORMANCE_MUTATE=<table> set, in any test binary (yours
// too) built with -tags tenantmcp_faults, Run breaks that table's isolation for the whole run (see [Mutate])
// so that you can watch it fail.
func Run(t *testing.T, target Target) *Report {
	t.Helper()
	rep := &Report{Target: target.Name, Repetitions: max(target.Repetitions, 1), OrderSeed: target.OrderSeed}
	if rep.OrderSeed == 0 {
		rep.OrderSeed = uint64(time.Now().UnixNano())
	}
	for _, p := range properties {
		rep.Results = append(rep.Results, &PropertyResult{ID: p.id, Name: p.name, Title: p.title, Criterion: p.criterion})
	}
	r, err := newRunner(target)
	if err != nil {
		rep.Error = err.Error()
		t.Error(err)
		return rep
	}
	rep.Engine = r.engine
	rep.Embedded = target.DSN == ""
	ctx := context.Background()
	if err := r.setup(ctx); err != nil {
		rep.Error = err.Error()
		t.Error(err)
		return rep
	}
	defer func() {
		if err := r.teardown(); err != nil {
			t.Errorf("dropping the scratch database: %v", err)
		}
	}()
	rep.Version, rep.Where = r.sc.version, r.sc.where
	restore, err := r.mutateFromEnv(t)
	if err != nil {
		rep.Error = err.Error()
		t.Error(err)
		return rep
	}
	if restore != nil {
		defer restore()
	}
	for _, table := range slices.Sorted(maps.Keys(target.Shared)) {
		rep.Shared = append(rep.Shared, Acknowledgement{Table: table, Reason: target.Shared[table], OwnedRows: r.cat.owned(table)})
		t.Logf("acknowledged shared by the run: %s (%s); the live catalog attributes %d of its rows to tenants", table, target.Shared[table], r.cat.owned(table))
	}
	for _, td := range target.Graph.Tables {
		for _, fk := range td.ForeignKeys {
			if fk.Unchecked != "" {
				k := UncheckedKey{Table: td.Name, Columns: slices.Clone(fk.Columns), RefTable: fk.RefTable, Reason: fk.Unchecked}
				for _, c := range fk.Columns {
					if why, ok := target.Unchecked[td.Name+"."+c]; ok {
						k.Acknowledged = why
					}
				}
				rep.Unchecked = append(rep.Unchecked, k)
				t.Logf("unchecked foreign key %s(%s) -> %s (%s): not checked on writes; acknowledged by the run: %q", td.Name, strings.Join(fk.Columns, ", "), fk.RefTable, fk.Unchecked, k.Acknowledged)
			}
		}
	}
	if rep.Embedded {
		t.Logf("no target DSN: target %s on embedded SQLite (%s, %s)", target.Name, rep.Version, rep.Where)
	} else {
		t.Logf("target %s: %s (%s)", target.Name, rep.Version, rep.Where)
	}
	t.Logf("seeded %s; tenants: %s", r.dataSummary(), r.tenantSummary())
	rng := rand.New(rand.NewPCG(rep.OrderSeed, 0x7e5a17))
	for i := 1; i <= rep.Repetitions; i++ {
		order := shuffled(rng)
		ids := make([]string, len(order))
		for j, p := range order {
			ids[j] = fmt.Sprint(p.id)
		}
		t.Logf("repetition %d/%d, order seed %d: %s", i, rep.Repetitions, rep.OrderSeed, strings.Join(ids, " "))
		r.mu.Lock()
		r.touched, r.calls, r.ran = map[string]map[int]bool{}, map[int]*callLog{}, map[int]bool{}
		r.mu.Unlock()
		t.Run(fmt.Sprintf("rep%d", i), func(t *testing.T) {
			for _, p := range order {
				res := rep.result(p.id)
				// Each property's random choices (which foreign rows, page
				// sizes) follow from the order seed, the repetition and
				// the property alone, so a failure replays with -run.
				seed := rep.OrderSeed ^ uint64(i)<<32 ^ uint64(p.id)
				t.Run(p.subtestName(), func(t *testing.T) {
					o := r.runProperty(ctx, p, t, seed)
					res.add(o)
					if o.skip != "" {
						t.Skip(o.skip)
					}
				})
			}
		})
	}
	return rep
}

// shuffled returns the properties in random order, with the coverage
// property last because it audits what the others touched.
func shuffled(rng *rand.Rand) []*property {
	var out []*property
	var last []*property
	for _, p := range properties {
		if p.last {
			last = append(last, p)
		} else {
			out = append(out, p)
		}
	}
	rng.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	return append(out, last...)
}

// property is one row of the property table.
type property struct {
	id        int
	name      string // subtest name part
	title     string
	criterion string
	only      Engine // "" for every engine
	onlyWhy   string
	last      bool
	fn        func(p *pt, r *runner)
}

func (p *property) subtestName() string { return fmt.Sprintf("P%02d_%s", p.id, p.name) }

// pt is what a property reports to. Properties call Errorf (keep going),
// Fatalf (stop), Skipf and Logf; all are safe for concurrent use.
type pt struct {
	mu     sync.Mutex
	tb     testing.TB // forward to, or nil to record only
	failed bool
	msgs   []string
	skip   string
	ctx    context.Context
	rng    *rand.Rand
	// tool calls made, per caller (vacuous.go)
	callers []string
	tallies map[string]*callTally
}

type abort struct{}

// keyText makes the suite's internal key encoding readable in messages.
var keyText = strings.NewReplacer("\x1f", ",", "\x00NULL", "NULL")

func (p *pt) Errorf(format string, args ...any) {
	msg := keyText.Replace(fmt.Sprintf(format, args...))
	p.mu.Lock()
	p.failed = true
	if len(p.msgs) < 50 {
		p.msgs = append(p.msgs, msg)
	}
	p.mu.Unlock()
	if p.tb != nil {
		p.tb.Helper()
		p.tb.Error(msg)
	}
}

func (p *pt) Fatalf(format string, args ...any) {
	p.Errorf(format, args...)
	panic(abort{})
}

func (p *pt) Skipf(format string, args ...any) {
	p.mu.Lock()
	p.skip = fmt.Sprintf(format, args...)
	p.mu.Unlock()
	panic(abort{})
}

func (p *pt) Logf(format string, args ...any) {
	if p.tb != nil {
		p.tb.Helper()
		p.tb.Logf(format, args...)
	}
}

// outcome is the result of one run of one property.
type outcome struct {
	failed bool
	skip   string
	msgs   []string
}

// runner holds one target's scratch database and everything the
// properties share.
type runner struct {
	target  Target
	engine  Engine
	g       *graph
	sch     *builder.Schema
	sc      *scratch
	db      *guardedsql.DB
	closeDB func() error
	data    *Dataset
	or      *oracle
	cat     *catOracle // the live catalog's attribution of every row (P58)
	raw     *snapshot  // the database right after seeding
	tenants []Tenant
	// seedPrint is the first seed's keyPrint: every rebuild must match it.
	seedPrint string
	mutable   map[string]string

	observer atomic.Pointer[func(context.Context, guardedsql.Statement)]

	mu      sync.Mutex
	cur     int                     // property running now
	touched map[string]map[int]bool // table -> properties that queried it
	calls   map[int]*callLog        // property -> its tool calls, this repetition (P59)
	ran     map[int]bool            // properties run, this repetition
}

func newRunner(target Target) (*runner, error) {
	e, err := engineOf(target.DSN)
	if err != nil {
		return nil, err
	}
	g, err := newGraph(target.Graph)
	if err != nil {
		return nil, err
	}
	sch := target.Schema
	own, err := builder.NewSchema(target.Graph)
	if err != nil {
		return nil, fmt.Errorf("conformance: the graph is not a valid schema: %w", err)
	}
	if sch == nil {
		sch = own
	} else if err := sameSchema(sch, own); err != nil {
		return nil, err
	}
	if target.Seed == nil {
		target.Seed = SyntheticSeed(target.Graph, 1)
	}
	for table, why := range target.Shared {
		if _, ok := g.tables[table]; !ok {
			return nil, fmt.Errorf("conformance: Target.Shared acknowledges table %q, which the graph does not declare", table)
		}
		if strings.TrimSpace(why) == "" {
			return nil, fmt.Errorf("conformance: Target.Shared acknowledges table %q without a reason", table)
		}
	}
	for key, why := range target.Unchecked {
		if !namesUncheckedKey(target.Graph, key) {
			return nil, fmt.Errorf("conformance: Target.Unchecked acknowledges %q, which names no foreign key the graph declares Unchecked (want \"table.column\")", key)
		}
		if strings.TrimSpace(why) == "" {
			return nil, fmt.Errorf("conformance: Target.Unchecked acknowledges %q without a reason", key)
		}
	}
	return &runner{target: target, engine: e, g: g, sch: sch, touched: map[string]map[int]bool{}}, nil
}

// namesUncheckedKey reports whether key ("table.column") names a column
// of a foreign key that def declares Unchecked.
func namesUncheckedKey(def builder.SchemaDef, key string) bool {
	table, col, ok := strings.Cut(key, ".")
	if !ok {
		return false
	}
	for _, td := range def.Tables {
		if td.Name != table {
			continue
		}
		for _, fk := range td.ForeignKeys {
			if fk.Unchecked != "" && slices.Contains(fk.Columns, col) {
				return true
			}
		}
	}
	return false
}

// sameSchema checks that a caller's Schema declares what the Graph does.
func sameSchema(a, b *builder.Schema) error {
	if !slices.Equal(a.TableNames(), b.TableNames()) {
		return fmt.Errorf("conformance: Target.Schema has tables %v, Target.Graph %v", a.TableNames(), b.TableNames())
	}
	for _, n := range a.TableNames() {
		if a.ScopePath(n) != b.ScopePath(n) {
			return fmt.Errorf("conformance: Target.Schema and Target.Graph disagree on table %s:\n%s\nvs\n%s", n, a.ScopePath(n), b.ScopePath(n))
		}
	}
	return nil
}

// setup creates and seeds the scratch database and opens the guard on it.
func (r *runner) setup(ctx context.Context) error {
	sc, err := newScratch(ctx, r.target.DSN)
	if err != nil {
		return err
	}
	r.sc = sc
	fail := func(err error) error {
		_ = sc.drop()
		r.sc = nil
		return err
	}
	data, err := r.target.Seed(ctx, sc.owner, sc.engine)
	if err != nil {
		return fail(fmt.Errorf("conformance: seeding: %w", err))
	}
	if data == nil {
		return fail(errors.New("conformance: Seed returned no Dataset"))
	}
	if err := prepareEngine(ctx, sc, r.sch); err != nil {
		return fail(err)
	}
	raw, err := takeSnapshot(ctx, sc.owner, sc.engine, r.g)
	if err != nil {
		return fail(err)
	}
	if err := checkSeed(r.g, data, raw); err != nil {
		return fail(err)
	}
	or, err := newOracle(r.g, data)
	if err != nil {
		return fail(err)
	}
	live, err := readCatalog(ctx, sc.owner, sc.engine)
	if err != nil {
		return fail(err)
	}
	r.g.addLiveUniques(live)
	lvl, err := levelColumns(r.target, r.target.Graph, live)
	if err != nil {
		return fail(err)
	}
	shared := map[string]bool{}
	for table := range r.target.Shared {
		shared[strings.ToLower(table)] = true
	}
	globals := map[string]bool{}
	for _, td := range r.target.Graph.Tables {
		if td.Global {
			globals[strings.ToLower(td.Name)] = true
		}
	}
	// References the database does not hold (named like one, or
	// polymorphic) are followed from the tables the graph does not
	// declare tenant-bound: its global tables and those it leaves out
	// (Akaunting's mediables, whose rows tie media to documents, with or
	// without a foreign key on media_id).
	untrusted := maps.Clone(globals)
	for name := range live {
		if !slices.ContainsFunc(r.target.Graph.Tables, func(td builder.TableDef) bool { return strings.EqualFold(td.Name, name) }) {
			untrusted[name] = true
		}
	}
	cat, err := newCatOracle(ctx, sc.owner, sc.engine, live, lvl, shared, impliedRefs(live, untrusted), untrusted)
	if err != nil {
		return fail(err)
	}
	// The tenants and every expectation come from the first seed; a
	// rebuild (after a property changed rows) must give the same rows.
	if kp := raw.keyPrint(); r.seedPrint == "" {
		r.seedPrint = kp
	} else if kp != r.seedPrint {
		return fail(errors.New("conformance: Seed gave other rows when the suite rebuilt the database (the keys of the tenant-bound tables differ from its first call's): " +
			"the suite rebuilds after a property that changed rows and keeps the tenants and expectations derived from the first rows, so Seed must give the same rows on every call " +
			"(derive ids from counters or a fixed random source, not fresh random UUIDs)"))
	}
	r.data, r.or, r.raw, r.cat = data, or, raw, cat
	if r.tenants == nil {
		r.tenants = r.target.Tenants
		if r.tenants == nil {
			r.tenants = deriveTenants(r.g, r.or)
		}
		if err := r.checkTenants(); err != nil {
			return fail(err)
		}
	}
	r.mutable = r.chooseMutable()
	db, closeDB, err := sc.openGuarded(ctx, r.sch, guardedsql.Options{Observer: func(ctx context.Context, s guardedsql.Statement) {
		if fn := r.observer.Load(); fn != nil {
			(*fn)(ctx, s)
		}
	}})
	if err != nil {
		return fail(fmt.Errorf("conformance: opening the guarded database as the app role: %w", err))
	}
	r.db, r.closeDB = db, closeDB
	return nil
}

func (r *runner) teardown() error {
	var errs []error
	if r.db != nil {
		errs = append(errs, r.closeDB())
		r.db, r.closeDB = nil, nil
	}
	if r.sc != nil {
		errs = append(errs, r.sc.drop())
		r.sc = nil
	}
	return errors.Join(errs...)
}

// checkTenants refuses tenant lists the properties cannot work with.
func (r *runner) checkTenants() error {
	if len(r.tenants) < 3 {
		return fmt.Errorf("conformance: %d tenants; the suite needs at least three", len(r.tenants))
	}
	for _, tn := range r.tenants {
		if len(tn.Grants) == 0 {
			return fmt.Errorf("conformance: tenant %q has no grants", tn.Name)
		}
		if _, err := mint.Scope("conformance:"+tn.Name, tn.Grants, tn.Roles); err != nil {
			return fmt.Errorf("conformance: tenant %q: %w", tn.Name, err)
		}
	}
	return nil
}

// runProperty runs p once, then checks that the database is as seeded. A
// property that changed it fails, and the scratch database is rebuilt.
func (r *runner) runProperty(ctx context.Context, p *property, tb testing.TB, seed uint64) outcome {
	if p.only != "" && p.only != r.engine {
		return outcome{skip: p.onlyWhy}
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	x := &pt{tb: tb, ctx: ctx, rng: rand.New(rand.NewPCG(seed, uint64(p.id)))}
	r.mu.Lock()
	r.cur = p.id
	r.mu.Unlock()
	func() {
		defer func() {
			if v := recover(); v != nil {
				if _, ok := v.(abort); !ok {
					x.Errorf("panic: %v\n%s", v, debug.Stack())
				}
			}
		}()
		p.fn(x, r)
	}()
	if x.skip == "" {
		x.checkVacuous()
		r.keepCalls(p.id, x)
		r.mu.Lock()
		if r.ran == nil {
			r.ran = map[int]bool{}
		}
		r.ran[p.id] = true
		r.mu.Unlock()
	}
	if r.db != nil {
		after, err := takeSnapshot(ctx, r.sc.owner, r.sc.engine, r.g)
		switch {
		case err != nil:
			x.Errorf("reading the database after the property: %v", err)
		case len(changed(r.raw, after)) > 0:
			x.Errorf("side effect: the property left tables %v different from the seed", changed(r.raw, after))
			if err := r.rebuild(ctx); err != nil {
				x.Errorf("rebuilding the scratch database: %v", err)
			}
		}
	}
	return outcome{failed: x.failed, skip: x.skip, msgs: x.msgs}
}

// rebuild replaces the scratch database with a freshly seeded one.
func (r *runner) rebuild(ctx context.Context) error {
	if err := r.teardown(); err != nil {
		return err
	}
	return r.setup(ctx)
}

// scoped returns a context carrying the tenant's scope, as the server
// would attach it to a tool call.
func (r *runner) scoped(ctx context.Context, tn Tenant) context.Context {
	return scopetest.NewContext(ctx, scopetest.New("conformance:"+tn.Name, tn.Grants, tn.Roles...))
}

func grantsCtx(ctx context.Context, grants []scope.Grant) context.Context {
	return scopetest.NewContext(ctx, scopetest.New("conformance", grants))
}

// touch records that the running property sent a statement on st's tables.
func (r *runner) touch(st builder.Statement) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, t := range st.Tables() {
		if r.touched[t.Name()] == nil {
			r.touched[t.Name()] = map[int]bool{}
		}
		r.touched[t.Name()][r.cur] = true
	}
}

// rows runs q and returns every row as canonical text per column.
func (r *runner) rows(ctx context.Context, q builder.Query) ([][]string, error) {
	r.touch(q)
	rs, err := r.db.Query(ctx, q)
	if err != nil {
		return nil, err
	}
	return guardedsql.CollectRows(rs, func(rs *guardedsql.Rows) ([]string, error) {
		cols, err := rs.Columns()
		if err != nil {
			return nil, err
		}
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rs.Scan(ptrs...); err != nil {
			return nil, err
		}
		out := make([]string, len(cols))
		for i, v := range vals {
			out[i] = canon(v)
		}
		return out, nil
	})
}

// keySet runs q, whose first n columns are a key, and returns the keys,
// reporting duplicates.
func (r *runner) keySet(ctx context.Context, q builder.Query, n int) (map[string]bool, []string, error) {
	rows, err := r.rows(ctx, q)
	if err != nil {
		return nil, nil, err
	}
	set := map[string]bool{}
	var order []string
	for _, row := range rows {
		k := strings.Join(row[:n], "\x1f")
		if set[k] {
			return nil, nil, fmt.Errorf("key %q returned twice", k)
		}
		set[k] = true
		order = append(order, k)
	}
	return set, order, nil
}

// exec runs a mutation and records its tables.
func (r *runner) exec(ctx context.Context, q guardedsql.Querier, m builder.Mutation) (guardedsql.Result, error) {
	r.touch(m)
	return q.Exec(ctx, m)
}

func (r *runner) dataSummary() string {
	var parts []string
	for _, n := range r.g.names {
		parts = append(parts, fmt.Sprintf("%s %d", n, len(r.data.Tables[n])))
	}
	return strings.Join(parts, ", ")
}

func (r *runner) tenantSummary() string {
	var parts []string
	for _, tn := range r.tenants {
		var gs []string
		for _, g := range tn.Grants {
			gs = append(gs, g.String())
		}
		parts = append(parts, tn.Name+" {"+strings.Join(gs, " ")+"}")
	}
	return strings.Join(parts, "; ")
}
