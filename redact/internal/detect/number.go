package detect

// Numbers: payment cards, IBANs, US SSNs, IPv4 addresses and phone numbers.
//
// All five start at an anchor: the first digit of a run of ASCII digits. The
// scanner walks the string once to find anchors and tries each recogniser at
// each anchor; anchors inside an accepted match are skipped.
//
// Shared guard (glued identifiers): a number is not reported when the byte
// before it is a letter, digit, '_', '*' (a mask) or non-ASCII byte, or when
// it is joined to a preceding alphanumeric by '.', '-' or '/'
// ("ORD-2024-000123", "v1.2.3.4", "build/20240115"); nor when it runs on at
// its end into such a byte, or into '(' or '+' and a digit. A number that is
// part of a larger token is an identifier, not a phone number.

func scanNumbers(dst []Span, s string) []Span {
	covered := 0
	i := 0
	for i < len(s) {
		i = nextDigit(s, i)
		if i >= len(s) {
			break
		}
		a := i
		for i < len(s) && class[s[i]]&cDigit != 0 {
			i++
		}
		if a < covered {
			continue
		}
		sp, ok := numberAt(s, a, i)
		if ok {
			dst = append(dst, sp)
		}
		if sp.End > covered {
			covered = sp.End
		}
	}
	return dst
}

// nextDigit returns the index of the first ASCII digit in s at or after i,
// or len(s). It tests eight bytes at a time: after XOR with '0' a digit is
// a byte below 10, and (y - 0x0A…) &^ y & 0x80… is non-zero exactly when
// some byte of y is below 10.
func nextDigit(s string, i int) int {
	for ; i+8 <= len(s); i += 8 {
		x := uint64(s[i]) | uint64(s[i+1])<<8 | uint64(s[i+2])<<16 | uint64(s[i+3])<<24 |
			uint64(s[i+4])<<32 | uint64(s[i+5])<<40 | uint64(s[i+6])<<48 | uint64(s[i+7])<<56
		y := x ^ 0x3030303030303030
		if (y-0x0A0A0A0A0A0A0A0A)&^y&0x8080808080808080 != 0 {
			break
		}
	}
	for i < len(s) && class[s[i]]&cDigit == 0 {
		i++
	}
	return i
}

// numberAt tries every number recogniser at the anchor a, whose digit run
// ends at runEnd. When it reports no match, a non-zero End still tells the
// caller to skip anchors up to there.
func numberAt(s string, a, runEnd int) (Span, bool) {
	if a >= 2 && isLetter(s[a-1]) && isLetter(s[a-2]) {
		end, ok := ibanAt(s, a-2)
		// An IBAN-shaped token whose checksum fails is a code of some
		// other kind: none of its fragments is a phone or card number.
		return Span{a - 2, end, IBAN}, ok
	}
	if end, ok := cardAt(s, a, runEnd); ok {
		return Span{a, end, Card}, true
	}
	if !leftOK(s, a) {
		return Span{}, false
	}
	if end, ok := ssnAt(s, a, runEnd); ok {
		return Span{a, end, SSN}, true
	}
	if end, ok := ipv4At(s, a); ok {
		return Span{a, end, IP}, true
	}
	if st, end, ok := phoneAt(s, a); ok {
		return Span{st, end, Phone}, true
	}
	return Span{}, false
}

func isLetter(c byte) bool { return class[c]&(cUpper|cLower) != 0 }

// upper returns the upper-case form of an ASCII letter, c otherwise.
func upper(c byte) byte {
	if c >= 'a' && c <= 'z' {
		return c - 'a' + 'A'
	}
	return c
}

// gluedLeft reports whether c, just before a number, makes the number part
// of a larger token: a word byte, or '*', the mask character ("****1111" is
// already redacted).
func gluedLeft(c byte) bool { return isWordByte(c) || c == '*' }

