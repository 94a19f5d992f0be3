package guardedsql

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/tenantmcp/tenantmcp/builder"
	"github.com/tenantmcp/tenantmcp/guardedsql/internal/engine"
	"github.com/tenantmcp/tenantmcp/guardedsql/internal/guard"
	"github.com/tenantmcp/tenantmcp/internal/sqlast"
	"github.com/tenantmcp/tenantmcp/scope"
)

// DB runs sealed builder statements under the tenant scope of each call's
// context. It is safe for concurrent use.
type DB struct {
	pool engine.Pool
	d    engine.Dialect
	sch  *builder.Schema
	g    *sqlast.Schema
	opt  guard.Options
	// logger is Options.Logger (slog.Default() if nil), for start-up
	// warnings.
	logger *slog.Logger
	// base is pool without the observer: start-up checks are not
	// statements of a request.
	base engine.Pool
	// gateFn and verify are the engine's own checks (engine.Conn's Gate
	// and Verify; PostgreSQL: its row-level security), nil if none.
	gateFn func(ctx context.Context, txBegan time.Time) error
	verify func(ctx context.Context, q engine.Querier) error
	stop   func() // engine.Conn's Stop
	// oracles are the unique keys found at open that reveal existence.
	oracles []UniqueOracle
}

// Querier is what DB and Tx have in common; helpers such as All and One
// accept either.
type Querier interface {
	Query(ctx context.Context, q builder.Query) (*Rows, error)
	QueryRow(ctx context.Context, q builder.Query) *Row
	Exec(ctx context.Context, m builder.Mutation) (Result, error)
}

var (
	_ Querier = (*DB)(nil)
	_ Querier = (*Tx)(nil)
)

// Result reports what a mutation changed. LastInsertID is the id of the
// last row inserted where the engine reports one (SQLite, MySQL) and, on
// PostgreSQL, the integer primary key returned by INSERT ... RETURNING for
// tables with a one-column key.
type Result struct {
	RowsAffected int64
	LastInsertID int64
}

// Statement is one piece of SQL on its way to the database, as seen by an
// observer. Kind is "select", "insert", "update", "delete", or one of
// "begin", "commit", "rollback", "savepoint", "session" for transaction
// control. Args hold request data: treat them as you would the rows.
type Statement struct {
	Kind string
	SQL  string
	Args []any
}

func newDB(pool engine.Pool, d engine.Dialect, sch *builder.Schema, c config) (*DB, error) {
	g, ok := sqlast.SchemaOf(sch)
	if !ok {
		return nil, fmt.Errorf("%w: nil or zero schema", ErrInvalid)
	}
	base := pool
	pool, err := applyLimits(pool, d, &c)
	if err != nil {
		return nil, err
	}
	if ec, ok := d.(engine.ErrorClassifier); ok {
		pool = &errorPool{Pool: pool, t: &engineErrors{c: ec, g: g, log: c.Logger}}
	}
	if c.Observer != nil || c.LogStatements {
		pool = &observedPool{Pool: pool, c: &c}
	}
	// Only a dialect whose engine enforces the reads itself may drop them.
	re, ok := d.(engine.ReadEnforcer)
	c.guard.EngineEnforcesReads = ok && re.EngineEnforcesReads()
	c.guard.Quoted = guard.QuoteNames(d, g)
	return &DB{pool: pool, d: d, sch: sch, g: g, opt: c.guard, logger: c.Logger, base: base}, nil
}

// Schema returns the schema the DB guards with.
func (db *DB) Schema() *builder.Schema { return db.sch }

// Close stops the DB's background work (PostgreSQL's periodic re-check)
// and closes the underlying pool if the DB opened it (Open); a DB made
// from a caller's pool leaves it open.
func (db *DB) Close() error {
	if db.stop != nil {
		db.stop()
	}
	return db.pool.Close()
}

// plan checks the scope and renders st. Nothing is sent.
func (db *DB) plan(ctx context.Context, st builder.Statement) (guard.Plan, scope.Scope, engine.Scope, error) {
	sc, ok := scope.FromContext(ctx)
	if !ok {
		return guard.Plan{}, scope.Scope{}, engine.Scope{}, ErrNoScope
	}
	p, ds, err := db.render(sc, st)
	if err == nil {
		err = db.gate(ctx, time.Time{})
	}
	return p, sc, ds, err
}

