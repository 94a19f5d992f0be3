package redact

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tenantmcp/tenantmcp/scope"
	"github.com/tenantmcp/tenantmcp/scope/scopetest"
)

var testKey = []byte("0123456789abcdef0123456789abcdef-test-master-key")

// sample values per category, and what Mask makes of them.
var samples = []struct {
	cat    Category
	value  string
	masked string
}{
	{Email, "Alice.Smith@Example.com", "***@example.com"},
	{Phone, "+1 202 555 0143", "***0143"},
	{Name, "Alice Smith", "[redacted:name]"},
	{Card, "4111 1111 1111 1111", "****1111"},
	{Address, "12 Rue de Rivoli, 75001 Paris", "[redacted:address]"},
	{IBAN, "DE89 3704 0044 0532 0130 00", "DE**3000"},
	{SSN, "123-45-6789", "[redacted:ssn]"},
	{IP, "203.0.113.7", "[redacted:ip]"},
	{Secret, "hunter2", ""},
}

// taggedType builds struct{ V string `json:"v" pii:"<cat>"` }.
func taggedType(cat Category) reflect.Type {
	return reflect.StructOf([]reflect.StructField{{
		Name: "V", Type: reflect.TypeFor[string](),
		Tag: reflect.StructTag(fmt.Sprintf(`json:"v" pii:"%s"`, cat)),
	}})
}

func taggedValue(cat Category, v string) any {
	x := reflect.New(taggedType(cat)).Elem()
	x.Field(0).SetString(v)
	return x.Interface()
}

var tokenRE = regexp.MustCompile(`^tok_[a-z]+_[a-z2-7]{24}$`)

func TestTaggedFieldPerCategoryAndOperator(t *testing.T) {
	for _, s := range samples {
		for _, op := range []Operator{Mask, Drop, Token} {
			t.Run(string(s.cat)+"/"+op.String(), func(t *testing.T) {
				cfg := Options{TokenKey: testKey}
				if s.cat != Secret {
					cfg.Operators = map[Category]Operator{s.cat: op}
				}
				r, err := New(cfg)
				if err != nil {
					t.Fatal(err)
				}
				sc := r.ForScope(testScope(t, "chain", "acme"))
				b, err := sc.JSON(taggedValue(s.cat, s.value))
				if err != nil {
					t.Fatal(err)
				}
				var got map[string]string
				if err := json.Unmarshal(b, &got); err != nil {
					t.Fatalf("invalid JSON %s: %v", b, err)
				}
				v, present := got["v"]
				switch {
				case s.cat == Secret || op == Drop:
					if present {
						t.Errorf("got %s, want the field dropped", b)
					}
				case op == Mask:
					if v != s.masked {
						t.Errorf("got %q, want %q", v, s.masked)
					}
				case op == Token:
					if !tokenRE.MatchString(v) || !strings.HasPrefix(v, "tok_"+string(s.cat)+"_") {
						t.Errorf("got %q, want a %s token", v, s.cat)
					}
				}
				if strings.Contains(string(b), s.value) {
					t.Errorf("output %s contains the value", b)
				}
				if n := sc.Report().Redacted(s.cat); n != 1 {
					t.Errorf("Report().Redacted(%s) = %d, want 1", s.cat, n)
				}
			})
		}
	}
}

func TestDetectedTextPerCategoryAndOperator(t *testing.T) {
	for _, s := range samples {
		if s.cat == Name || s.cat == Address {
			continue // no free-text detector: tag these fields
		}
		text := "before " + s.value + " after"
		if s.cat == Secret {
			text = "before password=" + s.value + " after"
		}
		for _, op := range []Operator{Mask, Drop, Token} {
			t.Run(string(s.cat)+"/"+op.String(), func(t *testing.T) {
				cfg := Options{TokenKey: testKey}
				if s.cat != Secret {
					cfg.Operators = map[Category]Operator{s.cat: op}
				}
				r, err := New(cfg)
				if err != nil {
					t.Fatal(err)
				}
				sc := r.ForScope(testScope(t, "chain", "acme"))
				got := sc.String(text)
				var want string
				switch {
				case s.cat == Secret:
					want = "before password=[redacted:secret] after"
				case op == Drop:
					want = "before [redacted:" + string(s.cat) + "] after"
				case op == Mask:
					want = "before " + s.masked + " after"
				}
				if op == Token && s.cat != Secret {
					mid := strings.TrimSuffix(strings.TrimPrefix(got, "before "), " after")
					if !tokenRE.MatchString(mid) {
						t.Errorf("String(%q) = %q, want a token", text, got)
					}
				} else if got != want {
					t.Errorf("String(%q) = %q, want %q", text, got, want)
				}
				if n := sc.Report().Redacted(s.cat); n != 1 {
					t.Errorf("Report().Redacted(%s) = %d, want 1", s.cat, n)
				}
			})
		}
	}
}

