package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unsafe"

	sq "github.com/Masterminds/squirrel"

	"github.com/tenantmcp/tenantmcp/builder"
	"github.com/tenantmcp/tenantmcp/internal/guardfault"
	"github.com/tenantmcp/tenantmcp/internal/sqlast"
	"github.com/tenantmcp/tenantmcp/scope"
)

// Frag is SQL text with its bind arguments in textual order, using '?'
// placeholders. It implements squirrel.Sqlizer, so it can be handed to
// squirrel builders as is; Frag never interprets its arguments (unlike
// squirrel.Expr, which splices any argument that is itself a Sqlizer).
type Frag struct {
	SQL  string
	Args []any
}

// ToSql implements squirrel.Sqlizer.
func (f Frag) ToSql() (string, []any, error) { return f.SQL, f.Args, nil }

// Row joins fragments into a row value "(a, b)" with their args in order.
func Row(xs []Frag) Frag {
	var r Frag
	parts := make([]string, len(xs))
	for i, x := range xs {
		parts[i] = x.SQL
		r.Args = append(r.Args, x.Args...)
	}
	r.SQL = "(" + strings.Join(parts, ", ") + ")"
	return r
}

// IsZero reports whether f holds no SQL.
func (f Frag) IsZero() bool { return f.SQL == "" }

// PathStyle chooses how the guard tests a foreign-key path.
type PathStyle int

const (
	// PathIn renders fk IN (SELECT parent.key FROM parent JOIN ... WHERE
	// <in scope>): an uncorrelated subquery the engine evaluates once per
	// statement and can drive an index on fk with (SQLite's choice).
	PathIn PathStyle = iota
	// PathExists renders EXISTS (SELECT 1 FROM parent JOIN ... WHERE
	// parent.key = fk AND <in scope>): a correlated semi-join.
	PathExists
)

// Dialect spells SQL for one engine and expands the scope document.
// Implementations must be safe for concurrent use.
type Dialect interface {
	// Name is the engine's short name ("sqlite", "postgres", "mysql").
	Name() string
	// Quote quotes an identifier. Identifiers are validated ASCII
	// (letters, digits, '_'), so no escaping is needed beyond the quotes.
	Quote(ident string) string
	// Placeholders converts the guard's '?' placeholders to the engine's
	// format (squirrel.Question, squirrel.Dollar) once per statement.
	Placeholders() sq.PlaceholderFormat
	// LikeEscape is the SQL literal naming '\' as LIKE's escape character
	// ('\' in standard SQL, '\\' in MySQL's default sql_mode).
	LikeEscape() string
	// DualTable is what a SELECT that reads no table but has a WHERE clause
	// selects FROM: "" for none (SQLite, PostgreSQL), "DUAL" for MySQL.
	DualTable() string
	// PathStyle chooses the shape of foreign-key path predicates.
	PathStyle() PathStyle
	// Prelude returns the text placed before every top-level statement to
	// make the scope document available to InScope (a WITH clause), with
	// doc bound as its argument; or a zero Frag.
	Prelude(doc string) Frag
	// InScope returns a condition true exactly when x equals one of the ids
	// granted at level lvl. x is a column reference or a bound value; its
	// args must stay in textual order in the result.
	InScope(x Frag, lvl *sqlast.Level, doc string) Frag
	// InTuples returns a condition true exactly when the values xs (one per
	// level of sh, in sh's order) equal, all together, one of the tuples
	// granted with shape sh: the ids of a grant confined to ancestors. xs
	// are column references; their args stay in textual order.
	InTuples(xs []Frag, sh Shape, doc string) Frag
	// NeedsTx reports whether each guarded statement must run in a
	// transaction that first calls Session.
	NeedsTx() bool
	// Session prepares a transaction for guarded statements (PostgreSQL:
	// transaction-local set_config of the scope). Called only if NeedsTx.
	Session(ctx context.Context, tx Querier, s scope.Scope, doc string) error
	// Introspect reads the catalog: tables, columns (with declared types),
	// primary keys and foreign keys. Tenancy fields are left empty.
	Introspect(ctx context.Context, q Querier) ([]builder.TableDef, error)
}