// leftOK reports whether a number may start at st: see the shared guard.
func leftOK(s string, st int) bool {
	if st == 0 {
		return true
	}
	c := s[st-1]
	if gluedLeft(c) {
		return false
	}
	if (c == '.' || c == '-' || c == '/') && st >= 2 && isAlnum(s[st-2]) {
		return false
	}
	return true
}

// rightOK reports whether a number may end at e: see the shared guard.
func rightOK(s string, e int) bool {
	if e >= len(s) {
		return true
	}
	c := s[e]
	if isWordByte(c) {
		return false
	}
	if (c == '.' || c == '-' || c == '/') && e+1 < len(s) && isAlnum(s[e+1]) {
		return false
	}
	if (c == '(' || c == '+') && e+1 < len(s) && isDigit(s[e+1]) {
		return false
	}
	return true
}

// Payment cards.
//
// Form: 13-19 digits, either bare or in groups separated by one kind of
// separator (space, '-' or '.'): fours with a shorter last group (4-4-4-4,
// 4-4-4-4-3, ...) or the Amex/Diners layouts 4-6-5 and 4-6-4.
//
// False-positive guard: the Luhn checksum must hold (nine in ten random
// digit strings fail it) and the first digit must be 2-6, the major industry
// identifiers of the card networks (Mastercard 2/5, Amex/Diners/JCB 3, Visa 4,
// Discover/UnionPay 6). Order numbers, Unix timestamps in milliseconds (which
// start with 1) and invoice ids therefore pass through unless they happen to
// be Luhn-valid and start with 2-6; those are redacted, which is the safe way
// to be wrong. Cards are checked before the glued-identifier guard on the
// left: a Luhn-valid card number behind "card-" is still a card.
func cardAt(s string, a, runEnd int) (int, bool) {
	if s[a] < '2' || s[a] > '6' {
		return 0, false
	}
	if a > 0 && gluedLeft(s[a-1]) {
		return 0, false
	}
	g1 := runEnd - a
	if g1 >= 13 && g1 <= 19 {
		if (runEnd >= len(s) || !isWordByte(s[runEnd])) && luhn(s[a:runEnd]) {
			return runEnd, true
		}
		return 0, false
	}
	if g1 != 4 || runEnd+1 >= len(s) {
		return 0, false
	}
	sep := s[runEnd]
	if sep != ' ' && sep != '-' && sep != '.' {
		return 0, false
	}
	var sizes [8]int
	var ends [8]int
	sizes[0], ends[0] = 4, runEnd
	n, total := 1, 4
	for p := runEnd; n < len(sizes) && total <= 19 && p+1 < len(s) && s[p] == sep && isDigit(s[p+1]); {
		q := p + 1
		for q < len(s) && isDigit(s[q]) {
			q++
		}
		if q-(p+1) > 6 {
			break
		}
		sizes[n], ends[n] = q-(p+1), q
		total += q - (p + 1)
		n++
		p = q
	}
	for k := n; k >= 3; k-- {
		end := ends[k-1]
		if end < len(s) && isWordByte(s[end]) {
			continue
		}
		if !cardLayout(sizes[:k]) {
			continue
		}
		if luhn(s[a:end]) {
			return end, true
		}
	}
	return 0, false
}

func cardLayout(sizes []int) bool {
	total := 0
	for _, n := range sizes {
		total += n
	}
	if total < 13 || total > 19 {
		return false
	}
	if len(sizes) == 3 && sizes[0] == 4 && sizes[1] == 6 && (sizes[2] == 5 || sizes[2] == 4) {
		return true
	}
	for i, n := range sizes {
		if i < len(sizes)-1 && n != 4 || i == len(sizes)-1 && (n < 1 || n > 4) {
			return false
		}
	}
	return true
}

