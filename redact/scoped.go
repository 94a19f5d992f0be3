package redact

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base32"
	"encoding/json"
	"fmt"
	"hash"
	"hash/maphash"
	"strings"
	"sync"
	"sync/atomic"
	"unicode/utf8"

	"github.com/tenantmcp/tenantmcp/redact/internal/detect"
	"github.com/tenantmcp/tenantmcp/scope"
)

// Scoped is the redaction of one request: the policy of a Redactor applied
// to one scope. Everything a request sends out (its result, the text
// rendering of the result, its error messages) goes through the same
// Scoped, whose Report then counts what was redacted for the audit record.
//
// A Scoped is cheap to create and safe for concurrent use. A nil *Scoped
// behaves as one without a scope: everything dropped.
type Scoped struct {
	r     *Redactor
	scope scope.Scope
	act   actions

	mu  sync.Mutex // guards mac
	mac hash.Hash  // HMAC under the tenant key, created on first use

	redacted [nCat]atomic.Int64
	revealed [nCat]atomic.Int64
}

// JSON returns the redacted JSON encoding of v. It follows encoding/json
// (field names and options from `json` tags, embedded structs, omitempty,
// omitzero, ",string", map key ordering, json.Marshaler and
// encoding.TextMarshaler, HTML-safe escaping) and on top of it:
//
//   - a struct field tagged `pii:"<category>"` is revealed, masked,
//     tokenised or omitted according to the policy for the caller's roles;
//   - every other string — untagged fields, map keys, slice elements,
//     interface values, the decoded content of []byte, the output of
//     MarshalText and the strings inside the output of MarshalJSON — is
//     scanned by the free-text detectors, and detected spans are redacted.
//
// On error nothing is returned, so nothing unredacted can leak from a
// partial encoding.
func (s *Scoped) JSON(v any) ([]byte, error) {
	s = s.orZero()
	e := newEncodeState(s)
	defer e.release()
	if err := e.marshal(v); err != nil {
		return nil, err
	}
	// A page is handed out in its buffer, and the next encoding makes one
	// of its own; a small output is copied, so that a caller keeping it
	// keeps no more than twice its size.
	out := e.buf
	if len(out) < cap(out)/2 {
		out = bytes.Clone(out)
	} else {
		e.buf, e.last = nil, len(out)
	}
	e.flush()
	return out, nil
}

// Text returns the text rendering of v for a text content block: a string is
// redacted as free text, an error as by Error, anything else is rendered as
// the redacted JSON of v, indented by two spaces.
//
// A caller that sends both the JSON and a text rendering of the same value
// should derive the text from the bytes JSON returned (they are already
// redacted) rather than call Text again, so the Report counts each
// redaction once.
func (s *Scoped) Text(v any) (string, error) {
	s = s.orZero()
	switch x := v.(type) {
	case string:
		return s.String(x), nil
	case error:
		return s.Error(x), nil
	}
	b, err := s.JSON(v)
	if err != nil {
		return "", err
	}
	var out bytes.Buffer
	out.Grow(len(b) + len(b)/2)
	if err := json.Indent(&out, b, "", "  "); err != nil {
		return "", fmt.Errorf("%w: indenting: %v", ErrUnsupported, err)
	}
	return out.String(), nil
}

// String redacts free text: every span the detectors recognise is revealed,
// masked, tokenised or replaced by "[redacted:<category>]" according to the
// policy. Text without detections is returned unchanged, without copying;
// invalid UTF-8 is replaced by U+FFFD before detection.
func (s *Scoped) String(text string) string {
	s = s.orZero()
	var r run
	r.init(s)
	if !utf8.ValidString(text) {
		text = validUTF8(text)
	}
	out := r.text(text)
	r.flush()
	return out
}

// Error returns the redacted message of err, as String(err.Error()), or ""
// for a nil error. Use it for every error message that leaves the server.
func (s *Scoped) Error(err error) string {
	if err == nil {
		return ""
	}
	return s.String(err.Error())
}

// Report returns what this Scoped has redacted and revealed so far.
func (s *Scoped) Report() Report {
	var rep Report
	if s == nil {
		return rep
	}
	for i := range rep.redacted {
		rep.redacted[i] = int(s.redacted[i].Load())
		rep.revealed[i] = int(s.revealed[i].Load())
	}
	return rep
}

// noScope is the most restrictive Scoped, used in place of a nil *Scoped.
var noScope = defaultRedactor.ForScope(scope.Scope{})

// orZero makes a nil *Scoped behave as the most restrictive one.
func (s *Scoped) orZero() *Scoped {
	if s == nil {
		return noScope
	}
	return s
}