// Optional capabilities. A Dialect or Pool implements them where the
// engine offers more than the common ground; guardedsql asserts them on
// the values it was built with (an observed Pool hides them, and
// everything still works the plain way).

// ShapeRenderer is implemented by dialects whose rendered text depends on
// the scope only through its shape (the active levels and the grant
// shapes), never on the document's content, and whose only scope argument
// is the document itself, bound whole. The guard may then reuse the text of
// a statement of the same shape and bind only its values (guard's render
// cache). A dialect that extracts ids from the document, or whose text
// varies with how many a level holds, must not implement it.
type ShapeRenderer interface {
	RendersByShape()
}

// CatalogChecker is implemented by the engine dialects for the start-up
// comparison of the schema graph with the live catalog (guardedsql's
// checkCatalog).
type CatalogChecker interface {
	// Catalog introspects like Introspect, as the connected role (the
	// application role must see its tables' keys), and returns which of
	// keyCols (table, column) would not compare byte for byte in the
	// guard's predicates, each described with its collation.
	Catalog(ctx context.Context, q Querier, keyCols [][2]string) ([]builder.TableDef, []string, error)
	// FKEnforced reports whether the connection enforces foreign keys,
	// and if not, why (a setting named by the engine).
	FKEnforced(ctx context.Context, q Querier) (bool, string, error)
}

// ReadEnforcer is implemented by dialects whose engine can be trusted with
// the read predicates on its own (PostgreSQL row-level security, when
// configured RLS-only). When EngineEnforcesReads reports true the guard
// leaves out the read predicates and keeps its write checks.
type ReadEnforcer interface {
	EngineEnforcesReads() bool
}

// Returner is implemented by dialects whose driver reports no last-insert
// id (PostgreSQL): when Returning reports true, a single-row INSERT into a
// table with a one-column primary key gets RETURNING <key>, runs as a
// query, and its integer key becomes Result.LastInsertID.
type Returner interface {
	Returning() bool
}

// SingleBeginner is implemented by pools that can run one statement, with
// the statements a dialect's Session deferred before it, as a single
// implicit transaction in one round trip (PostgreSQL: a pipelined batch
// without BEGIN, which the server commits at its Sync). guardedsql uses it
// for statements that need no multi-statement atomicity; the transaction's
// Commit and Rollback then only release the connection.
type SingleBeginner interface {
	BeginSingle(ctx context.Context) (Tx, error)
}

// Querier runs final SQL (placeholders already in the engine's format).
type Querier interface {
	Query(ctx context.Context, sql string, args ...any) (Rows, error)
	Exec(ctx context.Context, sql string, args ...any) (Result, error)
}

// Pool is a connection pool.
type Pool interface {
	Querier
	Begin(ctx context.Context) (Tx, error)
	Close() error
}

// Tx is a transaction.
type Tx interface {
	Querier
	Commit(ctx context.Context) error
	Rollback(ctx context.Context) error
}

// Rows is a result set; it must be closed.
type Rows interface {
	Columns() ([]string, error)
	Next() bool
	Scan(dest ...any) error
	Err() error
	Close() error
}

// Result reports what a statement changed. LastInsertID is 0 where the
// engine does not report one (PostgreSQL reports it through RETURNING, see
// Returner).
type Result struct {
	RowsAffected int64
	LastInsertID int64
}

// Scope is the typed scope document and the levels it holds ids at.
type Scope struct {
	// Doc is bound as the single scope parameter.
	Doc string
	// Active lists the schema levels with at least one valid plain id, in
	// schema order. The guard tests only these.
	Active []*sqlast.Level
	// Shapes lists the shapes of the grants confined to ancestors, sorted
	// by key: each is tested as a whole tuple.
	Shapes []Shape

	each []Scope // see Grants
}

