package guard

import (
	"encoding/binary"
	"slices"
	"sync"
	"time"
	"unsafe"

	"github.com/tenantmcp/tenantmcp/guardedsql/internal/engine"
	"github.com/tenantmcp/tenantmcp/internal/guardfault"
	"github.com/tenantmcp/tenantmcp/internal/sqlast"
)

// The render cache (issue 30): a tool builds the same query shape on every
// call with other values, and its text, guard included, is the same each
// time. A SELECT is fingerprinted (shapeKey) and, when a statement of the
// same fingerprint was rendered before, its text is reused and only its
// arguments are bound: the statement's values, in the recorded layout, and
// the scope document.
//
// Only dialects that implement engine.ShapeRenderer are cached (SQLite's:
// its scope tests do not read the document, so the text depends on the
// scope only through which levels are active and which shapes it holds).
// PostgreSQL binds ids extracted from the document and MySQL's text
// depends on how many entries a level holds; both render uncached.

// slot stands for the statement's i-th value (in shapeKey's walk order)
// while a layout is recorded. It is unexported, so no statement value can
// be one.
type slot int

// foreign stands for a value the walk did not record: recording it makes
// the statement uncacheable.
type foreign struct{}

// bound is v as bound in a condition (bindTime), or its slot while a
// layout is recorded.
func (r *renderer) bound(v *sqlast.Value) any {
	if r.rec != nil {
		return r.slotOf(v)
	}
	return r.bindTime(v.V)
}

// boundRaw is v as bound without bindTime (a LIKE pattern), or its slot.
func (r *renderer) boundRaw(v *sqlast.Value) any {
	if r.rec != nil {
		return r.slotOf(v)
	}
	return v.V
}

func (r *renderer) slotOf(v *sqlast.Value) any {
	if i := slices.Index(r.rec, v); i >= 0 {
		return slot(i)
	}
	return foreign{}
}

// cached is the text of one statement shape and where its arguments come
// from. It holds no argument value: layout[i] >= 0 is the index of the
// statement's value bound as argument i, -1 the scope document. keep holds
// the objects whose addresses the key names (tables, levels, the quoted
// names), so that none of them is freed and its address reused while the
// entry exists.
type cached struct {
	sql    string
	layout []int32
	keep   []any
}

// renderCache maps a shape key to its text and layout.
//
// Invariant: two statements share an entry only when they render to the
// same text with their arguments in the same places. The key holds
// everything rendering reads except the bound values: the dialect (its
// type and path style), the options (every flag and the identity of the
// quoted-name map), the scope's active levels and the levels and keys of
// its shapes (by identity), and the whole statement (every clause, operator,
// alias, column name, table by identity, LIMIT and OFFSET, and of each
// bound value whether it is NULL and its type, which decide IS NULL and
// the refusal of a value). No id, document or value is in the key or the
// entry (TestRenderCacheIsolation). Anything the walk does not know makes
// the statement uncacheable, and it renders as before; a field added to a
// type the walk covers fails TestRenderCacheKeyCoversFields until the key
// covers it.
//
// It is emptied when it holds renderCacheMax entries, which bounds it
// whatever the number of shapes.
var renderCache struct {
	sync.RWMutex
	m map[string]*cached
}

const renderCacheMax = 2048

// keyBufs recycles the key buffers and value lists of shapeKey.
var keyBufs = sync.Pool{New: func() any { return &keyBuf{b: make([]byte, 0, 256)} }}

type keyBuf struct {
	b    []byte
	vals []*sqlast.Value
	refs []*sqlast.Ref
	keep []any
	ok   bool
}

// renderCached renders s through the cache. It reports false when s is not
// cacheable; the caller then renders it normally.
func renderCached(d engine.Dialect, s *sqlast.Select, sc engine.Scope, opt Options) (Plan, bool, error) {
	if _, ok := d.(engine.ShapeRenderer); !ok || faulted(s) {
		return Plan{}, false, nil
	}
	k := keyBufs.Get().(*keyBuf)
	defer k.release()
	if !k.shapeKey(d, s, sc, opt) {
		return Plan{}, false, nil
	}
	renderCache.RLock()
	e := renderCache.m[string(k.b)] // no copy of the key for a lookup
	renderCache.RUnlock()
	if e == nil {
		p, err := render(d, s, sc, opt, k.vals)
		if err != nil {
			// Not cached: the plain render reports the error as it
			// always has.
			return Plan{}, false, nil
		}
		if e = k.layoutOf(p, sc); e == nil {
			return Plan{}, false, nil
		}
		renderCache.Lock()
		if renderCache.m == nil || len(renderCache.m) >= renderCacheMax {
			renderCache.m = make(map[string]*cached)
		}
		renderCache.m[string(k.b)] = e
		renderCache.Unlock()
	}
	var args []any // nil without arguments, as a render leaves it
	if len(e.layout) > 0 {
		args = make([]any, len(e.layout))
	}
	sqliteText := d.Name() == "sqlite"
	for i, j := range e.layout {
		if j < 0 {
			args[i] = sc.Doc
			continue
		}
		args[i] = k.vals[j].V
		if t, ok := args[i].(time.Time); ok && sqliteText {
			args[i] = SQLiteTime(t) // as Render's sqliteTimes does
		}
	}
	return Plan{Kind: Select, Steps: []Step{{SQL: e.sql, Args: args}}}, true, nil
}

