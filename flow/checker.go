package flow

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/tenantmcp/tenantmcp/redact"
)

// ErrDecl is wrapped by the error Register returns for a declaration it
// refuses.
var ErrDecl = errors.New("flow: invalid tool declaration")

// Decl is what a tool declares at registration (server.Tool.Flow).
//
// The label of the tool's results is the join of: Level and Categories
// here; the policy's "tools" entry for the tool; the categories of the
// pii-tagged fields of the result type, through the policy's "pii"
// mapping; and the level of each of those categories. If neither Level nor
// the policy gives a level, the policy's default_level applies. Nothing
// lowers what another source raised.
type Decl struct {
	// Level is the confidentiality of the results apart from their
	// categories. Zero: not declared.
	Level Level
	// Categories the results carry beyond those derived from pii tags.
	Categories []string
	// Sink, if not nil, declares that the tool sends data out of the
	// server: every call is checked before its handler runs.
	Sink *Sink
	// EchoOnly declares that the results hold nothing but what the caller
	// sent (as the plan check's report does): personal data package
	// redact detects in their free text then does not add categories.
	// Never set it on a tool that returns stored data.
	EchoOnly bool
}

// Sink declares where a sink tool sends data.
type Sink struct {
	Kind SinkKind
	// DestArg is the top-level input property (JSON name) holding the
	// destination; it must be a string field of the input type.
	DestArg string
	// Dest is a fixed destination, for a sink whose destination is not an
	// argument. Exactly one of DestArg and Dest is set.
	Dest string
}

// Options configures a Checker.
type Options struct {
	// Now returns the current time; nil means time.Now.
	Now func() time.Time
	// Store keeps the taints; nil means NewMemoryStore(), private to this
	// process. Replicas that serve the same subjects must share one (see
	// Store).
	Store Store
}

// Checker holds a policy, the labels of the registered tools and the taint
// of every session. It is safe for concurrent use.
type Checker struct {
	pol *Policy
	now func() time.Time

	mu    sync.RWMutex
	cats  []string // category index → name
	catIx map[string]int
	level [maxCategories]rank
	tools map[string]*Tool
	// piiCat maps a redact category (by its index in rcats, which is
	// redact.Categories) to a category index, -1 for none.
	piiCat []int
	rcats  []redact.Category

	// Compiled destinations: every pattern of "destinations" and of the
	// categories' "to" lists, with the clearance it grants and the
	// categories it admits.
	pats       []cpat
	ownerClear rank
	ownerCats  catSet
	declass    map[string][]*cdeclass

	store Store
	// retain is the retention every store call is given: the policy's
	// plus touchSlack, so that held may skip a write (see held.go).
	retain time.Duration
	held   *heldCache
}

type cpat struct {
	pat       pattern
	clearance rank
	cats      catSet
}

type cdeclass struct {
	r     *declassRule
	sinks []string
	to    []pattern
	cats  catSet
}

// Store returns the taint store the checker reads and writes (the
// memory store when Options.Store was nil): for readiness probes, which
// ping it when it can be pinged.
func (c *Checker) Store() Store { return c.store }

// New returns a Checker for p.
func New(p *Policy, o Options) (*Checker, error) {
	if p == nil {
		return nil, fmt.Errorf("%w: nil policy", ErrPolicy)
	}
	c := &Checker{pol: p, now: o.Now, catIx: map[string]int{}, tools: map[string]*Tool{}, declass: map[string][]*cdeclass{}}
	if c.now == nil {
		c.now = time.Now
	}
	c.store = o.Store
	if c.store == nil {
		c.store = NewMemoryStore()
	}
	slack := touchSlack(p.retain)
	c.retain, c.held = p.retain+slack, newHeldCache(slack)
	// Intern categories in a fixed order: described ones first (file
	// order), then the pii targets, then those only tools name.
	for _, name := range p.catOrder {
		if _, err := c.intern(name); err != nil {
			return nil, err
		}
	}
	rc := redact.Categories()
	c.rcats = rc
	c.piiCat = make([]int, len(rc))
	for i, r := range rc {
		c.piiCat[i] = -1
		if name, ok := p.pii[r]; ok {
			ix, err := c.intern(name)
			if err != nil {
				return nil, err
			}
			c.piiCat[i] = ix
		}
	}
	toolNames := make([]string, 0, len(p.tools))
	for n := range p.tools {
		toolNames = append(toolNames, n)
	}
	sort.Strings(toolNames)
	for _, n := range toolNames {
		for _, cat := range p.tools[n].cats {
			if _, err := c.intern(cat); err != nil {
				return nil, err
			}
		}
	}
	for _, d := range p.destinations {
		if d.pat.kind == patOwner {
			c.ownerClear = max(c.ownerClear, d.clearance)
			continue
		}
		c.addPattern(d.pat, d.clearance, 0)
	}
	for _, name := range p.catOrder {
		ix := c.catIx[name]
		for _, q := range p.categories[name].to {
			if q.kind == patOwner {
				c.ownerCats |= 1 << uint(ix)
				continue
			}
			c.addPattern(q, 0, 1<<uint(ix))
		}
	}
	for _, r := range p.declassify {
		cd := &cdeclass{r: r, sinks: r.sinks, to: r.to}
		for _, cat := range r.cats {
			ix, err := c.intern(cat)
			if err != nil {
				return nil, err
			}
			cd.cats |= 1 << uint(ix)
		}
		c.declass[r.reason] = append(c.declass[r.reason], cd)
	}
	return c, nil
}

