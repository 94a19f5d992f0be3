package detect

import (
	"math"
	"strings"
)

// Secrets: credentials that must never leave the server, whatever the
// caller's role. Six recognisers, each with its own guard:
//
//   - JWTs: three base64url segments separated by '.', the first two
//     starting with "eyJ" (the encoding of `{"`), each at least 10 bytes.
//     Guard: both the header and the payload must be JSON objects by that
//     prefix, so dotted identifiers and domain names never match.
//   - Authorization schemes: "Bearer <token>" and "Basic <credentials>"
//     (case-insensitive) followed by a token68 of at least 8 bytes. Guard: the
//     token must contain a digit or a non-letter, so prose like "bearer
//     authentication" is left alone, and an auth-param (`Bearer realm="x"`) is
//     not a token.
//   - Well-known API key formats by prefix (Stripe sk_live_, OpenAI and
//     Anthropic sk-, GitHub ghp_/github_pat_, GitLab glpat-, Slack xox?-, AWS
//     AKIA/ASIA, Google AIza, npm_, PyPI pypi-, Hugging Face hf_, Shopify
//     shpat_/shpss_). Guard: a minimum length per prefix and a random-looking
//     remainder (letters and digits).
//   - Generic high-entropy strings: a run of [A-Za-z0-9_+/=-] of at least 32
//     bytes. Guard: it must mix upper case, lower case and digits (hex hashes,
//     UUIDs and snake_case identifiers do not), have a Shannon entropy of at
//     least 4.2 bits per byte (prose, CamelCase names and paths do not), and,
//     if it contains '/', average at least 12 bytes per '/'-separated segment
//     (URL paths do not).
//   - Credential assignments: password=, passwd:, pwd=, secret:,
//     client_secret=, api_key=, access_token=, "password": "…" and similar,
//     the keyword matched case-insensitively at the end of the key. Guard: for
//     weak keywords (token, api key, credential) written with ':' the value
//     must be at least 8 bytes and contain a digit, so "invalid token: expired"
//     stays readable.
//   - PEM private key blocks ("-----BEGIN … PRIVATE KEY-----" to the matching
//     END line, or to the end of the text if it is cut off) and passwords in
//     URLs ("scheme://user:password@host", the password only).

const minSecretLen = 8

func scanSecrets(dst []Span, s string, flags uint8) []Span {
	if flags&(cColon|cEq) != 0 {
		dst = scanAssignments(dst, s)
	}
	if flags&cColon != 0 {
		dst = scanURLPasswords(dst, s)
	}
	if len(s) >= 30 && strings.Contains(s, "eyJ") {
		dst = scanJWT(dst, s)
	}
	if flags&cOther != 0 && flags&cUpper != 0 && strings.Contains(s, "-----BEGIN") {
		dst = scanPEM(dst, s)
	}
	if flags&(cDigit|cUpper|cLower) != 0 {
		dst = scanBlobs(dst, s)
	}
	return dst
}

// blobByte: the characters of API keys, base64 and token68.
var blobByte [256]bool

func init() {
	for c := 0; c < 256; c++ {
		b := byte(c)
		blobByte[c] = isAlnum(b) || b == '_' || b == '-' || b == '+' || b == '/' || b == '='
	}
}

func isB64URL(c byte) bool { return isAlnum(c) || c == '_' || c == '-' }

func scanJWT(dst []Span, s string) []Span {
	for i := 0; i < len(s); {
		j := strings.Index(s[i:], "eyJ")
		if j < 0 {
			break
		}
		st := i + j
		i = st + 3
		if st > 0 && (isB64URL(s[st-1]) || s[st-1] == '.') {
			continue
		}
		p := st
		seg := func(prefix bool) (int, bool) {
			q := p
			for q < len(s) && isB64URL(s[q]) {
				q++
			}
			if prefix && (q-p < 10 || !strings.HasPrefix(s[p:q], "eyJ")) {
				return 0, false
			}
			return q, true
		}
		q, ok := seg(true)
		if !ok || q >= len(s) || s[q] != '.' {
			continue
		}
		p = q + 1
		if q, ok = seg(true); !ok || q >= len(s) || s[q] != '.' {
			continue
		}
		p = q + 1
		q, _ = seg(false)
		dst = append(dst, Span{st, q, Secret})
		i = q
	}
	return dst
}