// Shape is the set of levels a grant confined to ancestors names (its own
// level and its ancestors'), in schema order. Its tuples sit in the scope
// document under Key, the level names joined by '/' (never a level name,
// which has no '/'): {"chain/hotel":[["initech","acme-paris"]]}, each tuple's
// ids typed like the plain ids of their levels.
type Shape struct {
	Key    string
	Levels []*sqlast.Level
}

// ShapeSep separates the level names of a Shape's key.
const ShapeSep = "/"

// Grants returns one scope per grant of s, in schema order: each plain id
// of an active level, and each tuple of a shape, alone in its document. It
// is computed when the scope is encoded (and cached with it); the scopes it
// returns have no Grants of their own, nor has a Scope made by hand: both
// are read as one grant.
func (s Scope) Grants() []Scope { return s.each }

// InlineScoper is implemented by a dialect whose InScope and InTuples read
// the scope from the Prelude: these read doc itself, bound where they
// stand, so that a statement may test a scope other than its prelude's.
type InlineScoper interface {
	InScopeInline(x Frag, lvl *sqlast.Level, doc string) Frag
	InTuplesInline(xs []Frag, sh Shape, doc string) Frag
}

// Has reports whether lvl holds at least one valid plain id.
func (s Scope) Has(lvl *sqlast.Level) bool { return slices.Contains(s.Active, lvl) }

// EncodeScope builds the typed scope document for the schema's levels
// from the scope's grants. Grant ids that are not valid for their level's
// key kind are dropped; so are grants at levels the schema does not have.
// A grant confined to ancestors becomes a tuple of its Shape, holding a
// value for every level the grant names; if any of them is not a level of
// the schema or not a valid id of its level, the grant is dropped whole:
// a condition that cannot be checked is never left out.
//
// The result is computed once per level list and grant set and cached (see
// scopeKey); callers must not modify it.
func EncodeScope(levels []*sqlast.Level, s scope.Scope) Scope {
	if guardfault.AncestorsIgnored() { // test-only mutation: never cached
		return encodeScope(levels, s)
	}
	js := s.GrantJSON() // a copy of its own: the key may share its bytes
	k := scopeKey{levels: unsafe.SliceData(levels), n: len(levels), grants: unsafe.String(unsafe.SliceData(js), len(js))}
	if guardfault.Off(guardfault.ScopeCacheKey) { // test-only mutation: the key loses the grants
		k.grants = ""
	}
	scopeCache.RLock()
	out, ok := scopeCache.m[k]
	scopeCache.RUnlock()
	if ok {
		return out
	}
	out = encodeScope(levels, s)
	out.Active = slices.Clip(out.Active) // no append by a caller writes into the shared arrays
	out.Shapes = slices.Clip(out.Shapes)
	out.each = slices.Clip(out.each)
	scopeCache.Lock()
	if scopeCache.m == nil || len(scopeCache.m) >= scopeCacheMax {
		scopeCache.m = make(map[scopeKey]Scope)
	}
	scopeCache.m[k] = out
	scopeCache.Unlock()
	return out
}

// scopeKey identifies an encoded scope. Invariant: two scopes share an
// entry only when they encode to the same document. The encoding depends on
// the levels (their names, key kinds and identity, which Active and Shapes
// point to) and on the scope's grants alone: their levels, ids and ancestors,
// not their roles nor the subject. The level list is identified by its
// backing array and length (a schema's levels never change after it is
// built, and the key keeps the array alive, so its address is never
// reused), and the grant set by scope.Scope.GrantJSON, its canonical
// encoding: two grant sets differing in any level, id or ancestor encode
// differently (TestEncodeScopeCacheKeyed).
type scopeKey struct {
	levels **sqlast.Level
	n      int
	grants string
}

// scopeCache maps a scopeKey to its Scope. It is emptied when it holds
// scopeCacheMax entries, which bounds it whatever the number of tenants.
var scopeCache struct {
	sync.RWMutex
	m map[scopeKey]Scope
}

const scopeCacheMax = 4096