func (c *Checker) addPattern(p pattern, clearance rank, cats catSet) {
	for i := range c.pats {
		if c.pats[i].pat.raw == p.raw {
			c.pats[i].clearance = max(c.pats[i].clearance, clearance)
			c.pats[i].cats |= cats
			return
		}
	}
	c.pats = append(c.pats, cpat{pat: p, clearance: clearance, cats: cats})
}

// intern returns the index of category name, adding it. Call with c.mu
// held for writing (or before c is shared).
func (c *Checker) intern(name string) (int, error) {
	if ix, ok := c.catIx[name]; ok {
		return ix, nil
	}
	if len(c.cats) == maxCategories {
		return 0, fmt.Errorf("%w: more than %d categories", ErrDecl, maxCategories)
	}
	ix := len(c.cats)
	c.cats = append(c.cats, name)
	c.catIx[name] = ix
	c.level[ix] = DefaultCategoryLevel.rank()
	if r, ok := c.pol.categories[name]; ok {
		c.level[ix] = r.level
	}
	return ix, nil
}

// Policy returns the checker's policy.
func (c *Checker) Policy() *Policy { return c.pol }

// Tool is a registered tool: its label and, for a sink, its destination.
type Tool struct {
	c    *Checker
	name string
	lab  label
	sink *Sink
	// dest is the parsed fixed destination (Sink.Dest).
	dest     Destination
	destErr  error
	echoOnly bool
	// in and destField locate the destination argument: the arguments
	// are decoded into a new in, exactly as the handler decodes them, and
	// the destination read from field destField.
	in        reflect.Type
	destField []int
}

// Name is the tool's name.
func (t *Tool) Name() string { return t.name }

// Label is the static label of the tool's results.
func (t *Tool) Label() Label { return t.c.labelOf(t.lab) }

// Sink returns a copy of the tool's sink declaration, nil for a tool that
// is not a sink.
func (t *Tool) Sink() *Sink {
	if t.sink == nil {
		return nil
	}
	s := *t.sink
	return &s
}