// run is one redaction pass: the decisions of a Scoped (possibly overridden
// for a nested clear-text encoding) and counts that are added to the Scoped
// only when the pass succeeds.
type run struct {
	sc      *Scoped
	act     actions
	nocount bool
	// inReveal is 1 + the category of the revealed tagged field being
	// encoded, 0 outside one: detections of that category inside it are the
	// field itself and are not counted twice.
	inReveal uint8
	redacted [nCat]int32
	revealed [nCat]int32
	spans    []detect.Span
	// firstClean: the last first pass found no span at all.
	firstClean bool
	// clean, when not nil, remembers the strings of this encoding in which
	// the detectors found nothing (see textJSON), in the order they were
	// found, as spans of cleanText, which holds a copy of their bytes (no
	// pointers: remembering a string costs the garbage collector nothing).
	// cleanIdx is its direct-mapped index: slot memoSlot(s) holds 1 + the
	// position in clean of the last string remembered with that hash, 0 for
	// none. A hit needs the remembered bytes to equal s byte for byte, so a
	// collision costs a scan, never a wrong answer.
	clean     []memoEntry
	cleanText []byte
	cleanIdx  *[cleanSlots]uint16
}

// memoEntry is a remembered clean string: cleanText[off : off+n].
type memoEntry struct{ off, n uint32 }

// A string is remembered as clean only when it is at most cleanMaxLen bytes
// long (long free text rarely repeats), and at most cleanMaxEntries per
// encoding, so the memo stays small and cheap to clear.
const (
	cleanMaxLen     = 128
	cleanMaxEntries = 512
	cleanBits       = 10
	cleanSlots      = 1 << cleanBits // above cleanMaxEntries
)

// memoSeed keys the memo's hash per process, so that input cannot be
// crafted offline to collide (a collision would only cost a scan).
var memoSeed = new(maphash.Hash).Sum64()

// memoSlot hashes s from its length and its first and last eight bytes:
// enough to tell apart the short strings of a page, and much cheaper than
// hashing every byte. Strings that agree on those collide, which costs a
// scan (see run.clean).
func memoSlot(s string) uint32 {
	n := len(s)
	var a, b uint64
	switch {
	case n >= 8:
		a, b = load64(s), load64(s[n-8:])
	case n >= 4:
		a, b = uint64(load32(s)), uint64(load32(s[n-4:]))
	case n > 0:
		a = uint64(s[0]) | uint64(s[n/2])<<8 | uint64(s[n-1])<<16
	}
	// The top bits of a product depend on every bit of its factors.
	h := (a^memoSeed)*0x9E3779B97F4A7C15 ^ (b+uint64(n))*0xC2B2AE3D27D4EB4F
	h *= 0xFF51AFD7ED558CCD
	return uint32(h >> (64 - cleanBits))
}

func load64(s string) uint64 {
	_ = s[7]
	return uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24 |
		uint64(s[4])<<32 | uint64(s[5])<<40 | uint64(s[6])<<48 | uint64(s[7])<<56
}

func load32(s string) uint32 {
	_ = s[3]
	return uint32(s[0]) | uint32(s[1])<<8 | uint32(s[2])<<16 | uint32(s[3])<<24
}

// lookupClean reports whether s is remembered as clean.
func (r *run) lookupClean(s string) bool {
	j := r.cleanIdx[memoSlot(s)]
	if j == 0 {
		return false
	}
	m := r.clean[j-1]
	return int(m.n) == len(s) && string(r.cleanText[m.off:m.off+m.n]) == s
}

// rememberClean remembers s as clean, within the memo's bound.
func (r *run) rememberClean(s string) {
	if len(r.clean) >= cleanMaxEntries {
		return
	}
	r.clean = append(r.clean, memoEntry{off: uint32(len(r.cleanText)), n: uint32(len(s))})
	r.cleanText = append(r.cleanText, s...)
	r.cleanIdx[memoSlot(s)] = uint16(len(r.clean))
}

// resetClean forgets every remembered string and zeroes the copy of its
// bytes, so that no string of one call stays in the pooled state.
func (r *run) resetClean() {
	clear(r.cleanText)
	r.cleanText = r.cleanText[:0]
	r.clean = r.clean[:0]
	*r.cleanIdx = [cleanSlots]uint16{}
}

func (r *run) init(s *Scoped) {
	r.sc = s
	r.act = s.act
	r.nocount = false
	r.inReveal = 0
	r.redacted = [nCat]int32{}
	r.revealed = [nCat]int32{}
}

func (r *run) count(c catIndex, a action) {
	if r.nocount {
		return
	}
	if a == actReveal {
		if r.inReveal == uint8(c)+1 {
			return
		}
		r.revealed[c]++
	} else {
		r.redacted[c]++
	}
}

