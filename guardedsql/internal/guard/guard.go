package guard

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/tenantmcp/tenantmcp/guardedsql/internal/engine"
	"github.com/tenantmcp/tenantmcp/internal/sqlast"
)

// Errors; guardedsql re-exports them.
var (
	ErrNotFound   = errors.New("guardedsql: not found")
	ErrOutOfScope = errors.New("guardedsql: row outside the tenant scope")
	ErrReadOnly   = errors.New("guardedsql: global table is read-only through the guard")
	ErrRefused    = errors.New("guardedsql: statement refused")
	ErrInvalid    = errors.New("guardedsql: invalid statement")
	ErrInternal   = errors.New("guardedsql: internal guard error")
)

// Kind is the statement kind.
type Kind int

const (
	Select Kind = iota
	Insert
	Update
	Delete
)

func (k Kind) String() string {
	return [...]string{"select", "insert", "update", "delete"}[k]
}

// Expect says how many rows a step must affect.
type Expect int

const (
	ExpectAny Expect = iota
	ExpectOne
)

// Step is one SQL statement of a plan.
type Step struct {
	SQL    string
	Args   []any
	Expect Expect
	// Fail is the error for a step affecting no row when ExpectOne.
	Fail error
	// Probe, when set, is run after an ExpectOne step affected no row: a
	// row from it means the step matched a row in scope that its write
	// guard held back (byref.go), and the error is ErrSharedRow, not Fail.
	Probe engine.Frag
	// Returning: the step is an INSERT ... RETURNING the table's key, run
	// as a query; its rows count as affected and the last integer key is
	// the insert id (dialects without a last-insert id, see
	// engine.Returner).
	Returning bool
}

// Plan is what guardedsql runs for one statement.
type Plan struct {
	Kind  Kind
	Steps []Step
	// Atomic: the steps (or the single step's row-count expectation) need a
	// transaction, or a savepoint inside one, so that a failure undoes them.
	Atomic bool
	// Returns and Run: a write with RETURNING or an upsert (writes.go).
	// Run, when set, executes the plan in place of Steps (which then only
	// show its statements); Returns names the columns of the rows it
	// returns.
	Returns []string
	Run     func(ctx context.Context, env Env) (Output, error)
	// Lock, when set, replaces Steps[0] of a locking SELECT: it reads the
	// keys of the rows in scope without locking and returns the locking
	// statement confined to them (keyed.go).
	Lock func(ctx context.Context, q engine.Querier) (Step, error)
}

// Options tune rendering.
type Options struct {
	// PredicatesOnly disables the two join-aware rewrites (elision and
	// path joins, see selectBuilder) so that every tenant-bound reference
	// carries its own predicate. Tests use it for textual checks.
	PredicatesOnly bool
	// EngineEnforcesReads leaves the read predicates (SELECT references,
	// UPDATE and DELETE targets, the parent checks of writes) to the
	// engine: PostgreSQL configured RLS-only, whose row-level security
	// policies filter every table reference. Write checks on values
	// (level columns, root rows) stay. guardedsql sets it only for a
	// dialect that implements engine.ReadEnforcer and reports true.
	EngineEnforcesReads bool
	// NoIntersectExcept: the engine lacks INTERSECT and EXCEPT (MySQL
	// before 8.0.31); set operations using them are refused (compound.go).
	NoIntersectExcept bool
	// Quoted maps identifiers to their quoted form, precomputed so that
	// rendering does not quote the schema's names anew for every
	// statement (QuoteNames). Identifiers not in it are quoted by the
	// dialect. It must come from QuoteNames with the dialect passed to
	// Render, and is never written after.
	Quoted map[string]string
}

// QuoteNames returns d's quoted form of every table and column name of g
// and of the first aliases the guard generates, for Options.Quoted.
func QuoteNames(d engine.Dialect, g *sqlast.Schema) map[string]string {
	m := map[string]string{}
	for name, t := range g.Tables {
		m[name] = d.Quote(name)
		for _, c := range t.Columns {
			m[c] = d.Quote(c)
		}
	}
	for i := 1; i <= 16; i++ {
		a := aliasPrefix + strconv.Itoa(i)
		m[a] = d.Quote(a)
	}
	// The short aliases statements usually give their tables ("b", "h",
	// "bk"): quoting them is a pure function of the name, so a name found
	// here is quoted exactly as the dialect would, without a new string
	// per reference.
	for x := 'a'; x <= 'z'; x++ {
		for _, a := range []string{string(x), string(x - 'a' + 'A')} {
			if _, ok := m[a]; !ok {
				m[a] = d.Quote(a)
			}
		}
		for y := 'a'; y <= 'z'; y++ {
			if a := string([]rune{x, y}); m[a] == "" {
				m[a] = d.Quote(a)
			}
		}
	}
	return m
}

// Render renders st for dialect d and scope sc. A SELECT whose text a
// statement of the same shape has produced before only binds its values
// (cache.go).
func Render(d engine.Dialect, st sqlast.Stmt, sc engine.Scope, opt Options) (Plan, error) {
	if s, ok := st.(*sqlast.Select); ok {
		if p, ok, err := renderCached(d, s, sc, opt); ok {
			return p, err
		}
	}
	return render(d, st, sc, opt, nil)
}