func scanPEM(dst []Span, s string) []Span {
	for i := 0; i < len(s); {
		j := strings.Index(s[i:], "-----BEGIN")
		if j < 0 {
			break
		}
		st := i + j
		hdrEnd := strings.Index(s[st+10:], "-----")
		if hdrEnd < 0 {
			break
		}
		label := s[st+10 : st+10+hdrEnd]
		i = st + 10 + hdrEnd + 5
		if !strings.Contains(label, "PRIVATE KEY") && !strings.Contains(label, "ENCRYPTED") {
			continue
		}
		end := len(s)
		if k := strings.Index(s[i:], "-----END"); k >= 0 {
			e := i + k + 8
			if m := strings.Index(s[e:], "-----"); m >= 0 {
				end = e + m + 5
			} else {
				end = len(s)
			}
		}
		dst = append(dst, Span{st, end, Secret})
		i = end
	}
	return dst
}

// scanURLPasswords finds "scheme://user:password@" and reports the password.
func scanURLPasswords(dst []Span, s string) []Span {
	for i := 0; i < len(s); {
		j := strings.Index(s[i:], "://")
		if j < 0 {
			break
		}
		p := i + j + 3
		i = p
		colon := -1
		q := p
		for q < len(s) && q-p < 512 {
			c := s[q]
			if c == '@' || c == '/' || c == '?' || c == '#' || c == ' ' || c == '\t' || c == '\n' || c == '"' || c == '\'' {
				break
			}
			if c == ':' && colon < 0 {
				colon = q
			}
			q++
		}
		if q < len(s) && s[q] == '@' && colon >= 0 && q > colon+1 && !strings.HasPrefix(s[colon+1:q], "[redacted") {
			dst = append(dst, Span{colon + 1, q, Secret})
			i = q
		}
	}
	return dst
}

// Keywords of credential assignments, lower case, matched as a suffix of
// the key. strong keywords accept any value.
var assignKeywords = []struct {
	word   string
	strong bool
}{
	{"password", true}, {"passwd", true}, {"pwd", true}, {"passphrase", true},
	{"secret", true}, {"privatekey", true}, {"private_key", true}, {"private-key", true},
	{"token", false}, {"apikey", false}, {"api_key", false}, {"api-key", false},
	{"accesskey", false}, {"access_key", false}, {"credential", false}, {"credentials", false},
}

func scanAssignments(dst []Span, s string) []Span {
	covered := 0
	nextEq, nextColon := indexFrom(s, 0, '='), indexFrom(s, 0, ':')
	for {
		i := min(nextEq, nextColon)
		if i == len(s) {
			break
		}
		c := s[i]
		if c == '=' {
			nextEq = indexFrom(s, i+1, '=')
		} else {
			nextColon = indexFrom(s, i+1, ':')
		}
		if i < covered {
			continue
		}
		// Key: back over spaces and one closing quote, then the word.
		k := i
		for k > 0 && s[k-1] == ' ' {
			k--
		}
		if k > 0 && (s[k-1] == '"' || s[k-1] == '\'') {
			k--
		}
		ke := k
		for k > 0 && ke-k < 64 && (isAlnum(s[k-1]) || s[k-1] == '_' || s[k-1] == '-') {
			k--
		}
		if ke-k < 3 {
			continue
		}
		strong, ok := matchKeyword(s[k:ke])
		if !ok {
			continue
		}
		// Value: after spaces and an optional opening quote.
		v := i + 1
		if c == '=' && v < len(s) && s[v] == '=' {
			continue // "==" is a comparison
		}
		for v < len(s) && s[v] == ' ' {
			v++
		}
		var ve int
		if v < len(s) && (s[v] == '"' || s[v] == '\'') {
			q := s[v]
			v++
			ve = v
			for ve < len(s) && s[ve] != q && s[ve] != '\n' && ve-v < 4096 {
				if s[ve] == '\\' && ve+1 < len(s) {
					ve++
				}
				ve++
			}
			if ve > len(s) {
				ve = len(s)
			}
		} else {
			ve = v
			for ve < len(s) && ve-v < 4096 && !valueStop(s[ve]) {
				ve++
			}
		}
		// The bound may fall inside a UTF-8 sequence: take the whole rune.
		for ve < len(s) && s[ve]&0xC0 == 0x80 {
			ve++
		}
		if ve <= v || strings.HasPrefix(s[v:ve], "[redacted") {
			continue
		}
		if !strong && c == ':' && !credentialLike(s[v:ve]) {
			continue
		}
		dst = append(dst, Span{v, ve, Secret})
		covered = ve
	}
	return dst
}

// indexFrom returns the index of the first c in s at or after i, or len(s).
func indexFrom(s string, i int, c byte) int {
	if i >= len(s) {
		return len(s)
	}
	if j := strings.IndexByte(s[i:], c); j >= 0 {
		return i + j
	}
	return len(s)
}