// gate fails closed while the engine's own isolation is not verified
// (PostgreSQL's row-level security; see guardedsql/postgres.Options.Recheck).
// txBegan is zero outside a transaction, else when its first gate began
// (engine.Conn's Gate).
func (db *DB) gate(ctx context.Context, txBegan time.Time) error {
	if db.gateFn == nil {
		return nil
	}
	return db.gateFn(ctx, txBegan)
}

func (db *DB) render(sc scope.Scope, st builder.Statement) (guard.Plan, engine.Scope, error) {
	s, ok := sqlast.Unseal(st)
	if !ok {
		return guard.Plan{}, engine.Scope{}, fmt.Errorf("%w: zero statement (use Build)", ErrInvalid)
	}
	if err := db.ownRefs(s); err != nil {
		return guard.Plan{}, engine.Scope{}, err
	}
	ds := engine.EncodeScope(db.g.Levels, sc)
	p, err := guard.Render(db.d, s, ds, db.opt)
	return p, ds, err
}

// ownRefs refuses statements built on a different Schema: their tables
// might be declared differently (global, say) from the ones guarded here.
func (db *DB) ownRefs(s sqlast.Stmt) error {
	var refs []*sqlast.Ref
	switch x := s.(type) {
	case *sqlast.Select:
		refs = x.Refs
	case *sqlast.Insert:
		refs = x.Refs
	case *sqlast.Update:
		refs = x.Refs
	case *sqlast.Delete:
		refs = x.Refs
	}
	for _, r := range refs {
		if r.Virtual() {
			continue // derived table or CTE: see checkVirtual
		}
		if db.g.Tables[r.Table.Name] != r.Table {
			return fmt.Errorf("%w: table %s comes from another Schema than this DB's", ErrInvalid, r.Table.Name)
		}
	}
	return db.checkVirtual(s)
}

// Render returns the SQL and arguments the DB would send for st under the
// scope in ctx, without sending anything. Multi-row inserts render one
// statement per row, separated by ";\n", with the arguments concatenated.
// It is meant for tests, debugging and EXPLAIN.
func (db *DB) Render(ctx context.Context, st builder.Statement) (string, []any, error) {
	p, _, _, err := db.plan(ctx, st)
	if err != nil {
		return "", nil, err
	}
	if len(p.Steps) == 1 {
		return p.Steps[0].SQL, p.Steps[0].Args, nil
	}
	var texts []string
	var args []any
	for _, s := range p.Steps {
		texts = append(texts, s.SQL)
		args = append(args, s.Args...)
	}
	return strings.Join(texts, ";\n"), args, nil
}

// Query runs a SELECT under the scope of ctx. Without a scope it returns
// ErrNoScope and sends nothing; a query that locks rows (ForUpdate,
// ForShare) returns ErrLockOutsideTx: run it with Tx.Query. The caller
// must close the Rows.
func (db *DB) Query(ctx context.Context, q builder.Query) (*Rows, error) {
	if locking(q) {
		return nil, ErrLockOutsideTx
	}
	p, sc, ds, err := db.plan(ctx, q)
	if err != nil {
		return nil, err
	}
	st := p.Steps[0]
	if !db.d.NeedsTx() {
		rows, err := db.pool.Query(ctx, st.SQL, st.Args...)
		if err != nil {
			return nil, err
		}
		return &Rows{rows: rows, times: timeColumns(q)}, nil
	}
	tx, err := db.beginStatement(ctx)
	if err != nil {
		return nil, err
	}
	if err := db.d.Session(ctx, tx, sc, ds.Doc); err != nil {
		return nil, errors.Join(err, tx.Rollback(ctx))
	}
	rows, err := tx.Query(ctx, st.SQL, st.Args...)
	if err != nil {
		return nil, errors.Join(err, tx.Rollback(ctx))
	}
	return &Rows{rows: rows, tx: tx, ctx: ctx, times: timeColumns(q)}, nil
}

