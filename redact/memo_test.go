package redact

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
)

// jsonWithoutMemo is Scoped.JSON with the clean-string memo off: every
// string is scanned, as before the memo existed. It is the oracle of
// TestCleanMemoIsExact.
func jsonWithoutMemo(s *Scoped, v any) ([]byte, error) {
	e := newEncodeState(s)
	saved := e.clean
	e.clean = nil
	defer func() {
		e.clean = saved
		e.release()
	}()
	if err := e.marshal(v); err != nil {
		return nil, err
	}
	out := bytes.Clone(e.buf)
	e.flush()
	return out, nil
}

type memoRow struct {
	Status string            `json:"status"`
	Note   string            `json:"note"`
	Email  string            `json:"email" pii:"email"`
	Quoted string            `json:"quoted,string"`
	Any    any               `json:"any"`
	Tags   []string          `json:"tags"`
	Attrs  map[string]string `json:"attrs"`
}

// memoPage repeats, row after row, clean strings and strings holding
// personal data in every disguise the detectors undo (an HTML entity,
// full-width characters, invalid UTF-8), short and longer than the memo's
// length bound, and more distinct clean strings than the memo holds, so
// that the memo fills up while detections keep coming.
func memoPage() []memoRow {
	dirty := []string{
		"alice@example.com",
		"call +44 20 7946 0958 now",
		"alice&#64;example.com",
		"ａｌｉｃｅ＠ｅｘａｍｐｌｅ．ｃｏｍ",
		"\xffbob@example.com",
		"card 4111 1111 1111 1111",
		strings.Repeat("word ", 40) + "carol@example.com",
	}
	clean := []string{"confirmed", "checked_out", "Grand Hôtel Paris", "room 1204", "2024-06-01", strings.Repeat("long clean text ", 12), "\xffinvalid but clean"}
	var rows []memoRow
	for i := range 700 {
		r := memoRow{
			Status: clean[i%len(clean)],
			Note:   dirty[i%len(dirty)],
			Email:  dirty[i%2],
			Quoted: clean[(i+1)%len(clean)],
			Tags:   []string{clean[i%3], dirty[(i+3)%len(dirty)], fmt.Sprintf("distinct clean %c%c", 'a'+i%26, 'a'+i/26)},
			Attrs:  map[string]string{clean[i%2]: dirty[i%len(dirty)], dirty[i%len(dirty)]: clean[i%4]},
		}
		if i%2 == 0 {
			r.Any = dirty[(i+1)%len(dirty)]
		} else {
			r.Any = clean[(i+2)%len(clean)]
		}
		rows = append(rows, r)
	}
	return rows
}

// The memo changes nothing: with every policy (masked, revealed, tokenised)
// the output bytes and the Report are those of scanning every string.
func TestCleanMemoIsExact(t *testing.T) {
	page := memoPage()
	key := bytes.Repeat([]byte{7}, MinTokenKeyLen)
	policies := map[string]Options{
		"default": {},
		"reveal":  {Reveal: map[string][]Category{"front_desk": {Email, Phone, Card}}},
		"token":   {Operators: map[Category]Operator{Email: Token, Phone: Token}, TokenKey: key},
	}
	for name, cfg := range policies {
		r, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		sc := testScope(t, "chain", "acme", "front_desk")
		withMemo, oracle := r.ForScope(sc), r.ForScope(sc)
		got, err := withMemo.JSON(page)
		if err != nil {
			t.Fatal(err)
		}
		want, err := jsonWithoutMemo(oracle, page)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("%s: output differs with the memo", name)
		}
		if withMemo.Report() != oracle.Report() {
			t.Fatalf("%s: report %v with the memo, %v without", name, withMemo.Report(), oracle.Report())
		}
		if oracle.Report().Total()+oracle.Report().Revealed(Email) == 0 {
			t.Fatalf("%s: nothing was detected; the page does not test the memo", name)
		}
		for _, leak := range []string{"alice@example.com", "7946 0958", "4111 1111 1111 1111"} {
			if name != "reveal" && bytes.Contains(got, []byte(leak)) {
				t.Fatalf("%s: %q in the output", name, leak)
			}
		}
	}
}

// A string is remembered only within one encoding: the state goes back to
// the pool with an empty memo, and a string remembered in one call is not
// trusted in the next one.
func TestCleanMemoClearedOnRelease(t *testing.T) {
	s := ForTest()
	e := newEncodeState(s)
	if err := e.marshal([]string{"confirmed", "confirmed", "Acme Hotels Lisbon"}); err != nil {
		t.Fatal(err)
	}
	if len(e.clean) == 0 {
		t.Fatal("nothing was remembered: the memo is not in use")
	}
	e.release()
	if len(e.clean) != 0 {
		t.Fatalf("%d strings survived the encoding", len(e.clean))
	}
	for range 3 {
		e := newEncodeState(s)
		if len(e.clean) != 0 {
			t.Fatal("a pooled encoding state came with remembered strings")
		}
		e.release()
	}
	if n := len(e.clean); n > cleanMaxEntries {
		t.Fatalf("memo holds %d strings, bound %d", n, cleanMaxEntries)
	}
}

// The memo never remembers a string in which anything was detected, even
// when the policy reveals it (output unchanged): each occurrence is counted.
func TestCleanMemoCountsEveryRevealedOccurrence(t *testing.T) {
	r, err := New(Options{Reveal: map[string][]Category{"front_desk": {Email}}})
	if err != nil {
		t.Fatal(err)
	}
	s := r.ForScope(testScope(t, "chain", "acme", "front_desk"))
	out, err := s.JSON([]string{"alice@example.com", "alice@example.com", "alice@example.com"})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(out, []byte("alice@example.com")) {
		t.Fatalf("revealed e-mail not in %s", out)
	}
	if n := s.Report().Revealed(Email); n != 3 {
		t.Fatalf("revealed %d e-mails, want 3", n)
	}
}