func encodeScope(levels []*sqlast.Level, s scope.Scope) Scope {
	var b strings.Builder
	b.WriteByte('{')
	out := Scope{}
	n := 0
	// entry writes key's values into the document and returns, in the
	// same order, the document of each value alone (one grant's).
	entry := func(key string, vals []string) (alone []string) {
		if n > 0 {
			b.WriteByte(',')
		}
		n++
		name, _ := json.Marshal(key)
		b.Write(name)
		b.WriteString(":[")
		b.WriteString(strings.Join(vals, ","))
		b.WriteByte(']')
		for _, v := range vals {
			alone = append(alone, "{"+string(name)+":["+v+"]}")
		}
		return alone
	}
	for _, l := range levels {
		ids := s.GrantsAt(l.Name)
		if guardfault.AncestorsIgnored() { // test-only mutation: see package guardfault
			ids = nil
			for _, g := range s.Grants() {
				if g.Level == l.Name {
					ids = append(ids, g.ID)
				}
			}
		}
		var vals []string
		switch l.Key {
		case sqlast.IntKey:
			var ns []int64
			for _, id := range ids {
				if n, ok := CanonicalInt(id); ok {
					ns = append(ns, n)
				}
			}
			slices.Sort(ns)
			for _, n := range slices.Compact(ns) {
				vals = append(vals, strconv.FormatInt(n, 10))
			}
		case sqlast.TextKey:
			for _, id := range ids {
				if v, ok := encodeID(l, id); ok {
					vals = append(vals, v)
				}
			}
		}
		if len(vals) == 0 {
			continue
		}
		for _, doc := range entry(l.Name, vals) {
			out.each = append(out.each, Scope{Doc: doc, Active: []*sqlast.Level{l}})
		}
		out.Active = append(out.Active, l)
	}
	if s.Plain() {
		b.WriteByte('}')
		out.Doc = b.String()
		return out
	}
	shapes := map[string]*Shape{}
	tuples := map[string][]string{}
	for _, g := range s.Grants() {
		if g.Plain() || guardfault.AncestorsIgnored() {
			continue
		}
		key, sh, tuple, ok := encodeTuple(levels, g)
		if !ok {
			continue
		}
		if shapes[key] == nil {
			shapes[key] = &sh
		}
		tuples[key] = append(tuples[key], tuple)
	}
	keys := make([]string, 0, len(shapes))
	for k := range shapes {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		ts := tuples[k]
		slices.Sort(ts)
		sh := *shapes[k]
		for _, doc := range entry(k, slices.Compact(ts)) {
			out.each = append(out.each, Scope{Doc: doc, Shapes: []Shape{sh}})
		}
		out.Shapes = append(out.Shapes, sh)
	}
	b.WriteByte('}')
	out.Doc = b.String()
	return out
}

// encodeID renders id as the JSON value of a plain or tuple id of l.
func encodeID(l *sqlast.Level, id string) (string, bool) {
	switch l.Key {
	case sqlast.IntKey:
		n, ok := CanonicalInt(id)
		if !ok {
			return "", false
		}
		return strconv.FormatInt(n, 10), true
	case sqlast.TextKey:
		js, err := json.Marshal(id)
		return string(js), err == nil
	}
	return "", false
}

// encodeTuple renders a grant confined to ancestors as a JSON array of its
// ids in schema level order, with its shape.
func encodeTuple(levels []*sqlast.Level, g scope.Grant) (string, Shape, string, bool) {
	byName := map[string]string{g.Level: g.ID}
	for _, w := range g.Within {
		if _, dup := byName[w.Level]; dup {
			return "", Shape{}, "", false
		}
		byName[w.Level] = w.ID
	}
	var (
		sh   Shape
		vals []string
		keys []string
	)
	for _, l := range levels {
		id, ok := byName[l.Name]
		if !ok {
			continue
		}
		v, ok := encodeID(l, id)
		if !ok {
			return "", Shape{}, "", false
		}
		delete(byName, l.Name)
		sh.Levels = append(sh.Levels, l)
		keys = append(keys, l.Name)
		vals = append(vals, v)
	}
	if len(byName) > 0 { // a level the schema does not have: uncheckable
		return "", Shape{}, "", false
	}
	sh.Key = strings.Join(keys, ShapeSep)
	return sh.Key, sh, "[" + strings.Join(vals, ",") + "]", true
}