// QueryRow runs a SELECT expected to return at most one row; Row.Scan
// reports ErrNotFound when none is in scope, and ErrAmbiguous when more
// than one is (see ErrAmbiguous).
func (db *DB) QueryRow(ctx context.Context, q builder.Query) *Row {
	rows, err := db.Query(ctx, q)
	return &Row{rows: rows, err: err}
}

// Exec runs an INSERT, UPDATE or DELETE under the scope of ctx. Without a
// scope it returns ErrNoScope and sends nothing.
//
// An insert inserts every row or none: a row whose parent (or any other
// referenced tenant row) is not in scope fails with ErrNotFound, a root row
// outside the scope with ErrOutOfScope. Updates and deletes touch only
// rows in scope; with ExpectOne they fail with ErrNotFound or
// ErrAmbiguous and change nothing unless exactly one row matched.
func (db *DB) Exec(ctx context.Context, m builder.Mutation) (Result, error) {
	p, sc, ds, err := db.plan(ctx, m)
	if err != nil {
		return Result{}, err
	}
	if p.Run != nil {
		return db.execWrites(ctx, p, sc, ds) // returning.go
	}
	// A call's idempotency claim is recorded in the write's own
	// transaction (writehook.go): then the write needs an explicit one.
	w := callWritesOf(ctx)
	claiming := w.claiming()
	if !claiming && !p.Atomic && !db.d.NeedsTx() && !writesInTx(db.d) {
		res, err := runSteps(ctx, db.pool, p)
		w.afterCommit(false, err)
		return res, err
	}
	begin := db.pool.Begin
	if !claiming && !p.Atomic && len(p.Steps) == 1 {
		begin = db.beginStatement
	}
	tx, err := begin(ctx)
	if err != nil {
		return Result{}, err
	}
	if db.d.NeedsTx() {
		if err := db.d.Session(ctx, tx, sc, ds.Doc); err != nil {
			return Result{}, errors.Join(err, tx.Rollback(ctx))
		}
	}
	res, err := runSteps(ctx, tx, p)
	if err != nil {
		return Result{}, errors.Join(err, tx.Rollback(ctx))
	}
	return res, db.commitWrite(ctx, tx)
}

// beginStatement begins the transaction of a single statement: one round
// trip with its session setup where the pool can (engine.SingleBeginner).
func (db *DB) beginStatement(ctx context.Context) (engine.Tx, error) {
	if sb, ok := db.pool.(engine.SingleBeginner); ok {
		return sb.BeginSingle(ctx)
	}
	return db.pool.Begin(ctx)
}

// runSteps executes a plan's steps and checks their row counts. The caller
// undoes everything (rollback) when it returns an error.
func runSteps(ctx context.Context, q engine.Querier, p guard.Plan) (Result, error) {
	var out Result
	for _, st := range p.Steps {
		exec := q.Exec
		if st.Returning {
			exec = func(ctx context.Context, text string, args ...any) (engine.Result, error) {
				return execReturning(ctx, q, text, args)
			}
		}
		r, err := exec(ctx, st.SQL, st.Args...)
		if err != nil {
			return Result{}, err
		}
		if st.Expect == guard.ExpectOne {
			switch {
			case r.RowsAffected == 0 && !st.Probe.IsZero():
				return Result{}, probeShared(ctx, q, st, p.Kind) // (h4-ref) byref.go
			case r.RowsAffected == 0:
				return Result{}, fmt.Errorf("%w (%s)", st.Fail, p.Kind)
			case r.RowsAffected > 1 && !expectOneOff():
				// Invariant: an ExpectOne step that matched several rows
				// is undone by the caller (its plan is Atomic).
				return Result{}, ambiguousWrite(p.Kind)
			}
		}
		out.RowsAffected += r.RowsAffected
		if p.Kind == guard.Insert {
			out.LastInsertID = r.LastInsertID
		}
	}
	return out, nil
}

