package detect

import "strings"

// IPv6 addresses.
//
// Anchor: each ':' not inside an already examined candidate; the candidate
// is the maximal run of hex digits, ':' and '.' around it, with a trailing
// '.' or single ':' (sentence punctuation) trimmed. It must parse as an RFC
// 4291 text address: eight groups of 1-4 hex digits, or fewer with exactly
// one "::", optionally ending in a dotted IPv4 address.
//
// False-positive guard: the candidate must not be glued to a letter, digit
// or '_' on either side ("std::vector", "a::b"), must contain a decimal digit,
// and a compressed form must have at least two groups, so clock times
// ("10:30:00"), MAC addresses (six groups), "::" and scope operators are not
// reported. The loopback "::1" is therefore not reported either.
func scanIPv6(dst []Span, s string) []Span {
	for i := 0; i < len(s); {
		j := strings.IndexByte(s[i:], ':')
		if j < 0 {
			break
		}
		pos := i + j
		start := pos
		for start > 0 && isIPv6Byte(s[start-1]) {
			start--
		}
		end := pos
		for end < len(s) && isIPv6Byte(s[end]) {
			end++
		}
		i = end
		st, en := start, end
		for st < en && s[st] == '.' {
			st++
		}
		for en > st && s[en-1] == '.' {
			en--
		}
		if en-st >= 2 && s[en-1] == ':' && s[en-2] != ':' {
			en--
		}
		if en-st < 3 {
			continue
		}
		if st > 0 && isWordByte(s[st-1]) || en < len(s) && isWordByte(s[en]) {
			continue
		}
		if validIPv6(s[st:en]) {
			dst = append(dst, Span{st, en, IP})
		}
	}
	return dst
}

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

func isIPv6Byte(c byte) bool { return isHex(c) || c == ':' || c == '.' }

// validIPv6 parses t as an IPv6 address and applies the guard.
func validIPv6(t string) bool {
	groups, double, digit := 0, false, false
	i := 0
	switch {
	case strings.HasPrefix(t, "::"):
		double, i = true, 2
	case t[0] == ':':
		return false
	}
	for i < len(t) {
		j := i
		for j < len(t) && isHex(t[j]) && j-i < 5 {
			if isDigit(t[j]) {
				digit = true
			}
			j++
		}
		if j < len(t) && t[j] == '.' {
			end, ok := ipv4At(t, i)
			if !ok || end != len(t) || i == 0 && !double {
				return false
			}
			groups += 2
			break
		}
		if j == i || j-i > 4 {
			return false
		}
		groups++
		i = j
		if i == len(t) {
			break
		}
		if t[i] != ':' {
			return false
		}
		if i+1 < len(t) && t[i+1] == ':' {
			if double {
				return false
			}
			double = true
			i += 2
			continue
		}
		i++
		if i == len(t) {
			return false
		}
	}
	if !digit {
		return false
	}
	if double {
		return groups >= 2 && groups <= 7
	}
	return groups == 8
}
