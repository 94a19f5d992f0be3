// Package detect finds personal data and credentials in free text.
//
// Scan is the only entry point: it reports byte spans of a string that look
// like an e-mail address, a phone number, a payment card number, an IBAN, a
// US social security number, an IP address or a secret (JWT, bearer token,
// API key, password assignment, private key block, URL password). Every
// detector is a hand-written scanner with a documented false-positive guard;
// none uses regular expressions, so the cost is linear in the input and a
// string with nothing interesting in it is rejected by a single table-driven
// pass.
//
// The detectors err on the side of reporting: a span that is reported but was
// not personal data costs readability, a span that is missed leaks. The guards
// exist to keep ordinary identifiers (order numbers, dates, timestamps,
// version strings, UUIDs, hashes) readable, not to be clever about intent.
package detect

import "slices"

// Kind is what a span was recognised as.
type Kind uint8

// Kinds, in decreasing priority: when spans of different kinds overlap they
// are merged and the merged span takes the kind that comes first here.
const (
	Secret Kind = iota + 1
	Card
	IBAN
	SSN
	Email
	Phone
	IP
)

var kindNames = [...]string{"", "secret", "card", "iban", "ssn", "email", "phone", "ip"}

func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return "unknown"
}

// Span is the half-open byte range [Start, End) of a detection.
type Span struct {
	Start, End int
	Kind       Kind
}

// Byte classes for the prefilter and the scanners.
const (
	cDigit = 1 << iota
	cUpper
	cLower
	cAt    // '@', and '%' for the URL-encoded "%40"
	cColon // ':' (IPv6, keyword: value, URL schemes)
	cEq    // '='
	cHigh  // bytes >= 0x80 (UTF-8)
	cOther // other word characters: '_' and '-'
)

// class is each byte's class; a package variable initialised by a
// function so that cleanJSON, derived from it, is initialised after it.
var class = func() (t [256]uint8) {
	for c := '0'; c <= '9'; c++ {
		t[c] = cDigit
	}
	for c := 'A'; c <= 'Z'; c++ {
		t[c] = cUpper
	}
	for c := 'a'; c <= 'z'; c++ {
		t[c] = cLower
	}
	t['@'] = cAt
	t['%'] = cAt
	t[':'] = cColon
	t['='] = cEq
	t['_'] = cOther
	t['-'] = cOther
	for c := 0x80; c < 0x100; c++ {
		t[c] = cHigh
	}
	return t
}()

func isDigit(c byte) bool { return class[c]&cDigit != 0 }
func isAlnum(c byte) bool { return class[c]&(cDigit|cUpper|cLower) != 0 }

// isWordByte reports whether c continues an identifier: a letter, a digit,
// '_' or a non-ASCII byte. A match glued to such a byte is part of a larger
// token and is not reported on its own.
func isWordByte(c byte) bool { return class[c]&(cDigit|cUpper|cLower|cHigh) != 0 || c == '_' }

// Scan appends to dst the spans of s that look like personal data or
// secrets and returns the extended slice. The appended spans are sorted by
// Start and do not overlap: overlapping detections are merged into one span
// whose kind is the highest-priority kind among them, so a caller that
// replaces every span never leaves part of a detection in clear.
//
// Text that spells personal data with look-alike characters or HTML
// character references is scanned in normalised form (see normalize), and
// each span mapped back to the original bytes it came from.
func Scan(dst []Span, s string) []Span {
	if Clean(s) {
		return dst
	}
	return scanAll(dst, s)
}

// shortClean is the longest string Clean can vouch for; see Clean.
const shortClean = 13

// cleanDigits is the most digits Clean accepts in a string (see Clean).
const cleanDigits = 8

// Clean reports whether s is too short and too plain for any detector: at
// most shortClean bytes, all ASCII, none of them '@', '%', ':', '=' or '&',
// and either no digit or at most cleanDigits digits and no '+' or '.' (a
// room number "103", a date "2026-02-24"). Scan finds nothing in such a
// string, so a caller may skip it; Clean is false for everything else,
// which must be scanned.
//
// Invariant (why Scan finds nothing when Clean is true): without '&' or a
// non-ASCII byte normalize changes nothing; without '@'/'%' there is no
// e-mail, without ':' no IPv6. Of the numbers, an IPv4 address needs '.', a
// phone number with '+' 8 digits and without it 10 (a North American,
// trunk-prefix or "00"-prefixed number), an SSN 9, a card 13 and an IBAN 15
// bytes. Of the secrets, assignments and URL passwords need ':' or '=', a
// JWT 30 bytes, a PEM block "-----BEGIN" and "-----" (15 bytes), a key 16
// bytes, and "bearer"/"basic" a space and 8 token bytes after it (14
// bytes). TestCleanAgrees and FuzzCleanAgrees check it against the
// detectors.
func Clean(s string) bool {
	if len(s) > shortClean {
		return false
	}
	digits, plusDot := 0, false
	for i := 0; i < len(s); i++ {
		c := s[i]
		if notClean(c) {
			return false
		}
		if class[c]&cDigit != 0 {
			digits++
		} else if c == '+' || c == '.' {
			plusDot = true
		}
	}
	return digits == 0 || digits <= cleanDigits && !plusDot
}