// ShapeTuples extracts the tuples of sh from a scope document as one Go
// slice per level ([]int64 or []string), position i of every slice making
// tuple i. A tuple that does not fit sh is skipped whole; a document that
// does not parse (it always does: EncodeScope writes it) yields no tuples.
func ShapeTuples(doc string, sh Shape) []any {
	var all map[string]json.RawMessage
	_ = json.Unmarshal([]byte(doc), &all)
	var ts [][]json.RawMessage
	_ = json.Unmarshal(all[sh.Key], &ts)
	ints := make([][]int64, len(sh.Levels))
	texts := make([][]string, len(sh.Levels))
next:
	for _, t := range ts {
		if len(t) != len(sh.Levels) {
			continue
		}
		ns := make([]int64, len(t))
		ss := make([]string, len(t))
		for i, l := range sh.Levels {
			var err error
			if l.Key == sqlast.IntKey {
				err = json.Unmarshal(t[i], &ns[i])
			} else {
				err = json.Unmarshal(t[i], &ss[i])
			}
			if err != nil {
				continue next
			}
		}
		for i := range sh.Levels {
			ints[i] = append(ints[i], ns[i])
			texts[i] = append(texts[i], ss[i])
		}
	}
	cols := make([]any, len(sh.Levels))
	for i, l := range sh.Levels {
		if l.Key == sqlast.IntKey {
			cols[i] = append([]int64{}, ints[i]...)
		} else {
			cols[i] = append([]string{}, texts[i]...)
		}
	}
	return cols
}

// CanonicalInt parses s as a decimal int64 written canonically (see
// sqlast.CanonicalInt).
func CanonicalInt(s string) (int64, bool) { return sqlast.CanonicalInt(s) }

// LevelValue converts a bound value to the level's key kind for a
// comparison with the scope document, reporting false when v cannot be a
// key of that kind (then it is in no scope). Integers of IntKey levels may
// arrive as Go integers or canonical decimal strings; TextKey values as
// strings or integers (rendered in decimal).
func LevelValue(lvl *sqlast.Level, v any) (any, bool) {
	if _, isBytes := v.([]byte); isBytes {
		return nil, false
	}
	return sqlast.ConvertValue(lvl.Key, v)
}

// ErrBusy is returned by a pool whose wait for a free connection exceeded
// its bound (Wait.Timeout) while the caller's own context was still live.
// guardedsql exports it as its ErrBusy.
var ErrBusy = errors.New("guardedsql: busy: no database connection free within the wait bound")

// ErrUnsafe is matched by every error of an engine's check of its own
// tenant isolation (PostgreSQL's ErrRLSUnsafe). guardedsql exports it as
// its ErrEngineUnsafe.
var ErrUnsafe = errors.New("guardedsql: the engine's own tenant isolation is not verified")

// Wait bounds how long a statement may wait for a free connection.
type Wait struct {
	// Timeout is the longest wait; zero or negative means wait as long as
	// the caller's context allows.
	Timeout time.Duration
	// Observe, if set, is told of every wait that had to block or failed:
	// how long it lasted and whether it ended in ErrBusy.
	Observe func(ctx context.Context, waited time.Duration, busy bool)
}

// WaitBounder is implemented by pools that can bound the wait for a
// connection separately from the statement's own context (a connection
// acquired in time is then used under the caller's context alone).
// guardedsql calls BoundWait once, before the pool is used.
type WaitBounder interface {
	BoundWait(w Wait)
}

// ConnCounter is implemented by pools that know the most connections they
// will open (PostgreSQL's pgxpool). guardedsql puts its tenant-fair wait
// queue in front of such a pool (see guardedsql.Options.PoolFIFO); a pool
// without it, or reporting zero, is used as it is.
type ConnCounter interface {
	MaxConns() int
}

