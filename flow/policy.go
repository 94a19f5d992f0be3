package flow

import (
	"errors"
	"fmt"
	"os"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/tenantmcp/tenantmcp/redact"
)

// ErrPolicy is wrapped by every error ParsePolicy and LoadPolicy return.
var ErrPolicy = errors.New("flow: invalid policy")

// PolicyError is one fault of a policy file, at a line.
type PolicyError struct {
	File string
	Line int
	Col  int
	Msg  string
}

func (e *PolicyError) Error() string {
	return fmt.Sprintf("%s:%d:%d: %s", e.File, e.Line, e.Col, e.Msg)
}

func (e *PolicyError) Unwrap() error { return ErrPolicy }

// TaintScope says which calls share a taint.
type TaintScope string

const (
	// ScopeSubject: one taint per verified subject, joined over all its
	// sessions and conversations. A new session does not start clean, so
	// data read in one session cannot leave through another. The default.
	ScopeSubject TaintScope = "subject"
	// ScopeSession: one taint per (subject, MCP session) in stateful HTTP,
	// per (subject, conversation id) otherwise. More precise, but a second
	// session of the same subject starts clean.
	ScopeSession TaintScope = "session"
)

// DefaultRetain is how long an idle taint is kept when the policy does not
// say.
const DefaultRetain = 24 * time.Hour

// MaxPolicyBytes bounds a policy file.
const MaxPolicyBytes = 1 << 20

// DefaultPII is the category mapping used for every redact category the
// policy's "pii" object does not name: personal data to "pii", payment
// instruments to "payment". redact.Secret has no mapping: package redact
// always drops it, so no result carries it.
func DefaultPII() map[redact.Category]string {
	return map[redact.Category]string{
		redact.Name: "pii", redact.Email: "pii", redact.Phone: "pii", redact.Address: "pii",
		redact.SSN: "pii", redact.IP: "pii",
		redact.Card: "payment", redact.IBAN: "payment",
	}
}

// DefaultCategoryLevel is the level of a category the policy does not
// describe.
const DefaultCategoryLevel Level = Confidential

// Policy is a validated flow policy. Create it with ParsePolicy or
// LoadPolicy; it is immutable.
type Policy struct {
	name         string
	defaultLevel rank
	scope        TaintScope
	retain       time.Duration
	pii          map[redact.Category]string
	categories   map[string]*categoryRule
	catOrder     []string // categories in file order
	destinations []destRule
	tools        map[string]*toolRule
	declassify   []*declassRule
	// metaDeclassify is the policy's explicit opt-in
	// ("declassify_from_meta": true) to let a call's own _meta name a
	// declassification reason. Off by default: _meta is written by the
	// client, that is, by the model's host.
	metaDeclassify bool
}

type categoryRule struct {
	level rank
	to    []pattern
	line  int
}

type destRule struct {
	pat       pattern
	clearance rank
	line      int
}

type toolRule struct {
	level rank
	cats  []string
	line  int
}

type declassRule struct {
	reason   string
	sinks    []string
	to       []pattern
	cats     []string
	maxLevel rank
	line     int
}

// Name is the file name the policy was parsed under.
func (p *Policy) Name() string { return p.name }

// Scope is the policy's taint scope.
func (p *Policy) Scope() TaintScope { return p.scope }

// LoadPolicy reads and parses the policy file at path.
func LoadPolicy(path string) (*Policy, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrPolicy, err)
	}
	return ParsePolicy(path, b)
}