// notClean reports whether c alone makes a string not Clean.
func notClean(c byte) bool { return c >= 0x80 || c == '&' || class[c]&(cAt|cColon|cEq) != 0 }

// Classes of cleanJSON, the table of CleanCopy: a byte that makes a string
// not Clean or needs escaping in a JSON string, a digit, '+' or '.'.
const (
	jDigit   = 1
	jPlusDot = 2
	jBad     = 4
)

// cleanJSON is derived from Clean's own tests (notClean, class), so the
// two cannot disagree on which bytes make a string not Clean.
var cleanJSON = func() (t [256]uint8) {
	for c := range 256 {
		switch b := byte(c); {
		case notClean(b), b < 0x20, b == '"', b == '\\', b == '<', b == '>':
			t[c] = jBad // not Clean, or escaped by JSON
		case class[b]&cDigit != 0:
			t[c] = jDigit
		case b == '+' || b == '.':
			t[c] = jPlusDot
		}
	}
	return t
}()

// CleanCopy reports whether Clean(s) holds and s needs no escaping in a
// JSON string written HTML-safe (no control character, '"', '\\', '<' or
// '>'; Clean already excludes '&' and non-ASCII bytes). When it does, s has
// been copied to dst[:len(s)]; otherwise dst may hold part of s. It is the
// common case of a redacted encoding (a short plain value written as it
// is) in one pass instead of three (Clean, the escape check, the copy).
// TestCleanCopyAgrees checks it against Clean.
func CleanCopy(dst []byte, s string) bool {
	if len(s) > shortClean || len(dst) < len(s) {
		return false
	}
	dst = dst[:len(s)]
	digits, seen := 0, uint8(0)
	for i := 0; i < len(s); i++ {
		c := s[i]
		k := cleanJSON[c]
		seen |= k
		digits += int(k & jDigit)
		dst[i] = c
	}
	return seen&jBad == 0 && (digits == 0 || digits <= cleanDigits && seen&jPlusDot == 0)
}

// scanAll is Scan without the Clean shortcut.
func scanAll(dst []Span, s string) []Span {
	if nt, ok := normalize(s); ok {
		n := len(dst)
		return nt.spans(scan(dst, nt.text), n)
	}
	return scan(dst, s)
}

// scan is Scan on text as it is.
func scan(dst []Span, s string) []Span {
	n := len(dst)
	// Prefilter: which byte classes occur at all. Long text usually has
	// them all within a few hundred bytes, so stop as soon as it does.
	const all = cDigit | cUpper | cLower | cAt | cColon | cEq
	var flags uint8
	for i := 0; i < len(s); i++ {
		flags |= class[s[i]]
		if i&255 == 255 && flags&all == all {
			break
		}
	}
	if flags&cAt != 0 {
		dst = scanEmail(dst, s)
	}
	if flags&cDigit != 0 {
		dst = scanNumbers(dst, s)
	}
	if flags&cColon != 0 && flags&(cDigit|cUpper|cLower) != 0 {
		dst = scanIPv6(dst, s)
	}
	if len(s) >= minSecretLen {
		dst = scanSecrets(dst, s, flags)
	}
	if len(dst)-n > 1 {
		dst = merge(dst, n)
	}
	return dst
}

// merge sorts dst[n:] and merges overlapping spans in place.
func merge(dst []Span, n int) []Span {
	sp := dst[n:]
	slices.SortFunc(sp, func(a, b Span) int {
		if a.Start != b.Start {
			return a.Start - b.Start
		}
		if a.End != b.End {
			return b.End - a.End
		}
		return int(a.Kind) - int(b.Kind)
	})
	out := sp[:1]
	for _, x := range sp[1:] {
		last := &out[len(out)-1]
		if x.Start < last.End {
			if x.End > last.End {
				last.End = x.End
			}
			if x.Kind < last.Kind {
				last.Kind = x.Kind
			}
			continue
		}
		out = append(out, x)
	}
	return dst[:n+len(out)]
}