// Acquire runs get under a context bounded by w.Timeout and maps the
// bound's expiry (with ctx itself still live) to ErrBusy, so that a caller
// can tell "the pool is saturated, retry" from its own deadline.
func Acquire[T any](ctx context.Context, w Wait, get func(context.Context) (T, error)) (T, error) {
	if w.Timeout <= 0 && w.Observe == nil {
		return get(ctx)
	}
	start := time.Now()
	actx, cancel := ctx, context.CancelFunc(func() {})
	if w.Timeout > 0 {
		actx, cancel = context.WithTimeoutCause(ctx, w.Timeout, ErrBusy)
	}
	v, err := get(actx)
	cancel()
	busy := err != nil && ctx.Err() == nil && errors.Is(context.Cause(actx), ErrBusy)
	if busy {
		err = fmt.Errorf("%w (waited %s)", ErrBusy, w.Timeout)
	}
	if w.Observe != nil {
		// Only waits that blocked are worth a metric; an idle connection is
		// handed out in microseconds.
		if waited := time.Since(start); busy || waited > time.Millisecond {
			w.Observe(ctx, waited, busy)
		}
	}
	return v, err
}

// EngineErrorKind classifies an error the engine raised for a statement.
type EngineErrorKind int

const (
	// EngineOther is any other engine error.
	EngineOther EngineErrorKind = iota
	// EngineUnique: a unique or primary-key constraint refused the row.
	EngineUnique
	// EngineReferenced: a foreign key refused deleting or re-keying a row
	// that other rows still reference.
	EngineReferenced
	// EngineMissingRef: a foreign key refused a row whose referenced row
	// does not exist.
	EngineMissingRef
	// EngineInvalid: the engine refused a value (type conversion, range,
	// length, CHECK, NOT NULL).
	EngineInvalid
	// EngineRetryable: the engine gave up on the transaction (or the
	// statement) because of concurrent ones, and says running it again may
	// succeed: a serialization failure, a deadlock, a lock wait that
	// timed out, a busy or locked database.
	EngineRetryable
)

// EngineError is what a dialect reads from an engine error. Table,
// Constraint and Columns are identifiers as the engine names them, never
// values; the caller still checks them against the schema. Message is the
// engine's text, which may quote values of any row the statement touched:
// it is for the operational log only, after redaction.
type EngineError struct {
	Kind       EngineErrorKind
	Code       string
	Table      string
	Constraint string
	Columns    []string
	Message    string
}

// ErrorClassifier is implemented by dialects that can read their engine's
// errors. Classify reports false for errors that do not come from the
// engine (connection, context, driver-side errors).
type ErrorClassifier interface {
	Classify(err error) (EngineError, bool)
}

// identRE matches one plain identifier.
var identRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_$]*$`)

// Ident returns s if it is a plain identifier, else "". Every name taken
// out of an engine message goes through it, so a quoted value can never
// pass for a name.
func Ident(s string) string {
	if identRE.MatchString(s) {
		return s
	}
	return ""
}

// UniqueKey is one unique constraint or unique index of a table.
type UniqueKey struct {
	Table, Name string
	Columns     []string
	Primary     bool
}

// UniqueLister is implemented by dialects that can list the unique keys
// of the connection's current schema.
type UniqueLister interface {
	UniqueKeys(ctx context.Context, q Querier) ([]UniqueKey, error)
}

// CollectUniqueKeys runs query, whose rows are (table, name, primary,
// comma-separated columns), and groups nothing: one row per key.
func CollectUniqueKeys(ctx context.Context, q Querier, query string) ([]UniqueKey, error) {
	rows, err := q.Query(ctx, query)
	if err != nil {
		return nil, err
	}
	var out []UniqueKey
	for rows.Next() {
		var k UniqueKey
		var cols string
		if err := rows.Scan(&k.Table, &k.Name, &k.Primary, &cols); err != nil {
			rows.Close()
			return nil, err
		}
		k.Columns = strings.Split(cols, ",")
		out = append(out, k)
	}
	if err := rows.Err(); err != nil {
		rows.Close()
		return nil, err
	}
	return out, rows.Close()
}