var reasonRE = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,63}$`)

// ParsePolicy parses and validates a policy file (see the package
// documentation for the format). name labels the errors. Every fault
// found is reported, each as a *PolicyError with its line, joined with
// errors.Join; each matches ErrPolicy.
func ParsePolicy(name string, data []byte) (*Policy, error) {
	v := &validator{name: name, data: data}
	if len(data) > MaxPolicyBytes {
		return nil, v.errAt(0, fmt.Sprintf("policy larger than %d bytes", MaxPolicyBytes))
	}
	root, err := parseTree(data)
	if err != nil {
		var pe *posError
		if errors.As(err, &pe) {
			return nil, v.errAt(pe.off, pe.msg)
		}
		return nil, v.errAt(0, err.Error())
	}
	p := v.policy(root)
	if len(v.errs) > 0 {
		return nil, errors.Join(v.errs...)
	}
	return p, nil
}

type validator struct {
	name string
	data []byte
	errs []error
}

func (v *validator) errAt(off int64, msg string) error {
	line, col := lineCol(v.data, off)
	return &PolicyError{File: v.name, Line: line, Col: col, Msg: msg}
}

func (v *validator) fail(off int64, format string, args ...any) {
	v.errs = append(v.errs, v.errAt(off, fmt.Sprintf(format, args...)))
}

func (v *validator) line(off int64) int {
	l, _ := lineCol(v.data, off)
	return l
}

// members checks n is an object whose keys are among allowed (nil: any),
// and calls f for each member in file order.
func (v *validator) members(n *jnode, what string, allowed []string, f func(key string, kend int64, val *jnode)) {
	if n.kind != 'o' {
		v.fail(n.end, "%s must be an object, not %s", what, n.kindName())
		return
	}
	for i, k := range n.keys {
		if allowed != nil && !slices.Contains(allowed, k) {
			v.fail(n.kends[i], "%s: unknown key %q (known: %s)", what, k, strings.Join(allowed, ", "))
			continue
		}
		f(k, n.kends[i], n.vals[i])
	}
}

func (v *validator) str(n *jnode, what string) (string, bool) {
	if n.kind != 's' {
		v.fail(n.end, "%s must be a string, not %s", what, n.kindName())
		return "", false
	}
	return n.str, true
}

func (v *validator) level(n *jnode, what string) rank {
	s, ok := v.str(n, what)
	if !ok {
		return 0
	}
	l, err := ParseLevel(s)
	if err != nil {
		v.fail(n.end, "%s: unknown level %q (public, internal, confidential, secret)", what, s)
		return 0
	}
	return l.rank()
}

// strings accepts a string or an array of strings.
func (v *validator) strs(n *jnode, what string) []string {
	if n.kind == 's' {
		return []string{n.str}
	}
	if n.kind != 'a' {
		v.fail(n.end, "%s must be a string or an array of strings, not %s", what, n.kindName())
		return nil
	}
	var out []string
	for _, e := range n.elems {
		if s, ok := v.str(e, what+" element"); ok {
			if slices.Contains(out, s) {
				v.fail(e.end, "%s: %q listed twice", what, s)
				continue
			}
			out = append(out, s)
		}
	}
	return out
}

func (v *validator) patterns(n *jnode, what string) []pattern {
	var out []pattern
	ss := v.strs(n, what)
	for _, s := range ss {
		p, err := parsePattern(s)
		if err != nil {
			v.fail(n.end, "%s: %v", what, err)
			continue
		}
		out = append(out, p)
	}
	return out
}

var categoryRE = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,63}$`)

func (v *validator) category(n *jnode, off int64, s, what string) bool {
	if !categoryRE.MatchString(s) {
		v.fail(off, "%s: category %q must be lower case letters, digits, '.', '_' or '-'", what, s)
		return false
	}
	return true
}