// luhn checks the Luhn checksum over the digits of s, ignoring separators.
func luhn(s string) bool {
	sum, double, digits := 0, false, 0
	for i := len(s) - 1; i >= 0; i-- {
		c := s[i]
		if c < '0' || c > '9' {
			continue
		}
		d := int(c - '0')
		if double {
			d *= 2
			if d > 9 {
				d -= 9
			}
		}
		sum += d
		double = !double
		digits++
	}
	return digits > 0 && sum%10 == 0
}

// US social security numbers.
//
// Form: ddd-dd-dddd, with hyphens or with spaces (the same both times).
//
// False-positive guard: only the grouped form is recognised (a bare nine
// digit number is far more often an id than an SSN), and the number must be
// issuable: area not 000, 666 or 900-999, group not 00, serial not 0000.
// Dates (dddd-dd-dd) and phone numbers have different group lengths.
func ssnAt(s string, a, runEnd int) (int, bool) {
	if runEnd-a != 3 || a+11 > len(s) {
		return 0, false
	}
	t := s[a : a+11]
	if t[3] != '-' && t[3] != ' ' || t[6] != t[3] || !isDigit(t[4]) || !isDigit(t[5]) {
		return 0, false
	}
	for _, c := range []byte(t[7:11]) {
		if !isDigit(c) {
			return 0, false
		}
	}
	if !rightOK(s, a+11) {
		return 0, false
	}
	if t[:3] == "000" || t[:3] == "666" || t[0] == '9' || t[4:6] == "00" || t[7:11] == "0000" {
		return 0, false
	}
	return a + 11, true
}

// IPv4 addresses.
//
// Form: four dot-separated decimal octets 0-255 without leading zeros,
// optionally followed by a port (":8080") or prefix length ("/24"), which
// stay visible.
//
// False-positive guard: a dotted quad glued to a letter or to a longer dotted
// sequence ("v1.2.3.4", "1.2.3.4.5", "10.0.0.1.2") is a version string, not
// an address. A bare "1.2.3.4" is indistinguishable from an address and is
// redacted.
func ipv4At(s string, a int) (int, bool) {
	if a > 0 && (s[a-1] == '.' || gluedLeft(s[a-1])) {
		return 0, false
	}
	p := a
	for k := 0; k < 4; k++ {
		if k > 0 {
			if p >= len(s) || s[p] != '.' {
				return 0, false
			}
			p++
		}
		q := p
		v := 0
		for q < len(s) && isDigit(s[q]) && q-p < 4 {
			v = v*10 + int(s[q]-'0')
			q++
		}
		if q == p || q-p > 3 || v > 255 || (q-p > 1 && s[p] == '0') {
			return 0, false
		}
		p = q
	}
	if p < len(s) {
		c := s[p]
		if isWordByte(c) || (c == '.' && p+1 < len(s) && isAlnum(s[p+1])) {
			return 0, false
		}
	}
	return p, true
}

