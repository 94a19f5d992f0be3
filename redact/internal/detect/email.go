package detect

import "strings"

// E-mail addresses.
//
// Anchor: every '@', and every URL-encoded "%40" (e-mail addresses in query
// strings). The local part is the run of [A-Za-z0-9._%+-] and non-ASCII bytes
// (RFC 6531 internationalised addresses) before the anchor; the domain is the
// run of dot-separated labels after it.
//
// False-positive guard: the domain must have at least two labels and end in a
// top-level domain of two or more letters (or an IDN "xn--" label), and no
// label may start or end with '-'. So "@mention", "user@localhost",
// "pkg@1.2.3" and "a@b" are not reported, while every routable address is.

const (
	maxLocal  = 128 // scan bound; RFC 5321 allows 64, longer runs are still covered up to here
	maxDomain = 255
)

func isLocalByte(c byte) bool {
	return class[c]&(cDigit|cUpper|cLower|cHigh) != 0 || c == '.' || c == '_' || c == '%' || c == '+' || c == '-'
}

func isLabelByte(c byte) bool {
	return class[c]&(cDigit|cUpper|cLower|cHigh) != 0 || c == '-'
}

func scanEmail(dst []Span, s string) []Span {
	for i := 0; i < len(s); {
		j := strings.IndexByte(s[i:], '@')
		if j < 0 {
			break
		}
		at := i + j
		if st, end, ok := emailAround(s, at, at+1); ok {
			dst = append(dst, Span{st, end, Email}) // overlaps are merged by Scan
		}
		i = at + 1
	}
	if strings.Contains(s, "%40") {
		for i := 0; i < len(s); {
			j := strings.Index(s[i:], "%40")
			if j < 0 {
				break
			}
			at := i + j
			if st, end, ok := emailAround(s, at, at+3); ok {
				dst = append(dst, Span{st, end, Email})
			}
			i = at + 3
		}
	}
	return dst
}

// emailAround tries to read an address whose '@' occupies s[at:after].
func emailAround(s string, at, after int) (start, end int, ok bool) {
	if at > 0 && s[at-1] == '"' {
		// A quoted local part ("john smith"@example.com, RFC 5321):
		// printable ASCII or UTF-8 up to the opening quote, with
		// backslash escapes, on one line.
		if st, ok := quotedLocalStart(s, at-1); ok {
			end, ok = domainEnd(s, after)
			return st, end, ok
		}
	}
	start = at
	for start > 0 && at-start < maxLocal && isLocalByte(s[start-1]) {
		start--
	}
	// The bound may fall inside a UTF-8 sequence: take the whole rune.
	for start > 0 && s[start]&0xC0 == 0x80 && isLocalByte(s[start-1]) {
		start--
	}
	for start < at && s[start] == '.' {
		start++
	}
	if start == at {
		return 0, 0, false
	}
	end, ok = domainEnd(s, after)
	return start, end, ok
}

// domainEnd reads a domain name starting at s[i] and returns where it ends.
func domainEnd(s string, i int) (int, bool) {
	labels := 0
	lastLabel := i
	end := i
	p := i
	for p < len(s) && p-i < maxDomain {
		q := p
		for q < len(s) && isLabelByte(s[q]) {
			q++
		}
		if q == p || q-p > 63 {
			break
		}
		// A label must not start or end with '-'; trim a trailing
		// hyphen run (prose such as "a@b.com-based") instead of failing.
		if s[p] == '-' {
			break
		}
		qe := q
		for qe > p && s[qe-1] == '-' {
			qe--
		}
		labels++
		lastLabel = p
		end = qe
		if qe != q || q >= len(s) || s[q] != '.' || q+1 >= len(s) || !isLabelByte(s[q+1]) {
			break
		}
		p = q + 1
	}
	if labels < 2 {
		return 0, false
	}
	tld := s[lastLabel:end]
	if len(tld) < 2 {
		return 0, false
	}
	if strings.HasPrefix(tld, "xn--") {
		return end, true
	}
	for k := 0; k < len(tld); k++ {
		if class[tld[k]]&(cUpper|cLower|cHigh) == 0 {
			return 0, false
		}
	}
	return end, true
}

// quotedLocalStart returns the index of the quote that opens the quoted
// local part closed by the quote at s[close].
func quotedLocalStart(s string, close int) (int, bool) {
	for p := close - 1; p >= 0 && close-p <= maxLocal; p-- {
		c := s[p]
		if c < 0x20 || c == 0x7f {
			return 0, false
		}
		if c != '"' {
			continue
		}
		bs := 0
		for q := p - 1; q >= 0 && s[q] == '\\'; q-- {
			bs++
		}
		if bs%2 == 1 {
			continue // an escaped quote inside the local part
		}
		return p, p+1 < close
	}
	return 0, false
}