func (v *validator) policy(root *jnode) *Policy {
	p := &Policy{
		name: v.name, defaultLevel: rInternal, scope: ScopeSubject, retain: DefaultRetain,
		pii: DefaultPII(), categories: map[string]*categoryRule{}, tools: map[string]*toolRule{},
	}
	sawVersion := false
	v.members(root, "policy", []string{"version", "default_level", "taint", "pii", "categories", "destinations", "tools", "declassify", "declassify_from_meta"},
		func(key string, kend int64, val *jnode) {
			switch key {
			case "version":
				sawVersion = true
				if val.kind != 'n' || val.num.String() != "1" {
					v.fail(val.end, "version must be 1")
				}
			case "default_level":
				if l := v.level(val, "default_level"); l != 0 {
					p.defaultLevel = l
				}
			case "taint":
				v.taint(p, val)
			case "pii":
				v.members(val, "pii", nil, func(k string, kend int64, c *jnode) {
					rc := redact.Category(k)
					if !slices.Contains(redact.Categories(), rc) {
						v.fail(kend, "pii: %q is not a redact category (%v)", k, redact.Categories())
						return
					}
					if rc == redact.Secret {
						v.fail(kend, "pii: %q is always dropped by package redact and cannot be labelled", k)
						return
					}
					if s, ok := v.str(c, "pii."+k); ok && v.category(c, c.end, s, "pii."+k) {
						p.pii[rc] = s
					}
				})
			case "categories":
				v.members(val, "categories", nil, func(k string, kend int64, c *jnode) {
					if !v.category(c, kend, k, "categories") {
						return
					}
					r := &categoryRule{level: DefaultCategoryLevel.rank(), line: v.line(kend)}
					v.members(c, "categories."+k, []string{"level", "to"}, func(f string, _ int64, fv *jnode) {
						switch f {
						case "level":
							if l := v.level(fv, "categories."+k+".level"); l != 0 {
								r.level = l
							}
						case "to":
							r.to = v.patterns(fv, "categories."+k+".to")
						}
					})
					p.categories[k] = r
					p.catOrder = append(p.catOrder, k)
				})
			case "destinations":
				v.members(val, "destinations", nil, func(k string, kend int64, c *jnode) {
					pat, err := parsePattern(k)
					if err != nil {
						v.fail(kend, "destinations: %v", err)
						return
					}
					if pat.kind == patAny {
						v.fail(kend, "destinations: \"*\" would clear every destination; untrusted destinations are public already")
						return
					}
					if l := v.level(c, "destinations."+k); l != 0 {
						p.destinations = append(p.destinations, destRule{pat: pat, clearance: l, line: v.line(kend)})
					}
				})
			case "tools":
				v.members(val, "tools", nil, func(k string, kend int64, c *jnode) {
					r := &toolRule{line: v.line(kend)}
					if c.kind == 's' {
						r.level = v.level(c, "tools."+k)
					} else {
						v.members(c, "tools."+k, []string{"level", "categories"}, func(f string, fkend int64, fv *jnode) {
							switch f {
							case "level":
								r.level = v.level(fv, "tools."+k+".level")
							case "categories":
								for _, s := range v.strs(fv, "tools."+k+".categories") {
									if v.category(fv, fv.end, s, "tools."+k+".categories") {
										r.cats = append(r.cats, s)
									}
								}
							}
						})
					}
					p.tools[k] = r
				})
			case "declassify":
				v.declassify(p, val)
			case "declassify_from_meta":
				if val.kind != 'b' {
					v.fail(val.end, "declassify_from_meta must be true or false, not %s", val.kindName())
				}
				p.metaDeclassify = val.kind == 'b' && val.b
			}
		})
	if root.kind == 'o' && !sawVersion {
		v.fail(root.end, "policy: \"version\": 1 is required")
	}
	v.crossCheck(p)
	return p
}

func (v *validator) taint(p *Policy, n *jnode) {
	v.members(n, "taint", []string{"scope", "retain"}, func(k string, _ int64, val *jnode) {
		s, ok := v.str(val, "taint."+k)
		if !ok {
			return
		}
		switch k {
		case "scope":
			switch TaintScope(s) {
			case ScopeSubject, ScopeSession:
				p.scope = TaintScope(s)
			default:
				v.fail(val.end, "taint.scope: %q (want %q or %q)", s, ScopeSubject, ScopeSession)
			}
		case "retain":
			d, err := time.ParseDuration(s)
			if err != nil || d < time.Minute {
				v.fail(val.end, "taint.retain: %q must be a duration of at least 1m (for example \"24h\")", s)
				return
			}
			p.retain = d
		}
	})
}