// Register declares a tool: name, its input and result types, and d. The
// server calls it from AddTool; an error refuses the tool. It fails
// (ErrDecl, or redact.ErrTag for a bad pii tag) for a malformed Decl, a
// sink whose DestArg is not a string property of in, or an unparseable
// fixed destination.
func (c *Checker) Register(name string, in, out reflect.Type, d Decl) (*Tool, error) {
	if name == "" {
		return nil, fmt.Errorf("%w: empty tool name", ErrDecl)
	}
	if d.Level != "" && !d.Level.Valid() {
		return nil, fmt.Errorf("%w: tool %q: unknown level %q", ErrDecl, name, d.Level)
	}
	for _, cat := range d.Categories {
		if !categoryRE.MatchString(cat) {
			return nil, fmt.Errorf("%w: tool %q: category %q must be lower case letters, digits, '.', '_' or '-'", ErrDecl, name, cat)
		}
	}
	t := &Tool{c: c, name: name, echoOnly: d.EchoOnly}
	if d.Sink != nil {
		s := *d.Sink
		if s.Kind != Email && s.Kind != URL {
			return nil, fmt.Errorf("%w: sink %q: kind %q (want %q or %q)", ErrDecl, name, s.Kind, Email, URL)
		}
		switch {
		case (s.DestArg == "") == (s.Dest == ""):
			return nil, fmt.Errorf("%w: sink %q: set exactly one of DestArg and Dest", ErrDecl, name)
		case s.Dest != "":
			if t.dest, t.destErr = ParseDestination(s.Kind, s.Dest); t.destErr != nil {
				return nil, fmt.Errorf("%w: sink %q: %v", ErrDecl, name, t.destErr)
			}
		default:
			idx, err := destArgField(in, s.DestArg)
			if err != nil {
				return nil, fmt.Errorf("%w: sink %q: %v", ErrDecl, name, err)
			}
			t.in, t.destField = in, idx
		}
		t.sink = &s
	}
	var piis []redact.Category
	if out != nil {
		var err error
		if piis, err = redact.CategoriesOf(out); err != nil {
			return nil, fmt.Errorf("tool %q: %w", name, err)
		}
	}

	c.mu.Lock()
	defer c.mu.Unlock()
	lv := d.Level.rank()
	cats := slices.Clone(d.Categories)
	if r, ok := c.pol.tools[name]; ok {
		lv = max(lv, r.level)
		cats = append(cats, r.cats...)
	}
	if lv == 0 {
		lv = c.pol.defaultLevel
	}
	var set catSet
	for _, p := range piis {
		if ix := c.piiIndex(p); ix >= 0 {
			set |= 1 << uint(ix)
		}
	}
	for _, cat := range cats {
		ix, err := c.intern(cat)
		if err != nil {
			return nil, err
		}
		set |= 1 << uint(ix)
	}
	t.lab = c.withCatLevels(label{level: lv, cats: set})
	c.tools[name] = t
	return t, nil
}

// withCatLevels raises l to the level of each of its categories.
func (c *Checker) withCatLevels(l label) label {
	l.cats.each(func(i int) { l.level = max(l.level, c.level[i]) })
	return l
}

func (c *Checker) piiIndex(p redact.Category) int {
	for i, r := range c.rcats {
		if r == p {
			return c.piiCat[i]
		}
	}
	return -1
}

// destArgField returns the index of the field of struct type in that
// encoding/json decodes the property arg into: a direct, exported string
// field whose JSON name is arg. The checker reads the destination from
// that field after decoding the arguments into in exactly as the handler
// does, so that what is judged is what the handler sends to, whatever the
// case-insensitive key matching of encoding/json makes of the arguments.
func destArgField(in reflect.Type, arg string) ([]int, error) {
	if in == nil || in.Kind() != reflect.Struct {
		return nil, fmt.Errorf("DestArg %q needs a struct input type, not %v", arg, in)
	}
	for i := 0; i < in.NumField(); i++ {
		f := in.Field(i)
		jn, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if !f.IsExported() || f.Anonymous || jn == "-" {
			continue
		}
		if jn == "" {
			jn = f.Name
		}
		if jn != arg {
			continue
		}
		if f.Type.Kind() != reflect.String {
			return nil, fmt.Errorf("DestArg %q is a %v, not a string", arg, f.Type)
		}
		return f.Index, nil
	}
	return nil, fmt.Errorf("DestArg %q is not a direct field of %v", arg, in)
}

// Verify checks the policy against the registered tools: every tool the
// policy's "tools" names and every sink a declassification rule names must
// be registered, and each such sink must be declared a sink. Call it after
// registering every tool, and refuse to start if it fails: a name that
// matches nothing is a rule that silently does nothing.
func (c *Checker) Verify() error {
	c.mu.RLock()
	defer c.mu.RUnlock()
	var errs []error
	names := make([]string, 0, len(c.pol.tools))
	for n := range c.pol.tools {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		if c.tools[n] == nil {
			errs = append(errs, &PolicyError{File: c.pol.name, Line: c.pol.tools[n].line, Col: 1,
				Msg: fmt.Sprintf("tools: %q is not a registered tool", n)})
		}
	}
	for _, r := range c.pol.declassify {
		for _, s := range r.sinks {
			if t := c.tools[s]; t == nil || t.sink == nil {
				errs = append(errs, &PolicyError{File: c.pol.name, Line: r.line, Col: 1,
					Msg: fmt.Sprintf("declassify reason %q: %q is not a registered sink", r.reason, s)})
			}
		}
	}
	return errors.Join(errs...)
}

