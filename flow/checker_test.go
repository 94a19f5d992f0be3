package flow

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tenantmcp/tenantmcp/redact"
	"github.com/tenantmcp/tenantmcp/scope"
)

type guest struct {
	ID    int64  `json:"id"`
	Name  string `json:"name" pii:"name"`
	Email string `json:"email" pii:"email"`
}

type guestsOut struct {
	Guests []guest `json:"guests"`
}

type payment struct {
	Card  string `json:"card" pii:"card"`
	Email string `json:"email" pii:"email"`
}

type roomsOut struct {
	Rooms []string `json:"rooms"`
}

type notesOut struct {
	Notes string `json:"notes"` // untagged free text
}

type revenueOut struct {
	Total int64 `json:"total"`
}

type mailIn struct {
	To   string `json:"to"`
	Body string `json:"body"`
}

type hookIn struct {
	URL  string `json:"url"`
	Body string `json:"body"`
}

type empty struct{}

// fixture is a checker over testPolicy with the test tools registered.
type fixture struct {
	c     *Checker
	tools map[string]*Tool
	now   time.Time
	seq   int
}

func newFixture(t testing.TB, src string) *fixture {
	t.Helper()
	return newFixtureStore(t, src, nil)
}

// newFixtureStore is newFixture with the taints in st (nil: the default).
func newFixtureStore(t testing.TB, src string, st Store) *fixture {
	t.Helper()
	p, err := ParsePolicy("test.json", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{tools: map[string]*Tool{}, now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	f.c, err = New(p, Options{Now: func() time.Time { return f.now }, Store: st})
	if err != nil {
		t.Fatal(err)
	}
	reg := func(name string, in, out reflect.Type, d Decl) {
		tool, err := f.c.Register(name, in, out, d)
		if err != nil {
			t.Fatal(err)
		}
		f.tools[name] = tool
	}
	reg("guests", reflect.TypeFor[empty](), reflect.TypeFor[guestsOut](), Decl{})
	reg("pay", reflect.TypeFor[empty](), reflect.TypeFor[payment](), Decl{})
	reg("rooms", reflect.TypeFor[empty](), reflect.TypeFor[roomsOut](), Decl{})
	reg("notes", reflect.TypeFor[empty](), reflect.TypeFor[notesOut](), Decl{Level: Public})
	reg("revenue", reflect.TypeFor[empty](), reflect.TypeFor[revenueOut](), Decl{})
	reg("mail", reflect.TypeFor[mailIn](), reflect.TypeFor[empty](), Decl{Level: Public, Sink: &Sink{Kind: Email, DestArg: "to"}})
	reg("hook", reflect.TypeFor[hookIn](), reflect.TypeFor[empty](), Decl{Level: Public, Sink: &Sink{Kind: URL, DestArg: "url"}})
	if err := f.c.Verify(); err != nil {
		t.Fatal(err)
	}
	return f
}

var testRedactor = func() *redact.Redactor {
	r, err := redact.New(redact.Options{})
	if err != nil {
		panic(err)
	}
	return r
}()

// read makes a successful call of a non-sink tool returning out, as the
// server does: redact the result, then Record it.
func (f *fixture) read(t testing.TB, ci CallInfo, tool string, out any) {
	t.Helper()
	call, den := f.begin(ci, tool, nil)
	if den != nil {
		t.Fatalf("%s denied: %v", tool, den)
	}
	red := testRedactor.ForScope(scope.Scope{})
	if _, err := red.JSON(out); err != nil {
		t.Fatal(err)
	}
	if err := call.Record(context.Background(), out, red.Report()); err != nil {
		t.Fatal(err)
	}
}

// taint returns the label of ci's taint.
func (f *fixture) taint(t testing.TB, ci CallInfo) Label {
	t.Helper()
	l, err := f.c.Taint(context.Background(), f.c.KeyOf(ci))
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func (f *fixture) begin(ci CallInfo, tool string, args any) (*Call, *Denial) {
	f.seq++
	ci.CallID = tool + "-" + string(rune('a'+f.seq%26))
	if args != nil {
		ci.Args, _ = json.Marshal(args)
	} else {
		ci.Args = json.RawMessage(`{}`)
	}
	call, err := f.tools[tool].Begin(context.Background(), ci)
	return call, asDenial(err)
}

// asDenial is the *Denial err is, nil for nil. Begin's errors are always
// denials; anything else becomes one no test expects.
func asDenial(err error) *Denial {
	if err == nil {
		return nil
	}
	var d *Denial
	if !errors.As(err, &d) {
		return &Denial{Rule: "not a *Denial: " + err.Error()}
	}
	return d
}

// send judges a sink call and returns its denial, or nil.
func (f *fixture) send(ci CallInfo, tool, dest string) *Denial {
	arg := map[string]any{"to": dest, "body": "x"}
	if tool == "hook" {
		arg = map[string]any{"url": dest, "body": "x"}
	}
	_, den := f.begin(ci, tool, arg)
	return den
}

var (
	ann     = guest{ID: 1, Name: "Ann Lee", Email: "ann@guest.example"}
	bob     = guest{ID: 2, Name: "Bob Roe", Email: "bob@guest.example"}
	annOnly = guestsOut{Guests: []guest{ann}}
	both    = guestsOut{Guests: []guest{ann, bob}}
)

func TestLabelsFromDeclarations(t *testing.T) {
	f := newFixture(t, testPolicy)
	for name, want := range map[string]Label{
		"guests":  NewLabel(Confidential, "guest.pii"),      // default internal ⊔ guest.pii (confidential)
		"pay":     NewLabel(Secret, "guest.pii", "payment"), // card → payment (secret)
		"rooms":   NewLabel(Public),                         // policy: public
		"notes":   NewLabel(Public),                         // declared public
		"revenue": NewLabel(Internal, "finance"),            // policy: internal + finance
		"mail":    NewLabel(Public),
	} {
		if got := f.tools[name].Label(); got.String() != want.String() {
			t.Errorf("%s: label %v, want %v", name, got, want)
		}
	}
	// The code cannot lower what the policy raises, nor the policy what
	// the code raises.
	tool, err := f.c.Register("revenue", reflect.TypeFor[empty](), reflect.TypeFor[revenueOut](), Decl{Level: Public})
	if err != nil || tool.Label().Level != Internal {
		t.Errorf("declared public, policy internal: %v %v", tool.Label(), err)
	}
	tool, err = f.c.Register("rooms", reflect.TypeFor[empty](), reflect.TypeFor[roomsOut](), Decl{Level: Secret})
	if err != nil || tool.Label().Level != Secret {
		t.Errorf("declared secret, policy public: %v %v", tool.Label(), err)
	}
}

func TestRegisterRefusals(t *testing.T) {
	f := newFixture(t, testPolicy)
	type badTag struct {
		X string `pii:"dna"`
	}
	type numTo struct {
		To int `json:"to"`
	}
	for name, c := range map[string]struct {
		in, out reflect.Type
		d       Decl
		want    error
	}{
		"no kind":       {reflect.TypeFor[mailIn](), nil, Decl{Sink: &Sink{DestArg: "to"}}, ErrDecl},
		"both dests":    {reflect.TypeFor[mailIn](), nil, Decl{Sink: &Sink{Kind: Email, DestArg: "to", Dest: "a@b.example"}}, ErrDecl},
		"no dest":       {reflect.TypeFor[mailIn](), nil, Decl{Sink: &Sink{Kind: Email}}, ErrDecl},
		"missing arg":   {reflect.TypeFor[mailIn](), nil, Decl{Sink: &Sink{Kind: Email, DestArg: "recipient"}}, ErrDecl},
		"arg not str":   {reflect.TypeFor[numTo](), nil, Decl{Sink: &Sink{Kind: Email, DestArg: "to"}}, ErrDecl},
		"bad fixed":     {reflect.TypeFor[empty](), nil, Decl{Sink: &Sink{Kind: URL, Dest: "ftp://x.example"}}, ErrDecl},
		"bad level":     {reflect.TypeFor[empty](), nil, Decl{Level: "TOP"}, ErrDecl},
		"bad category":  {reflect.TypeFor[empty](), nil, Decl{Categories: []string{"Guest PII"}}, ErrDecl},
		"bad pii tag":   {reflect.TypeFor[empty](), reflect.TypeFor[badTag](), Decl{}, redact.ErrTag},
		"sms sink kind": {reflect.TypeFor[mailIn](), nil, Decl{Sink: &Sink{Kind: "sms", DestArg: "to"}}, ErrDecl},
	} {
		if _, err := f.c.Register("x", c.in, c.out, c.d); !errors.Is(err, c.want) {
			t.Errorf("%s: err = %v, want %v", name, err, c.want)
		}
	}
	// Verify: the policy's names must exist.
	p, _ := ParsePolicy("v.json", []byte(testPolicy))
	c, _ := New(p, Options{})
	err := c.Verify()
	if err == nil || !strings.Contains(err.Error(), `"rooms" is not a registered tool`) || !strings.Contains(err.Error(), `"mail" is not a registered sink`) {
		t.Errorf("Verify = %v", err)
	}
}

func TestSinkRules(t *testing.T) {
	carol := CallInfo{Subject: "carol", SessionID: "s1"}
	for _, c := range []struct {
		name      string
		reads     []string // tools read before the sink
		out       map[string]any
		sink      string
		dest      string
		declass   string
		wantRule  string // "" allow
		wantCats  []string
		wantFirst string // introducing tool of the first origin
	}{
		{name: "nothing read, anywhere", sink: "hook", dest: "https://evil.example/"},
		{name: "public anywhere", reads: []string{"rooms"}, sink: "hook", dest: "https://evil.example/"},
		{name: "internal to untrusted", reads: []string{"revenue"}, sink: "hook", dest: "https://evil.example/", wantRule: RuleCategory, wantCats: []string{"finance"}, wantFirst: "revenue"},
		{name: "pii to staff", reads: []string{"guests"}, sink: "mail", dest: "desk@staff.example"},
		{name: "pii to staff subdomain", reads: []string{"guests"}, sink: "mail", dest: "desk@eu.staff.example", wantRule: RuleCategory, wantCats: []string{"guest.pii"}, wantFirst: "guests"},
		{name: "pii to the guest", reads: []string{"guests"}, sink: "mail", dest: "ANN@guest.example"},
		{name: "pii to another", reads: []string{"guests"}, sink: "mail", dest: "bob@guest.example", wantRule: RuleCategory, wantCats: []string{"guest.pii"}, wantFirst: "guests"},
		{name: "pii to trusted host", reads: []string{"guests"}, sink: "hook", dest: "https://app.corp.example/", wantRule: RuleCategory, wantCats: []string{"guest.pii"}, wantFirst: "guests"},
		{name: "payment to guest", reads: []string{"pay"}, sink: "mail", dest: "ann@guest.example", wantRule: RuleCategory, wantCats: []string{"payment"}, wantFirst: "pay"},
		{name: "payment to guest, declassified", reads: []string{"pay"}, sink: "mail", dest: "ann@guest.example", declass: "invoice"},
		{name: "wrong reason", reads: []string{"pay"}, sink: "mail", dest: "ann@guest.example", declass: "marketing", wantRule: RuleDeclassify},
		{name: "right reason, other sink", reads: []string{"pay"}, sink: "hook", dest: "https://app.corp.example/", declass: "invoice", wantRule: RuleDeclassify},
		{name: "right reason, other person", reads: []string{"pay"}, sink: "mail", dest: "eve@evil.example", declass: "invoice", wantRule: RuleDeclassify},
		{name: "reason on an allowed flow", reads: []string{"rooms"}, sink: "mail", dest: "eve@evil.example", declass: "nonsense", wantRule: RuleDeclassify},
		{name: "internal-only policy level", reads: []string{"rooms"}, sink: "hook", dest: "https://x.corp.example/"},
		{name: "bad destination", reads: []string{"rooms"}, sink: "mail", dest: "ann@guest.example,eve@evil.example", wantRule: RuleDestination},
	} {
		t.Run(c.name, func(t *testing.T) {
			// These rows name the reason in _meta, which needs the
			// policy's opt-in; TestConsent covers the default.
			f := newFixture(t, metaPolicy)
			outs := map[string]any{"guests": annOnly, "pay": payment{Card: "4111111111111111", Email: ann.Email}, "rooms": roomsOut{Rooms: []string{"101"}}, "revenue": revenueOut{Total: 5}}
			for _, r := range c.reads {
				f.read(t, carol, r, outs[r])
			}
			arg := map[string]any{"to": c.dest, "body": "x"}
			if c.sink == "hook" {
				arg = map[string]any{"url": c.dest, "body": "x"}
			}
			ci := carol
			if c.declass != "" {
				ci.Meta = map[string]any{MetaDeclassify: c.declass}
			}
			call, den := f.begin(ci, c.sink, arg)
			if c.wantRule == "" {
				if den != nil {
					t.Fatalf("denied: %v (witness %+v)", den, den.Witness)
				}
				if c.declass != "" && call.Note() != "declassified:"+c.declass {
					t.Errorf("note %q", call.Note())
				}
				return
			}
			if den == nil {
				t.Fatalf("allowed, want %s", c.wantRule)
			}
			if den.Rule != c.wantRule || den.Witness.Rule != c.wantRule || !errors.Is(den, ErrDenied) {
				t.Fatalf("rule %s (witness %s), want %s: %v", den.Rule, den.Witness.Rule, c.wantRule, den)
			}
			w := den.Witness
			if c.wantCats != nil && !slices.Equal(w.Categories, c.wantCats) {
				t.Errorf("witness categories %v, want %v", w.Categories, c.wantCats)
			}
			if c.wantFirst != "" && (len(w.IntroducedBy) == 0 || w.IntroducedBy[0].Tool != c.wantFirst || !w.IntroducedBy[0].SameSession) {
				t.Errorf("introduced_by %+v, want %s first", w.IntroducedBy, c.wantFirst)
			}
			if w.Sink.Tool != c.sink || w.Sink.Destination != c.dest || w.Declassify != c.declass || w.Step != -1 {
				t.Errorf("witness sink %+v declassify %q step %d", w.Sink, w.Declassify, w.Step)
			}
		})
	}
}

func TestOwnerNeedsOneKnownSubject(t *testing.T) {
	f := newFixture(t, testPolicy)
	x := CallInfo{Subject: "x"}
	f.read(t, x, "guests", both)
	if den := f.send(x, "mail", ann.Email); den == nil || den.Rule != RuleCategory {
		t.Fatalf("two guests' data to one of them: %v", den)
	}
	// An address in free text the owner fields do not account for makes
	// the subjects unknown.
	y := CallInfo{Subject: "y"}
	f.read(t, y, "guests", annOnly)
	f.read(t, y, "notes", notesOut{Notes: "also cc eve@evil.example"})
	if got := f.taint(t, y); !slices.Contains(got.Categories, "guest.pii") {
		t.Fatalf("free-text e-mail did not label the result: %v", got)
	}
	if den := f.send(y, "mail", ann.Email); den == nil {
		t.Fatal("allowed to ann although the session also holds an address found in free text")
	}
	// A guest whose e-mail is empty has no known address.
	z := CallInfo{Subject: "z"}
	f.read(t, z, "guests", guestsOut{Guests: []guest{{ID: 3, Name: "No Mail"}}})
	if den := f.send(z, "mail", "nomail@guest.example"); den == nil {
		t.Fatal("allowed to an address that is not the subject's")
	}
	// Nine different subjects overflow the set: unknown from then on.
	w := CallInfo{Subject: "w"}
	for i := 0; i < maxOwners+1; i++ {
		f.read(t, w, "guests", guestsOut{Guests: []guest{{ID: int64(i), Name: "G", Email: "g" + string(rune('a'+i)) + "@guest.example"}}})
	}
	if den := f.send(w, "mail", "ga@guest.example"); den == nil {
		t.Fatal("owner overflow still matched")
	}
}

func TestTaintIsMonotonic(t *testing.T) {
	f := newFixture(t, testPolicy)
	ci := CallInfo{Subject: "m", SessionID: "s"}
	f.read(t, ci, "guests", annOnly)
	before := f.taint(t, ci)
	for _, r := range []string{"rooms", "notes", "revenue", "rooms"} {
		out := map[string]any{"rooms": roomsOut{}, "notes": notesOut{Notes: "nothing"}, "revenue": revenueOut{}}[r]
		f.read(t, ci, r, out)
		now := f.taint(t, ci)
		if !before.Leq(now) {
			t.Fatalf("taint went from %v to %v after %s", before, now, r)
		}
		before = now
	}
	if den := f.send(ci, "hook", "https://evil.example/"); den == nil || den.Witness.IntroducedBy[0].Tool != "guests" {
		t.Fatalf("public calls after the PII reset it: %v", den)
	}
	// Idle past retain, the taint is dropped whole (the policy's release).
	f.now = f.now.Add(DefaultRetain + time.Minute)
	if den := f.send(CallInfo{Subject: "other"}, "hook", "https://evil.example/"); den != nil {
		t.Fatal(den)
	}
	if got := f.taint(t, ci); got.Level != "" {
		t.Errorf("taint after retain: %v", got)
	}
}

const sessionPolicy = `{"version": 1, "taint": {"scope": "session"},
  "pii": {"email": "guest.pii", "name": "guest.pii"},
  "categories": {"guest.pii": {"level": "confidential"}},
  "tools": {"rooms": "public"}}`

func TestSubjectScopeSpansSessions(t *testing.T) {
	f := newFixture(t, testPolicy)
	s1 := CallInfo{Subject: "carol", SessionID: "s1"}
	s2 := CallInfo{Subject: "carol", SessionID: "s2"}
	f.read(t, s1, "guests", annOnly)
	den := f.send(s2, "hook", "https://evil.example/")
	if den == nil {
		t.Fatal("a second session of the subject sent what the first read")
	}
	if o := den.Witness.IntroducedBy[0]; o.Tool != "guests" || o.SameSession {
		t.Errorf("origin %+v: want guests, another session", o)
	}
	// Another subject is not affected, whatever session id it presents.
	if den := f.send(CallInfo{Subject: "bob", SessionID: "s1"}, "hook", "https://evil.example/"); den != nil {
		t.Errorf("bob inherited carol's taint: %v", den)
	}
}

func TestSessionScopeKeys(t *testing.T) {
	f := newFixture(t, sessionPolicy)
	carol1 := CallInfo{Subject: "carol", SessionID: "s1"}
	f.read(t, carol1, "guests", annOnly)
	// A session id presented with another subject's token neither
	// inherits nor resets the session's taint.
	bobOnS1 := CallInfo{Subject: "bob", SessionID: "s1"}
	if den := f.send(bobOnS1, "hook", "https://evil.example/"); den != nil {
		t.Errorf("bob with carol's session id inherited her taint: %v", den)
	}
	f.read(t, bobOnS1, "rooms", roomsOut{})
	if den := f.send(carol1, "hook", "https://evil.example/"); den == nil {
		t.Error("bob's calls with carol's session id reset her taint")
	}
	// Session scope: a second session starts clean (the documented
	// trade-off of this scope).
	if den := f.send(CallInfo{Subject: "carol", SessionID: "s2"}, "hook", "https://evil.example/"); den != nil {
		t.Errorf("session scope: second session denied: %v", den)
	}
	// Stateless: the conversation id keys the taint; _meta wins over the
	// header; no id means the subject's own taint.
	h := http.Header{}
	h.Set(HeaderConversation, "c1")
	c1meta := CallInfo{Subject: "dan", Meta: map[string]any{MetaConversation: "c1"}}
	c1head := CallInfo{Subject: "dan", Header: h}
	c2 := CallInfo{Subject: "dan", Meta: map[string]any{MetaConversation: "c2"}, Header: h}
	none := CallInfo{Subject: "dan"}
	f.read(t, c1meta, "guests", annOnly)
	if den := f.send(c1head, "hook", "https://evil.example/"); den == nil {
		t.Error("the header did not name the same conversation as _meta")
	}
	if den := f.send(c2, "hook", "https://evil.example/"); den != nil {
		t.Errorf("_meta c2 with header c1: %v", den)
	}
	if den := f.send(none, "hook", "https://evil.example/"); den != nil {
		t.Errorf("no conversation id: %v", den)
	}
	f.read(t, none, "guests", annOnly)
	if den := f.send(CallInfo{Subject: "dan", Meta: map[string]any{MetaConversation: strings.Repeat("x", 200)}}, "hook", "https://evil.example/"); den == nil {
		t.Error("an invalid conversation id escaped the subject's taint")
	}
	if k := f.c.KeyOf(CallInfo{Subject: "dan", SessionID: "s9", Meta: map[string]any{MetaConversation: "c1"}}); k.Session != "mcp:s9" {
		t.Errorf("stateful key %+v: the MCP session must win", k)
	}
}

func TestSessionScopeBound(t *testing.T) {
	f := newFixture(t, sessionPolicy)
	// Each session reads internal data (a public read stores nothing).
	for i := 0; i < MaxKeysPerSubject; i++ {
		f.read(t, CallInfo{Subject: "flood", SessionID: "s" + strings.Repeat("x", i%7) + string(rune(i))}, "revenue", revenueOut{})
	}
	// Past the bound, new sessions share the subject's taint: more
	// taint, never less.
	extra := CallInfo{Subject: "flood", SessionID: "one-too-many"}
	f.read(t, extra, "guests", annOnly)
	if den := f.send(CallInfo{Subject: "flood", SessionID: "another-new-one"}, "hook", "https://evil.example/"); den == nil {
		t.Error("sessions past the bound did not share the subject's taint")
	}
}

func TestCheckPlan(t *testing.T) {
	f := newFixture(t, testPolicy)
	ctx := context.Background()
	rep, err := f.c.CheckPlan(ctx, Plan{Steps: []PlanStep{
		{Tool: "rooms"},
		{Tool: "hook", Args: map[string]any{"url": "https://evil.example/", "body": "$ret:0"}},
		{Tool: "guests"},
		{Tool: "hook", Args: map[string]any{"url": "https://evil.example/", "body": "$ret:2.guests"}},
		{Tool: "mail", Args: map[string]any{"to": "ann@guest.example", "body": "$ret:2"}},
		{Tool: "mail", Args: map[string]any{"to": "$ret:2.guests.0.email"}},
		{Tool: "mail", Args: map[string]any{"to": "desk@staff.example", "body": "$ret:9"}},
		{Tool: "nope"},
		{Tool: "pay"},
		{Tool: "mail", Args: map[string]any{"to": "ann@guest.example"}, Declassify: "marketing"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{VerdictAllow, VerdictAllow, VerdictAllow, VerdictDeny, VerdictDeferred, VerdictDeferred, VerdictDeny, VerdictDeny, VerdictAllow, VerdictDeny}
	for i, s := range rep.Steps {
		if s.Verdict != want[i] {
			t.Errorf("step %d (%s): %s (%s), want %s", i, s.Tool, s.Verdict, s.Reason, want[i])
		}
	}
	if rep.Verdict != VerdictDeny {
		t.Errorf("plan verdict %s", rep.Verdict)
	}
	w := rep.Steps[3].Witness
	if w == nil || w.Rule != RuleCategory || w.Step != 3 || w.IntroducedBy[0].CallID != "plan:2" || w.IntroducedBy[0].Tool != "guests" {
		t.Errorf("step 3 witness %+v", w)
	}
	if !strings.HasPrefix(rep.Steps[6].Reason, RulePlan) || !strings.HasPrefix(rep.Steps[7].Reason, RulePlan) {
		t.Errorf("malformed steps: %q, %q", rep.Steps[6].Reason, rep.Steps[7].Reason)
	}
	// testPolicy does not let _meta declassify: the step's reason is not
	// applied, and the flow is judged (and denied) without it.
	if rep.Steps[9].Witness.Rule != RuleCategory || rep.Steps[9].Witness.Declassify != "" {
		t.Errorf("step 9 witness %+v", rep.Steps[9].Witness)
	}

	// From the caller's taint: a session that already read PII.
	ci := CallInfo{Subject: "p", SessionID: "s"}
	f.read(t, ci, "guests", annOnly)
	call, _ := f.begin(ci, "rooms", nil)
	rep, _ = f.c.CheckPlan(NewContext(ctx, call), Plan{Steps: []PlanStep{{Tool: "hook", Args: map[string]any{"url": "https://evil.example/"}}}})
	if rep.Verdict != VerdictDeny || rep.Steps[0].Witness.IntroducedBy[0].CallID == "" || strings.HasPrefix(rep.Steps[0].Witness.IntroducedBy[0].CallID, "plan:") {
		t.Errorf("plan from a tainted session: %+v", rep)
	}
	// The plan check never changes the taint.
	if den := f.send(CallInfo{Subject: "fresh"}, "hook", "https://evil.example/"); den != nil {
		t.Error(den)
	}
	if _, err := f.c.CheckPlan(ctx, Plan{Steps: make([]PlanStep, maxPlanSteps+1)}); !errors.Is(err, ErrPlan) {
		t.Errorf("oversized plan: %v", err)
	}
}

func TestWitnessMap(t *testing.T) {
	f := newFixture(t, testPolicy)
	ci := CallInfo{Subject: "w", SessionID: "s"}
	f.read(t, ci, "pay", payment{Card: "4111111111111111", Email: ann.Email})
	den := f.send(ci, "hook", "https://evil.example/x")
	m := den.Witness.Map()
	if m["rule"] != RuleCategory || m["clearance"] != "public" || m["step"] != float64(-1) {
		t.Fatalf("map %v", m)
	}
	src := m["source"].(map[string]any)
	if src["level"] != "secret" || len(src["categories"].([]any)) != 2 {
		t.Errorf("source %v", src)
	}
	if sink := m["sink"].(map[string]any); sink["tool"] != "hook" || sink["kind"] != "url" || sink["arg"] != "url" || sink["destination"] != "https://evil.example/x" {
		t.Errorf("sink %v", sink)
	}
	by := m["introduced_by"].([]any)
	if len(by) != 3 || by[2].(map[string]any)["level"] != "internal" {
		t.Errorf("introduced_by %v", by)
	}
}

// TestDestinationDecodedAsTheHandlerDoes: encoding/json matches keys to
// fields case-insensitively and the last match wins, so a second key that
// folds to the destination argument must not let the check judge one
// value while the handler sends to another.
func TestDestinationDecodedAsTheHandlerDoes(t *testing.T) {
	type hostIn struct {
		Host string `json:"host"`
	}
	f := newFixture(t, testPolicy)
	sink, err := f.c.Register("push", reflect.TypeFor[hostIn](), nil, Decl{Sink: &Sink{Kind: URL, DestArg: "host"}})
	if err != nil {
		t.Fatal(err)
	}
	ci := CallInfo{Subject: "fold"}
	f.read(t, ci, "revenue", revenueOut{Total: 1}) // internal{finance}: only *.corp.example
	for _, args := range []string{
		`{"host":"https://x.corp.example/","HOST":"https://evil.example/"}`,
		`{"host":"https://x.corp.example/","hoſt":"https://evil.example/"}`,
		`{"host":"https://x.corp.example/","Host":"https://evil.example/"}`,
	} {
		var handler hostIn
		if err := json.Unmarshal([]byte(args), &handler); err != nil {
			t.Fatal(err)
		}
		ci.Args = json.RawMessage(args)
		_, err := sink.Begin(context.Background(), ci)
		den := asDenial(err)
		judged := "https://x.corp.example/"
		if den != nil {
			judged = den.Witness.Sink.Destination
		}
		if judged != handler.Host {
			t.Errorf("%s: judged %q, the handler sends to %q", args, judged, handler.Host)
		}
	}
}