// Phone numbers.
//
// Forms: international numbers with a leading '+' or the international
// call prefix 00 in its own group ("0044 20 7946 0958", "001 202 555
// 0143"; E.164: 8-15 digits after the prefix, country code not starting
// with 0), grouped by spaces, '-', '.',
// '/' or parentheses ("+44 (0)20 7946 0958", "+1-202-555-0143",
// "+14155552671"); North American numbers "(202) 555-0143",
// "202-555-0143", "202.555.0143", "1 202 555 0143"; and national numbers with
// a trunk prefix 0 written in groups ("020 7946 0958", "01 23 45 67 89",
// "030/1234567", "06-12345678").
//
// False-positive guard: without a '+', a number must be written in groups
// (a bare run of digits is an id), North American numbers need valid area
// and exchange codes (first digit 2-9) in the 3-3-4 layout, and trunk-prefix
// numbers need 10-11 digits in groups of at least two. Dates (2024-01-15,
// 01.02.2024), times and amounts do not have these shapes.
func phoneAt(s string, a int) (int, int, bool) {
	st, plus := a, false
	if a > 0 && s[a-1] == '+' {
		st, plus = a-1, true
	} else if a > 0 && s[a-1] == '(' {
		st = a - 1
		if a > 1 && s[a-2] == '+' {
			st, plus = a-2, true
		}
	}
	if !leftOK(s, st) {
		return 0, 0, false
	}
	var gs [8]numGroup
	ng := 0
	p := st
	if plus {
		p++
	}
	for ng < len(gs) {
		q := p
		paren := false
		if q < len(s) && s[q] == '(' {
			paren = true
			q++
		}
		d := q
		for d < len(s) && isDigit(s[d]) {
			d++
		}
		if d == q || d-q > 12 {
			break
		}
		e := d
		if paren {
			if e >= len(s) || s[e] != ')' {
				break
			}
			e++
		}
		gs[ng] = numGroup{start: q, n: d - q, end: e, paren: paren}
		ng++
		p = e
		if p+1 < len(s) && (s[p] == ' ' || s[p] == '-' || s[p] == '.' || s[p] == '/') && (isDigit(s[p+1]) || s[p+1] == '(') {
			p++
			continue
		}
		if paren && p < len(s) && isDigit(s[p]) {
			continue
		}
		break
	}
	for k := ng; k >= 1; k-- {
		if !rightOK(s, gs[k-1].end) || !phoneGroups(s, gs[:k], plus) {
			continue
		}
		// Two numbers written one after the other ("+1 202 555 0143 020
		// 7946 0958") look like one long international number. Stop the
		// first where a national number starts, if both halves are valid.
		for j := k - 1; j >= 1; j-- {
			if !phoneGroups(s, gs[:j], plus) || s[gs[j-1].end] != ' ' {
				continue
			}
			for e := ng; e > j; e-- {
				if rightOK(s, gs[e-1].end) && phoneGroups(s, gs[j:e], false) {
					return st, gs[j-1].end, true
				}
			}
		}
		return st, gs[k-1].end, true
	}
	return 0, 0, false
}

// phoneGroups reports whether digit groups form a phone number: an
// international one if plus, else a North American or trunk-prefix one.
func phoneGroups(s string, gs []numGroup, plus bool) bool {
	k := len(gs)
	digits := 0
	for _, g := range gs {
		digits += g.n
	}
	first := s[gs[0].start]
	switch {
	case plus:
		return digits >= 8 && digits <= 15 && first != '0'
	case k >= 2 && gs[0].n >= 3 && gs[0].n <= 5 && !gs[0].paren && s[gs[0].start:gs[0].start+2] == "00":
		// 00 is the '+' of most of the world's dialling plans.
		return digits-2 >= 8 && digits-2 <= 15 && s[gs[0].start+2] != '0'
	case k == 3 || k == 4 && gs[0].n == 1 && first == '1' && !gs[0].paren:
		g := gs[k-3 : k]
		if g[0].n == 3 && g[1].n == 3 && g[2].n == 4 && !g[1].paren && !g[2].paren &&
			s[g[0].start] >= '2' && s[g[1].start] >= '2' {
			return true
		}
		return k == 3 && trunkNumber(s, gs, digits)
	case k >= 2:
		return trunkNumber(s, gs, digits)
	}
	return false
}

// numGroup is one digit group of a phone number: digits at
// s[start:start+n]; the group, with a closing parenthesis, ends at end.
type numGroup struct {
	start, n, end int
	paren         bool
}

// trunkNumber reports whether groups form a national number with trunk
// prefix 0: 10-11 digits, the first group starting with a single 0, every
// group at least two digits long.
func trunkNumber(s string, gs []numGroup, digits int) bool {
	if digits < 10 || digits > 11 {
		return false
	}
	for i, g := range gs {
		if g.n < 2 {
			return false
		}
		if i == 0 && (s[g.start] != '0' || s[g.start+1] == '0') {
			return false
		}
	}
	return true
}