func (r *run) flush() {
	for i := range r.redacted {
		if n := r.redacted[i]; n != 0 {
			r.sc.redacted[i].Add(int64(n))
		}
		if n := r.revealed[i]; n != 0 {
			r.sc.revealed[i].Add(int64(n))
		}
	}
	r.redacted = [nCat]int32{}
	r.revealed = [nCat]int32{}
}

// text redacts free text and returns it.
//
// Replacing a span changes the context of its neighbours: text that a
// detector declined because it was glued to the span ("0::0(202)555 0143")
// may stand alone once the span is a placeholder. text therefore rescans
// its output until no detector finds anything new (at most maxPasses
// times), so that its output is a fixed point: redacting it again changes
// nothing, and no detector finds anything in it that the caller may not see.
func (r *run) text(s string) string {
	out, changed := r.pass(s, true)
	for i := 1; changed && i < maxPasses; i++ {
		out, changed = r.pass(out, false)
	}
	return out
}

const maxPasses = 4

// pass replaces the detections in s. Reveals are counted on the first pass
// only: later passes see the same revealed spans again.
func (r *run) pass(s string, first bool) (string, bool) {
	sp := detect.Scan(r.spans[:0], s)
	r.spans = sp[:0]
	if first {
		r.firstClean = len(sp) == 0
	}
	if len(sp) == 0 {
		return s, false
	}
	var b strings.Builder
	last := 0
	changed := false
	for _, x := range sp {
		c := kindCat[x.Kind]
		a := r.act[c]
		if a == actReveal {
			if first {
				r.count(c, a)
			}
			continue
		}
		r.count(c, a)
		if !changed {
			b.Grow(len(s))
			changed = true
		}
		b.WriteString(s[last:x.Start])
		b.WriteString(r.apply(c, a, s[x.Start:x.End]))
		last = x.End
	}
	if !changed {
		return s, false
	}
	b.WriteString(s[last:])
	return b.String(), true
}

// textJSON redacts s for a JSON string and reports whether it changed.
// Detection runs on s with invalid UTF-8 replaced by U+FFFD, which is what
// a JSON reader will see; an unchanged s is returned as is, so that it is
// escaped exactly as encoding/json escapes it.
//
// A page of rows repeats many short strings (a hotel's name, a status), so
// an encoding remembers those in which the detectors found nothing and
// does not scan them again. This is exact: detection depends on the string
// alone (not on the policy or the caller), and a string without any span is
// returned unchanged and counts nothing, so a remembered string gets the
// same output and the same Report as a scanned one. The memo lives in one
// encoding state and is cleared when it returns to the pool, so it never
// carries one caller's data into another's call.
func (r *run) textJSON(s string) (string, bool) {
	// A short plain string ("confirmed", "acme-lisbon") is one in which the
	// detectors find nothing (detect.Clean), so it is returned as is, as a
	// scan would; it is cheaper to check than to look up in the memo.
	if detect.Clean(s) {
		return s, false
	}
	memo := r.clean != nil && len(s) <= cleanMaxLen
	if memo {
		if r.lookupClean(s) {
			return s, false
		}
	}
	t := s
	if !utf8.ValidString(s) {
		t = validUTF8(s)
		memo = false
	}
	out := r.text(t)
	if out == t {
		if memo && r.firstClean {
			r.rememberClean(s)
		}
		return s, false
	}
	return out, true
}

// appendText appends the JSON string literal of the redacted text s.
func (r *run) appendText(dst []byte, s string) []byte {
	out, _ := r.textJSON(s)
	return appendString(dst, out)
}