type guestRecord struct {
	Name  string `json:"name" pii:"name"`
	Email string `json:"email" pii:"email"`
	Phone string `json:"phone" pii:"phone"`
	Note  string `json:"note"`
}

func TestRevealByRole(t *testing.T) {
	r, err := New(Options{Reveal: map[string][]Category{
		"front_desk": {Phone},
		"manager":    {Name, Email},
	}})
	if err != nil {
		t.Fatal(err)
	}
	g := guestRecord{"Alice Smith", "alice@example.com", "+1 202 555 0143", "alt 020 7946 0958, alice@example.com"}
	tests := []struct {
		name  string
		scope scope.Scope
		want  string
	}{
		{"no role", testScope(t, "hotel", "h1"),
			`{"name":"[redacted:name]","email":"***@example.com","phone":"***0143","note":"alt ***0958, ***@example.com"}`},
		{"front_desk", testScope(t, "hotel", "h1", "front_desk"),
			`{"name":"[redacted:name]","email":"***@example.com","phone":"+1 202 555 0143","note":"alt 020 7946 0958, ***@example.com"}`},
		{"front_desk+manager", testScope(t, "hotel", "h1", "front_desk", "manager"),
			`{"name":"Alice Smith","email":"alice@example.com","phone":"+1 202 555 0143","note":"alt 020 7946 0958, alice@example.com"}`},
		{"unknown role", testScope(t, "hotel", "h1", "night_auditor"),
			`{"name":"[redacted:name]","email":"***@example.com","phone":"***0143","note":"alt ***0958, ***@example.com"}`},
		{"zero scope", scope.Scope{},
			`{"note":"alt [redacted:phone], [redacted:email]"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := r.ForScope(tt.scope).JSON(g)
			if err != nil {
				t.Fatal(err)
			}
			if string(b) != tt.want {
				t.Errorf("\n got %s\nwant %s", b, tt.want)
			}
		})
	}

	// The context form reads the same scope.
	ctx := scopetest.NewContext(context.Background(), testScope(t, "hotel", "h1", "front_desk"))
	sc := r.For(ctx)
	if b, _ := sc.JSON(g); !strings.Contains(string(b), `"phone":"+1 202 555 0143"`) {
		t.Errorf("For(ctx) did not reveal the phone to front_desk: %s", b)
	}
	if rep := sc.Report(); rep.Revealed(Phone) != 2 || rep.Redacted(Email) != 2 || rep.Redacted(Name) != 1 {
		t.Errorf("report = %v", rep)
	}
	if b, _ := r.For(context.Background()).JSON(g); string(b) != tests[4].want {
		t.Errorf("For(context without scope) = %s, want the most restrictive output", b)
	}
}

func TestTokens(t *testing.T) {
	r, err := New(Options{TokenKey: testKey, Operators: map[Category]Operator{
		Email: Token, Name: Token, Phone: Token, Card: Token, IBAN: Token,
	}})
	if err != nil {
		t.Fatal(err)
	}
	acme1 := r.ForScope(scopetest.New("alice", []scope.Grant{{Level: "chain", ID: "acme"}}))
	acme2 := r.ForScope(scopetest.New("bob", []scope.Grant{{Level: "chain", ID: "acme"}}, "some_role"))
	globex := r.ForScope(scopetest.New("carol", []scope.Grant{{Level: "chain", ID: "globex"}}))
	acmeHotel := r.ForScope(scopetest.New("dan", []scope.Grant{{Level: "hotel", ID: "acme-h1"}}))

	tok := func(sc *Scoped, cat Category, v string) string {
		b, err := sc.JSON(taggedValue(cat, v))
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]string
		json.Unmarshal(b, &m)
		if !tokenRE.MatchString(m["v"]) {
			t.Fatalf("not a token: %s", b)
		}
		return m["v"]
	}

	a := tok(acme1, Email, "alice@example.com")
	if b := tok(acme1, Email, "alice@example.com"); a != b {
		t.Errorf("same value, same Scoped: %s != %s", a, b)
	}
	if b := tok(acme2, Email, "alice@example.com"); a != b {
		t.Errorf("same tenant, other subject: %s != %s", a, b)
	}
	if b := tok(acme2, Email, " ALICE@Example.COM "); a != b {
		t.Errorf("normalised spelling gives another token: %s != %s", a, b)
	}
	if b := tok(acme1, Email, "alice2@example.com"); a == b {
		t.Errorf("different values, same token %s", a)
	}
	if b := tok(globex, Email, "alice@example.com"); a == b {
		t.Errorf("tokens linkable across tenants: %s", a)
	}
	if b := tok(acmeHotel, Email, "alice@example.com"); a == b {
		t.Errorf("different grant sets share a token: %s", a)
	}
	if n, e := tok(acme1, Name, "alice@example.com"), a; n[len("tok_name_"):] == e[len("tok_email_"):] {
		t.Errorf("categories share a token space")
	}
	if p1, p2 := tok(acme1, Phone, "+1 (202) 555-0143"), tok(acme1, Phone, "+1 202 555 0143"); p1 != p2 {
		t.Errorf("phone normalisation: %s != %s", p1, p2)
	}

	// A token in free text equals the token of the tagged field.
	text := acme1.String("guest alice@example.com asked")
	if text != "guest "+a+" asked" {
		t.Errorf("String = %q, want the field's token %s", text, a)
	}

	// Another master key gives other tokens.
	r2, _ := New(Options{TokenKey: append([]byte("other-"), testKey...), Operators: map[Category]Operator{Email: Token}})
	if b := tok(r2.ForScope(scopetest.New("alice", []scope.Grant{{Level: "chain", ID: "acme"}})), Email, "alice@example.com"); a == b {
		t.Errorf("token does not depend on the master key")
	}

	// A scope without grants mints no token at all.
	b, _ := r.ForScope(scope.Scope{}).JSON(taggedValue(Email, "alice@example.com"))
	if string(b) != "{}" {
		t.Errorf("zero scope: %s, want {}", b)
	}
}

// Canary test: personal data seeded in every position of a value must not
// appear anywhere in its redacted encoding.

type canaryAddress struct {
	Street string `json:"street"`
	City   string `json:"city"`
}

type canaryContact struct {
	Email  string `pii:"email"`
	Backup string // untagged: detectors
}

type canaryBase struct {
	BaseName string `json:"base_name" pii:"name"`
	BaseNote string `json:"base_note"`
}

type canaryPayment struct {
	Card   string `json:"card" pii:"card"`
	Holder string `json:"holder" pii:"name"`
	IBAN   string `json:"iban" pii:"iban"`
	CVV    string `json:"cvv" pii:"secret"`
}

type canaryGuest struct {
	canaryBase
	*canaryContact
	Name      string                    `json:"name" pii:"name"`
	Names     []string                  `json:"names" pii:"name"`
	Phone     *string                   `json:"phone" pii:"phone"`
	Address   canaryAddress             `json:"address" pii:"address"`
	AddrPtr   *canaryAddress            `json:"addr_ptr" pii:"address"`
	ByName    map[string]int            `json:"by_name" pii:"name,keys"`
	PhoneBook map[string]string         `json:"phone_book" pii:"phone"`
	SSNAsInt  int64                     `json:"ssn_int" pii:"ssn"`
	CardInt   uint64                    `json:"card_int" pii:"card"`
	Payment   canaryPayment             `json:"payment"`
	Payments  []*canaryPayment          `json:"payments"`
	Notes     string                    `json:"notes"`
	NoteList  []string                  `json:"note_list"`
	NoteArr   [2]string                 `json:"note_arr"`
	Index     map[string]string         `json:"index"`
	Nested    map[string]map[string]any `json:"nested"`
	Any       any                       `json:"any"`
	AnyGuest  any                       `json:"any_guest"`
	Raw       json.RawMessage           `json:"raw"`
	Blob      []byte                    `json:"blob"`
	Text      canaryText                `json:"text"`
	Err       string                    `json:"err"`
	Quoted    string                    `json:"quoted,string"`
	Time      time.Time                 `json:"time"`
	TextKeys  map[canaryText]int        `json:"text_keys"`
	ErrValue  error                     `json:"err_value"`
}

type canaryText struct{ v string }

func (c canaryText) MarshalText() ([]byte, error) { return []byte("contact " + c.v), nil }

var canaries = []string{
	// names and addresses: only ever in tagged fields
	"Zebulon Quixote", "Xanthippe Oddleigh", "Quentin Vexley", "Ysolde Marchbank",
	"221B Baker Street", "Marylebone",
	// detectable values, used tagged and untagged
	"zebulon.q@example.com", "ysolde@mail.example.org", "xan%40example.net",
	"+44 20 7946 0958", "(202) 555-0143", "020 7946 0123",
	"4111 1111 1111 1111", "5555555555554444", "378282246310005", "4111111111111111",
	"DE89 3704 0044 0532 0130 00", "GB82WEST12345698765432",
	"078-05-1120", "219099999",
	"198.51.100.23", "2001:db8:1234::42",
	"eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ6ZWJ1bG9uIn0.qVbc9lmKq3zX1y8T0lq4mQ", "sk_live_51Hc0ZbXyZ123abcDEF456ghi",
	"hunter2-Zebulon", "737",
}

func canaryValue() canaryGuest {
	phone := "+44 20 7946 0958"
	other := &canaryGuest{Name: "Quentin Vexley", Notes: "reach him at ysolde@mail.example.org"}
	return canaryGuest{
		canaryBase:    canaryBase{BaseName: "Xanthippe Oddleigh", BaseNote: "wife: xan%40example.net"},
		canaryContact: &canaryContact{Email: "zebulon.q@example.com", Backup: "or (202) 555-0143"},
		Name:          "Zebulon Quixote",
		Names:         []string{"Zebulon Quixote", "Ysolde Marchbank"},
		Phone:         &phone,
		Address:       canaryAddress{Street: "221B Baker Street", City: "Marylebone"},
		AddrPtr:       &canaryAddress{Street: "221B Baker Street"},
		ByName:        map[string]int{"Zebulon Quixote": 1, "Xanthippe Oddleigh": 2},
		PhoneBook:     map[string]string{"home": "020 7946 0123", "zebulon.q@example.com": "+44 20 7946 0958"},
		SSNAsInt:      219099999,
		CardInt:       4111111111111111,
		Payment:       canaryPayment{Card: "5555555555554444", Holder: "Zebulon Quixote", IBAN: "GB82WEST12345698765432", CVV: "737"},
		Payments:      []*canaryPayment{{Card: "378282246310005", Holder: "Ysolde Marchbank", IBAN: "DE89 3704 0044 0532 0130 00"}, nil},
		Notes:         "Guest zebulon.q@example.com, card 4111 1111 1111 1111, ssn 078-05-1120, ip 198.51.100.23",
		NoteList:      []string{"iban DE89 3704 0044 0532 0130 00", "call +44 20 7946 0958"},
		NoteArr:       [2]string{"v6 2001:db8:1234::42", "password=hunter2-Zebulon"},
		Index:         map[string]string{"zebulon.q@example.com": "vip", "198.51.100.23": "last login", "plain": "(202) 555-0143"},
		Nested:        map[string]map[string]any{"ysolde@mail.example.org": {"4111111111111111": []any{"GB82WEST12345698765432", 1.0}}},
		Any:           "token eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ6ZWJ1bG9uIn0.qVbc9lmKq3zX1y8T0lq4mQ",
		AnyGuest:      other,
		Raw:           json.RawMessage(`{"zebulon.q@example.com":["sk_live_51Hc0ZbXyZ123abcDEF456ghi","+44 20 7946 0958"],"n":1}`),
		Blob:          []byte("card 5555555555554444 of zebulon.q@example.com"),
		Text:          canaryText{v: "zebulon.q@example.com"},
		Err:           fmt.Errorf("charge 4111 1111 1111 1111 for zebulon.q@example.com: %w", errors.New("declined")).Error(),
		Quoted:        "zebulon.q@example.com",
		Time:          time.Date(2024, 1, 15, 10, 30, 0, 0, time.UTC),
		TextKeys:      map[canaryText]int{{v: "zebulon.q@example.com"}: 1, {v: "+44 20 7946 0958"}: 2},
		ErrValue:      errors.New("declined for zebulon.q@example.com"),
	}
}

func assertNoCanary(t *testing.T, label, out string) {
	t.Helper()
	for _, c := range canaries {
		if strings.Contains(out, c) {
			t.Errorf("%s: canary %q leaked in %s", label, c, out)
		}
		if digits := onlyDigits(c); len(digits) >= 9 && strings.Contains(onlyDigits(out), digits) {
			t.Errorf("%s: digits of canary %q leaked", label, c)
		}
	}
}

func onlyDigits(s string) string {
	var b strings.Builder
	for _, r := range s {
		if r >= '0' && r <= '9' {
			b.WriteRune(r)
		}
	}
	return b.String()
}

func TestCanary(t *testing.T) {
	v := canaryValue()
	tokenAll, err := New(Options{TokenKey: testKey, Operators: map[Category]Operator{
		Email: Token, Phone: Token, Name: Token, Card: Token, Address: Token, IBAN: Token, SSN: Token, IP: Token,
	}})
	if err != nil {
		t.Fatal(err)
	}
	dropAll, _ := New(Options{Operators: map[Category]Operator{
		Email: Drop, Phone: Drop, Name: Drop, Card: Drop, Address: Drop, IBAN: Drop, SSN: Drop, IP: Drop,
	}})
	for _, tc := range []struct {
		name string
		sc   *Scoped
	}{
		{"default policy", defaultRedactor.ForScope(testScope(t, "chain", "acme", "front_desk"))},
		{"default policy, no scope", defaultRedactor.ForScope(scope.Scope{})},
		{"tokens", tokenAll.ForScope(testScope(t, "chain", "acme"))},
		{"drop", dropAll.ForScope(testScope(t, "chain", "acme"))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := tc.sc.JSON(v)
			if err != nil {
				t.Fatal(err)
			}
			if !json.Valid(b) {
				t.Fatalf("invalid JSON: %s", b)
			}
			assertNoCanary(t, "JSON", string(b))
			var decoded struct{ Blob []byte }
			json.Unmarshal(b, &decoded)
			assertNoCanary(t, "decoded blob", string(decoded.Blob))
			txt, err := tc.sc.Text(v)
			if err != nil {
				t.Fatal(err)
			}
			assertNoCanary(t, "Text", txt)
			assertNoCanary(t, "Error", tc.sc.Error(errors.New(v.Err)))
			assertNoCanary(t, "String", tc.sc.String(v.Notes+" "+v.NoteArr[1]+" "+v.Any.(string)))
			if tc.sc.Report().Total() < 30 {
				t.Errorf("implausibly few redactions: %v", tc.sc.Report())
			}
		})
	}

	// The test can fail: a role that may see phones sees the phone canaries.
	r, _ := New(Options{Reveal: map[string][]Category{"front_desk": {Phone}}})
	b, _ := r.ForScope(testScope(t, "chain", "acme", "front_desk")).JSON(v)
	if !strings.Contains(string(b), "+44 20 7946 0958") {
		t.Errorf("revealed phone missing: %s", b)
	}
	// ...and only those.
	for _, c := range canaries {
		if strings.Contains(string(b), c) && c != "+44 20 7946 0958" && c != "(202) 555-0143" && c != "020 7946 0123" {
			t.Errorf("canary %q leaked with only phones revealed", c)
		}
	}
}

func TestMapKeyCollisions(t *testing.T) {
	m := map[string]int{
		"alice@example.com": 1, "bob@example.com": 2, "carol@example.com": 3,
		"***@example.com": 4, "***@example.com (2)": 5, "plain": 6,
	}
	var first string
	for i := 0; i < 20; i++ {
		b, err := ForTest().JSON(m)
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			first = string(b)
		} else if string(b) != first {
			t.Fatalf("unstable output:\n%s\n%s", first, b)
		}
	}
	var back map[string]int
	if err := json.Unmarshal([]byte(first), &back); err != nil {
		t.Fatal(err)
	}
	if len(back) != len(m) {
		t.Errorf("members lost: %s", first)
	}
	sum := 0
	for _, v := range back {
		sum += v
	}
	if sum != 21 {
		t.Errorf("values lost: %s", first)
	}
	if strings.Contains(first, "alice") || strings.Contains(first, "bob") || strings.Contains(first, "carol") {
		t.Errorf("key leaked: %s", first)
	}
}

type roomList struct {
	ByGuest map[string][]int `json:"by_guest" pii:"name,keys"`
}

func TestKeysOption(t *testing.T) {
	v := roomList{ByGuest: map[string][]int{"Alice Smith": {101}, "Bob Jones": {102, 103}}}
	b, err := ForTest().JSON(v)
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"by_guest":{"[redacted:name]":[101],"[redacted:name] (2)":[102,103]}}`; string(b) != want {
		t.Errorf("got %s, want %s", b, want)
	}
	r, _ := New(Options{TokenKey: testKey, Operators: map[Category]Operator{Name: Token}})
	b, _ = r.ForScope(testScope(t, "chain", "acme")).JSON(v)
	var got struct {
		ByGuest map[string][]int `json:"by_guest"`
	}
	json.Unmarshal(b, &got)
	for k := range got.ByGuest {
		if !tokenRE.MatchString(k) {
			t.Errorf("key %q is not a token", k)
		}
	}
	if len(got.ByGuest) != 2 {
		t.Errorf("got %s", b)
	}
	rv, _ := New(Options{Reveal: map[string][]Category{"mgr": {Name}}})
	b, _ = rv.ForScope(testScope(t, "chain", "acme", "mgr")).JSON(v)
	if string(b) != `{"by_guest":{"Alice Smith":[101],"Bob Jones":[102,103]}}` {
		t.Errorf("revealed: %s", b)
	}
}

type shapes struct {
	CardNum  int64             `json:"card_num" pii:"card"`
	Phones   []string          `json:"phones" pii:"phone"`
	PhoneArr [2]string         `json:"phone_arr" pii:"phone"`
	ByLabel  map[string]string `json:"by_label" pii:"phone"`
	NilPtr   *string           `json:"nil_ptr" pii:"email"`
	Empty    string            `json:"empty" pii:"email"`
	Omitted  string            `json:"omitted,omitempty" pii:"email"`
	Addr     canaryAddress     `json:"addr" pii:"address"`
	Born     time.Time         `json:"born" pii:"name"`
	Bytes    []byte            `json:"bytes" pii:"email"`
	Iface    any               `json:"iface" pii:"email"`
	Raw      json.RawMessage   `json:"raw" pii:"email"`
	Text     canaryText        `json:"text" pii:"name"`
	QuotedN  int               `json:"quoted_n,string" pii:"card"`
}

func TestTaggedShapes(t *testing.T) {
	v := shapes{
		CardNum:  4111111111111111,
		Phones:   []string{"+1 202 555 0143", "020 7946 0958"},
		PhoneArr: [2]string{"+1 202 555 0143", ""},
		ByLabel:  map[string]string{"home": "+1 202 555 0143", "bob@example.com": "020 7946 0958"},
		Addr:     canaryAddress{Street: "221B Baker Street"},
		Born:     time.Date(1980, 5, 17, 0, 0, 0, 0, time.UTC),
		Bytes:    []byte("alice@example.com"),
		Iface:    "alice@example.com",
		Raw:      json.RawMessage(`"alice@example.com"`),
		Text:     canaryText{v: "Alice"},
		QuotedN:  1234,
	}
	b, err := ForTest().JSON(v)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"card_num":"****1111","phones":["***0143","***0958"],"phone_arr":["***0143",""],` +
		`"by_label":{"***@example.com":"***0958","home":"***0143"},"nil_ptr":null,"empty":"",` +
		`"addr":"[redacted:address]","born":"[redacted:name]","bytes":"***@example.com","iface":"***@example.com",` +
		`"raw":"***@example.com","text":"[redacted:name]","quoted_n":"[redacted:card]"}`
	if string(b) != want {
		t.Errorf("\n got %s\nwant %s", b, want)
	}

	// Revealed, every field encodes as encoding/json would.
	all := map[string][]Category{"all": {Email, Phone, Name, Card, Address, IBAN, SSN, IP}}
	r, _ := New(Options{Reveal: all})
	got, err := r.ForScope(testScope(t, "chain", "acme", "all")).JSON(v)
	if err != nil {
		t.Fatal(err)
	}
	plain, _ := json.Marshal(v)
	if string(got) != string(plain) {
		t.Errorf("revealed\n got %s\nwant %s", got, plain)
	}

	// Tokens of composites are tokens of their clear JSON.
	rt, _ := New(Options{TokenKey: testKey, Operators: map[Category]Operator{Address: Token}})
	sc := rt.ForScope(testScope(t, "chain", "acme"))
	b1, _ := sc.JSON(v)
	v.Addr.Street = "10 Downing Street"
	b2, _ := sc.JSON(v)
	var s1, s2 struct{ Addr string }
	json.Unmarshal(b1, &s1)
	json.Unmarshal(b2, &s2)
	if !tokenRE.MatchString(s1.Addr) || s1.Addr == s2.Addr {
		t.Errorf("composite tokens: %q, %q", s1.Addr, s2.Addr)
	}
}

type taggedEmbed struct {
	canaryAddress `pii:"address"`
	Room          int `json:"room"`
}

func TestEmbeddedTagIsInherited(t *testing.T) {
	b, err := ForTest().JSON(taggedEmbed{canaryAddress{"221B Baker Street", "London"}, 12})
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"street":"[redacted:address]","city":"[redacted:address]","room":12}`; string(b) != want {
		t.Errorf("got %s, want %s", b, want)
	}
	fs, err := TaggedFields(reflect.TypeFor[taggedEmbed]())
	if err != nil || len(fs) != 2 || fs[0].Path[0] != "street" || fs[0].Category != Address {
		t.Errorf("TaggedFields = %+v, %v", fs, err)
	}
}

type badCategory struct {
	X string `pii:"passport"`
}

type badKeys struct {
	X string `pii:"name,keys"`
}

type badOption struct {
	X string `pii:"name,sometimes"`
}

type selfMarshaling struct {
	Email string `pii:"email"`
}

func (s selfMarshaling) MarshalJSON() ([]byte, error) { return json.Marshal(s.Email) }

type hidesMarshaler struct {
	Inner []selfMarshaling
}

func TestTagErrors(t *testing.T) {
	for name, v := range map[string]any{
		"unknown category":      badCategory{},
		"keys on a non-map":     badKeys{},
		"unknown option":        badOption{},
		"MarshalJSON with tags": selfMarshaling{Email: "alice@example.com"},
		"nested":                hidesMarshaler{Inner: []selfMarshaling{{}}},
		"in an interface":       []any{badCategory{}},
	} {
		t.Run(name, func(t *testing.T) {
			b, err := ForTest().JSON(v)
			if !errors.Is(err, ErrTag) || b != nil {
				t.Errorf("JSON = %s, %v; want ErrTag", b, err)
			}
			if name == "in an interface" {
				return
			}
			if _, err := CategoriesOf(reflect.TypeOf(v)); !errors.Is(err, ErrTag) {
				t.Errorf("CategoriesOf: %v, want ErrTag", err)
			}
		})
	}
}

type hotelPage struct {
	Bookings []struct {
		ID    string       `json:"id"`
		Guest *guestRecord `json:"guest"`
		Pay   map[string]canaryPayment
	} `json:"bookings"`
	Self *hotelPage `json:"next,omitempty"`
}

func TestCategoriesOfAndTaggedFields(t *testing.T) {
	cats, err := CategoriesOf(reflect.TypeFor[hotelPage]())
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(cats); got != "[email phone name card iban secret]" {
		t.Errorf("CategoriesOf = %v", got)
	}
	fs, err := TaggedFields(reflect.TypeFor[*hotelPage]())
	if err != nil {
		t.Fatal(err)
	}
	var paths []string
	for _, f := range fs {
		paths = append(paths, strings.Join(f.Path, ".")+"="+string(f.Category))
	}
	want := "bookings.[].guest.name=name bookings.[].guest.email=email bookings.[].guest.phone=phone " +
		"bookings.[].Pay.{}.card=card bookings.[].Pay.{}.holder=name bookings.[].Pay.{}.iban=iban bookings.[].Pay.{}.cvv=secret"
	if got := strings.Join(paths, " "); got != want {
		t.Errorf("TaggedFields =\n %s\nwant\n %s", got, want)
	}
	if cats, err := CategoriesOf(reflect.TypeFor[time.Time]()); err != nil || len(cats) != 0 {
		t.Errorf("time.Time: %v %v", cats, err)
	}
}

func TestErrorMessages(t *testing.T) {
	sc := ForTest()
	err := fmt.Errorf("booking for alice@example.com: %w", errors.New("card 4111 1111 1111 1111 declined"))
	if got, want := sc.Error(err), "booking for ***@example.com: card ****1111 declined"; got != want {
		t.Errorf("Error = %q, want %q", got, want)
	}
	if sc.Error(nil) != "" {
		t.Errorf("Error(nil) not empty")
	}
	nos := defaultRedactor.ForScope(scope.Scope{})
	if got, want := nos.Error(err), "booking for [redacted:email]: card [redacted:card] declined"; got != want {
		t.Errorf("no scope: %q, want %q", got, want)
	}
	if got := sc.String("no personal data here"); got != "no personal data here" {
		t.Errorf("clean text changed: %q", got)
	}
}

func TestReport(t *testing.T) {
	sc := ForTest()
	sc.JSON(guestRecord{"A B", "a@example.com", "", "c@example.com and 10.0.0.1"})
	sc.String("password=x")
	rep := sc.Report()
	if rep.Redacted(Name) != 1 || rep.Redacted(Email) != 2 || rep.Redacted(Phone) != 0 || rep.Redacted(IP) != 1 ||
		rep.Redacted(Secret) != 1 || rep.Total() != 5 || rep.Redacted("bogus") != 0 {
		t.Errorf("report = %v", rep)
	}
	if got := rep.String(); got != "redacted email=2 name=1 ip=1 secret=1; revealed" {
		t.Errorf("String = %q", got)
	}
	b, _ := json.Marshal(rep)
	if string(b) != `{"redacted":{"email":2,"name":1,"ip":1,"secret":1},"revealed":{}}` {
		t.Errorf("MarshalJSON = %s", b)
	}
	if got := rep.LogValue().String(); !strings.Contains(got, "email=2") {
		t.Errorf("LogValue = %s", got)
	}
	// A failed encoding counts nothing.
	before := sc.Report()
	if _, err := sc.JSON([]any{"a@example.com", make(chan int)}); err == nil {
		t.Fatal("expected an error")
	}
	if sc.Report() != before {
		t.Errorf("failed JSON changed the report")
	}
}

func TestConfigErrors(t *testing.T) {
	for name, cfg := range map[string]Options{
		"unknown category op":  {Operators: map[Category]Operator{"passport": Mask}},
		"unknown operator":     {Operators: map[Category]Operator{Email: Operator(9)}},
		"secret masked":        {Operators: map[Category]Operator{Secret: Mask}},
		"secret revealed":      {Reveal: map[string][]Category{"admin": {Secret}}},
		"unknown reveal":       {Reveal: map[string][]Category{"admin": {"dob"}}},
		"empty role":           {Reveal: map[string][]Category{"": {Email}}},
		"token without key":    {Operators: map[Category]Operator{Email: Token}},
		"token with short key": {Operators: map[Category]Operator{Email: Token}, TokenKey: []byte("short")},
	} {
		if _, err := New(cfg); !errors.Is(err, ErrConfig) {
			t.Errorf("%s: err = %v, want ErrConfig", name, err)
		}
	}
	if _, err := New(Options{Operators: map[Category]Operator{Secret: Drop}}); err != nil {
		t.Errorf("explicit Drop for secret: %v", err)
	}
}

func TestNilScopedIsMostRestrictive(t *testing.T) {
	var sc *Scoped
	b, err := sc.JSON(guestRecord{Email: "a@example.com", Note: "b@example.com"})
	if err != nil || string(b) != `{"note":"[redacted:email]"}` {
		t.Errorf("nil Scoped: %s %v", b, err)
	}
	if sc.Report().Total() != 0 {
		t.Errorf("nil Scoped report")
	}
}

func TestNilRedactorIsDefault(t *testing.T) {
	var r *Redactor
	b, err := r.ForScope(testScope(t, "chain", "acme")).JSON(guestRecord{Email: "a@example.com"})
	if err != nil || !strings.Contains(string(b), `"email":"***@example.com"`) {
		t.Errorf("nil Redactor: %s %v", b, err)
	}
}

func TestTextRendering(t *testing.T) {
	sc := ForTest()
	txt, err := sc.Text(guestRecord{Name: "A", Email: "a@example.com"})
	if err != nil {
		t.Fatal(err)
	}
	want := "{\n  \"name\": \"[redacted:name]\",\n  \"email\": \"***@example.com\",\n  \"phone\": \"\",\n  \"note\": \"\"\n}"
	if txt != want {
		t.Errorf("Text =\n%s\nwant\n%s", txt, want)
	}
	if s, _ := sc.Text("mail a@example.com"); s != "mail ***@example.com" {
		t.Errorf("Text(string) = %q", s)
	}
	if s, _ := sc.Text(errors.New("mail a@example.com")); s != "mail ***@example.com" {
		t.Errorf("Text(error) = %q", s)
	}
}

func TestIdempotent(t *testing.T) {
	sc := ForTest()
	for _, c := range canaries {
		once := sc.String("x " + c + " y")
		if twice := sc.String(once); twice != once {
			t.Errorf("not idempotent: %q → %q → %q", c, once, twice)
		}
	}
}

func TestConcurrentUse(t *testing.T) {
	r, _ := New(Options{TokenKey: testKey, Operators: map[Category]Operator{Name: Token}})
	sc := r.ForScope(testScope(t, "chain", "acme"))
	v := canaryValue()
	want, err := sc.JSON(v)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; j < 20; j++ {
				got, err := sc.JSON(v)
				if err != nil || string(got) != string(want) {
					t.Errorf("concurrent output differs: %v", err)
					return
				}
			}
		}()
	}
	wg.Wait()
	one := r.ForScope(testScope(t, "chain", "acme"))
	one.JSON(v)
	if got, per := sc.Report().Redacted(Name), one.Report().Redacted(Name); per == 0 || got != 161*per {
		t.Errorf("report counted %d names, want 161×%d", got, per)
	}
}