func valueStop(c byte) bool {
	switch c {
	case ' ', '\t', '\n', '\r', ',', ';', '&', '"', '\'', '}', ']', ')', '>', '<':
		return true
	}
	return false
}

func matchKeyword(key string) (strong, ok bool) {
	for _, kw := range assignKeywords {
		if len(key) >= len(kw.word) && strings.EqualFold(key[len(key)-len(kw.word):], kw.word) {
			return kw.strong, true
		}
	}
	return false, false
}

func credentialLike(v string) bool {
	if len(v) < 8 {
		return false
	}
	for i := 0; i < len(v); i++ {
		if isDigit(v[i]) {
			return true
		}
	}
	return false
}

// apiKeyPrefixes: prefix and minimum length of what follows it.
var apiKeyPrefixes = []struct {
	prefix  string
	minRest int
}{
	{"sk_live_", 10}, {"sk_test_", 10}, {"rk_live_", 10}, {"rk_test_", 10}, {"whsec_", 16},
	{"sk-", 20}, {"ghp_", 20}, {"gho_", 20}, {"ghu_", 20}, {"ghs_", 20}, {"ghr_", 20},
	{"github_pat_", 20}, {"glpat-", 20}, {"xoxb-", 10}, {"xoxp-", 10}, {"xoxa-", 10},
	{"xoxr-", 10}, {"xoxs-", 10}, {"AKIA", 16}, {"ASIA", 16}, {"AIza", 30}, {"npm_", 30},
	{"pypi-", 50}, {"hf_", 30}, {"shpat_", 32}, {"shpss_", 32},
}

func scanBlobs(dst []Span, s string) []Span {
	i := 0
	for i < len(s) {
		for i < len(s) && !blobByte[s[i]] {
			i++
		}
		// A blob is a run of key characters and trailing '=' padding; an
		// '=' inside the run is an assignment and separates two blobs.
		st := i
		for i < len(s) && blobByte[s[i]] && s[i] != '=' {
			i++
		}
		for i < len(s) && s[i] == '=' {
			i++
		}
		n := i - st
		if n < 5 {
			continue
		}
		if st > 0 && s[st-1] >= 0x80 || i < len(s) && s[i] >= 0x80 {
			continue // part of a non-ASCII word
		}
		b := s[st:i]
		if (n == 6 || n == 5) && i+1 < len(s) && s[i] == ' ' &&
			(strings.EqualFold(b, "bearer") || strings.EqualFold(b, "basic")) {
			t := i
			for t < len(s) && s[t] == ' ' {
				t++
			}
			te := t
			for te < len(s) && (blobByte[s[te]] || s[te] == '.' || s[te] == '~') {
				te++
			}
			if te-t >= 8 && !(te < len(s) && s[te] == '"') && tokenLike(s[t:te]) {
				dst = append(dst, Span{t, te, Secret})
				i = te
			}
			continue
		}
		if n < 16 {
			continue
		}
		if prefixedKey(b) || n >= 32 && highEntropy(b) {
			dst = append(dst, Span{st, i, Secret})
		}
	}
	return dst
}

func tokenLike(t string) bool {
	for i := 0; i < len(t); i++ {
		if class[t[i]]&(cUpper|cLower) == 0 {
			return true
		}
	}
	return false
}

func prefixedKey(b string) bool {
	for _, p := range apiKeyPrefixes {
		if len(b) < len(p.prefix)+p.minRest || !strings.HasPrefix(b, p.prefix) {
			continue
		}
		rest := b[len(p.prefix):]
		var letter, digit bool
		for k := 0; k < len(rest); k++ {
			c := rest[k]
			letter = letter || class[c]&(cUpper|cLower) != 0
			digit = digit || isDigit(c)
		}
		if letter && digit {
			return true
		}
	}
	return false
}

// highEntropy applies the generic secret guard to a blob of 32+ bytes.
func highEntropy(b string) bool {
	var upper, lower, digit bool
	slashes := 0
	for k := 0; k < len(b); k++ {
		c := class[b[k]]
		upper = upper || c&cUpper != 0
		lower = lower || c&cLower != 0
		digit = digit || c&cDigit != 0
		if b[k] == '/' {
			slashes++
		}
	}
	if !upper || !lower || !digit {
		return false
	}
	if slashes > 0 && len(b)/(slashes+1) < 12 {
		return false
	}
	if len(b) > 4096 {
		b = b[:4096]
	}
	var counts [256]uint16
	for k := 0; k < len(b); k++ {
		counts[b[k]]++
	}
	n := float64(len(b))
	h := 0.0
	for _, c := range counts {
		if c != 0 {
			p := float64(c) / n
			h -= p * math.Log2(p)
		}
	}
	return h >= 4.2
}