// validUTF8 replaces each invalid byte of s with U+FFFD, as encoding/json
// does when it writes s.
func validUTF8(s string) string {
	var b strings.Builder
	b.Grow(len(s) + 8)
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && n == 1 {
			b.WriteRune(utf8.RuneError)
		} else {
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return b.String()
}

// apply redacts one value of category c with action a (not actReveal).
func (r *run) apply(c catIndex, a action, v string) string {
	switch {
	case c == ciSecret || a == actDrop:
		return placeholders[c]
	case a == actToken:
		return r.sc.token(c, v)
	default:
		return maskText(c, v)
	}
}

// maskText implements Mask.
func maskText(c catIndex, v string) string {
	return string(appendMask(make([]byte, 0, 24), c, v))
}

// appendMask appends the Mask of v to dst. The result is always plain
// ASCII that needs no JSON escaping: "***", digits, letters, '@', '.', '-'
// or a placeholder.
// trimMaskDomain is strings.TrimRight(d, " \t\r\n.>)") without building
// the cutset on every call.
func trimMaskDomain(d string) string {
	for len(d) > 0 {
		switch d[len(d)-1] {
		case ' ', '\t', '\r', '\n', '.', '>', ')':
			d = d[:len(d)-1]
			continue
		}
		break
	}
	return d
}

func appendMask(dst []byte, c catIndex, v string) []byte {
	switch c {
	case ciEmail:
		at, skip := strings.LastIndexByte(v, '@'), 1
		if at < 0 {
			at, skip = strings.LastIndex(v, "%40"), 3
		}
		if at < 0 {
			break
		}
		dom := trimMaskDomain(v[at+skip:])
		if validMaskDomain(dom) {
			dst = append(dst, "***@"...)
			for i := 0; i < len(dom); i++ {
				b := dom[i]
				if b >= 'A' && b <= 'Z' {
					b += 'a' - 'A'
				}
				dst = append(dst, b)
			}
			return dst
		}
	case ciPhone:
		if d, n := lastDigits(v); n >= 7 {
			return append(append(dst, "***"...), d[:]...)
		}
	case ciCard:
		if d, n := lastDigits(v); n >= 12 {
			return append(append(dst, "****"...), d[:]...)
		}
	case ciIBAN:
		var cc [2]byte
		var tail [4]byte
		n := 0
		for i := 0; i < len(v); i++ {
			b := v[i]
			if b >= 'a' && b <= 'z' {
				b -= 'a' - 'A'
			}
			if b >= 'A' && b <= 'Z' || b >= '0' && b <= '9' {
				if n < 2 {
					cc[n] = b
				}
				tail[n%4] = b
				n++
			}
		}
		if n >= 15 && cc[0] >= 'A' && cc[1] >= 'A' {
			dst = append(dst, cc[0], cc[1], '*', '*')
			for k := 0; k < 4; k++ {
				dst = append(dst, tail[(n+k)%4])
			}
			return dst
		}
	}
	return append(dst, placeholders[c]...)
}

// validMaskDomain accepts a plain DNS name (letters, digits, '-', '.', at
// least one dot) as the hint of a masked e-mail address; anything else in a
// field tagged email is not shown.
func validMaskDomain(d string) bool {
	if len(d) < 3 || len(d) > 253 || !strings.Contains(d, ".") || d[0] == '.' || d[0] == '-' {
		return false
	}
	for i := 0; i < len(d); i++ {
		c := d[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '.') {
			return false
		}
	}
	return true
}

// lastDigits returns the last four ASCII digits of v and the number of
// digits in v.
func lastDigits(v string) ([4]byte, int) {
	var last, out [4]byte
	n := 0
	for i := 0; i < len(v); i++ {
		if c := v[i]; c >= '0' && c <= '9' {
			last[n%4] = c
			n++
		}
	}
	for k := 0; k < 4; k++ {
		out[k] = last[(n+k)%4]
	}
	return out, n
}

var tokenEncoding = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

// token implements Token: "tok_<category>_" and the first 120 bits of
// HMAC-SHA256(tenant key, category || 0 || normalised value) in base32.
func (s *Scoped) token(c catIndex, v string) string {
	if len(s.r.key) == 0 || s.scope.IsZero() {
		return placeholders[c] // unreachable: New and ForScope prevent it
	}
	norm := normalize(c, v)
	var sum [32]byte
	s.mu.Lock()
	if s.mac == nil {
		k := tenantKey(s.r.key, s.scope)
		s.mac = hmac.New(sha256.New, k[:])
	}
	s.mac.Reset()
	s.mac.Write([]byte(catNames[c]))
	s.mac.Write([]byte{0})
	s.mac.Write([]byte(norm))
	s.mac.Sum(sum[:0])
	s.mu.Unlock()
	return "tok_" + string(catNames[c]) + "_" + tokenEncoding.EncodeToString(sum[:15])
}

// normalize maps equivalent spellings of a value to one form before
// tokenising, so "Alice@Example.com " and "alice@example.com" share a token:
// digits only for phone, card and SSN; upper-case letters and digits for
// IBAN; lower case with single spaces for everything else.
func normalize(c catIndex, v string) string {
	switch c {
	case ciPhone, ciCard, ciSSN:
		b := make([]byte, 0, len(v))
		for i := 0; i < len(v); i++ {
			if v[i] >= '0' && v[i] <= '9' {
				b = append(b, v[i])
			}
		}
		return string(b)
	case ciIBAN:
		b := make([]byte, 0, len(v))
		for i := 0; i < len(v); i++ {
			ch := v[i]
			if ch >= 'a' && ch <= 'z' {
				ch -= 'a' - 'A'
			}
			if ch >= 'A' && ch <= 'Z' || ch >= '0' && ch <= '9' {
				b = append(b, ch)
			}
		}
		return string(b)
	}
	return strings.Join(strings.Fields(strings.ToLower(v)), " ")
}
