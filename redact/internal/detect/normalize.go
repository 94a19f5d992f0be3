package detect

import (
	"strings"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// Normalisation. Text can spell personal data so that the byte scanners,
// which read ASCII, do not see it: a full-width '＠' (U+FF20), full-width
// digits, an HTML entity ("&#64;", "&commat;"), a no-break space or a
// Unicode dash between digit groups, a zero-width space inside a number.
// Scan therefore scans a normalised copy of such text, and maps each span
// back onto the original bytes, so the caller replaces exactly what it
// would have replaced had the text been written plainly:
//
//   - every non-ASCII rune is replaced by its Unicode NFKC form (per rune:
//     compatibility mappings, which is what turns look-alikes into ASCII);
//   - Unicode dashes and the minus sign become '-', and format characters
//     that render as nothing (zero-width space and joiners, word joiner,
//     byte order mark, soft hyphen) are dropped;
//   - HTML character references are decoded: numeric ("&#64;", "&#x40;")
//     and the named ones that can spell an address, a number or a
//     separator; the decoded rune is normalised in turn.
//
// Text that needs none of it (almost all text) is scanned as it is: the
// check skips ASCII eight bytes at a time and stops at the first change.

// needsNormalizing reports whether s reads differently once normalised:
// it holds an HTML character reference, or a non-ASCII rune that
// normalisation changes. ASCII is skipped eight bytes at a time.
func needsNormalizing(s string) bool {
	for i := 0; ; {
		j := strings.IndexByte(s[i:], '&')
		if j < 0 {
			break
		}
		if _, size := entityAt(s, i+j); size > 0 {
			return true
		}
		i += j + 1
	}
	var buf [utf8.UTFMax * 4]byte
	for i := 0; i < len(s); {
		if i+8 <= len(s) {
			x := uint64(s[i]) | uint64(s[i+1])<<8 | uint64(s[i+2])<<16 | uint64(s[i+3])<<24 |
				uint64(s[i+4])<<32 | uint64(s[i+5])<<40 | uint64(s[i+6])<<48 | uint64(s[i+7])<<56
			if x&0x8080808080808080 == 0 {
				i += 8
				continue
			}
		}
		if s[i] < utf8.RuneSelf {
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError {
			i += size
			continue
		}
		if string(normalizeRune(buf[:0], r)) != s[i:i+size] {
			return true
		}
		i += size
	}
	return false
}

// normalized is a normalised copy of a text with, for every byte of it,
// the range of the original bytes it came from.
type normalized struct {
	text       []byte
	start, end []int32
}

func (n *normalized) add(b []byte, st, end int) {
	n.text = append(n.text, b...)
	for range b {
		n.start = append(n.start, int32(st))
		n.end = append(n.end, int32(end))
	}
}

// normalize returns the normalised form of s, or ok false when it equals s
// (then s is scanned as it is).
func normalize(s string) (n normalized, ok bool) {
	changed := false
	var buf [utf8.UTFMax * 4]byte
	for i := 0; i < len(s); {
		c := s[i]
		if c == '&' {
			if r, size := entityAt(s, i); size > 0 {
				n.add(normalizeRune(buf[:0], r), i, i+size)
				changed = true
				i += size
				continue
			}
		}
		if c < utf8.RuneSelf {
			n.text = append(n.text, c)
			n.start = append(n.start, int32(i))
			n.end = append(n.end, int32(i+1))
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		var out []byte
		if r == utf8.RuneError {
			out = append(buf[:0], s[i:i+size]...) // keep invalid bytes as they are
		} else if out = normalizeRune(buf[:0], r); string(out) != s[i:i+size] {
			changed = true
		}
		n.add(out, i, i+size)
		i += size
	}
	return n, changed
}

// normalizeRune appends the normalised form of r to dst.
func normalizeRune(dst []byte, r rune) []byte {
	switch {
	case r < utf8.RuneSelf:
		return append(dst, byte(r))
	case r == 0x200B || r == 0x200C || r == 0x200D || r == 0x2060 || r == 0xFEFF || r == 0x00AD:
		return dst // renders as nothing
	case r >= 0x2010 && r <= 0x2015 || r == 0x2212 || r == 0xFE63 || r == 0xFF0D:
		return append(dst, '-')
	}
	var rb [utf8.UTFMax]byte
	k := utf8.EncodeRune(rb[:], r)
	return norm.NFKC.Append(dst, rb[:k]...)
}

// namedEntities are the HTML named character references that can spell
// an address, a number or a separator.
var namedEntities = map[string]rune{
	"amp": '&', "commat": '@', "period": '.', "plus": '+', "minus": 0x2212, "hyphen": 0x2010,
	"dash": 0x2010, "ndash": 0x2013, "mdash": 0x2014, "nbsp": 0xA0, "colon": ':', "lpar": '(',
	"rpar": ')', "sol": '/', "percnt": '%', "lowbar": '_', "quot": '"', "apos": '\'', "num": '#',
	"lt": '<', "gt": '>', "equals": '=', "dot": '.', "thinsp": 0x2009, "ensp": 0x2002, "emsp": 0x2003,
}

// entityAt decodes the HTML character reference at s[i] ('&'): the rune
// and the reference's length, or size 0 for none.
func entityAt(s string, i int) (rune, int) {
	p := i + 1
	if p < len(s) && s[p] == '#' {
		p++
		base := 10
		if p < len(s) && (s[p] == 'x' || s[p] == 'X') {
			base = 16
			p++
		}
		v, q := 0, p
		for q < len(s) && q-p < 8 {
			d := hexVal(s[q])
			if d < 0 || d >= base {
				break
			}
			v = v*base + d
			q++
		}
		if q == p || v > utf8.MaxRune {
			return 0, 0
		}
		if q < len(s) && s[q] == ';' {
			q++
		}
		return rune(v), q - i
	}
	q := p
	for q < len(s) && q-p < 8 && isAlnum(s[q]) {
		q++
	}
	if q == p || q >= len(s) || s[q] != ';' {
		return 0, 0
	}
	r, ok := namedEntities[s[p:q]]
	if !ok {
		return 0, 0
	}
	return r, q + 1 - i
}

func hexVal(c byte) int {
	switch {
	case c >= '0' && c <= '9':
		return int(c - '0')
	case c >= 'a' && c <= 'f':
		return int(c-'a') + 10
	case c >= 'A' && c <= 'F':
		return int(c-'A') + 10
	}
	return -1
}