func (v *validator) declassify(p *Policy, n *jnode) {
	if n.kind != 'a' {
		v.fail(n.end, "declassify must be an array of rules, not %s", n.kindName())
		return
	}
	for i, e := range n.elems {
		what := fmt.Sprintf("declassify[%d]", i)
		r := &declassRule{line: v.line(e.end)}
		var seen []string
		v.members(e, what, []string{"reason", "sink", "to", "categories", "max_level"}, func(k string, _ int64, val *jnode) {
			seen = append(seen, k)
			switch k {
			case "reason":
				if s, ok := v.str(val, what+".reason"); ok {
					if !reasonRE.MatchString(s) {
						v.fail(val.end, "%s.reason: %q must be a short name: lower case letters, digits, '.', '_', '-'", what, s)
					}
					r.reason = s
				}
			case "sink":
				r.sinks = v.strs(val, what+".sink")
			case "to":
				r.to = v.patterns(val, what+".to")
			case "categories":
				for _, s := range v.strs(val, what+".categories") {
					if v.category(val, val.end, s, what+".categories") {
						r.cats = append(r.cats, s)
					}
				}
			case "max_level":
				r.maxLevel = v.level(val, what+".max_level")
			}
		})
		if e.kind != 'o' {
			continue
		}
		for _, req := range []string{"reason", "sink", "to", "max_level"} {
			if !slices.Contains(seen, req) {
				v.fail(e.end, "%s: %q is required (a declassification names its reason, the sink, the destinations and how high it reaches)", what, req)
			}
		}
		for _, q := range r.to {
			if q.kind == patAny {
				v.fail(e.end, "%s.to: \"*\" would declassify to every destination; name them", what)
			}
		}
		if r.reason != "" {
			for _, o := range p.declassify {
				if o.reason == r.reason && slices.Equal(o.sinks, r.sinks) {
					v.fail(e.end, "%s: reason %q for the same sinks already declared at line %d", what, r.reason, o.line)
				}
			}
		}
		p.declassify = append(p.declassify, r)
	}
}

// crossCheck reports what is well-formed alone but wrong together.
func (v *validator) crossCheck(p *Policy) {
	// A category no rule mentions is fine (it never leaves); a rule naming
	// a category the policy cannot produce is probably a typo.
	known := map[string]bool{}
	for _, c := range p.pii {
		known[c] = true
	}
	for c := range p.categories {
		known[c] = true
	}
	for _, t := range p.tools {
		for _, c := range t.cats {
			known[c] = true
		}
	}
	for _, r := range p.declassify {
		for _, c := range r.cats {
			if !known[c] {
				v.errs = append(v.errs, &PolicyError{File: v.name, Line: r.line, Col: 1,
					Msg: fmt.Sprintf("declassify reason %q: category %q appears nowhere else in the policy (not in pii, categories or tools)", r.reason, c)})
			}
		}
	}
	owner := false
	for _, d := range p.destinations {
		owner = owner || d.pat.kind == patOwner
	}
	for _, c := range p.catOrder {
		for _, q := range p.categories[c].to {
			if q.kind == patOwner && !owner {
				v.errs = append(v.errs, &PolicyError{File: v.name, Line: p.categories[c].line, Col: 1,
					Msg: fmt.Sprintf("categories.%s.to names $owner but destinations gives $owner no clearance", c)})
			}
		}
	}
	sort.SliceStable(v.errs, func(i, j int) bool {
		var a, b *PolicyError
		errors.As(v.errs[i], &a)
		errors.As(v.errs[j], &b)
		return a != nil && b != nil && a.Line < b.Line
	})
}