// IBANs.
//
// Form: two letters (country), two check digits and the country's BBAN,
// compact or printed in groups of four separated by single spaces ("DE89
// 3704 0044 0532 0130 00"), in either case ("de89 3704 …"): the checksum
// is over the upper-case form.
//
// False-positive guard: the country must be one that issues IBANs, the
// length must be exactly that country's IBAN length, and the ISO 7064
// mod-97 checksum must equal 1 (one random string in 97 passes it). A
// token of that exact shape whose checksum fails is some other code, and
// none of its digit groups is reported as a phone or card number either.
func ibanAt(s string, st int) (int, bool) {
	if st+4 > len(s) || !isDigit(s[st+2]) || !isDigit(s[st+3]) {
		return 0, false
	}
	if st > 0 && isWordByte(s[st-1]) {
		return 0, false
	}
	want := ibanLength(upper(s[st]), upper(s[st+1]))
	if want == 0 {
		return 0, false
	}
	var buf [34]byte
	n, p := 0, st
	for p < len(s) && n < want {
		c := s[p]
		if isAlnum(c) {
			buf[n] = upper(c)
			n++
			p++
			continue
		}
		if c == ' ' && n%4 == 0 && p+1 < len(s) && isAlnum(s[p+1]) {
			p++
			continue
		}
		break
	}
	if n != want || (p < len(s) && isWordByte(s[p])) {
		return 0, false
	}
	return p, mod97(buf[:n]) == 1
}

func mod97(iban []byte) int {
	r := 0
	add := func(c byte) {
		if c >= '0' && c <= '9' {
			r = (r*10 + int(c-'0')) % 97
		} else {
			r = (r*100 + int(c-'A'+10)) % 97
		}
	}
	for _, c := range iban[4:] {
		add(c)
	}
	for _, c := range iban[:4] {
		add(c)
	}
	return r
}

// ibanLengths holds the IBAN length per country (SWIFT IBAN registry).
var ibanLengths = map[string]int{
	"AD": 24, "AE": 23, "AL": 28, "AT": 20, "AZ": 28, "BA": 20, "BE": 16, "BG": 22, "BH": 22, "BI": 27,
	"BR": 29, "BY": 28, "CH": 21, "CR": 22, "CY": 28, "CZ": 24, "DE": 22, "DJ": 27, "DK": 18, "DO": 28,
	"EE": 20, "EG": 29, "ES": 24, "FI": 18, "FK": 18, "FO": 18, "FR": 27, "GB": 22, "GE": 22, "GI": 23,
	"GL": 18, "GR": 27, "GT": 28, "HN": 28, "HR": 21, "HU": 28, "IE": 22, "IL": 23, "IQ": 23, "IS": 26,
	"IT": 27, "JO": 30, "KW": 30, "KZ": 20, "LB": 28, "LC": 32, "LI": 21, "LT": 20, "LU": 20, "LV": 21,
	"LY": 25, "MC": 27, "MD": 24, "ME": 22, "MK": 19, "MN": 20, "MR": 27, "MT": 31, "MU": 30, "NI": 28,
	"NL": 18, "NO": 15, "OM": 23, "PK": 24, "PL": 28, "PS": 29, "PT": 25, "QA": 29, "RO": 24, "RS": 22,
	"RU": 33, "SA": 24, "SC": 31, "SD": 18, "SE": 24, "SI": 19, "SK": 24, "SM": 27, "SO": 23, "ST": 25,
	"SV": 28, "TL": 23, "TN": 24, "TR": 26, "UA": 29, "VA": 22, "VG": 24, "XK": 20, "YE": 30,
}

var ibanTable [26 * 26]uint8

func init() {
	for cc, n := range ibanLengths {
		ibanTable[int(cc[0]-'A')*26+int(cc[1]-'A')] = uint8(n)
	}
}

func ibanLength(a, b byte) int {
	if a < 'A' || a > 'Z' || b < 'A' || b > 'Z' {
		return 0
	}
	return int(ibanTable[int(a-'A')*26+int(b-'A')])
}