func TestMaskWithoutHint(t *testing.T) {
	for _, tc := range []struct {
		cat  catIndex
		in   string
		want string
	}{
		{ciEmail, "not an address", "[redacted:email]"},
		{ciEmail, "a@b", "[redacted:email]"},
		{ciEmail, "a@evil.com, also b@x.com 555-0143", "[redacted:email]"},
		{ciEmail, "A@Sub.Example.COM", "***@sub.example.com"},
		{ciEmail, "a%40example.com", "***@example.com"},
		{ciPhone, "12345", "[redacted:phone]"},
		{ciPhone, "(202) 555-0143", "***0143"},
		{ciCard, "4111", "[redacted:card]"},
		{ciCard, "4111-1111-1111-1111", "****1111"},
		{ciIBAN, "DE89", "[redacted:iban]"},
		{ciIBAN, "de89 3704 0044 0532 0130 00", "DE**3000"},
		{ciIBAN, "1234567890123456", "[redacted:iban]"},
		{ciSSN, "123-45-6789", "[redacted:ssn]"},
		{ciName, "Alice", "[redacted:name]"},
	} {
		if got := maskText(tc.cat, tc.in); got != tc.want {
			t.Errorf("maskText(%s, %q) = %q, want %q", catNames[tc.cat], tc.in, got, tc.want)
		}
	}
}

