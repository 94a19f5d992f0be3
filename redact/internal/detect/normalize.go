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
// pass over it jumps from '&' to '&' (IndexByte) and over ASCII eight bytes
// at a time, and copies only once a character actually changes, then in
// whole runs.

// nextHigh returns the index of the first byte >= 0x80 in s[i:lim], or
// lim. ASCII is skipped eight bytes at a time.
func nextHigh(s string, i, lim int) int {
	for ; i+8 <= lim; i += 8 {
		x := uint64(s[i]) | uint64(s[i+1])<<8 | uint64(s[i+2])<<16 | uint64(s[i+3])<<24 |
			uint64(s[i+4])<<32 | uint64(s[i+5])<<40 | uint64(s[i+6])<<48 | uint64(s[i+7])<<56
		if x&0x8080808080808080 != 0 {
			break
		}
	}
	for ; i < lim; i++ {
		if s[i] >= utf8.RuneSelf {
			return i
		}
	}
	return lim
}

// edit is one change normalising made: the original bytes s[s0:s1] became
// text[t0:t1] (empty for a character dropped).
type edit struct{ t0, t1, s0, s1 int }

// normalized is the normalised copy of a text and the edits that made it;
// between edits the two are byte-for-byte the same.
type normalized struct {
	text  string
	edits []edit
}

// normalize returns the normalised form of s, or ok false when it equals s
// (then s is scanned as it is). Unchanged runs are copied whole.
func normalize(s string) (n normalized, ok bool) {
	var b []byte
	last := 0 // s[:last] is in b
	// rb is scratch for one normalised rune. It escapes (norm's Append keeps
	// its argument's backing array reachable), so it is made only when a
	// character may change: text that needs no normalising allocates nothing.
	var rb []byte
	replace := func(i, size int, out []byte) {
		if b == nil {
			b = make([]byte, 0, len(s))
		}
		b = append(b, s[last:i]...)
		t0 := len(b)
		b = append(b, out...)
		n.edits = append(n.edits, edit{t0, len(b), i, i + size})
		last = i + size
	}
	amp := -1 // the next '&' at or after i, len(s) for none
	for i := 0; i < len(s); {
		// Jump over the ASCII that cannot change: to the next '&' or
		// non-ASCII byte.
		if amp < i {
			if j := strings.IndexByte(s[i:], '&'); j >= 0 {
				amp = i + j
			} else {
				amp = len(s)
			}
		}
		if i = nextHigh(s, i, amp); i >= len(s) {
			break
		}
		if s[i] == '&' {
			if r, size := entityAt(s, i); size > 0 {
				if rb == nil {
					rb = make([]byte, 0, utf8.UTFMax*4)
				}
				replace(i, size, normalizeRune(rb[:0], r))
				i += size
				continue
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r != utf8.RuneError {
			if rb == nil {
				rb = make([]byte, 0, utf8.UTFMax*4)
			}
			if out := normalizeRune(rb[:0], r); string(out) != s[i:i+size] {
				replace(i, size, out)
			}
		}
		i += size
	}
	if n.edits == nil {
		return normalized{}, false
	}
	n.text = string(append(b, s[last:]...))
	return n, true
}

// spans maps the spans dst[from:], found in n.text, back onto the original
// bytes, merging those that now meet inside one original character. The
// mapping is monotone, so the spans stay sorted.
func (n *normalized) spans(dst []Span, from int) []Span {
	k := 0 // edits before k end at or before the current position
	// orig maps position p of text (p < len(text)) to the original: the
	// start (or, with end, the end) of the edit holding it, else shifted
	// by the last edit before it.
	orig := func(p int, end bool) int {
		for k < len(n.edits) && n.edits[k].t1 <= p {
			k++
		}
		if k < len(n.edits) && n.edits[k].t0 <= p && p < n.edits[k].t1 {
			if end {
				return n.edits[k].s1
			}
			return n.edits[k].s0
		}
		shift := 0
		if k > 0 {
			shift = n.edits[k-1].s1 - n.edits[k-1].t1
		}
		if end {
			return p + 1 + shift
		}
		return p + shift
	}
	out := from
	for i := from; i < len(dst); i++ {
		sp := Span{Kind: dst[i].Kind}
		sp.Start = orig(dst[i].Start, false)
		sp.End = orig(dst[i].End-1, true)
		if out > from && sp.Start < dst[out-1].End {
			last := &dst[out-1]
			last.End = max(last.End, sp.End)
			last.Kind = min(last.Kind, sp.Kind)
			continue
		}
		dst[out] = sp
		out++
	}
	return dst[:out]
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