// execReturning runs an INSERT ... RETURNING <key> and reports the rows it
// returned as affected, and the last integer key as the insert id.
func execReturning(ctx context.Context, q engine.Querier, text string, args []any) (engine.Result, error) {
	rows, err := q.Query(ctx, text, args...)
	if err != nil {
		return engine.Result{}, err
	}
	var out engine.Result
	for rows.Next() {
		var key any
		if err := rows.Scan(&key); err != nil {
			rows.Close()
			return engine.Result{}, err
		}
		out.RowsAffected++
		switch k := key.(type) {
		case int64:
			out.LastInsertID = k
		case int32:
			out.LastInsertID = int64(k)
		case int16:
			out.LastInsertID = int64(k)
		}
	}
	if err := rows.Err(); err != nil {
		rows.Close()
		return engine.Result{}, err
	}
	return out, rows.Close()
}

// Tx runs fn in a transaction under the scope of ctx, committing if fn
// returns nil and rolling back otherwise (or if fn panics). Every statement
// in fn must run with a context carrying the same scope. Without a scope Tx
// returns ErrNoScope and begins nothing. It is TxWith with zero options:
// the engine's default isolation, fn run once.
func (db *DB) Tx(ctx context.Context, fn func(tx *Tx) error) error {
	return db.TxWith(ctx, TxOptions{}, fn)
}

// Tx is a transaction started by DB.Tx. It is not safe for concurrent use.
type Tx struct {
	db   *DB
	tx   engine.Tx
	sc   scope.Scope
	done bool
	sp   int
	// began is when the transaction's gate began (DB.gate).
	began time.Time
	// wrote: a write ran in the transaction (its commit is counted for
	// the call: writehook.go).
	wrote bool
}

var errTxDone = errors.New("guardedsql: transaction already finished")

func (tx *Tx) plan(ctx context.Context, st builder.Statement) (guard.Plan, error) {
	if tx.done {
		return guard.Plan{}, errTxDone
	}
	sc, ok := scope.FromContext(ctx)
	if !ok {
		return guard.Plan{}, ErrNoScope
	}
	if !sc.Equal(tx.sc) {
		return guard.Plan{}, ErrScopeMismatch
	}
	p, _, err := tx.db.render(sc, st)
	if err == nil {
		err = tx.db.gate(ctx, tx.began)
	}
	return p, err
}

// Query is DB.Query inside the transaction.
func (tx *Tx) Query(ctx context.Context, q builder.Query) (*Rows, error) {
	p, err := tx.plan(ctx, q)
	if err != nil {
		return nil, err
	}
	st := p.Steps[0]
	if p.Lock != nil { // a locking read by key (issue 26 §1, guard's keyed.go)
		if st, err = p.Lock(ctx, tx.tx); err != nil {
			return nil, err
		}
	}
	rows, err := tx.tx.Query(ctx, st.SQL, st.Args...)
	if err != nil {
		return nil, err
	}
	return &Rows{rows: rows, times: timeColumns(q)}, nil
}

// QueryRow is DB.QueryRow inside the transaction.
func (tx *Tx) QueryRow(ctx context.Context, q builder.Query) *Row {
	rows, err := tx.Query(ctx, q)
	return &Row{rows: rows, err: err}
}

// Exec is DB.Exec inside the transaction. A failing multi-row insert or
// ExpectOne mutation is undone through a savepoint, so the transaction
// can go on (an upsert can try the update, then insert).
func (tx *Tx) Exec(ctx context.Context, m builder.Mutation) (Result, error) {
	p, err := tx.plan(ctx, m)
	if err != nil {
		return Result{}, err
	}
	tx.wrote = true
	if p.Run != nil {
		out, err := tx.savepoint(ctx, p) // returning.go
		return Result{RowsAffected: out.RowsAffected, LastInsertID: out.LastInsertID}, err
	}
	if !p.Atomic {
		return runSteps(ctx, tx.tx, p)
	}
	tx.sp++
	sp := fmt.Sprintf("_tm_sp%d", tx.sp)
	if _, err := tx.tx.Exec(ctx, "SAVEPOINT "+sp); err != nil {
		return Result{}, err
	}
	res, err := runSteps(ctx, tx.tx, p)
	if err != nil {
		_, rerr := tx.tx.Exec(ctx, "ROLLBACK TO SAVEPOINT "+sp)
		_, relErr := tx.tx.Exec(ctx, "RELEASE SAVEPOINT "+sp)
		return Result{}, errors.Join(err, rerr, relErr)
	}
	if _, err := tx.tx.Exec(ctx, "RELEASE SAVEPOINT "+sp); err != nil {
		return Result{}, err
	}
	return res, nil
}