// TestTokensKeyedByGrantPath (issue 13 §1): a grant confined to ancestors
// is its own tenant for tokens, so "hotel acme-paris within chain initech"
// (a path the data contradicts) cannot obtain acme-paris's tokens, and the
// roles bound to grants do not change the tenant.
func TestTokensKeyedByGrantPath(t *testing.T) {
	r, err := New(Options{TokenKey: testKey, Operators: map[Category]Operator{Email: Token}})
	if err != nil {
		t.Fatal(err)
	}
	within := func(chain string, roles ...string) scope.Grant {
		return scope.Grant{Level: "hotel", ID: "acme-paris", Within: []scope.Grant{{Level: "chain", ID: chain}}, Roles: roles}
	}
	tok := func(g scope.Grant) string {
		b, err := r.ForScope(scopetest.New("alice", []scope.Grant{g})).JSON(taggedValue(Email, "guest@example.com"))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	plain, own, wrong := tok(scope.Grant{Level: "hotel", ID: "acme-paris"}), tok(within("acme")), tok(within("initech"))
	if own == plain || own == wrong || plain == wrong {
		t.Errorf("tokens of plain, own-path and wrong-path grants coincide: %s %s %s", plain, own, wrong)
	}
	if withRole := tok(within("acme", "front_desk")); withRole != own {
		t.Errorf("a role bound to the grant changed the tenant's token: %s != %s", withRole, own)
	}
}