func (k *keyBuf) release() {
	clear(k.vals)
	clear(k.refs)
	clear(k.keep)
	k.b, k.vals, k.refs, k.keep = k.b[:0], k.vals[:0], k.refs[:0], k.keep[:0]
	if cap(k.b) > 4096 {
		k.b = make([]byte, 0, 256)
	}
	keyBufs.Put(k)
}

// layoutOf returns the entry for p, a plan rendered with k.vals recorded,
// or nil when p has anything but a single plain statement whose arguments
// are slots and the scope document itself.
func (k *keyBuf) layoutOf(p Plan, sc engine.Scope) *cached {
	if p.Kind != Select || len(p.Steps) != 1 || p.Atomic || p.Run != nil || p.Lock != nil || p.Returns != nil {
		return nil
	}
	st := p.Steps[0]
	if st.Expect != ExpectAny || st.Fail != nil || !st.Probe.IsZero() || st.Returning {
		return nil
	}
	e := &cached{sql: st.SQL, layout: make([]int32, len(st.Args)), keep: slices.Clone(k.keep)}
	for i, a := range st.Args {
		switch x := a.(type) {
		case slot:
			e.layout[i] = int32(x)
		case string:
			// The document is known by its bytes' address, not its
			// content: a value equal to it is still a value (and would
			// be a slot here anyway).
			if len(x) != len(sc.Doc) || unsafe.StringData(x) != unsafe.StringData(sc.Doc) {
				return nil
			}
			e.layout[i] = -1
		default:
			return nil
		}
	}
	return e
}

// faulted reports whether a test-only fault that changes rendering is on;
// the cache is bypassed then, so that no text rendered under a fault
// outlives it and no fault is hidden by a text rendered without it.
func faulted(s *sqlast.Select) bool {
	if !guardfault.Enabled {
		return false
	}
	if guardfault.AncestorsIgnored() {
		return true
	}
	for _, f := range []guardfault.Fix{guardfault.GuardFirst, guardfault.Windows, guardfault.ByRef, guardfault.Typed,
		guardfault.ConsistencyPaths, guardfault.SetBranch, guardfault.CTEBody, guardfault.GlobalReadOnly,
		guardfault.UpsertConflict, guardfault.NullableFK, guardfault.ByRefExists} {
		if guardfault.Off(f) {
			return true
		}
	}
	for _, ref := range s.Refs {
		if guardfault.Dropped(ref.Table.Name) {
			return true
		}
	}
	return false
}

// Key encoding: tags, then fixed-width or length-prefixed fields, so that
// no two different sequences of fields encode the same bytes.
const (
	tagNil byte = iota
	tagCol
	tagAgg
	tagCmpVal
	tagCmpExpr
	tagBetween
	tagInList
	tagLike
	tagIsNull
	tagAnd
	tagOr
	tagNot
)

func (k *keyBuf) u(n uint64)   { k.b = binary.AppendUvarint(k.b, n) }
func (k *keyBuf) i(n int64)    { k.b = binary.AppendVarint(k.b, n) }
func (k *keyBuf) str(s string) { k.u(uint64(len(s))); k.b = append(k.b, s...) }
func (k *keyBuf) bit(v bool) {
	if v {
		k.b = append(k.b, 1)
	} else {
		k.b = append(k.b, 0)
	}
}

// ptr writes p's address and keeps p alive with the entry (see cached).
func (k *keyBuf) ptr(p unsafe.Pointer, keep any) {
	k.b = binary.LittleEndian.AppendUint64(k.b, uint64(uintptr(p)))
	k.keep = append(k.keep, keep)
}