// Tools returns the registered tools, by name.
func (c *Checker) Tools() []*Tool {
	c.mu.RLock()
	defer c.mu.RUnlock()
	out := make([]*Tool, 0, len(c.tools))
	for _, t := range c.tools {
		out = append(out, t)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out
}

func (c *Checker) tool(name string) *Tool {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.tools[name]
}

func (c *Checker) catNames(s catSet) []string {
	if s == 0 {
		return nil
	}
	c.mu.RLock()
	defer c.mu.RUnlock()
	var out []string
	s.each(func(i int) { out = append(out, c.cats[i]) })
	sort.Strings(out)
	return out
}

func (c *Checker) labelOf(l label) Label {
	return Label{Level: l.level.level(), Categories: c.catNames(l.cats)}
}

// Taint returns the label of the taint under k (see KeyOf). It is for
// inspection and tests; nothing a session does lowers it.
func (c *Checker) Taint(ctx context.Context, k Key) (Label, error) {
	s, err := c.load(ctx, k)
	if err != nil {
		return Label{}, err
	}
	return c.labelOf(s.lab), nil
}

// snapshot is what a check reads of a taint: the stored form and its
// compiled label.
type snapshot struct {
	lab label
	t   Taint
}

// load reads the taint under k from the store and compiles its label.
// The store marked what it read used at now: a result of this call that
// adds nothing to it needs no write (held.go).
func (c *Checker) load(ctx context.Context, k Key) (snapshot, error) {
	now := c.now()
	t, err := c.store.Load(ctx, k, now, c.retain)
	if err != nil {
		if !errors.Is(err, ErrTaintStore) {
			err = fmt.Errorf("%w: %w", ErrTaintStore, err)
		}
		return snapshot{}, err
	}
	lab := label{level: t.Level.rank()}
	for _, name := range t.Categories {
		ix, err := c.catIndex(name)
		if err != nil {
			return snapshot{}, fmt.Errorf("%w: stored category: %w", ErrTaintStore, err)
		}
		lab.cats |= 1 << uint(ix)
	}
	if lab.level > rNone || lab.cats != 0 {
		c.held.note(k, lab.level, lab.cats, t.Owners, t.OwnersUnknown, now)
	}
	// A stored category raises the level as a fresh result would, so a
	// taint joined by a replica with another policy is never read lower.
	return snapshot{lab: c.withCatLevels(lab), t: t}, nil
}

// catIndex returns the index of category name, interning a category this
// checker has not seen (a taint written by a replica with another policy):
// it then has the default level and no destination, so it fails closed.
func (c *Checker) catIndex(name string) (int, error) {
	c.mu.RLock()
	ix, ok := c.catIx[name]
	c.mu.RUnlock()
	if ok {
		return ix, nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.intern(name)
}

// stored is the Taint form of one result's label l, recorded by call o.
func (c *Checker) stored(l label, owners []string, ownersBad bool, o TaintOrigin) Taint {
	t := Taint{Level: l.level.level(), Categories: c.catNames(l.cats), Owners: owners, OwnersUnknown: ownersBad}
	for lv := rPublic; lv <= l.level; lv++ {
		lo := o
		lo.Level = lv.level()
		t.From = append(t.From, lo)
	}
	for _, name := range t.Categories {
		co := o
		co.Category = name
		t.From = append(t.From, co)
	}
	return t
}

// origins returns where each category of bad and the level lv (0: none)
// came from, as s records it.
func (c *Checker) origins(s *snapshot, bad catSet, lv rank) (map[int]origin, origin) {
	out := map[int]origin{}
	var lo origin
	c.mu.RLock()
	defer c.mu.RUnlock()
	for _, o := range s.t.From {
		org := origin{tool: o.Tool, callID: o.CallID, session: o.Session}
		if o.Category != "" {
			if ix, ok := c.catIx[o.Category]; ok && bad.has(ix) {
				out[ix] = org
			}
		} else if lv != rNone && o.Level.rank() == lv {
			lo = org
		}
	}
	return out, lo
}

// origin is the call that introduced something into a taint.
type origin struct {
	tool, callID, session string
}

// decision is the outcome of judging one sink call.
type decision struct {
	denial       *Denial
	declassified string // the reason of the declassification that allowed it
	viaOwner     bool   // the destination is the data subject
	clearance    rank   // the destination's clearance for this call
	allowed      catSet // the categories that may reach it
}

// ownerMode says how decide treats $owner.
type ownerMode uint8

const (
	ownerFromTaint ownerMode = iota // the taint's data subjects decide
	ownerNever                      // $owner matches nothing
	ownerAlways                     // $owner matches (plans: "if it is the subject")
)

// decide judges a flow of taint s to destination d through sink t, with
// the declassification reason the call gave.
func (c *Checker) decide(t *Tool, s *snapshot, d *Destination, destErr error, reason string, om ownerMode) decision {
	if destErr != nil {
		return decision{denial: &Denial{Rule: RuleDestination, Reason: destErr.Error()}}
	}
	var clearance rank
	var allowed catSet
	for i := range c.pats {
		p := &c.pats[i]
		if p.pat.match(d) {
			clearance = max(clearance, p.clearance)
			allowed |= p.cats
		}
	}
	isOwner := false
	switch om {
	case ownerFromTaint:
		w, ok := s.t.owner()
		isOwner = ok && d.Kind == Email && d.Address == w
	case ownerAlways:
		isOwner = d.Kind == Email
	}
	if isOwner {
		clearance = max(clearance, c.ownerClear)
		allowed |= c.ownerCats
	}
	clearance = max(clearance, rPublic) // anywhere may receive public data
	out := decision{clearance: clearance, allowed: allowed, viaOwner: isOwner}
	if reason != "" {
		rules, ok := c.declass[reason]
		if !ok {
			out.denial = &Denial{Rule: RuleDeclassify, Reason: fmt.Sprintf("no declassification rule is named %q", reason)}
			return out
		}
		var hit *cdeclass
		for _, r := range rules {
			if !slices.Contains(r.sinks, t.name) {
				continue
			}
			for i := range r.to {
				q := &r.to[i]
				if q.match(d) || q.kind == patOwner && isOwner {
					hit = r
					break
				}
			}
			if hit != nil {
				break
			}
		}
		if hit == nil {
			out.denial = &Denial{Rule: RuleDeclassify,
				Reason: fmt.Sprintf("declassification %q does not cover sink %s to %s", reason, t.name, d)}
			return out
		}
		clearance = max(clearance, hit.r.maxLevel)
		allowed |= hit.cats
		out.clearance, out.allowed = clearance, allowed
		out.declassified = reason
		if s.lab.cats&^allowed != 0 || s.lab.level > clearance {
			// The reason is right but does not reach what the session
			// holds: report it as the declassification's failure.
			out.denial = &Denial{Rule: RuleDeclassify,
				Reason: fmt.Sprintf("declassification %q does not cover what the session holds", reason)}
			return out
		}
	}
	if bad := s.lab.cats &^ allowed; bad != 0 {
		out.denial = &Denial{Rule: RuleCategory,
			Reason: fmt.Sprintf("the session holds %s, which may not reach %s", strings.Join(c.catNames(bad), ", "), d)}
		return out
	}
	if s.lab.level > clearance {
		out.denial = &Denial{Rule: RuleLevel,
			Reason: fmt.Sprintf("the session holds %s data; %s is cleared for %s", s.lab.level, d, clearance)}
		return out
	}
	return out
}

// witness fills in den's witness. origins returns where the offending
// categories and the level came from.
func (c *Checker) witness(den *Denial, dec *decision, t *Tool, s *snapshot, raw, reason string,
	origins func(bad catSet, lv rank) (map[int]origin, origin), session string, step int) {
	bad := s.lab.cats &^ dec.allowed
	var lv rank
	if s.lab.level > dec.clearance && den.Rule != RuleDestination {
		lv = dec.clearance + 1
	}
	w := Witness{
		Rule: den.Rule, Source: c.labelOf(s.lab), Categories: c.catNames(bad), Clearance: dec.clearance.level(),
		Sink:       SinkView{Tool: t.name, Kind: t.sink.Kind, Arg: t.sink.DestArg, Destination: raw},
		Declassify: reason, Step: step,
	}
	if bad != 0 || lv != 0 {
		cm, lo := origins(bad, lv)
		bad.each(func(i int) {
			if o, ok := cm[i]; ok {
				w.IntroducedBy = append(w.IntroducedBy, Origin{Category: c.catNames(1 << uint(i))[0], Tool: o.tool, CallID: o.callID, SameSession: o.session == session})
			}
		})
		if lv != 0 && lo.tool != "" {
			w.IntroducedBy = append(w.IntroducedBy, Origin{Level: lv.level(), Tool: lo.tool, CallID: lo.callID, SameSession: lo.session == session})
		}
	}
	den.Witness = w
}