// observedPool reports every call to the observer and the statement log.
type observedPool struct {
	engine.Pool
	c *config
}

func (c *config) report(ctx context.Context, kind, text string, args []any) func(error) {
	if c.Observer != nil {
		c.Observer(ctx, Statement{Kind: kind, SQL: text, Args: args})
	}
	if !c.LogStatements {
		return func(error) {}
	}
	start := time.Now()
	return func(err error) {
		c.Logger.LogAttrs(ctx, slog.LevelDebug, "guardedsql statement",
			slog.String("kind", kind), slog.String("sql", text), slog.Int("args", len(args)),
			slog.Duration("dur", time.Since(start)), slog.Any("err", err))
	}
}

// kindOf names the statement kind of SQL text for observers: the first
// keyword at parenthesis depth 0, outside quotes, so that a leading WITH
// clause (the scope CTE) is skipped.
func kindOf(text string) string {
	depth := 0
	for i := 0; i < len(text); i++ {
		switch c := text[i]; c {
		case '(':
			depth++
		case ')':
			depth--
		case '\'', '"', '`':
			if j := strings.IndexByte(text[i+1:], c); j >= 0 {
				i += j + 1
			}
		default:
			if depth != 0 || !(c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z') || (i > 0 && text[i-1] != ' ' && text[i-1] != ')') {
				continue
			}
			j := i
			for j < len(text) && (text[j] >= 'A' && text[j] <= 'Z' || text[j] >= 'a' && text[j] <= 'z') {
				j++
			}
			switch w := strings.ToLower(text[i:j]); w {
			case "select", "insert", "update", "delete", "savepoint":
				return w
			case "release", "rollback":
				return "savepoint"
			}
			i = j - 1
		}
	}
	return "session"
}

func (p *observedPool) Query(ctx context.Context, q string, args ...any) (engine.Rows, error) {
	done := p.c.report(ctx, kindOf(q), q, args)
	r, err := p.Pool.Query(ctx, q, args...)
	done(err)
	return r, err
}

func (p *observedPool) Exec(ctx context.Context, q string, args ...any) (engine.Result, error) {
	done := p.c.report(ctx, kindOf(q), q, args)
	r, err := p.Pool.Exec(ctx, q, args...)
	done(err)
	return r, err
}

func (p *observedPool) Begin(ctx context.Context) (engine.Tx, error) {
	// BEGIN names the isolation level asked with DB.TxWith, if any (on
	// MariaDB/MySQL the driver sends it as SET TRANSACTION before BEGIN).
	done := p.c.report(ctx, "begin", engine.BeginSQL(ctx), nil)
	tx, err := p.Pool.Begin(ctx)
	done(err)
	if err != nil {
		return nil, err
	}
	return &observedTx{Tx: tx, c: p.c}, nil
}

type observedTx struct {
	engine.Tx
	c *config
}

func (t *observedTx) Query(ctx context.Context, q string, args ...any) (engine.Rows, error) {
	done := t.c.report(ctx, kindOf(q), q, args)
	r, err := t.Tx.Query(ctx, q, args...)
	done(err)
	return r, err
}

func (t *observedTx) Exec(ctx context.Context, q string, args ...any) (engine.Result, error) {
	done := t.c.report(ctx, kindOf(q), q, args)
	r, err := t.Tx.Exec(ctx, q, args...)
	done(err)
	return r, err
}

func (t *observedTx) Commit(ctx context.Context) error {
	done := t.c.report(ctx, "commit", "COMMIT", nil)
	err := t.Tx.Commit(ctx)
	done(err)
	return err
}

func (t *observedTx) Rollback(ctx context.Context) error {
	done := t.c.report(ctx, "rollback", "ROLLBACK", nil)
	err := t.Tx.Rollback(ctx)
	done(err)
	return err
}