// shapeKey writes s's key (see renderCache) into k.b and records its values
// in walk order in k.vals. It reports false for a statement the walk does
// not cover.
func (k *keyBuf) shapeKey(d engine.Dialect, s *sqlast.Select, sc engine.Scope, opt Options) bool {
	k.ok = true
	k.b = append(k.b, 'S', 1) // statement kind and key version
	k.str(d.Name())
	k.i(int64(d.PathStyle()))
	k.bit(opt.PredicatesOnly)
	k.bit(opt.EngineEnforcesReads)
	k.bit(opt.NoIntersectExcept)
	k.ptr(*(*unsafe.Pointer)(unsafe.Pointer(&opt.Quoted)), opt.Quoted)
	if !guardfault.Off(guardfault.RenderCacheKey) {
		// Not sc.Grants: only writes (pairing.go) render by grant.
		k.u(uint64(len(sc.Active)))
		for _, l := range sc.Active {
			k.ptr(unsafe.Pointer(l), l)
		}
		k.u(uint64(len(sc.Shapes)))
		for _, sh := range sc.Shapes {
			k.str(sh.Key)
			k.u(uint64(len(sh.Levels)))
			for _, l := range sh.Levels {
				k.ptr(unsafe.Pointer(l), l)
			}
		}
	}
	if len(s.With) > 0 || s.Lock != sqlast.NoLock || len(s.Outer) > 0 || s.From == nil {
		return false
	}
	// The references, in declaration order; columns name them by index.
	k.u(uint64(len(s.Refs)))
	for _, ref := range s.Refs {
		if ref.Virtual() || ref.Table == nil {
			return false
		}
		k.str(ref.Alias)
		k.ptr(unsafe.Pointer(ref.Table), ref.Table)
	}
	k.refs = append(k.refs, s.Refs...)
	k.bit(s.Distinct)
	k.u(uint64(len(s.Items)))
	for _, it := range s.Items {
		k.expr(it.X)
		k.str(it.As)
	}
	k.ref(s.From)
	k.u(uint64(len(s.Joins)))
	for _, j := range s.Joins {
		k.i(int64(j.Kind))
		k.ref(j.Ref)
		k.pred(j.On)
	}
	k.pred(s.Where)
	k.u(uint64(len(s.GroupBy)))
	for _, e := range s.GroupBy {
		k.expr(e)
	}
	k.pred(s.Having)
	k.u(uint64(len(s.OrderBy)))
	for _, o := range s.OrderBy {
		k.expr(o.X)
		k.bit(o.Desc)
	}
	k.i(s.Limit)
	k.i(s.Offset)
	return k.ok
}

// ref writes the index of x among the statement's references.
func (k *keyBuf) ref(x *sqlast.Ref) {
	i := slices.Index(k.refs, x)
	if i < 0 {
		k.ok = false
		return
	}
	k.u(uint64(i))
}

func (k *keyBuf) expr(e sqlast.Expr) {
	switch x := e.(type) {
	case *sqlast.Col:
		k.b = append(k.b, tagCol)
		k.ref(x.Ref)
		k.str(x.Name)
	case *sqlast.Agg:
		k.b = append(k.b, tagAgg)
		k.str(string(x.Fn))
		k.bit(x.Distinct)
		if x.Arg == nil {
			k.b = append(k.b, tagNil)
		} else {
			k.expr(x.Arg)
		}
	default:
		k.ok = false // scalar expressions render values of their own
	}
}

// value records v and writes its type: NULL and the type decide the text
// (IS NULL) and whether the value is refused (checkValue).
func (k *keyBuf) value(v *sqlast.Value) {
	var t byte
	switch v.V.(type) {
	case nil:
		t = 0
	case bool:
		t = 1
	case int64:
		t = 2
	case float64:
		t = 3
	case string:
		t = 4
	case []byte:
		t = 5
	case time.Time:
		t = 6
	default:
		k.ok = false // refused by checkValue: rendered uncached
		return
	}
	k.b = append(k.b, t)
	k.vals = append(k.vals, v)
}

func (k *keyBuf) pred(p sqlast.Pred) {
	if !k.ok {
		return
	}
	switch x := p.(type) {
	case nil:
		k.b = append(k.b, tagNil)
	case *sqlast.CmpVal:
		k.b = append(k.b, tagCmpVal)
		k.str(string(x.Op))
		k.expr(x.X)
		k.value(&x.V)
	case *sqlast.CmpExpr:
		k.b = append(k.b, tagCmpExpr)
		k.str(string(x.Op))
		k.expr(x.X)
		k.expr(x.Y)
	case *sqlast.Between:
		k.b = append(k.b, tagBetween)
		k.expr(x.X)
		k.value(&x.Lo)
		k.value(&x.Hi)
	case *sqlast.InList:
		k.b = append(k.b, tagInList)
		k.expr(x.X)
		k.bit(x.Not)
		k.u(uint64(len(x.Vals)))
		for i := range x.Vals {
			k.value(&x.Vals[i])
		}
	case *sqlast.Like:
		k.b = append(k.b, tagLike)
		k.expr(x.X)
		k.bit(x.Not)
		k.value(&x.Pattern)
	case *sqlast.IsNull:
		k.b = append(k.b, tagIsNull)
		k.expr(x.X)
		k.bit(x.Not)
	case *sqlast.And:
		k.b = append(k.b, tagAnd)
		k.preds(x.Ps)
	case *sqlast.Or:
		k.b = append(k.b, tagOr)
		k.preds(x.Ps)
	case *sqlast.Not:
		k.b = append(k.b, tagNot)
		k.pred(x.P)
	default:
		k.ok = false // subqueries: not covered
	}
}

func (k *keyBuf) preds(ps []sqlast.Pred) {
	k.u(uint64(len(ps)))
	for _, p := range ps {
		k.pred(p)
	}
}