// render renders st. With rec set (cache.go), each bound value of the
// statement at an address in rec is written as its slot instead.
func render(d engine.Dialect, st sqlast.Stmt, sc engine.Scope, opt Options, rec []*sqlast.Value) (Plan, error) {
	r := &renderer{d: d, sc: sc, seen: map[*sqlast.Ref]bool{}, opt: opt, rec: rec}
	var (
		p   Plan
		err error
	)
	var refs []*sqlast.Ref
	switch s := st.(type) {
	case *sqlast.Select:
		refs = s.Refs
		p, err = r.selectPlan(s)
	case *sqlast.Insert:
		refs = s.Refs
		p, err = r.insertPlan(s)
	case *sqlast.Update:
		refs = s.Refs
		p, err = r.updatePlan(s)
	case *sqlast.Delete:
		refs = s.Refs
		p, err = r.deletePlan(s)
	default:
		return Plan{}, fmt.Errorf("%w: statement of type %T", ErrInvalid, st)
	}
	if err != nil {
		return Plan{}, err
	}
	if len(r.seen) != len(refs) {
		return Plan{}, fmt.Errorf("%w: guarded %d table references, statement has %d", ErrInternal, len(r.seen), len(refs))
	}
	for _, ref := range refs {
		if !r.seen[ref] {
			return Plan{}, fmt.Errorf("%w: table reference %s (%s) was not guarded", ErrInternal, ref.Alias, ref.Table.Name)
		}
	}
	if d.Name() == "sqlite" {
		sqliteTimes(&p) // time.go
	}
	return p, nil
}

// aliasPrefix starts the aliases the guard gives the tables it adds.
const aliasPrefix = "_tm"

type renderer struct {
	opt       Options
	d         engine.Dialect
	sc        engine.Scope
	n         int
	seen      map[*sqlast.Ref]bool
	usedScope bool
	ctes      []*sqlast.CTE        // declared so far (compound.go)
	windowed  bool                 // a window function or scalar subquery was rendered (scalar.go)
	from      *sqlast.Ref          // FROM of the SELECT being rendered (scalar.go)
	noKeyed   bool                 // render a locking SELECT as is (keyed.go's own steps)
	rec       []*sqlast.Value      // recording a layout (cache.go): values written as slots
	inline    bool                 // test sc inline, not through the prelude (pairing.go)
	byPK      map[*sqlast.Ref]bool // read these by primary key (keyed.go's locking step)
}

// fb accumulates SQL text and its arguments in textual order.
type fb struct {
	b    strings.Builder
	args []any
}

// minText is the capacity a builder starts with on its first write: most
// fragments outgrow the builder's own start (8 bytes) several times.
const minText = 64

func (f *fb) start() {
	if f.b.Cap() == 0 {
		f.b.Grow(minText)
	}
}

func (f *fb) s(parts ...string) {
	f.start()
	for _, p := range parts {
		f.b.WriteString(p)
	}
}

// grow makes room for n more bytes of text and k more arguments, so that
// a builder whose final size is known up front allocates once.
func (f *fb) grow(n, k int) {
	f.b.Grow(n)
	if k > 0 && cap(f.args)-len(f.args) < k {
		f.args = append(make([]any, 0, len(f.args)+k), f.args...)
	}
}

// col writes the qualified column alias.c.
func (f *fb) col(r *renderer, alias, c string) {
	f.start()
	f.b.WriteString(r.q(alias))
	f.b.WriteByte('.')
	f.b.WriteString(r.q(c))
}

func (f *fb) frag(x engine.Frag) {
	f.start()
	f.b.WriteString(x.SQL)
	f.args = append(f.args, x.Args...)
}

// two writes open, x, mid, y and end ("f(" x ", " y ")").
func (f *fb) two(open string, x engine.Frag, mid string, y engine.Frag, end string) {
	f.s(open)
	f.frag(x)
	f.s(mid)
	f.frag(y)
	f.s(end)
}

func (f *fb) arg(v any) {
	f.b.WriteByte('?')
	f.args = append(f.args, v)
}

func (f *fb) done() engine.Frag { return engine.Frag{SQL: f.b.String(), Args: f.args} }

var (
	fragFalse = engine.Frag{SQL: "(1=0)"}
	fragTrue  = engine.Frag{SQL: "(1=1)"}
)

func (r *renderer) q(id string) string {
	if s, ok := r.opt.Quoted[id]; ok {
		return s
	}
	return r.d.Quote(id)
}

func (r *renderer) col(alias, c string) string { return r.q(alias) + "." + r.q(c) }

func (r *renderer) cols(alias string, cs []string) string {
	parts := make([]string, len(cs))
	for i, c := range cs {
		parts[i] = r.col(alias, c)
	}
	return strings.Join(parts, ", ")
}

func (r *renderer) newAlias() string {
	r.n++
	return aliasPrefix + strconv.Itoa(r.n)
}

func (r *renderer) table(ref *sqlast.Ref) string {
	return r.q(ref.Table.Name) + " AS " + r.q(ref.Alias)
}

func (r *renderer) inScope(x engine.Frag, lvl *sqlast.Level) engine.Frag {
	if is, ok := r.d.(engine.InlineScoper); ok && r.inline {
		return is.InScopeInline(x, lvl, r.sc.Doc)
	}
	r.usedScope = true
	return r.d.InScope(x, lvl, r.sc.Doc)
}

// guardRef returns the read predicate for one declared table reference, or
// a zero Frag for a global table, and records the reference as guarded.
func (r *renderer) guardRef(ref *sqlast.Ref) (engine.Frag, error) {
	if r.seen[ref] {
		return engine.Frag{}, fmt.Errorf("%w: table reference %s rendered twice", ErrInternal, ref.Alias)
	}
	r.seen[ref] = true
	if ref.Table.Global {
		return engine.Frag{}, nil
	}
	return r.readGuard(ref.Table, ref.Alias), nil
}
